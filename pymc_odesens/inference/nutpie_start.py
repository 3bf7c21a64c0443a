"""Where nutpie's chains start: ``initvals`` and ``init``'s jitter, as for PyMC's NUTS.

``pm.sample(nuts_sampler="nutpie")`` drops ``initvals`` (with a warning) and ignores
``init``: nutpie starts every chain at the model's initial point plus a uniform(-1, 1)
jitter on the transformed scale of every free variable. On a PEtab problem with wide
bounds that jitter is large: a parameter uniform on log10 [-8, 8] moves by up to 3.7
decades at the centre of its interval. On Fujita_SciSignal2010, 8 of 10 such starts had
log-likelihoods between -1e4 and -3e14 (53.08 at the nominal values), and local
optimisation from them ended in different optima (docs/petab.md); chains started there
do not meet.

:func:`nutpie_start` makes ``nutpie.compile_pymc_model`` (what PyMC calls) receive the
starting values as ``initial_points`` and jitter only when ``init`` asks for it, as
``pm.sample`` does for its own NUTS: ``"jitter+adapt_diag"`` (PyMC's ``"auto"``) and
the other ``jitter+...`` names jitter, ``"adapt_diag"`` and the rest do not. The model is
compiled by :func:`~pymc_odesens.inference.nutpie_callbacks.compile_nutpie_model` (nutpie's
callbacks cached across processes).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np

from pymc_odesens.inference.nutpie_callbacks import compile_nutpie_model

__all__ = ["nutpie_start", "single_initvals"]


def single_initvals(initvals) -> Mapping | None:
    """One dict of starting values from ``pm.sample``'s ``initvals`` for nutpie.

    nutpie takes one set of starting values for all chains: a sequence of per-chain dicts
    must repeat one dict (else a ``ValueError`` names the difference).
    """
    if initvals is None or isinstance(initvals, Mapping):
        return initvals
    if not isinstance(initvals, Sequence) or not initvals:
        raise TypeError(
            f"initvals must be a dict or a sequence of dicts (one per chain); got {initvals!r}"
        )
    first = initvals[0]
    for chain, other in enumerate(initvals[1:], start=1):
        same = other is first or (
            other is not None
            and first is not None
            and other.keys() == first.keys()
            and all(np.array_equal(np.asarray(other[k]), np.asarray(first[k])) for k in first)
        )
        if not same:
            raise ValueError(
                "initvals: nutpie starts all chains from one set of values (plus jitter); "
                f"chain {chain}'s differ from chain 0's. Give one dict."
            )
    return first


# PyMC's init values that only choose a start (nutpie adapts its own mass matrix)
_STARTS = ("auto", "adapt_diag", "jitter+adapt_diag", "adapt_full", "jitter+adapt_full")


def _jitters(init: str) -> bool:
    if not isinstance(init, str):
        raise TypeError(f"init must be a string such as 'jitter+adapt_diag'; got {init!r}")
    if init not in _STARTS:
        raise ValueError(
            f"init={init!r}: with nuts_sampler='nutpie' init only chooses the start, one of "
            f"{_STARTS} (ADVI and MAP initialisations are PyMC's own NUTS's)"
        )
    return init == "auto" or init.startswith("jitter+")


@contextmanager
def nutpie_start(initvals=None, init: str = "auto") -> Iterator[None]:
    """While open, nutpie (called by PyMC) starts from ``initvals`` with ``init``'s jitter.

    Parameters
    ----------
    initvals : dict or sequence of dict, optional
        As for :func:`pymc.sample` (values on the variables' own scale, by variable or
        name); a sequence must repeat one dict (:func:`single_initvals`).
    init : str
        As for :func:`pymc.sample`: ``"auto"`` and ``"jitter+..."`` add PyMC's
        uniform(-1, 1) jitter on the transformed scale; ``"adapt_diag"`` and
        ``"adapt_full"`` start every chain exactly at the initial point. Others (ADVI,
        MAP) raise ``ValueError``.
    """
    nutpie = importlib.import_module("nutpie")
    values = single_initvals(initvals)
    jitter = _jitters(init)
    original = nutpie.compile_pymc_model

    def compile_pymc_model(model, **kwargs):
        if values is not None:
            kwargs.setdefault("initial_points", dict(values))
        if not jitter:
            kwargs.setdefault("jitter_rvs", set())
        return compile_nutpie_model(model, **kwargs)

    nutpie.compile_pymc_model = compile_pymc_model
    try:
        yield
    finally:
        nutpie.compile_pymc_model = original
