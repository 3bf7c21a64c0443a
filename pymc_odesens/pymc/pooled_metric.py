"""NUTS whose chains share one dense metric, estimated from the draws of all of them.

PyMC (like Stan and nutpie) adapts each chain's mass matrix to that chain's own draws.
Where a posterior has a narrow core and wide, slowly reached tails, that can lock in: a
chain that has stayed in the core learns a narrow metric and a large step size, which
make excursions into the tails rare; a chain that went out early learns a wide metric and
a small step. Both look stationary and R-hat reports the two metrics (Bachmann_MSB2011,
docs/petab.md: step sizes 0.159 and 0.036, log-densities 186.8 and 172.5 on average; with
one pooled metric 0.054 and 0.053, 165.6 and 166.1).

:func:`sample_pooled_metric` samples in two stages. The first runs the given NUTS step
(its own per-chain adaptation, e.g. :func:`~pymc_odesens.pymc.mode_metric.mode_metric_nuts`)
for ``tune`` tuning steps and ``pooling_draws`` draws per chain. The draws of all chains
then give one covariance (anchored to the step's anchor covariance when it has one, as in
:class:`~pymc_odesens.pymc.anchored_potential.AnchoredFullAdapt`; otherwise regularised
toward a small multiple of the identity, as Stan does), and the second stage continues
every chain from its last draw with that fixed metric, adapting only the step size for
``step_size_tune`` steps before ``draws`` draws. Only the second stage's draws are
returned: all chains then move under the same metric, so R-hat compares chains, not
adaptations.
"""

from __future__ import annotations

import time

import arviz as az
import numpy as np
import pymc as pm
from pymc.step_methods.hmc.quadpotential import QuadPotentialFull

from pymc_odesens.pymc.anchored_potential import AnchoredFullAdapt
from pymc_odesens.pymc.sampling import sample

__all__ = ["pooled_covariance", "sample_pooled_metric"]

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
        :class:`~pymc_odesens.pymc.anchored_potential.AnchoredFullAdapt` adds its anchor
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
    **kwargs,
) -> az.InferenceData:
    """Sample with NUTS, all chains sharing one dense metric from the draws of all of them.

    Parameters
    ----------
    draws : int
        Draws per chain of the second stage (returned).
    step : pymc.NUTS
        The first stage's step (with its own metric adaptation), e.g. from
        :func:`~pymc_odesens.pymc.mode_metric.mode_metric_nuts`. Its ``target_accept``,
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
    if not isinstance(step, pm.NUTS):
        raise ValueError(f"step: expected a pymc.NUTS step, got {type(step).__name__}")
    if chains < 2:
        raise ValueError(f"chains: expected at least 2 (the metric pools chains), got {chains}")
    for name, value in (("tune", tune), ("pooling_draws", pooling_draws)):
        if value < 1:
            raise ValueError(f"{name}: expected a positive count, got {value!r}")
    if kwargs.get("nuts_sampler", "pymc") != "pymc":
        raise ValueError(
            f"nuts_sampler: expected 'pymc' (the stages run the given PyMC NUTS step), got "
            f"{kwargs['nuts_sampler']!r}"
        )
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
    covariance = pooled_covariance(pooled, step.potential)
    step_sizes = [float(first.get_sampler_stats("step_size", chains=[c])[-1]) for c in first.chains]
    free = [rv.name for rv in model.free_RVs]
    restarts = [{name: first.point(-1, chain=c)[name] for name in free} for c in first.chains]
    shared = pm.NUTS(
        vars=step.vars,
        model=model,
        potential=QuadPotentialFull(covariance),
        target_accept=step.target_accept,
        max_treedepth=step.max_treedepth,
        logp_dlogp_func=step._logp_dlogp_func,
    )
    idata = sample(
        draws,
        model=model,
        step=shared,
        tune=step_size_tune,
        chains=len(restarts),
        random_seed=second_seed,
        initvals=restarts,
        **kwargs,
    )
    idata.sample_stats.attrs.update(
        pooled_metric_draws=pooling_draws,
        first_stage_time=first_time,
        first_stage_step_sizes=step_sizes,
    )
    return idata
