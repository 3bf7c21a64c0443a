"""The numba cache guard: an edit anywhere in the package drops numba's cache files, an
unchanged package keeps them."""

from __future__ import annotations

from pathlib import Path

import pytest
from numba.core import config
from numba.core.caching import _CacheLocator

import pymc_odesens
from pymc_odesens.caching.numba_cache_guard import (
    DIGEST_FILE,
    numba_cache_directories,
    purge_stale_numba_cache,
    sources_digest,
)


def _cache_files(package: Path) -> list[Path]:
    return [
        package / "__pycache__" / "driver.run-10.py311.nbi",
        package / "__pycache__" / "driver.run-10.py311.1.nbc",
        package / "sub" / "__pycache__" / "callee.step-3.py311.nbi",
    ]


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A package whose driver's cached code would link its callee's."""
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "driver.py").write_text("from pkg.sub.callee import step\n")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "callee.py").write_text("def step(x):\n    return x + 1\n")
    purge_stale_numba_cache(root)
    return root


def _write_cache(package: Path) -> list[Path]:
    files = _cache_files(package)
    for path in files:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"machine code")
    (package / "__pycache__" / "driver.cpython-311.pyc").write_bytes(b"bytecode")
    return files


def test_unchanged_sources_keep_the_cache(package):
    files = _write_cache(package)
    assert purge_stale_numba_cache(package) is False
    assert all(path.exists() for path in files)
    # rewriting a file with the same content is no change (a checkout back and forth)
    callee = package / "sub" / "callee.py"
    callee.write_text(callee.read_text())
    assert purge_stale_numba_cache(package) is False
    assert all(path.exists() for path in files)


def test_an_edited_callee_drops_every_cache_file_and_only_those(package):
    files = _write_cache(package)
    (package / "sub" / "callee.py").write_text("def step(x):\n    return x + 2\n")
    assert purge_stale_numba_cache(package) is True
    assert not any(path.exists() for path in files)
    assert (package / "__pycache__" / "driver.cpython-311.pyc").exists()
    stored = (package / "__pycache__" / DIGEST_FILE).read_text()
    assert stored == sources_digest(package)
    assert not list(package.rglob("*.partial"))
    # the digest is stored: the next import keeps what is compiled from now on
    files = _write_cache(package)
    assert purge_stale_numba_cache(package) is False
    assert all(path.exists() for path in files)


def test_a_new_or_renamed_module_is_a_change(package):
    files = _write_cache(package)
    (package / "sub" / "callee.py").rename(package / "sub" / "renamed.py")
    assert purge_stale_numba_cache(package) is True
    assert not any(path.exists() for path in files)


def test_numba_cache_dir_folders_are_purged_too(package, tmp_path, monkeypatch):
    cache_dir = tmp_path / "numba_cache"
    monkeypatch.setattr(config, "CACHE_DIR", str(cache_dir))
    folder = cache_dir / _CacheLocator.get_suitable_cache_subpath(
        str(package / "sub" / "callee.py")
    )
    assert folder in numba_cache_directories(package)
    folder.mkdir(parents=True)
    (folder / "callee.step-3.py311.nbi").write_bytes(b"index")
    (package / "sub" / "callee.py").write_text("def step(x):\n    return x - 1\n")
    assert purge_stale_numba_cache(package) is True
    assert not (folder / "callee.step-3.py311.nbi").exists()


def test_importing_the_package_stored_its_current_digest():
    package = Path(pymc_odesens.__file__).parent
    stored = (package / "__pycache__" / DIGEST_FILE).read_text()
    assert stored == sources_digest(package)
    assert purge_stale_numba_cache() is False
