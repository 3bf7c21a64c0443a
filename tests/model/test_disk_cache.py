"""Atomic writes of the package's files (kernels, conservation laws, traces)."""

from pathlib import Path

import pytest

from pymc_odesens.model.disk_cache import write_atomically


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
