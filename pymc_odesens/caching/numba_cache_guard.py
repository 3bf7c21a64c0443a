"""numba's on-disk cache kept in step with the package's sources.

numba invalidates a cached function when *its own* source file changes, not when a function
it calls in another module changes: its linked copy of the callee, and the module constants
the callee read, stay as they were. After a ``git pull`` into an editable install that edits
``solvers/event_instant.py`` but not ``solvers/hybrid.py``, the cached driver would go on
running the old event code, silently. So at import, before any cached function is loaded,
the package compares a digest of its sources (every ``.py`` file's path and content) with
the digest stored beside numba's cache files; when they differ it deletes the package's
numba cache files (``*.nbi``, ``*.nbc``) and stores the new digest. The first use after an
edit then compiles the solvers again (about a minute), never runs stale machine code.

A process that loads a cache file while another one deletes it recompiles (numba treats a
missing data file as a cache miss). An installed release writes new source files, which
numba's own stamps already catch; an unwritable package directory is left alone.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["numba_cache_directories", "purge_stale_numba_cache", "sources_digest"]

DIGEST_FILE = "numba_sources.sha256"
"""Name of the file, in the package's top ``__pycache__``, that holds the sources' digest."""


def sources_digest(package_dir: Path) -> str:
    """SHA-256 over the relative path and content of every ``.py`` file under
    ``package_dir``, in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        digest.update(path.relative_to(package_dir).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def numba_cache_directories(package_dir: Path) -> list[Path]:
    """Where numba keeps the cache files of the modules under ``package_dir``: each
    ``__pycache__`` beside them, and, with ``NUMBA_CACHE_DIR`` set, its per-directory
    folders there."""
    directories = sorted(package_dir.rglob("__pycache__"))
    from numba.core import config

    if config.CACHE_DIR:
        from numba.core.caching import _CacheLocator

        for source_dir in sorted({p.parent for p in package_dir.rglob("*.py")}):
            subpath = _CacheLocator.get_suitable_cache_subpath(str(source_dir / "__init__.py"))
            directories.append(Path(config.CACHE_DIR) / subpath)
    return directories


def purge_stale_numba_cache(package_dir: Path | None = None) -> bool:
    """Delete the numba cache files of ``package_dir`` (default: this package) if its
    sources changed since the digest was last stored, and store the new digest.

    Parameters
    ----------
    package_dir : Path, optional
        A package directory (default: the directory of ``pymc_odesens``).

    Returns
    -------
    bool
        Whether cache files were deleted (False when the sources are unchanged or the
        directory is not writable).
    """
    # this file is pymc_odesens/caching/numba_cache_guard.py: the package is two levels up
    package_dir = Path(package_dir) if package_dir is not None else Path(__file__).parents[1]
    digest_file = package_dir / "__pycache__" / DIGEST_FILE
    digest = sources_digest(package_dir)
    try:
        if digest_file.read_text() == digest:
            return False
    except OSError:
        pass
    if not os.access(package_dir, os.W_OK):
        return False
    for directory in numba_cache_directories(package_dir):
        for pattern in ("*.nbi", "*.nbc"):
            for cache_file in directory.glob(pattern):
                cache_file.unlink(missing_ok=True)
    digest_file.parent.mkdir(exist_ok=True)
    partial = digest_file.with_name(f"{DIGEST_FILE}.{os.getpid()}.partial")
    partial.write_text(digest)
    os.replace(partial, digest_file)
    return True
