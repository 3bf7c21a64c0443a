"""On-disk cache of generated kernel modules, keyed by a hash of the expressions."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType

import numba

__all__ = [
    "GENERATION_LOCK",
    "cache_directory",
    "module_path",
    "write_atomically",
    "import_module_from_path",
]


def cache_directory() -> Path:
    """Directory holding generated kernels.

    ``$PYMC_ODESENS_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/pymc_odesens``
    (``~/.cache/pymc_odesens``). numba's own compile cache lands in its
    ``__pycache__`` beside each module, so a later process pays neither code
    generation nor compilation.
    """
    configured = os.environ.get("PYMC_ODESENS_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pymc_odesens"


def module_path(key: str) -> Path:
    """Path of the generated module for the cache ``key``."""
    tag = f"numba{numba.__version__.replace('.', '_')}"
    return cache_directory() / tag / f"kernels_{key}.py"


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that concurrent readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp_", suffix=".py")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


GENERATION_LOCK = threading.RLock()
"""Serialises generating, writing and importing kernel modules within a process: a module
being imported (its cfuncs compiling) must not be seen half-initialised by another thread."""


def import_module_from_path(path: Path) -> ModuleType:
    """Import (once per process, thread-safely) the generated module at ``path``."""
    name = f"pymc_odesens_generated.{path.stem}"
    with GENERATION_LOCK:
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
