"""Atomic writes of the package's files (kernels, conservation laws, traces); the cache's
rules: verified artefacts, private directories, refused when others can write, a warning
when it cannot be written."""

import json
import os
import stat
from pathlib import Path

import pytest

from pymc_odesens.caching import disk_cache
from pymc_odesens.caching.disk_cache import (
    KernelCacheError,
    KernelCacheWarning,
    load_artefact,
    read_artefact,
    store_artefact,
    write_atomically,
)


def test_content_and_writer_functions_replace_the_file_whole(tmp_path):
    path = tmp_path / "sub" / "a.txt"
    write_atomically(path, "first")
    assert path.read_text() == "first"
    write_atomically(path, lambda partial: Path(partial).write_bytes(b"second"))
    assert path.read_bytes() == b"second"
    assert sorted(p.name for p in path.parent.iterdir()) == ["a.txt"]


def test_a_writer_that_fails_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "a.txt"
    write_atomically(path, "kept")

    def fails(partial):
        Path(partial).write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(path, fails)
    assert path.read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


# ----------------------------------------------------------------------------- the cache's rules


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "parent" / "cache"
    monkeypatch.setenv("PYMC_ODESENS_CACHE_DIR", str(root))
    return root


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_stored_artefacts_come_back_and_the_cache_is_private(cache):
    path = cache / "sub" / "deeper" / "a.bin"
    old_umask = os.umask(0)  # the most permissive umask: the modes are still private
    try:
        store_artefact(path, b"content")
    finally:
        os.umask(old_umask)
    assert read_artefact(path) == b"content"
    assert [_mode(p) for p in (cache, cache / "sub", path.parent)] == [0o700] * 3
    assert _mode(path) == 0o600
    assert load_artefact(path, lambda data: data.upper()) == b"CONTENT"
    assert read_artefact(cache / "sub" / "missing.bin") is None
    assert read_artefact(cache / "no_such_folder" / "a.bin") is None


def test_a_damaged_artefact_is_a_miss_with_one_warning_until_replaced(cache):
    path = cache / "a.bin"
    store_artefact(path, b"content")
    path.write_bytes(path.read_bytes()[:-1] + b"?")
    with pytest.warns(KernelCacheWarning, match="SHA-256 digest does not match") as caught:
        assert read_artefact(path) is None
        assert read_artefact(path) is None  # once per file
    assert len(caught) == 1 and f"kernel cache file {path} does not verify" in str(
        caught[0].message
    )
    store_artefact(path, b"content")
    assert read_artefact(path) == b"content"


def test_a_file_copied_under_another_name_does_not_verify(cache):
    store_artefact(cache / "one.o", b"code of one")
    (cache / "two.o").write_bytes((cache / "one.o").read_bytes())
    with pytest.warns(KernelCacheWarning, match="written as 'one.o'"):
        assert read_artefact(cache / "two.o") is None


def test_content_the_decoder_rejects_is_a_miss_with_a_warning(cache):
    path = cache / "a.json"
    store_artefact(path, b"{not json")
    with pytest.warns(KernelCacheWarning, match="content is not understood"):
        assert load_artefact(path, json.loads) is None


def test_an_unreadable_artefact_is_a_miss_with_a_warning(cache):
    path = cache / "a.bin"
    path.mkdir(parents=True)  # a directory where the file should be
    with pytest.warns(KernelCacheWarning, match="cannot be read"):
        assert read_artefact(path) is None


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o720])
def test_a_directory_others_can_write_is_refused(cache, mode):
    store_artefact(cache / "sub" / "a.bin", b"content")
    (cache / "sub").chmod(mode)
    for action in (
        lambda: read_artefact(cache / "sub" / "a.bin"),
        lambda: store_artefact(cache / "sub" / "b.bin", b"x"),
    ):
        with pytest.raises(KernelCacheError) as error:
            action()
        message = str(error.value)
        assert f"kernel cache directory {cache / 'sub'} is writable by" in message
        assert f"(mode {mode:04o})" in message
        assert f"chmod 700 {cache / 'sub'}" in message and "PYMC_ODESENS_CACHE_DIR" in message
    assert not (cache / "sub" / "b.bin").exists()


def test_a_file_others_can_write_is_refused(cache):
    path = cache / "a.bin"
    store_artefact(path, b"content")
    path.chmod(0o622)
    with pytest.raises(KernelCacheError, match="writable by its group and others") as error:
        read_artefact(path)
    assert f"kernel cache file {path}" in str(error.value)
    assert f"chmod 600 {path}" in str(error.value)


def test_a_cache_of_another_user_is_refused(cache, monkeypatch):
    store_artefact(cache / "a.bin", b"content")
    monkeypatch.setattr(disk_cache.os, "geteuid", lambda: os.getuid() + 4242)
    with pytest.raises(KernelCacheError, match="owned by user id") as error:
        read_artefact(cache / "a.bin")
    assert f"kernel cache directory {cache} is owned by user id {os.getuid()}" in str(error.value)
    assert "PYMC_ODESENS_CACHE_DIR" in str(error.value)


def test_an_unwritable_cache_warns_once_naming_the_variable(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("PYMC_ODESENS_CACHE_DIR", str(blocker))
    with pytest.warns(KernelCacheWarning) as caught:
        store_artefact(blocker / "a.bin", b"content")  # kept in memory by the caller
        store_artefact(blocker / "b.bin", b"content")
    assert len(caught) == 1
    message = str(caught[0].message)
    assert f"the kernel cache {blocker} cannot be written" in message
    assert "PYMC_ODESENS_CACHE_DIR" in message
    assert read_artefact(blocker / "a.bin") is None
