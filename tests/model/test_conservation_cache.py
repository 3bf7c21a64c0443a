"""Conservation laws kept on disk: read by a second process, missed on any change, a corrupt
entry recomputed (with a warning naming the file) and replaced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

import pymc_odesens.model.system as system_module
from pymc_odesens import OdeSystem
from pymc_odesens.caching.disk_cache import (
    KernelCacheWarning,
    cache_directory,
    read_artefact,
    store_artefact,
)
from pymc_odesens.model.conservation_cache import conservation_cache_path

REPO = Path(__file__).resolve().parents[2]

ENZYME = textwrap.dedent(
    """
    from pymc_odesens import OdeSystem

    def enzyme_system(regenerated=True):
        def rhs(t, y, p):
            substrate, enzyme, complex_, product = y
            v1 = p.kf * substrate * enzyme - p.kr * complex_
            v2 = p.kcat * complex_
            return [-v1, -v1 + v2 if regenerated else -v1, v1 - v2, v2]

        return OdeSystem(rhs, states=["S", "E", "C", "P"], params=["kf", "kr", "kcat"])
    """
)
namespace: dict = {}
exec(ENZYME, namespace)
enzyme_system = namespace["enzyme_system"]

STOICHIOMETRY = [[-1, 0], [-1, 1], [1, -1], [0, 1]]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PYMC_ODESENS_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def finds(monkeypatch):
    """Counts the calls of the laws' finder (each a cache miss)."""
    calls = []
    find = system_module.find_conservation_laws

    def counted(*args, **kwargs):
        calls.append(1)
        return find(*args, **kwargs)

    monkeypatch.setattr(system_module, "find_conservation_laws", counted)
    return calls


def _summary(laws) -> dict:
    return {
        "exact": [[str(v) for v in laws.exact.row(r)] for r in range(laws.n_laws)],
        "dependent": laws.dependent.tolist(),
        "source": laws.source,
        "unresolved": laws.unresolved,
        "describe": laws.describe(),
    }


def test_a_second_process_reads_the_laws_without_finding_them(cache):
    system = enzyme_system()
    system.stoichiometry = STOICHIOMETRY
    first = _summary(system.conservation_laws)
    assert first["exact"] == [["1", "0", "1", "1"], ["0", "1", "1", "0"]]
    child = ENZYME + textwrap.dedent(
        f"""
        import json
        import pymc_odesens.model.system as system_module

        def refuse(*args, **kwargs):
            raise AssertionError("the laws were recomputed")

        system_module.find_conservation_laws = refuse
        system = enzyme_system()
        system.stoichiometry = {STOICHIOMETRY!r}
        laws = system.conservation_laws
        print(json.dumps({{
            "exact": [[str(v) for v in laws.exact.row(r)] for r in range(laws.n_laws)],
            "dependent": laws.dependent.tolist(), "source": laws.source,
            "unresolved": laws.unresolved, "describe": laws.describe(),
            "matrix": laws.matrix.tolist(),
        }}))
        """
    )
    env = {**os.environ, "PYMC_ODESENS_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", child], env=env, capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-3000:]
    second = json.loads(done.stdout.strip().splitlines()[-1])
    np.testing.assert_array_equal(second.pop("matrix"), system.conservation_laws.matrix)
    assert second == first


def test_identical_systems_hit_and_changes_miss(cache, finds):
    laws = enzyme_system().conservation_laws
    assert len(finds) == 1
    again = enzyme_system().conservation_laws  # a new object of the same system: a hit
    assert len(finds) == 1
    assert again.exact == laws.exact and again.source == "structure"
    np.testing.assert_array_equal(again.dependent, laws.dependent)

    with_stoichiometry = enzyme_system()
    with_stoichiometry.stoichiometry = STOICHIOMETRY
    assert with_stoichiometry.conservation_laws.source == "stoichiometry"
    assert len(finds) == 2
    doubled = enzyme_system()  # the same reactions, other stoichiometric coefficients
    doubled.stoichiometry = 2 * np.array(STOICHIOMETRY)
    assert doubled.conservation_laws.source == "stoichiometry"
    assert len(finds) == 3

    # a changed right-hand side (the enzyme is not regenerated) has laws of its own
    changed = enzyme_system(regenerated=False).conservation_laws
    assert len(finds) == 4
    assert changed.exact == sp.Matrix([[1, 0, 1, 1], [0, 1, 1, 1]])
    assert enzyme_system(regenerated=False).conservation_laws.exact == changed.exact
    assert len(finds) == 4


def test_renamed_states_miss(cache, finds):
    assert enzyme_system().conservation_laws.n_laws == 2
    renamed = OdeSystem(
        lambda t, y, p: [
            -(p.kf * y.A * y.B - p.kr * y.AB),
            -(p.kf * y.A * y.B - p.kr * y.AB) + p.kcat * y.AB,
            p.kf * y.A * y.B - p.kr * y.AB - p.kcat * y.AB,
            p.kcat * y.AB,
        ],
        states=["A", "B", "AB", "Q"],
        params=["kf", "kr", "kcat"],
    )
    assert renamed.conservation_laws.describe() == ["A + AB + Q = const", "B + AB = const"]
    assert len(finds) == 2


def _altered(field: str, value):
    """An entry with ``field`` changed (stored with a matching digest: a corruption that the
    digest alone would not catch)."""

    def alter(text: str) -> str:
        return json.dumps({**json.loads(text), field: value})

    return alter


def _flipped(data: bytes) -> bytes:
    """One character of the laws changed, the file's header (and digest) kept."""
    at = data.index(b'"exact": [["1", "0", "1"') + len(b'"exact": [["1", "0", "')
    return data[:at] + b"2" + data[at + 1 :]


FILE_CORRUPTIONS = {
    "not json": lambda data: b"{not json",
    "empty": lambda data: b"",
    "truncated": lambda data: data[: len(data) // 2],
    "a changed entry": _flipped,
    "header removed": lambda data: data.split(b"\n", 1)[1],
}

ENTRY_CORRUPTIONS = {
    "not json": lambda text: "{not json",
    "a list": lambda text: "[]",
    "other key": _altered("key", "0" * 24),
    "other version": _altered("version", "0"),
    "wrong width": _altered("n_states", 3),
    "unknown source": _altered("source", "x"),
    "negative unresolved": _altered("unresolved", -1),
    "symbolic entry": _altered("exact", [["1", "0", "k", "1"], ["0", "1", "1", "0"]]),
    "float entry": _altered("exact", [["1", "0", "1.0", "1"], ["0", "1", "1", "0"]]),
    "short row": _altered("exact", [["1", "0", "1"], ["0", "1", "1", "0"]]),
    "not reduced": _altered("exact", [["1", "1", "1", "1"], ["0", "1", "1", "0"]]),
    "pivots off": _altered("pivots", [0, 2]),
    "pivots missing": _altered("pivots", [0]),
    "pivots unordered": _altered("pivots", [1, 0]),
}


def _corrupt_and_recompute(finds, write_corruption) -> None:
    system = enzyme_system()
    laws = system.conservation_laws
    path = conservation_cache_path(system)
    original = path.read_bytes()
    write_corruption(path)
    with pytest.warns(KernelCacheWarning, match="does not verify") as caught:
        recomputed = enzyme_system().conservation_laws
    assert [str(path) in str(w.message) for w in caught] == [True]
    assert len(finds) == 2
    assert recomputed.exact == laws.exact
    np.testing.assert_array_equal(recomputed.dependent, laws.dependent)
    assert path.read_bytes() == original  # replaced
    assert enzyme_system().conservation_laws.exact == laws.exact  # rewritten: a hit
    assert len(finds) == 2


@pytest.mark.parametrize("corruption", sorted(FILE_CORRUPTIONS))
def test_a_corrupt_file_is_recomputed(cache, finds, corruption):
    def write(path: Path) -> None:
        path.write_bytes(FILE_CORRUPTIONS[corruption](path.read_bytes()))

    _corrupt_and_recompute(finds, write)


@pytest.mark.parametrize("corruption", sorted(ENTRY_CORRUPTIONS))
def test_an_inconsistent_entry_under_a_matching_digest_is_recomputed(cache, finds, corruption):
    def write(path: Path) -> None:
        text = read_artefact(path).decode()
        store_artefact(path, ENTRY_CORRUPTIONS[corruption](text).encode())

    _corrupt_and_recompute(finds, write)


def test_an_unwritable_cache_still_gives_the_laws(tmp_path, monkeypatch, finds):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("PYMC_ODESENS_CACHE_DIR", str(blocker))
    assert cache_directory() == blocker
    with pytest.warns(KernelCacheWarning, match="PYMC_ODESENS_CACHE_DIR") as caught:
        laws = enzyme_system().conservation_laws
    assert len(caught) == 1 and str(blocker) in str(caught[0].message)
    assert laws.describe() == ["S + C + P = const", "E + C = const"]
    assert len(finds) == 1
