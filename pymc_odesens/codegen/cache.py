"""On-disk cache of generated kernels: their source, their object code and a manifest.

Files of one cache key (a hash of the expressions and of the code generator's version)
live in :func:`kernel_directory`:

- ``kernels_<key>.py``: the generated kernel source (the kernel language of
  :mod:`pymc_odesens.codegen.llvm_emitter`), kept as a readable artefact;
- ``kernels_<key>.json``: the manifest, the kernels the source defines and the external
  symbols each calls;
- ``kernels_<key>.<kernel>.o``: the object code of one kernel, written the first time it is
  compiled and loaded by every later process (which then generates and compiles nothing);
- other artefacts of a system stored with its kernels (its Jacobian's sparsity pattern and
  fill-reducing ordering: ``kernels_<key>.pattern.npz``).
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

__all__ = [
    "GENERATION_LOCK",
    "artefact_path",
    "cache_directory",
    "kernel_directory",
    "write_atomically",
]


def cache_directory() -> Path:
    """Directory holding generated kernels.

    ``$PYMC_ODESENS_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/pymc_odesens``
    (``~/.cache/pymc_odesens``).
    """
    configured = os.environ.get("PYMC_ODESENS_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pymc_odesens"


def kernel_directory() -> Path:
    """The cache directory's folder for this kind of machine (object code is CPU-specific)."""
    from pymc_odesens.codegen.machine_code import machine_tag

    return cache_directory() / machine_tag()


def artefact_path(key: str, suffix: str) -> Path:
    """Path of the artefact ``suffix`` (``.py``, ``.json``, ``.rhs.o``, ...) of ``key``."""
    return kernel_directory() / f"kernels_{key}{suffix}"


def write_atomically(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` so that concurrent readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp_", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


GENERATION_LOCK = threading.RLock()
"""Serialises generating, compiling and loading kernels within a process."""
