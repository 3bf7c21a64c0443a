"""Sampling until the chains have converged, or until a wall-clock limit.

:func:`sample_until_converged` samples a PyMC model with nutpie or PyMC's NUTS and checks
R-hat and the bulk and tail effective sample sizes
(:func:`~pymc_odesens.inference.convergence.convergence_report`) every ``draws`` draws per
chain; while a check fails, time remains and the chains have fewer than ``max_draws``
draws, the *same* chains go on:

- nutpie: one run with ``max_draws`` draws per chain, in the background (nutpie's
  non-blocking sampler); its trace is inspected as it grows, and the run is ended (the
  draws so far kept) once a check passes or the time is up. A converged result holds the
  first ``k * draws`` draws of every chain, so it does not depend on when the trace was
  inspected.
- PyMC's NUTS: the first ``draws`` draws after ``tune`` tuning steps (with the given NUTS
  step, e.g. a dense mass matrix from a Laplace approximation), then continuations of
  ``draws`` draws from every chain's last draw with one dense metric pooled from all draws
  so far (:func:`~pymc_odesens.inference.pooled_metric.resume_pooled_metric`), each bounded by
  a :class:`~pymc_odesens.inference.time_limit.TimeLimit`.

``extra_draws`` adds variables that are not sampled (the marginalised parameters, drawn from
their conditional posterior by :func:`~pymc_odesens.inference.marginal_recovery.
recover_marginalized`) for each new stretch of draws, so that the checks cover them too.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr

from pymc_odesens.inference.convergence import ConvergenceReport, convergence_report
from pymc_odesens.inference.laplace_mixture import LaplaceMixture
from pymc_odesens.inference.laplace_start import LaplaceApproximation
from pymc_odesens.inference.nutpie_callbacks import compile_nutpie_model
from pymc_odesens.inference.nutpie_start import single_initvals
from pymc_odesens.inference.pooled_metric import resume_pooled_metric
from pymc_odesens.inference.sampling import sample
from pymc_odesens.inference.time_limit import TimeLimit
from pymc_odesens.inference.whitened_model import WHITENED_NAME, whitened_model

__all__ = ["ConvergedSampling", "MIN_TUNE", "SAMPLERS", "sample_until_converged"]

SAMPLERS = ("nutpie", "pymc")

MIN_TUNE = {"nutpie": 1, "pymc": 0}
"""The fewest tuning steps per chain each sampler takes: nuts-rs (nutpie) panics in its
threads without one ("assertion failed: early_end < num_tune")."""

# looks at nutpie's growing trace: each copies the whole trace in this (the Python) thread,
# which then takes CPU from the chains. A look is timed for when the chains should have the
# next check's draws, at the rate of their iterations (tuning steps, then draws) since the
# last look; within _LOOK_EVERY seconds, and at least _LOOK_COST_RATIO times as long after
# the last look as it took (a 0.5 s look then takes at most a tenth of one core)
_LOOK_EVERY = (1.0, 30.0)
_LOOK_COST_RATIO = 10.0
_CATCH_UP_SECONDS = 5.0


@dataclass
class ConvergedSampling:
    """How :func:`sample_until_converged` ended.

    Attributes
    ----------
    converged : bool
        Every checked variable has R-hat <= ``target_rhat`` and bulk and tail ESS >=
        ``target_ess`` (divergences are reported, not part of the target).
    checks : ConvergenceReport or None
        The last check (None: no draws to check).
    draws : int
        Draws per chain returned.
    rounds : int
        Convergence checks made (``len(history)``).
    stopped_by : str
        ``"converged"``, ``"time limit"``, ``"time limit in tuning"`` (nutpie: the limit
        passed before every chain had a draw; no draws are returned) or ``"max_draws"``.
    sampling_time, extra_time : float
        Seconds of sampling (tuning included) and of ``extra_draws``.
    history : list of tuple
        Per check: ``(draws per chain, R-hat max, bulk ESS min, tail ESS min)``.
    """

    converged: bool
    checks: ConvergenceReport | None
    draws: int
    stopped_by: str
    history: list = field(default_factory=list)
    sampling_time: float = 0.0
    extra_time: float = 0.0

    @property
    def rounds(self) -> int:
        return len(self.history)


@dataclass(frozen=True)
class _Plan:
    """What :func:`sample_until_converged` passes to its sampler's loop (its arguments,
    the deadline on ``time.monotonic()`` and the extra variables' accumulator)."""

    model: pm.Model
    var_names: Sequence[str]
    draws: int
    tune: int
    chains: int
    cores: int | None
    max_draws: int
    deadline: float | None
    target_rhat: float
    target_ess: float
    random_seed: int | None
    initvals: Mapping | None
    step: object
    target_accept: float
    step_size_tune: int
    extras: _Extras
    progressbar: bool
    whiten: LaplaceApproximation | LaplaceMixture | None = None


def _meets(checks: ConvergenceReport, target_rhat: float, target_ess: float) -> bool:
    values = (checks.rhat_max, checks.ess_bulk_min, checks.ess_tail_min)
    if not all(math.isfinite(v) for v in values):
        return False
    return (
        checks.rhat_max <= target_rhat
        and checks.ess_bulk_min >= target_ess
        and checks.ess_tail_min >= target_ess
    )


class _Extras:
    """The variables ``extra_draws`` adds, accumulated over stretches of draws."""

    def __init__(self, extra_draws: Callable | None):
        self.function = extra_draws
        self.parts: list[xr.Dataset] = []
        self.done = 0
        self.seconds = 0.0

    def extend(self, posterior: xr.Dataset, upto: int) -> None:
        """Add the extra variables of draws ``done`` to ``upto`` of every chain."""
        if self.function is None or upto <= self.done:
            return
        began = time.perf_counter()
        stretch = posterior.isel(draw=slice(self.done, upto))
        added = self.function(stretch)
        self.parts.append(added.assign_coords(draw=np.arange(self.done, upto)))
        self.done = upto
        self.seconds += time.perf_counter() - began

    def joined(self, posterior: xr.Dataset, draws: int) -> xr.Dataset:
        """``posterior`` (its first ``draws`` draws) with the extra variables."""
        posterior = posterior.isel(draw=slice(0, draws))
        if self.function is None or not self.parts:  # no draws: nothing was added
            return posterior
        extras = xr.concat(self.parts, dim="draw").isel(draw=slice(0, draws))
        extras = extras.assign_coords(draw=posterior["draw"].values)
        return posterior.assign({name: extras[name] for name in extras.data_vars})


def _checked(
    posterior: xr.Dataset, stats: xr.Dataset | None, var_names: Sequence[str]
) -> ConvergenceReport:
    groups = {"posterior": posterior}
    if stats is not None:
        groups["sample_stats"] = stats
    return convergence_report(az.InferenceData(**groups), var_names=list(var_names))


def _say(progressbar: bool, text: str) -> None:
    if progressbar:
        print(f"sample_posterior: {text}", file=sys.stderr, flush=True)


def sample_until_converged(
    model: pm.Model,
    *,
    var_names: Sequence[str],
    sampler: str = "nutpie",
    draws: int = 500,
    tune: int = 500,
    chains: int = 4,
    cores: int | None = None,
    max_draws: int = 5000,
    time_limit: float | None = None,
    started: float | None = None,
    target_rhat: float = 1.01,
    target_ess: float = 400,
    random_seed: int | None = None,
    initvals: Mapping | None = None,
    step: pm.NUTS | None = None,
    target_accept: float = 0.8,
    step_size_tune: int = 100,
    extra_draws: Callable[[xr.Dataset], xr.Dataset] | None = None,
    whiten: LaplaceApproximation | LaplaceMixture | None = None,
    progressbar: bool = True,
) -> tuple[az.InferenceData, ConvergedSampling]:
    """Sample ``model`` until R-hat and ESS of ``var_names`` meet their targets.

    Parameters
    ----------
    model : pymc.Model
    var_names : sequence of str
        The variables checked (posterior variables, or those ``extra_draws`` adds).
    sampler : {"nutpie", "pymc"}
    draws : int
        Draws per chain between two checks (the first check after ``draws`` draws).
    tune : int
        Tuning steps per chain before the first draw (nutpie: at least 1; its adaptation
        has no window otherwise).
    chains : int
        At least 2.
    cores : int, optional
        PyMC's processes (chains run in parallel). nutpie runs every chain at once, each in
        its own thread, whatever ``cores`` says: the checks need every chain's draws as they
        grow, and nutpie starts the chains beyond ``cores`` only once the first ones have
        all their ``max_draws`` (measured on Boehm_JProteomeRes2014, 4 chains on 2 cores:
        152 s of sampling to 600 draws per chain with 2 threads, against 60 s for 1000).
    max_draws : int
        At most this many draws per chain (at least ``draws``).
    time_limit : float, optional
        Seconds from ``started``; sampling ends at the first look after it, keeping the
        draws so far. nutpie: a limit that passes while the chains still tune ends the run
        there, with no draws (``stopped_by = "time limit in tuning"``; tuning's statistics
        in ``warmup_sample_stats``). PyMC's NUTS is not stopped in tuning
        (:class:`~pymc_odesens.inference.time_limit.TimeLimit`).
    started : float, optional
        ``time.monotonic()`` from which ``time_limit`` counts (default: this call).
    target_rhat, target_ess : float
    random_seed : int, optional
    initvals : dict, optional
        Where the chains start (values, or PyTensor expressions drawn once per chain, as
        :meth:`~pymc_odesens.inference.laplace_start.LaplaceApproximation.start_values`),
        without jitter.
    step : pymc.NUTS, optional
        PyMC's NUTS step (``sampler="pymc"``), e.g. with a dense mass matrix; default:
        ``pm.NUTS`` compiled in NUMBA mode.
    target_accept : float
        For nutpie and for the default PyMC step.
    step_size_tune : int
        PyMC's continuations: step-size tuning steps under the pooled metric.
    extra_draws : callable, optional
        ``extra_draws(posterior_stretch) -> xarray.Dataset`` with dims ``(chain, draw)``
        first: variables for those draws, added to the posterior.
    whiten : LaplaceApproximation or LaplaceMixture, optional
        nutpie only: sample in the coordinates whitened by this approximation of
        ``model``'s posterior (:func:`~pymc_odesens.inference.whitened_model.
        whitened_model`; the same posterior, in coordinates where nutpie's diagonal mass
        matrix can express its correlations). Each chain starts at its own draw of the
        approximation, and ``initvals`` must be None. A
        :class:`~pymc_odesens.inference.laplace_mixture.LaplaceMixture` whitens by its
        heaviest component, and each chain starts at its own draw of the mixture.
    progressbar : bool
        The sampler's progress bar and a line per check on stderr.

    Returns
    -------
    (arviz.InferenceData, ConvergedSampling)
        nutpie's runs also return tuning's statistics (step sizes, gradients per step) in
        ``warmup_sample_stats``.
    """
    started = time.monotonic() if started is None else started
    deadline = None if time_limit is None else started + time_limit
    extras = _Extras(extra_draws)
    began = time.perf_counter()
    plan = _Plan(
        model=model,
        var_names=var_names,
        draws=draws,
        tune=tune,
        chains=chains,
        cores=cores,
        max_draws=max_draws,
        deadline=deadline,
        target_rhat=target_rhat,
        target_ess=target_ess,
        random_seed=random_seed,
        initvals=initvals,
        step=step,
        target_accept=target_accept,
        step_size_tune=step_size_tune,
        extras=extras,
        progressbar=progressbar,
        whiten=whiten,
    )
    if whiten is not None:
        if sampler != "nutpie":
            raise ValueError(
                f"whiten: only for sampler='nutpie' (PyMC's NUTS takes the approximation "
                f"as its dense mass matrix: LaplaceApproximation.nuts_step); got "
                f"sampler={sampler!r}"
            )
        if initvals is not None:
            raise ValueError(
                "initvals: must be None with whiten (the chains start at draws "
                "of the approximation)"
            )
        if not isinstance(whiten, LaplaceApproximation | LaplaceMixture):
            raise TypeError(
                "whiten: expected a LaplaceApproximation or LaplaceMixture, got "
                f"{type(whiten).__name__}"
            )
        if _whitening(whiten).model is not model:
            raise ValueError("whiten: an approximation of another model than `model`")
    if tune < MIN_TUNE.get(sampler, 0):
        raise ValueError(
            f"tune: {sampler} needs at least {MIN_TUNE[sampler]} tuning step (its adaptation "
            f"windows), got {tune!r}"
        )
    if sampler == "nutpie":
        idata, outcome = _nutpie_until_converged(plan)
    elif sampler == "pymc":
        idata, outcome = _pymc_until_converged(plan)
    else:
        raise ValueError(f"sampler: expected one of {SAMPLERS}, got {sampler!r}")
    outcome.extra_time = extras.seconds
    outcome.sampling_time = time.perf_counter() - began - extras.seconds
    return idata, outcome


def _check_round(plan: _Plan, posterior, stats, upto, history):
    plan.extras.extend(posterior, upto)
    checks = _checked(plan.extras.joined(posterior, upto), stats, plan.var_names)
    history.append((upto, checks.rhat_max, checks.ess_bulk_min, checks.ess_tail_min))
    return checks, _meets(checks, plan.target_rhat, plan.target_ess)


def _round_line(checks: ConvergenceReport, upto: int, met: bool) -> str:
    return (
        f"{upto} draws per chain: R-hat max {checks.rhat_max:.4f}, ESS bulk min "
        f"{checks.ess_bulk_min:.0f}, tail min {checks.ess_tail_min:.0f}"
        + (" (converged)" if met else "")
    )


def _posterior_draws(posterior: xr.Dataset) -> int:
    """Draws that every chain has (nutpie pads shorter chains with NaN)."""
    if not posterior.data_vars or posterior.sizes.get("draw", 0) == 0:
        return 0
    first = posterior[next(iter(posterior.data_vars))].values
    finite = np.isfinite(first.reshape(first.shape[0], first.shape[1], -1)).all(axis=2)
    counts = [int(np.argmin(row)) if not row.all() else row.size for row in finite]
    return min(counts)


def _next_pause(done, due, looked, cost, last, deadline) -> float:
    """Seconds until the next look at nutpie's trace: when every chain should have done
    ``due`` iterations (tuning steps and draws) at the rate since the last look (or at the
    deadline, if sooner), within ``_LOOK_EVERY`` and at least ``_LOOK_COST_RATIO`` times
    the look's ``cost``."""
    low, high = _LOOK_EVERY
    wait = 4 * low  # no rate yet
    if last is not None and done > last[1] and looked > last[0]:
        rate = (done - last[1]) / (looked - last[0])
        wait = max(due - done, 1) / rate
    if deadline is not None:
        wait = min(wait, max(deadline - time.monotonic(), 0.0))
    return min(max(wait, low, _LOOK_COST_RATIO * cost), high)


def _tuning_done(trace) -> np.ndarray | None:
    """Per chain and tuning step, whether nutpie has done it (None: no statistics yet)."""
    if trace is None or "warmup_sample_stats" not in trace.groups():
        return None
    stats = trace.warmup_sample_stats
    return np.isfinite(stats["step_size"].values) & (stats["n_steps"].values > 0)


def _tuning_steps(trace) -> int:
    """Tuning steps that every chain has done (0 before nutpie reports any)."""
    done = _tuning_done(trace)
    return int(done.sum(axis=1).min()) if done is not None and done.size else 0


def _finished(sampler) -> bool:
    """Whether nutpie's background sampler has finished (it raises ``TimeoutError`` when
    it cannot tell at once, i.e. while its chains run)."""
    try:
        return bool(sampler.is_finished)
    except TimeoutError:
        return False


def _whitening(whiten: LaplaceApproximation | LaplaceMixture) -> LaplaceApproximation:
    """The approximation that whitens the coordinates (a mixture's heaviest component)."""
    return whiten.heaviest if isinstance(whiten, LaplaceMixture) else whiten


def nutpie_model(
    model: pm.Model,
    initvals=None,
    whiten: LaplaceApproximation | LaplaceMixture | None = None,
):
    """nutpie's compiled ``model`` without jitter, and the variable names a trace keeps
    (:func:`~pymc_odesens.inference.nutpie_callbacks.compile_nutpie_model`: its callbacks
    cached across processes).

    ``initvals`` (one dict) are the chains' starts; with ``whiten``, the whitened model
    (:func:`~pymc_odesens.inference.whitened_model.whitened_model`) whose chains each start
    at their own draw of the approximation (of the mixture, for a ``LaplaceMixture``,
    whitened by its heaviest component; ``initvals`` must then be None).
    """
    compile_kwargs = {"jitter_rvs": set()}
    values = single_initvals(initvals)
    if values is not None:
        compile_kwargs["initial_points"] = dict(values)
    recorded = [rv.name for rv in model.free_RVs] + [d.name for d in model.deterministics]
    sampled = model
    if whiten is not None:
        white = whitened_model(_whitening(whiten))
        sampled, recorded = white.model, list(white.recorded)
        # each chain at its own draw: of the mixture, or of the approximation, N(0, I) in
        # these coordinates
        if isinstance(whiten, LaplaceMixture):
            start = whiten.whitened_start(white.mean, white.cholesky)
        else:
            start = pt.random.normal(size=(white.mean.size,))
        compile_kwargs["initial_points"] = {WHITENED_NAME: start}
    return compile_nutpie_model(sampled, **compile_kwargs), recorded


def _nutpie_until_converged(plan: _Plan):
    model, draws, tune, chains = plan.model, plan.draws, plan.tune, plan.chains
    max_draws, deadline, random_seed = plan.max_draws, plan.deadline, plan.random_seed
    initvals, target_accept, extras, progressbar = (
        plan.initvals,
        plan.target_accept,
        plan.extras,
        plan.progressbar,
    )
    import nutpie

    compiled, recorded = nutpie_model(model, initvals, plan.whiten)
    seed = (
        None
        if random_seed is None
        else int(np.random.SeedSequence(random_seed).generate_state(1)[0])
    )
    # every chain in a thread of its own (see `cores` in sample_until_converged)
    sampler = nutpie.sample(
        compiled,
        draws=max_draws,
        tune=tune,
        chains=chains,
        cores=chains,
        seed=seed,
        target_accept=target_accept,
        save_warmup=True,  # tuning's statistics, kept in warmup_sample_stats
        progress_bar=progressbar,
        blocking=False,
    )
    history: list = []
    next_check = draws
    checks, met, stopped_by, upto = None, False, "max_draws", 0
    trace = None
    pause, last = _LOOK_EVERY[0], None
    try:
        while True:
            finished = _finished(sampler)
            if not finished:
                time.sleep(pause)
            looked = time.monotonic()
            with warnings.catch_warnings():  # arviz: "more chains than draws" early on
                warnings.simplefilter("ignore", UserWarning)
                trace = sampler.inspect()
            have = _posterior_draws(trace.posterior)
            done = tune + have if have else _tuning_steps(trace)
            cost = time.monotonic() - looked
            pause = _next_pause(done, tune + next_check, looked, cost, last, deadline)
            last = (looked, done)
            past = deadline is not None and time.monotonic() > deadline
            late = past and have >= 1
            if past and have == 0:  # still tuning at the limit: stop, say so
                stopped_by = "time limit in tuning"
                _say(
                    progressbar,
                    "time limit: the chains were still tuning " + _tuning_line(trace, tune),
                )
                break
            # every check that the draws so far allow, in order, before the next pause: the
            # result is the first k * draws draws that pass, whenever the trace was looked at
            # (at most _CATCH_UP_SECONDS of them per look, one past a time limit)
            checked = False
            while have >= next_check and not met:
                checked = True
                upto = next_check
                checks, met = _check_round(
                    plan,
                    trace.posterior,
                    trace.sample_stats,
                    upto,
                    history,
                )
                _say(progressbar, _round_line(checks, upto, met))
                next_check += draws
                if late or time.monotonic() - looked > _CATCH_UP_SECONDS:
                    break
            if met:
                stopped_by = "converged"
                break
            if late and checked:  # the checks at the limit did not pass: stop here
                stopped_by = "time limit"
                break
            if late:
                upto = have
                checks, met = _check_round(
                    plan,
                    trace.posterior,
                    trace.sample_stats,
                    upto,
                    history,
                )
                stopped_by = "converged" if met else "time limit"
                _say(progressbar, "time limit: " + _round_line(checks, upto, met))
                break
            if finished and have < next_check:
                break  # max_draws reached and every check made
    finally:
        if not _finished(sampler):
            trace = sampler.abort()
        else:
            sampler.cancel()
    if upto == 0 and trace is not None:
        upto = _posterior_draws(trace.posterior)
        if upto:
            checks, met = _check_round(
                plan,
                trace.posterior,
                trace.sample_stats,
                upto,
                history,
            )
    # nutpie also records the value variables (transformed scale): PyMC's names only
    posterior = trace.posterior[[name for name in recorded if name in trace.posterior]]
    posterior = extras.joined(posterior, upto)
    stats = trace.sample_stats.isel(draw=slice(0, upto))
    groups = {"posterior": posterior, "sample_stats": stats}
    if "warmup_sample_stats" in trace.groups():
        groups["warmup_sample_stats"] = trace.warmup_sample_stats
    idata = az.InferenceData(**groups)
    _add_data_groups(idata, model)
    return idata, ConvergedSampling(met, checks, upto, stopped_by, history)


def _tuning_line(trace, tune: int) -> str:
    """How far nutpie's chains got in tuning: draws, gradients per draw, step size."""
    done = _tuning_done(trace)
    if done is None:
        return "(no tuning statistics yet)"
    stats = trace.warmup_sample_stats
    steps = stats["n_steps"].values.astype(float)
    per_chain = done.sum(axis=1)
    if not done.any():
        return f"(0 of {tune} tuning steps in every chain)"
    return (
        f"({per_chain.min()}-{per_chain.max()} of {tune} tuning steps per chain; "
        f"{steps[done].mean():.0f} gradients per step; last step sizes "
        + ", ".join(
            f"{stats['step_size'].values[c][done[c]][-1]:.2g}" if done[c].any() else "-"
            for c in range(done.shape[0])
        )
        + ")"
    )


def _add_data_groups(idata: az.InferenceData, model: pm.Model) -> None:
    """``observed_data`` and ``constant_data`` of ``model`` (as PyMC adds to nutpie's trace)."""
    from pymc.backends.arviz import (
        coords_and_dims_for_inferencedata,
        dict_to_dataset,
        find_constants,
        find_observations,
    )

    coords, dims = coords_and_dims_for_inferencedata(model)
    groups = {}
    for name, values in (
        ("observed_data", find_observations(model)),
        ("constant_data", find_constants(model)),
    ):
        if values:
            groups[name] = dict_to_dataset(
                values, library=pm, coords=coords, dims=dims, default_dims=[]
            )
    if groups:
        idata.add_groups(groups)


def _pymc_until_converged(plan: _Plan):
    model, draws, tune, chains, cores = (
        plan.model,
        plan.draws,
        plan.tune,
        plan.chains,
        plan.cores,
    )
    max_draws, deadline, random_seed = plan.max_draws, plan.deadline, plan.random_seed
    initvals, step, target_accept, step_size_tune, extras, progressbar = (
        plan.initvals,
        plan.step,
        plan.target_accept,
        plan.step_size_tune,
        plan.extras,
        plan.progressbar,
    )
    if step is None:
        step = pm.NUTS(model=model, target_accept=target_accept, compile_kwargs={"mode": "NUMBA"})
    seeds = np.random.SeedSequence(random_seed).generate_state(64)
    common = {
        "model": model,
        "cores": cores,
        "progressbar": progressbar,
        "compute_convergence_checks": False,
        "quiet": not progressbar,
    }

    def limit():
        if deadline is None:
            return {}
        return {"callback": TimeLimit(max(deadline - time.monotonic(), 1e-3))}

    idata = sample(
        draws,
        step=step,
        tune=tune,
        chains=chains,
        random_seed=int(seeds[0]),
        initvals=dict(initvals) if initvals is not None else None,
        init="adapt_diag",
        **limit(),
        **common,
    )
    history: list = []
    rounds = 0
    while True:
        rounds += 1
        stats = idata.sample_stats if "sample_stats" in idata.groups() else None
        upto = idata.posterior.sizes["draw"]
        checks, met = _check_round(plan, idata.posterior, stats, upto, history)
        _say(progressbar, _round_line(checks, upto, met))
        if met:
            stopped_by = "converged"
            break
        out_of_time = deadline is not None and time.monotonic() >= deadline
        if out_of_time or upto < draws * rounds:  # a stop by the limit returns fewer draws
            stopped_by = "time limit"
            break
        if upto + draws > max_draws:
            stopped_by = "max_draws"
            break
        if idata.posterior.sizes["chain"] < 2:
            stopped_by = "time limit"
            break
        idata = resume_pooled_metric(
            idata,
            draws,
            step=step,
            step_size_tune=step_size_tune,
            random_seed=int(seeds[rounds % len(seeds)]),
            **limit(),
            **common,
        )
    upto = idata.posterior.sizes["draw"]
    idata.posterior = extras.joined(idata.posterior, upto)
    return idata, ConvergedSampling(met, checks, upto, stopped_by, history)
