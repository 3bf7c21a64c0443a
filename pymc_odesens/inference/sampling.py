"""``sample``: ``pm.sample`` with the log-density of an ODE model compiled in NUMBA mode.

PyMC's NUTS calls the compiled log-density and gradient once per leapfrog step, often
hundreds of thousands of times in a fit. In PyTensor's default mode every call runs
PyTensor's virtual machine and the Python ``perform`` of the ODE Op (argument
handling, result arrays); in NUMBA mode the whole function is one compiled numba
function that calls the solvers directly. Measured on the Lotka-Volterra example
(``benchmarks/bench_first_use.py``, section ``sample``): see docs/pymc.md. A model's
NUMBA-mode graph is cached on disk by PyTensor (:mod:`pymc_odesens.ops.numba_cache`),
so only the first compile of a model costs seconds.
"""

from __future__ import annotations

import contextlib
import time
import warnings

import pymc as pm

from pymc_odesens.inference.nutpie_start import nutpie_start
from pymc_odesens.inference.sampling_report import SamplingReport, reporting
from pymc_odesens.inference.step_assignment import one_gradient_step_assignment
from pymc_odesens.ops.distributed_likelihood_op import DistributedLogLikelihoodOp
from pymc_odesens.ops.graph_traversal import ancestors
from pymc_odesens.ops.rejection import FailurePenalty

__all__ = ["sample", "sample_posterior_predictive", "sampling_compile_kwargs"]

# PyMC's warning whenever a model has potentials (pymc.sampling.forward)
_POTENTIALS_WARNING = "The effect of Potentials on other parameters is ignored"


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
    default mode; ``nuts_sampler="nutpie"`` compiles in NUMBA mode by itself. PyMC's choice
    of step methods takes one gradient of the log-density instead of one per variable
    (:mod:`pymc_odesens.inference.step_assignment`; the same choice). With
    ``nuts_sampler="nutpie"``, ``initvals`` and ``init`` act as for PyMC's NUTS (PyMC
    drops them for nutpie): chains start from ``initvals``, with PyMC's uniform(-1, 1)
    jitter on the transformed scale only for ``init="auto"`` or ``"jitter+..."``
    (:mod:`pymc_odesens.inference.nutpie_start`). A model with a distributed
    log-likelihood (:class:`~pymc_odesens.inference.DistributedLogLikelihood`) whose cluster
    was lost during the run raises that error (nutpie alone would count it as divergences).

    With PyMC's samplers the call says on stderr which phase it is in (compiling and
    initialising, then each chain's end of tuning; ``quiet=True`` silences it) and reports
    solver failures once, in this process, when sampling ends: every draw carries the
    failures of its trajectory as the statistic ``ode_failures``, also from the chains'
    worker processes; failures while initialising or tuning are expected and get one line
    with their count, the first one after tuning in each process a warning in full
    (:mod:`pymc_odesens.inference.sampling_report`). ``idata.sample_stats.attrs`` gains
    ``setup_time`` (seconds from the call to the chains' first step: compiling the
    log-density and gradient, initialising; PyMC's ``sampling_time`` is the tuning and the
    draws) and the failure counts ``ode_failures_initialising``, ``ode_failures_tuning``
    and ``ode_failures_after_tuning``.

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
    sampler = kwargs.get("nuts_sampler", "pymc")
    if sampler == "pymc" and kwargs.get("compile_kwargs") is None:
        kwargs["compile_kwargs"] = sampling_compile_kwargs(model)
    if sampler != "pymc":
        if sampler == "nutpie":
            start = nutpie_start(kwargs.pop("initvals", None), kwargs.pop("init", "auto"))
        else:
            start = contextlib.nullcontext()
        called = time.perf_counter()
        with one_gradient_step_assignment(), start:
            idata = _sample_checked(draws, model, kwargs)
        _note_external_setup_time(idata, time.perf_counter() - called)
        return idata
    report = SamplingReport(
        tune=kwargs.get("tune", 1000),
        quiet=bool(kwargs.get("quiet", False)),
        callback=kwargs.get("callback"),
    )
    kwargs["callback"] = report.callback
    mode = (kwargs.get("compile_kwargs") or {}).get("mode")
    report.say(
        "compiling the model's log-density and gradient"
        + (" (PyTensor's NUMBA mode)" if mode == "NUMBA" else "")
        + " and initialising the chains ..."
    )
    with one_gradient_step_assignment(), reporting(report):
        idata = _sample_checked(draws, model, kwargs)
    report.finish(idata)
    return idata


def _note_external_setup_time(idata, call: float) -> None:
    """``setup_time`` of an external sampler's run: the call without its sampling time."""
    posterior = getattr(idata, "posterior", None)
    sampling = (getattr(posterior, "attrs", None) or {}).get("sampling_time")
    stats = getattr(idata, "sample_stats", None)
    if sampling is not None and stats is not None:
        stats.attrs["setup_time"] = max(call - float(sampling), 0.0)


def _sample_checked(draws: int, model: pm.Model, kwargs: dict):
    """``pm.sample``, then the error that ended a distributed log-likelihood, if any."""
    try:
        idata = pm.sample(draws, model=model, **kwargs)
    except Exception as error:
        _raise_distributed_errors(model, error)
        raise
    _raise_distributed_errors(model, None)
    return idata


def _raise_distributed_errors(model: pm.Model, during: Exception | None) -> None:
    """Raise the error that ended a distributed log-likelihood of ``model`` (a lost
    cluster), if any: nutpie turns an error of the log-density into a divergence and goes
    on, or fails to start with an error of its own."""
    outputs = list(model.potentials) + list(model.observed_RVs) + list(model.deterministics)
    for variable in ancestors(outputs):
        node = variable.owner
        if node is not None and isinstance(node.op, DistributedLogLikelihoodOp):
            try:
                node.op.evaluator.check()
            except Exception as error:
                raise error from during


def _only_failure_potentials(model: pm.Model) -> bool:
    """Whether every potential of ``model`` is a solver-failure rejection of this package."""
    return all(
        potential.owner is not None and isinstance(potential.owner.op, FailurePenalty)
        for potential in model.potentials
    )


def sample_posterior_predictive(trace, *, model: pm.Model | None = None, **kwargs):
    """:func:`pymc.sample_posterior_predictive`, without PyMC's potentials warning when the
    only potentials are this package's solver-failure rejections.

    ``ode_solution`` inside a model adds a ``pm.Potential`` that is ``-inf`` when a solve
    fails (``on_failure="reject"``) and ``0`` otherwise. PyMC warns that potentials are
    ignored in predictive sampling; for these it is harmless: every posterior draw had a
    successful solve (a failed one is never accepted), so the potential is ``0`` at every
    draw and ignoring it changes nothing. The warning is kept when the model has any other
    potential (one of the user's, whose effect on the predictive may matter).

    Parameters
    ----------
    trace : arviz.InferenceData or xarray.Dataset
        Posterior draws, as for :func:`pymc.sample_posterior_predictive`.
    model : pymc.Model, optional
        Default: the model in context.
    **kwargs
        Any argument of :func:`pymc.sample_posterior_predictive`.

    Returns
    -------
    arviz.InferenceData (or what :func:`pymc.sample_posterior_predictive` returns)
    """
    model = pm.modelcontext(model)
    with warnings.catch_warnings():
        if _only_failure_potentials(model):
            warnings.filterwarnings("ignore", message=_POTENTIALS_WARNING, category=UserWarning)
        return pm.sample_posterior_predictive(trace, model=model, **kwargs)
