"""On-disk cache of generated kernels: their source, their object code and a manifest.

Files of one cache key (a hash of the expressions and of the code generator's version)
live in :func:`kernel_directory`, each stored with the SHA-256 digest of its content and
its name and verified before it is used (:func:`read_artefact`, :func:`store_artefact`;
the rules, permissions and warnings: :mod:`pymc_odesens.caching.disk_cache`):

- ``kernels_<key>.py``: the generated kernel source (the kernel language of
  :mod:`pymc_odesens.codegen.llvm_emitter`), kept as a readable artefact;
- ``kernels_<key>.json``: the manifest, the kernels the source defines and the external
  symbols each calls;
- ``kernels_<key>.<kernel>.o``: the object code of one kernel, written the first time it is
  compiled and loaded by every later process (which then generates and compiles nothing);
- other artefacts of a system stored with its kernels (its Jacobian's sparsity pattern:
  ``kernels_<key>.pattern.npz``; the sparse LU analysis of its Newton matrices:
  ``kernels_<key>.newton.v<version>.npy``; a description: ``kernels_<key>.system.json``).

Object code is loaded into the process only after it verified: a damaged file is compiled
again and replaced, never handed to LLVM.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pymc_odesens.caching.disk_cache import (
    KernelCacheError,
    KernelCacheWarning,
    cache_directory,
    load_artefact,
    read_artefact,
    store_artefact,
)
from pymc_odesens.caching.verified_file import FORMAT_VERSION

__all__ = [
    "GENERATION_LOCK",
    "KernelCacheError",
    "KernelCacheWarning",
    "artefact_path",
    "cache_directory",
    "kernel_directory",
    "load_artefact",
    "read_artefact",
    "store_artefact",
]


def kernel_directory() -> Path:
    """The cache directory's folder for this kind of machine (object code is CPU-specific)
    and this file format."""
    from pymc_odesens.codegen.machine_code import machine_tag

    return cache_directory() / f"kernels-v{FORMAT_VERSION}" / machine_tag()


def artefact_path(key: str, suffix: str) -> Path:
    """Path of the artefact ``suffix`` (``.py``, ``.json``, ``.rhs.o``, ...) of ``key``."""
    return kernel_directory() / f"kernels_{key}{suffix}"


GENERATION_LOCK = threading.RLock()
"""Serialises generating, compiling and loading kernels within a process."""
