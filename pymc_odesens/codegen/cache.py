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

import threading
from pathlib import Path

from pymc_odesens.model.disk_cache import cache_directory, write_atomically

__all__ = [
    "GENERATION_LOCK",
    "artefact_path",
    "cache_directory",
    "kernel_directory",
    "write_atomically",
]


def kernel_directory() -> Path:
    """The cache directory's folder for this kind of machine (object code is CPU-specific)."""
    from pymc_odesens.codegen.machine_code import machine_tag

    return cache_directory() / machine_tag()


def artefact_path(key: str, suffix: str) -> Path:
    """Path of the artefact ``suffix`` (``.py``, ``.json``, ``.rhs.o``, ...) of ``key``."""
    return kernel_directory() / f"kernels_{key}{suffix}"


GENERATION_LOCK = threading.RLock()
"""Serialises generating, compiling and loading kernels within a process."""
