"""``sample``: ``pm.sample`` with the log-density of an ODE model compiled in NUMBA mode.

PyMC's NUTS calls the compiled log-density and gradient once per leapfrog step, often
hundreds of thousands of times in a fit. In PyTensor's default mode every call runs
PyTensor's virtual machine and the Python ``perform`` of the ODE Op (argument
handling, result arrays); in NUMBA mode the whole function is one compiled numba
function that calls the solvers directly. Measured on the Lotka-Volterra example
(``benchmarks/bench_first_use.py``, section ``sample``): see docs/pymc.md. A model's
NUMBA-mode graph is cached on disk by PyTensor (:mod:`pymc_odesens.pymc.numba_cache`),
so only the first compile of a model costs seconds.
"""

from __future__ import annotations

import pymc as pm

__all__ = ["sample", "sampling_compile_kwargs"]


def sampling_compile_kwargs(model: pm.Model | None = None) -> dict:
    """The ``compile_kwargs`` :func:`sample` gives ``pm.sample``: ``{"mode": "NUMBA"}``.

    Every Op of this package has a numba implementation; PyTensor's and PyMC's Ops have
    theirs (PyTensor runs any Op without one in Python, with a warning).

    Parameters
    ----------
    model : pymc.Model, optional
        Default: the model in context (checked to exist).
    """
    pm.modelcontext(model)
    return {"mode": "NUMBA"}


def sample(draws: int = 1000, *, model: pm.Model | None = None, **kwargs):
    """``pm.sample(draws, **kwargs)`` with the log-density compiled in PyTensor's NUMBA mode.

    Everything is passed to :func:`pymc.sample` unchanged, with one default added: for
    PyMC's own samplers (``nuts_sampler="pymc"``, the default) and no ``compile_kwargs``
    given, ``compile_kwargs=sampling_compile_kwargs(model)``, i.e. ``{"mode": "NUMBA"}``.
    The log-density and gradient then run as one compiled function, without PyTensor's
    per-call overhead in the default mode (several times faster per evaluation on small
    ODE models; see docs/pymc.md). The first compile of a model takes seconds; later
    processes load it from PyTensor's cache. ``compile_kwargs={}`` gives PyTensor's
    default mode; ``nuts_sampler="nutpie"`` compiles in NUMBA mode by itself.

    Parameters
    ----------
    draws : int
        Draws per chain, as for :func:`pymc.sample`.
    model : pymc.Model, optional
        Default: the model in context.
    **kwargs
        Any argument of :func:`pymc.sample`.

    Returns
    -------
    arviz.InferenceData (or what :func:`pymc.sample` returns for the given arguments)
    """
    model = pm.modelcontext(model)
    if kwargs.get("nuts_sampler", "pymc") == "pymc" and kwargs.get("compile_kwargs") is None:
        kwargs["compile_kwargs"] = sampling_compile_kwargs(model)
    return pm.sample(draws, model=model, **kwargs)
