"""Where the package keeps what it computes once per model, and how it writes there.

One directory per user (:func:`cache_directory`) holds the generated kernels
(:mod:`pymc_odesens.codegen.cache`) and the other per-model results that are worth keeping
across processes (the conservation laws, :mod:`pymc_odesens.model.conservation_cache`).
Files are written atomically (:func:`write_atomically`), so that processes sharing the
directory never read a partial file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["cache_directory", "write_atomically"]


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
