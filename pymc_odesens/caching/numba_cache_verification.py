"""numba's cache files of the package's functions, verified before numba loads them.

numba keeps a compiled function in two pickled files: an index (``.nbi``: which file holds
the code of which signature) and one data file per signature (``.nbc``: the object code).
It checks neither against damage: random bytes end in an unpickling error
(``unregistered extension code``) that fails the import, and one changed byte of the object
code is loaded and run. For the functions of this package (every jitted function or cfunc
whose module is ``pymc_odesens.*``) :func:`verify_numba_cache` makes numba write both
files through :mod:`pymc_odesens.caching.verified_file` (the SHA-256 digest of the content
and the file's name; a data file's name also carries a digest of the signature it holds)
and read them back only when they verify. A file that does not verify is a cache miss, with
one :class:`~pymc_odesens.caching.disk_cache.KernelCacheWarning` naming it: numba compiles the
function again and replaces the file.

The verified files have names of their own (``<function>-<line>.pyXY.sha256.nbi`` and
``....sha256.<n>.nbc``), so numba files written without verification are never read; the
package's numba cache guard (:mod:`pymc_odesens.caching.numba_cache_guard`) removes them with the
rest when the sources change. They live where numba puts them (beside the package's
sources, or under ``NUMBA_CACHE_DIR``), as trusted as the sources themselves: the
permission rule of the kernel cache directory is not applied there.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import pickle
import threading
import warnings

from numba.core import caching

from pymc_odesens.caching.disk_cache import KernelCacheWarning
from pymc_odesens.caching.verified_file import frame, unframe

__all__ = ["VerifiedCacheFile", "verify_numba_cache"]

PACKAGE = "pymc_odesens"
_LOCK = threading.Lock()
_WARNED: set[str] = set()


def _warn_damaged(path: str, reason: str) -> None:
    with _LOCK:
        if path in _WARNED:
            return
        _WARNED.add(path)
    warnings.warn(
        f"numba cache file {path} does not verify ({reason}): a cache miss, the function is "
        "compiled again and the file replaced",
        KernelCacheWarning,
        stacklevel=3,
    )


class VerifiedCacheFile(caching.IndexDataCacheFile):
    """numba's index and data files, each written with its digest and verified on reading.

    Parameters are numba's (``cache_path``, ``filename_base``, ``source_stamp``).
    """

    def __init__(self, cache_path, filename_base, source_stamp) -> None:
        super().__init__(cache_path, f"{filename_base}.sha256", source_stamp)

    def _read(self, path: str, identity: str) -> bytes | None:
        """The verified content of ``path``; None if missing (silent) or not verified."""
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
        except OSError as error:
            _warn_damaged(path, f"it cannot be read: {error.strerror}")
            return None
        try:
            return unframe(data, identity)
        except ValueError as reason:
            _warn_damaged(path, str(reason))
            return None

    def _load_index(self) -> dict:
        content = self._read(self._index_path, self._index_name)
        if content is None:
            return {}
        try:
            stream = io.BytesIO(content)
            version = pickle.load(stream)
            if version != self._version:
                return {}
            stamp, overloads = pickle.loads(stream.read())
        except Exception as error:  # verified, yet not numba's index: compiled again
            _warn_damaged(self._index_path, f"not an index: {error}")
            return {}
        return overloads if stamp == self._source_stamp else {}

    def _save_index(self, overloads) -> None:
        content = pickle.dumps(self._version, protocol=-1) + self._dump(
            (self._source_stamp, overloads)
        )
        with self._open_for_write(self._index_path) as handle:
            handle.write(frame(content, self._index_name))

    @staticmethod
    def _data_identity(data_name: str, key) -> str:
        return f"{data_name}:{hashlib.sha256(repr(key).encode()).hexdigest()[:32]}"

    def save(self, key, data) -> None:
        """Save the entry ``data`` of ``key`` (numba's logic, verified files).

        A directory that cannot be written (read-only, full) keeps the compiled function in
        memory, with one warning.
        """
        try:
            self._save_verified(key, data)
        except OSError as error:
            with _LOCK:
                if self._cache_path in _WARNED:
                    return
                _WARNED.add(self._cache_path)
            warnings.warn(
                f"numba's cache {self._cache_path} cannot be written ({error}): the "
                "package's compiled functions are kept in memory for this process only",
                KernelCacheWarning,
                stacklevel=2,
            )

    def _save_verified(self, key, data) -> None:
        overloads = self._load_index()
        data_name = overloads.get(key)
        if data_name is None:
            existing = set(overloads.values())
            data_name = next(
                name for name in map(self._data_name, itertools.count(1)) if name not in existing
            )
            overloads[key] = data_name
            self._save_index(overloads)
        with self._open_for_write(self._data_path(data_name)) as handle:
            handle.write(frame(self._dump(data), self._data_identity(data_name, key)))

    def load(self, key):
        """The entry of ``key``, or None (not cached, or its file does not verify)."""
        data_name = self._load_index().get(key)
        if data_name is None:
            return None
        path = self._data_path(data_name)
        content = self._read(path, self._data_identity(data_name, key))
        if content is None:
            return None
        try:
            return pickle.loads(content)
        except Exception as error:  # verified, yet not numba's data: compiled again
            _warn_damaged(path, f"not numba's data: {error}")
            return None


def _is_package_function(py_func) -> bool:
    module = getattr(py_func, "__module__", None) or ""
    return module == PACKAGE or module.startswith(f"{PACKAGE}.")


def verify_numba_cache() -> None:
    """Make numba keep the cache of this package's functions in verified files.

    Installed once per process, before any of the package's cached functions is compiled
    or loaded (``import pymc_odesens`` does it); numba's caching of other code is left as
    it is.
    """
    if getattr(caching.Cache.__init__, "_verified_for", None) == PACKAGE:
        return
    original = caching.Cache.__init__

    def __init__(self, py_func, *args, **kwargs):
        original(self, py_func, *args, **kwargs)
        plain = self._cache_file
        if _is_package_function(py_func) and type(plain) is caching.IndexDataCacheFile:
            self._cache_file = VerifiedCacheFile(
                plain._cache_path, self._impl.filename_base, plain._source_stamp
            )

    __init__._verified_for = PACKAGE
    caching.Cache.__init__ = __init__
