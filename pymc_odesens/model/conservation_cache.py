"""The conservation laws of a system, kept on disk across processes.

Finding the laws (:func:`~pymc_odesens.model.conservation.find_conservation_laws`) takes
exact null spaces and a numerical check of the Jacobian: a noticeable part of a model's
first use that every later process would repeat. They are stored in the cache directory
(:func:`~pymc_odesens.caching.disk_cache.cache_directory`, folder ``conservation``) as
``laws_<key>.json``, the exact rational matrix, its pivots, where the laws were found and the
number of unresolved null vectors. The key hashes everything the laws depend on: the system's
fingerprint (its canonical right-hand side), its state and parameter names, the exact
stoichiometry and :data:`CONSERVATION_VERSION` (raised whenever the algorithm changes).

The file is stored with the SHA-256 digest of its content and its name and verified before
it is read (:mod:`pymc_odesens.caching.disk_cache`), and an entry is trusted only when it is
also consistent: its key, its shape, exact rational entries in reduced row echelon form with
the stored pivots. Anything else (a truncated, corrupt or foreign file, an unreadable one)
is recomputed and written again, with a warning naming it; a cache that cannot be written
keeps the laws in memory (one warning).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import sympy as sp

from pymc_odesens.caching.disk_cache import cache_directory, load_artefact, store_artefact
from pymc_odesens.model.conservation import ConservationLaws

__all__ = ["CONSERVATION_VERSION", "cached_conservation_laws", "conservation_cache_path"]

CONSERVATION_VERSION = "2"
"""Version of the laws' algorithm and of this file format: part of every key."""

_SOURCES = ("stoichiometry", "structure")


def _key(system) -> str:
    stoichiometry = system.stoichiometry
    stoichiometry_text = (
        "none"
        if stoichiometry is None
        else f"{stoichiometry.shape}:" + ",".join(str(v) for v in stoichiometry)
    )
    text = "\n".join(
        [
            f"conservation {CONSERVATION_VERSION}",
            system.fingerprint,
            "states=" + ",".join(system.states),
            "params=" + ",".join(system.params),
            "stoichiometry=" + stoichiometry_text,
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _path(key: str) -> Path:
    return cache_directory() / "conservation" / f"laws_{key}.json"


def conservation_cache_path(system) -> Path:
    """The file that holds (or will hold) the conservation laws of ``system``."""
    return _path(_key(system))


def _encode(laws: ConservationLaws, key: str) -> str:
    exact = laws.exact
    entry = {
        "key": key,
        "version": CONSERVATION_VERSION,
        "n_states": int(exact.shape[1]),
        "exact": [[str(v) for v in exact.row(r)] for r in range(exact.shape[0])],
        "pivots": [int(p) for p in laws.dependent],
        "source": laws.source,
        "unresolved": int(laws.unresolved),
    }
    return json.dumps(entry)


def _decode(text: str, key: str, state_names: tuple) -> ConservationLaws | None:
    """The laws stored in ``text``, or None unless the entry is complete and consistent."""
    entry = json.loads(text)
    n = len(state_names)
    if (
        not isinstance(entry, dict)
        or entry.get("key") != key
        or entry.get("version") != CONSERVATION_VERSION
        or entry.get("n_states") != n
        or entry.get("source") not in _SOURCES
    ):
        return None
    unresolved, pivots, rows = entry.get("unresolved"), entry.get("pivots"), entry.get("exact")
    if not isinstance(unresolved, int) or isinstance(unresolved, bool) or unresolved < 0:
        return None
    if not isinstance(rows, list) or not isinstance(pivots, list) or len(pivots) != len(rows):
        return None
    if any(not isinstance(p, int) or isinstance(p, bool) for p in pivots):
        return None
    if any(not 0 <= p < n for p in pivots) or any(a >= b for a, b in zip(pivots, pivots[1:])):
        return None
    exact_rows = []
    for row in rows:
        if not isinstance(row, list) or len(row) != n or not all(isinstance(v, str) for v in row):
            return None
        values = [sp.Rational(v) for v in row]  # raises on anything but a number
        if [str(v) for v in values] != row:  # only exact rationals as written by _encode
            return None
        exact_rows.append(values)
    # reduced row echelon form: each pivot column a unit vector, nothing left of a pivot
    for r, (values, pivot) in enumerate(zip(exact_rows, pivots)):
        if any(values[j] != 0 for j in range(pivot)):
            return None
        if any(exact_rows[s][pivot] != (1 if s == r else 0) for s in range(len(exact_rows))):
            return None
    exact = sp.Matrix(exact_rows) if exact_rows else sp.zeros(0, n)
    return ConservationLaws(
        matrix=np.array(exact.tolist(), dtype=float).reshape(len(exact_rows), n),
        exact=exact,
        dependent=np.array(pivots, dtype=np.int64),
        source=entry["source"],
        states=tuple(state_names),
        unresolved=unresolved,
    )


def cached_conservation_laws(system, find: Callable[[], ConservationLaws]) -> ConservationLaws:
    """The conservation laws of ``system`` from the disk cache, else ``find()`` (stored).

    Parameters
    ----------
    system : OdeSystem
    find : callable
        Computes the laws (called on a miss, or when the stored entry is not valid).
    """
    key = _key(system)
    path = _path(key)

    def decode(data: bytes) -> ConservationLaws:
        laws = _decode(data.decode(), key, tuple(system.states))
        if laws is None:
            raise ValueError("not a consistent entry of this system's laws")
        return laws

    laws = load_artefact(path, decode)  # None: missing, or not verified (then warned)
    if laws is not None:
        return laws
    laws = find()
    store_artefact(path, _encode(laws, key).encode())
    return laws
