"""Where the package keeps what it computes once per model, and how it reads and writes there.

One directory per user (:func:`cache_directory`) holds the generated kernels
(:mod:`pymc_odesens.codegen.cache`) and the other per-model results that are worth keeping
across processes (the conservation laws, :mod:`pymc_odesens.model.conservation_cache`).

The cache holds machine code that the process executes, so:

- every artefact is stored with the SHA-256 digest of its content and its name
  (:mod:`pymc_odesens.caching.verified_file`) and verified before use
  (:func:`read_artefact`); a file that does not verify (damaged, truncated, empty,
  unreadable, another file copied in place) is a cache miss: what it held is computed
  again and the file replaced, with one :class:`KernelCacheWarning` naming it;
- the directories the package creates there are private (mode 0700), and a directory or
  file that is not owned by the user, or that its group or others may write, is refused
  with a :class:`KernelCacheError` naming the path and the fix (as ssh refuses such keys):
  whoever can write there could run code in this process;
- a cache that cannot be written (a read-only directory, a full disk) is not an error:
  results are kept in memory for the process, with one :class:`KernelCacheWarning` naming
  ``PYMC_ODESENS_CACHE_DIR``.

Files are written atomically (:func:`write_atomically`), so that processes sharing the
directory never read a partial file.
"""

from __future__ import annotations

import os
import stat
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pymc_odesens.caching.verified_file import frame, unframe

__all__ = [
    "KernelCacheError",
    "KernelCacheWarning",
    "cache_directory",
    "load_artefact",
    "private_directory",
    "read_artefact",
    "store_artefact",
    "write_atomically",
]

T = TypeVar("T")


class KernelCacheWarning(UserWarning):
    """A cache file was damaged and is replaced, or the cache cannot be written."""


class KernelCacheError(RuntimeError):
    """The cache directory or a file in it could be written by someone else: refused."""


_LOCK = threading.Lock()
_WARNED: set[str] = set()


def cache_directory() -> Path:
    """Directory holding generated kernels and other per-model results.

    ``$PYMC_ODESENS_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/pymc_odesens``
    (``~/.cache/pymc_odesens``).
    """
    configured = os.environ.get("PYMC_ODESENS_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pymc_odesens"


def write_atomically(path: Path, data: str | bytes | Callable[[Path], None]) -> None:
    """Write ``data`` to ``path`` so that concurrent readers never see a partial file.

    ``data``: the file's content, or a function that writes the file at the path it is
    given (for writers that want a path, such as NetCDF's). The file is written beside
    ``path`` and renamed over it when whole, so a process stopped while writing leaves
    ``path`` as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp_", suffix=path.suffix)
    try:
        if callable(data):
            os.close(fd)
            data(Path(tmp))
        else:
            with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as fh:
                fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ----------------------------------------------------------------------------- permissions


def _check_private(path: Path, status: os.stat_result, kind: str) -> None:
    """Raise :class:`KernelCacheError` unless ``path`` is the user's and only the user's to
    write (no check where the OS has no user ids)."""
    if not hasattr(os, "geteuid"):
        return
    user = os.geteuid()
    fix = (
        f"chmod 700 {path}" if kind == "directory" else f"chmod 600 {path} (or remove it)"
    ) + ", or set PYMC_ODESENS_CACHE_DIR to a private directory of your own"
    if status.st_uid != user:
        raise KernelCacheError(
            f"the kernel cache {kind} {path} is owned by user id {status.st_uid}, not by this "
            f"user ({user}): the cache holds machine code that this process runs, so it must "
            f"be your own. Remove it or set PYMC_ODESENS_CACHE_DIR to a private directory of "
            f"your own."
        )
    writable = [
        who for who, bit in (("its group", 0o020), ("others", 0o002)) if status.st_mode & bit
    ]
    if writable:
        raise KernelCacheError(
            f"the kernel cache {kind} {path} is writable by {' and '.join(writable)} (mode "
            f"{stat.S_IMODE(status.st_mode):04o}): whoever can write there can make this "
            f"process run their machine code. Fix: {fix}."
        )


def _directories(root: Path, directory: Path) -> list[Path]:
    """``root`` and each directory below it down to ``directory``."""
    parts = directory.relative_to(root).parts
    return [root] + [root.joinpath(*parts[: i + 1]) for i in range(len(parts))]


def _readable_directories(root: Path, directory: Path) -> bool:
    """Whether ``directory`` exists; each existing level from ``root`` checked private."""
    for level in _directories(root, directory):
        try:
            status = os.stat(level)
        except OSError:
            return False
        if not stat.S_ISDIR(status.st_mode):
            return False
        _check_private(level, status, "directory")
    return True


def _make_private_directories(root: Path, directory: Path) -> None:
    """Create the missing levels from ``root`` to ``directory`` with mode 0700; check the
    existing ones (raises OSError when they cannot be created)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    for level in _directories(root, directory):
        try:
            os.mkdir(level, 0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(level, 0o700)  # whatever the umask
        status = os.stat(level)
        if not stat.S_ISDIR(status.st_mode):
            raise NotADirectoryError(f"{level} is not a directory")
        _check_private(level, status, "directory")


# ----------------------------------------------------------------------------- warnings


def _warn_once(key: str, message: str) -> None:
    with _LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    warnings.warn(message, KernelCacheWarning, stacklevel=4)


def _warn_damaged(path: Path, reason: str) -> None:
    _warn_once(
        f"damaged:{path}",
        f"kernel cache file {path} does not verify ({reason}): a cache miss, its content is "
        "computed again and the file replaced",
    )


def _warn_unwritable(root: Path, error: OSError) -> None:
    _warn_once(
        f"unwritable:{root}",
        f"the kernel cache {root} cannot be written ({error}): compiled kernels and other "
        "cached results are kept in memory for this process only. Set "
        "PYMC_ODESENS_CACHE_DIR to a writable directory to keep them across processes.",
    )


# ----------------------------------------------------------------------------- artefacts


def _identity(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def read_artefact(path: Path) -> bytes | None:
    """The verified content of the cache file ``path`` (under :func:`cache_directory`).

    Returns None for a cache miss: no such file, or a file that does not verify or cannot
    be read (then with one :class:`KernelCacheWarning` naming it; the caller computes the
    content again and stores it with :func:`store_artefact`, which replaces the file).

    Raises
    ------
    KernelCacheError
        When the file or a directory on its way from the cache directory is not owned by
        the user or may be written by its group or others.
    """
    root = cache_directory()
    path = Path(path)
    if not _readable_directories(root, path.parent):
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as error:
        _warn_damaged(path, f"it cannot be read: {error.strerror}")
        return None
    try:
        status = os.fstat(fd)
        _check_private(path, status, "file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read()
    except OSError as error:
        _warn_damaged(path, f"it cannot be read: {error.strerror}")
        return None
    finally:
        os.close(fd)
    try:
        return unframe(data, _identity(root, path))
    except ValueError as reason:
        _warn_damaged(path, str(reason))
        return None


def load_artefact(path: Path, decode: Callable[[bytes], T]) -> T | None:
    """``decode`` of the verified content of ``path`` (see :func:`read_artefact`), or None.

    A content that ``decode`` rejects (an exception) is a cache miss with a warning, like a
    file that does not verify.
    """
    data = read_artefact(path)
    if data is None:
        return None
    try:
        return decode(data)
    except Exception as error:  # any rejection of the content: computed again
        _warn_damaged(path, f"its content is not understood: {error}")
        return None


def store_artefact(path: Path, content: bytes) -> None:
    """Store ``content`` at ``path`` (under :func:`cache_directory`) with its digest.

    Missing directories are created private (mode 0700); the file replaces any earlier one
    atomically. A cache that cannot be written is left as it is, with one
    :class:`KernelCacheWarning` per process naming ``PYMC_ODESENS_CACHE_DIR``.

    Raises
    ------
    KernelCacheError
        When a directory on the way is not owned by the user or may be written by its group
        or others.
    """
    root = cache_directory()
    path = Path(path)
    data = frame(content, _identity(root, path))
    if private_directory(path.parent.relative_to(root)) is None:
        return
    try:
        write_atomically(path, data)
    except OSError as error:
        _warn_unwritable(root, error)


def private_directory(relative: str | Path) -> Path | None:
    """The directory ``relative`` below :func:`cache_directory`, created private (mode 0700).

    For caches that write their own files there (numba's). Returns None, with one
    :class:`KernelCacheWarning` per process, when it cannot be created.

    Raises
    ------
    KernelCacheError
        When a directory on the way is not owned by the user or may be written by its group
        or others.
    """
    root = cache_directory()
    directory = root / relative
    try:
        _make_private_directories(root, directory)
    except OSError as error:
        _warn_unwritable(root, error)
        return None
    return directory
