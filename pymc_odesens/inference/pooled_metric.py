"""NUTS whose chains share one dense metric, estimated from the draws of all of them.

PyMC (like Stan and nutpie) adapts each chain's mass matrix to that chain's own draws.
Where a posterior has a narrow core and wide, slowly reached tails, that can lock in: a
chain that has stayed in the core learns a narrow metric and a large step size, which
make excursions into the tails rare; a chain that went out early learns a wide metric and
a small step. Both look stationary and R-hat reports the two metrics (Bachmann_MSB2011,
docs/petab.md: step sizes 0.159 and 0.036, log-densities 186.8 and 172.5 on average; with
one pooled metric 0.054 and 0.053, 165.6 and 166.1).

:func:`sample_pooled_metric` samples in two stages. The first runs the given NUTS step
(its own per-chain adaptation, e.g. :func:`~pymc_odesens.inference.mode_metric.mode_metric_nuts`)
for ``tune`` tuning steps and ``pooling_draws`` draws per chain. The draws of all chains
then give one covariance (anchored to the step's anchor covariance when it has one, as in
:class:`~pymc_odesens.inference.anchored_potential.AnchoredFullAdapt`; otherwise regularised
toward a small multiple of the identity, as Stan does), and the second stage continues
every chain from its last draw with that fixed metric, adapting only the step size for
``step_size_tune`` steps before ``draws`` draws. Only the second stage's draws are
returned: all chains then move under the same metric, so R-hat compares chains, not
adaptations.

:func:`resume_pooled_metric` continues such a trace (saved, say, at the end of one session)
from the last draw of every chain, with one metric pooled from all its draws, so that
draws along a slowly mixing direction accumulate over several runs.
"""

from __future__ import annotations

import os
import time

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import xarray as xr
from pymc.step_methods.hmc.quadpotential import QuadPotentialFull
from pytensor.graph.replace import graph_replace

from pymc_odesens.inference.anchored_potential import AnchoredFullAdapt
from pymc_odesens.inference.checkpoint import TraceCheckpoint, checked_every
from pymc_odesens.inference.sampling import sample

__all__ = [
    "pooled_covariance",
    "resume_pooled_metric",
    "sample_pooled_metric",
    "sampler_coordinates",
]

# Stan's regularisation of a window's covariance estimate: (n / (n + 5)) S + 1e-3 (5 / (n + 5)) I
_STAN_SHRINK_DRAWS = 5
_STAN_SHRINK_SCALE = 1e-3


def pooled_covariance(draws: np.ndarray, potential=None) -> np.ndarray:
    """One covariance from the draws of all chains.

    Parameters
    ----------
    draws : numpy.ndarray
        Shape ``(chains, draws, n)``: the sampler's coordinates (value variables, raveled).
    potential : optional
        The first stage's potential. An
        :class:`~pymc_odesens.inference.anchored_potential.AnchoredFullAdapt` adds its anchor
        (mean and covariance, counted as its ``anchor_weight`` draws) to the estimate;
        anything else: the sample covariance, regularised as Stan does,
        ``(m / (m + 5)) S + 1e-3 (5 / (m + 5)) I`` for ``m`` draws in all.

    Returns
    -------
    numpy.ndarray
        Shape ``(n, n)``, symmetric positive definite.
    """
    draws = np.asarray(draws, dtype=float)
    if draws.ndim != 3 or draws.shape[0] * draws.shape[1] < 2:
        raise ValueError(
            f"draws: expected shape (chains, draws, n) with at least 2 draws in all, got "
            f"{draws.shape}"
        )
    flat = draws.reshape(-1, draws.shape[2])
    if isinstance(potential, AnchoredFullAdapt):
        estimate = potential.anchored_estimate()
        for row in flat:
            estimate.add_sample(row)
        covariance = np.array(estimate.current_covariance(), dtype=float)
    else:
        m = flat.shape[0]
        covariance = (m / (m + _STAN_SHRINK_DRAWS)) * np.cov(flat, rowvar=False) + (
            _STAN_SHRINK_SCALE * _STAN_SHRINK_DRAWS / (m + _STAN_SHRINK_DRAWS)
        ) * np.eye(flat.shape[1])
    return (covariance + covariance.T) / 2


def _stage_seeds(random_seed) -> tuple:
    if random_seed is None:
        return None, None
    first, second = np.random.SeedSequence(random_seed).generate_state(2)
    return int(first), int(second)


def sample_pooled_metric(
    draws: int = 1000,
    *,
    step: pm.NUTS,
    tune: int = 500,
    pooling_draws: int = 200,
    step_size_tune: int = 200,
    chains: int = 2,
    model: pm.Model | None = None,
    random_seed: int | None = None,
    initvals=None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 100,
    **kwargs,
) -> az.InferenceData:
    """Sample with NUTS, all chains sharing one dense metric from the draws of all of them.

    Parameters
    ----------
    draws : int
        Draws per chain of the second stage (returned).
    step : pymc.NUTS
        The first stage's step (with its own metric adaptation), e.g. from
        :func:`~pymc_odesens.inference.mode_metric.mode_metric_nuts`. Its ``target_accept``,
        ``max_treedepth`` and compiled log-density serve the second stage too.
    tune : int
        The first stage's tuning steps per chain (500).
    pooling_draws : int
        The first stage's draws per chain after tuning, which give the shared metric (200).
    step_size_tune : int
        The second stage's tuning steps per chain: the step size only (200).
    chains : int
        At least 2 (2).
    model : pymc.Model, optional
        Default: the model in context.
    random_seed : int, optional
        Seeds both stages (each its own, derived from this one).
    initvals : optional
        Where the first stage's chains start, as for :func:`pymc.sample`.
    checkpoint : str or os.PathLike, optional
        A NetCDF file to which the second stage's draws so far are written every
        ``checkpoint_every`` draws per chain (see
        :class:`~pymc_odesens.inference.checkpoint.TraceCheckpoint`), so that a run stopped from
        outside keeps them and :func:`resume_pooled_metric` can continue it.
    checkpoint_every : int
        Draws per chain between two checkpoints (100).
    **kwargs
        Other arguments of :func:`pymc_odesens.sample` (``cores``, ``progressbar``,
        ``compile_kwargs``, ...), given to both stages.

    Returns
    -------
    arviz.InferenceData
        The second stage's draws. ``sample_stats.attrs`` adds ``pooled_metric_draws`` (the
        first stage's draws per chain), ``first_stage_time`` (its wall time in seconds) and
        ``first_stage_step_sizes`` (each chain's step size after its own tuning).
    """
    model = pm.modelcontext(model)
    _check_pymc_nuts(step, kwargs)
    checked_every(checkpoint_every, "checkpoint_every")
    if chains < 2:
        raise ValueError(f"chains: expected at least 2 (the metric pools chains), got {chains}")
    for name, value in (("tune", tune), ("pooling_draws", pooling_draws)):
        if value < 1:
            raise ValueError(f"{name}: expected a positive count, got {value!r}")
    if "return_inferencedata" in kwargs:
        raise ValueError(
            "return_inferencedata: sample_pooled_metric returns an InferenceData (the second "
            "stage's draws, with the first stage's in sample_stats.attrs); do not pass it"
        )
    first_seed, second_seed = _stage_seeds(random_seed)
    # the first stage's draws after tuning are what the metric pools
    first_kwargs = {**kwargs, "compute_convergence_checks": False, "discard_tuned_samples": True}
    began = time.perf_counter()
    first = sample(
        pooling_draws,
        model=model,
        step=step,
        tune=tune,
        chains=chains,
        random_seed=first_seed,
        initvals=initvals,
        return_inferencedata=False,
        **first_kwargs,
    )
    first_time = time.perf_counter() - began
    names = [v.name for v in step.vars]
    pooled = np.stack(
        [
            np.concatenate(
                [first.get_values(name, chains=[c]).reshape(len(first), -1) for name in names],
                axis=1,
            )
            for c in first.chains
        ]
    )
    step_sizes = [float(first.get_sampler_stats("step_size", chains=[c])[-1]) for c in first.chains]
    free = [rv.name for rv in model.free_RVs]
    restarts = [{name: first.point(-1, chain=c)[name] for name in free} for c in first.chains]
    idata = _shared_metric_stage(
        pooled,
        restarts,
        step=step,
        model=model,
        draws=draws,
        step_size_tune=step_size_tune,
        random_seed=second_seed,
        checkpoint=checkpoint,
        checkpoint_every=checkpoint_every,
        **kwargs,
    )
    idata.sample_stats.attrs.update(
        pooled_metric_draws=pooling_draws,
        first_stage_time=first_time,
        first_stage_step_sizes=step_sizes,
    )
    return idata


def _check_pymc_nuts(step, kwargs: dict) -> None:
    """The step is PyMC's NUTS and nothing asks for another sampler."""
    if not isinstance(step, pm.NUTS):
        raise ValueError(f"step: expected a pymc.NUTS step, got {type(step).__name__}")
    if kwargs.get("nuts_sampler", "pymc") != "pymc":
        raise ValueError(
            f"nuts_sampler: expected 'pymc' (the draws come from the given PyMC NUTS step), "
            f"got {kwargs['nuts_sampler']!r}"
        )


def _shared_metric_stage(
    pooled: np.ndarray,
    restarts: list[dict],
    *,
    step: pm.NUTS,
    model: pm.Model,
    draws: int,
    step_size_tune: int,
    random_seed,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 100,
    join=None,
    **kwargs,
) -> az.InferenceData:
    """Every chain from its restart point with the fixed metric pooled from ``pooled``
    (``(chains, draws, n)`` in the sampler's coordinates), tuning only the step size;
    with ``checkpoint``, the draws so far (through ``join``) written every
    ``checkpoint_every`` draws."""
    if checkpoint is not None:
        kwargs["callback"] = TraceCheckpoint(
            checkpoint,
            checkpoint_every,
            tune=step_size_tune,
            chains=len(restarts),
            model=model,
            join=join,
            then=kwargs.get("callback"),
        )
    shared = pm.NUTS(
        vars=step.vars,
        model=model,
        potential=QuadPotentialFull(pooled_covariance(pooled, step.potential)),
        target_accept=step.target_accept,
        max_treedepth=step.max_treedepth,
        logp_dlogp_func=step._logp_dlogp_func,
    )
    return sample(
        draws,
        model=model,
        step=shared,
        tune=step_size_tune,
        chains=len(restarts),
        random_seed=random_seed,
        initvals=restarts,
        **kwargs,
    )


def sampler_coordinates(posterior, value_vars: list, model: pm.Model | None = None) -> np.ndarray:
    """A posterior's draws in the sampler's coordinates (transformed, raveled).

    Parameters
    ----------
    posterior : xarray.Dataset
        Draws of the model's free random variables on their own (constrained) scale, with
        dimensions ``chain`` and ``draw`` first, as in ``InferenceData.posterior``.
    value_vars : list
        The value variables in the sampler's order (``step.vars``).
    model : pymc.Model, optional
        Default: the model in context.

    Returns
    -------
    numpy.ndarray
        Shape ``(chains, draws, n)``: each draw's value variables, transformed as the
        model does and raveled in the order of ``value_vars``.
    """
    model = pm.modelcontext(model)
    free = {rv.name for rv in model.free_RVs}
    missing = sorted(free - set(posterior.data_vars))
    if missing:
        raise ValueError(f"posterior: expected draws of every free variable, missing {missing}")
    # constrained values in; each value variable out, through its transform, whose
    # arguments (bounds, ...) may depend on other free variables
    inputs = {rv: rv.type() for rv in model.free_RVs}
    outputs = []
    for value in value_vars:
        rv = model.values_to_rvs[value]
        transform = model.rvs_to_transforms.get(rv)
        outputs.append(
            inputs[rv] if transform is None else transform.forward(inputs[rv], *rv.owner.inputs)
        )
    outputs = graph_replace(outputs, inputs, strict=False)
    order = list(inputs)
    forward = pytensor.function([inputs[rv] for rv in order], outputs, on_unused_input="ignore")
    values = [posterior[rv.name].values for rv in order]
    chains, count = values[0].shape[:2]
    rows = [
        np.concatenate([np.ravel(piece) for piece in forward(*(v[c, d] for v in values))])
        for c in range(chains)
        for d in range(count)
    ]
    return np.reshape(rows, (chains, count, -1))


def resume_pooled_metric(
    trace: az.InferenceData,
    draws: int = 1000,
    *,
    step: pm.NUTS,
    step_size_tune: int = 100,
    model: pm.Model | None = None,
    random_seed: int | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 100,
    **kwargs,
) -> az.InferenceData:
    """Continue a trace's chains with one dense metric pooled from all its draws.

    Long runs on slowly mixing posteriors can be split over several sessions: each
    continuation starts every chain from its last draw, estimates the shared metric from
    all draws so far (as :func:`pooled_covariance` does), tunes the step size for
    ``step_size_tune`` steps and adds ``draws`` draws. Every segment is a Markov chain
    that leaves the posterior invariant, started where the previous one stopped, so the
    joined chains are valid draws; the tuning steps are discarded as usual.

    Parameters
    ----------
    trace : arviz.InferenceData
        The draws so far (``posterior`` with every free variable, at least 2 chains), e.g.
        from :func:`sample_pooled_metric` or an earlier continuation.
    draws : int
        New draws per chain (1000).
    step : pymc.NUTS
        Gives ``target_accept``, ``max_treedepth``, the compiled log-density, and the anchor
        of the metric estimate when its potential is an
        :class:`~pymc_odesens.inference.anchored_potential.AnchoredFullAdapt` (as from
        :func:`~pymc_odesens.inference.mode_metric.mode_metric_nuts`).
    step_size_tune : int
        Tuning steps of the step size per chain (100).
    model : pymc.Model, optional
        Default: the model in context.
    random_seed : int, optional
    checkpoint : str or os.PathLike, optional
        A NetCDF file to which the trace's draws followed by the new draws so far are
        written every ``checkpoint_every`` new draws per chain (see
        :class:`~pymc_odesens.inference.checkpoint.TraceCheckpoint`): a run stopped from outside
        keeps them, and the file can be continued in turn.
    checkpoint_every : int
        New draws per chain between two checkpoints (100).
    **kwargs
        Other arguments of :func:`pymc_odesens.sample` (``cores``, ``progressbar``, ...).

    Returns
    -------
    arviz.InferenceData
        ``posterior`` and ``sample_stats``: the trace's draws followed by the new ones
        (``observed_data`` and the like from the new run). ``sample_stats.attrs`` adds
        ``resumed_draws`` (the trace's draws per chain) and ``metric_draws`` (draws in all
        that gave the metric).
    """
    model = pm.modelcontext(model)
    _check_pymc_nuts(step, kwargs)
    checked_every(checkpoint_every, "checkpoint_every")
    if not hasattr(trace, "posterior"):
        raise ValueError("trace: expected an InferenceData with a posterior group")
    chains = trace.posterior.sizes["chain"]
    if chains < 2:
        raise ValueError(
            f"trace: expected at least 2 chains (the metric pools chains), got {chains}"
        )
    for name in ("chains", "tune", "initvals", "return_inferencedata"):
        if name in kwargs:
            raise ValueError(
                f"{name}: resume_pooled_metric continues the trace's chains from their last "
                f"draws (tuning only the step size, step_size_tune); do not pass it"
            )
    recorded = [rv.name for rv in model.free_RVs] + [d.name for d in model.deterministics]
    missing = sorted(set(recorded) - set(trace.posterior.data_vars))
    if missing:
        raise ValueError(
            f"trace: expected draws of every free and deterministic variable of the model in "
            f"its posterior, missing {missing}"
        )
    coordinates = sampler_coordinates(trace.posterior, step.vars, model)
    free = [rv.name for rv in model.free_RVs]
    restarts = [{name: trace.posterior[name].values[c, -1] for name in free} for c in range(chains)]
    new = _shared_metric_stage(
        coordinates,
        restarts,
        step=step,
        model=model,
        draws=draws,
        step_size_tune=step_size_tune,
        random_seed=random_seed,
        checkpoint=checkpoint,
        checkpoint_every=checkpoint_every,
        join=lambda so_far: _joined(trace, so_far),
        **kwargs,
    )
    return _joined(trace, new)


def _joined(trace: az.InferenceData, new: az.InferenceData) -> az.InferenceData:
    """The trace's draws followed by the new ones (other groups from ``new``)."""
    chains = trace.posterior.sizes["chain"]
    if new.posterior.sizes["chain"] != chains:
        raise RuntimeError(
            f"the continuation returned {new.posterior.sizes['chain']} of the trace's {chains} "
            f"chains: after an interrupt PyMC keeps only the chains that give the most draws "
            f"when their lengths differ much; a checkpoint (checkpoint=...) holds the draws "
            f"that all chains had"
        )
    # without the trace's attributes: az.concat combines differing ones into a list, which a
    # NetCDF round trip makes an array, and a later concat then fails on (``append``)
    posterior = trace.posterior[list(new.posterior.data_vars)].copy()
    posterior.attrs = {}
    stats = _stats_like(trace, new.sample_stats)
    stats.attrs = {}
    joined = az.concat(
        az.InferenceData(posterior=posterior, sample_stats=stats),
        az.InferenceData(posterior=new.posterior, sample_stats=new.sample_stats),
        dim="draw",
    )
    for group in new.groups():
        if group not in ("posterior", "sample_stats"):
            joined.add_groups({group: new[group]})
    joined.posterior.attrs = dict(new.posterior.attrs)
    joined.sample_stats.attrs = dict(
        new.sample_stats.attrs,
        resumed_draws=trace.posterior.sizes["draw"],
        metric_draws=chains * trace.posterior.sizes["draw"],
    )
    return joined


def _stats_like(trace: az.InferenceData, stats: xr.Dataset) -> xr.Dataset:
    """The trace's sampler statistics named as in ``stats``; those the trace lacks (it may
    come from another sampler, or none) are NaN over its draws."""
    chains, draws = trace.posterior.sizes["chain"], trace.posterior.sizes["draw"]
    own = trace.sample_stats if "sample_stats" in trace.groups() else xr.Dataset()
    columns = {}
    for name, new in stats.data_vars.items():
        if name in own.data_vars:
            columns[name] = own[name]
        else:
            shape = (chains, draws, *new.shape[2:])
            columns[name] = (new.dims, np.full(shape, np.nan))
    return xr.Dataset(
        columns,
        coords={"chain": trace.posterior["chain"].values, "draw": trace.posterior["draw"].values},
    )
