"""One call from a PEtab problem to a checked posterior: :func:`sample_posterior`.

The recipe (docs/petab.md, "One call to a posterior"):

1. **Model**: the problem's PyMC model with its observation parameters marginalised
   (``marginalize="auto"``: every parameter that qualifies; none qualify: the full model).
2. **Modes**: a multistart optimisation of the problem's posterior
   (:func:`~pymc_odesens.inference.find_modes`, on the full model: its optima are the
   problem's, with PEtab's log-likelihoods), in worker processes or on ``executor=``.
3. **Start**: the Laplace approximation of the sampled model at the mode of its sampler's
   density next to each mode within :data:`MODE_WEIGHT_WINDOW` of the best (at most
   :data:`MAX_WEIGHED_MODES`), weighed by its mass
   (:func:`~pymc_odesens.inference.laplace_mixture.laplace_mixture`): each chain starts at
   its own draw of that mixture (a mode with its weight; never exactly at a mode, where
   nutpie's first metric stalls); nutpie's coordinates are whitened by, and PyMC's NUTS
   starts its dense mass matrix from, the heaviest mode's approximation.
4. **Sample** with nutpie or PyMC's NUTS, checking R-hat and bulk and tail ESS of every
   estimated parameter every ``draws`` draws per chain (the marginalised ones drawn from
   their conditional posterior for each draw first), and continuing the same chains until
   the checks pass, ``time_limit`` or ``max_draws``
   (:func:`~pymc_odesens.inference.converged_sampling.sample_until_converged`).
5. **Report** in ``idata.sample_stats.attrs`` (see :data:`REPORT_FIELDS`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pymc as pm

from pymc_odesens.inference.arguments import positive_int, positive_number
from pymc_odesens.inference.converged_sampling import (
    MIN_TUNE,
    SAMPLERS,
    sample_until_converged,
)
from pymc_odesens.inference.executor_choice import check_executor
from pymc_odesens.inference.laplace_mixture import laplace_mixture
from pymc_odesens.inference.marginal_recovery import MarginalRecovery, marginal_nodes
from pymc_odesens.inference.multistart import find_modes

__all__ = [
    "CHECK_EVERY",
    "MAX_DRAWS",
    "MAX_WEIGHED_MODES",
    "MODE_WEIGHT_WINDOW",
    "MULTIMODAL_GAP",
    "MULTIMODAL_WEIGHT",
    "REPORT_FIELDS",
    "sample_posterior",
]

CHECK_EVERY = {"nutpie": 100, "pymc": 500}
"""Default ``draws`` between two convergence checks, by sampler. nutpie's chains go on while
the trace is checked, so a check every 100 draws ends a run close to where it first meets
its targets (at most 99 draws per chain late); PyMC's NUTS is stopped and continued at each
check, which costs a restart of its processes."""

MAX_DRAWS = 10000
"""Default ``max_draws`` per chain."""

MODE_WEIGHT_WINDOW = 10.0
"""Modes of the multistart whose log-posterior is within this many log-units of the best
one's are weighed by their Laplace masses (a mode further below would need a Laplace
volume e**10 = 22 000 times the best one's to hold as much mass)."""

MAX_WEIGHED_MODES = 4
"""At most this many modes (the highest) are weighed: each costs a Laplace approximation
(a Hessian by finite differences of the gradient: 2 d gradients)."""

MULTIMODAL_WEIGHT = 0.01
"""A second distinct mode of the sampler's density that holds at least this share of the
Laplace mass makes the run report ``multimodal = 1``."""

MULTIMODAL_GAP = 5.0
"""A mode that could not be weighed (no Laplace approximation there) and whose
log-posterior is within this many log-units of the best one's (another cluster of
:func:`~pymc_odesens.inference.find_modes` that a valley deeper than ``barrier``
separates from the best) makes the run report ``multimodal = 1`` too."""

REPORT_FIELDS = {
    "converged": "1 if every estimated parameter has R-hat <= target_rhat and bulk and tail "
    "ESS >= target_ess, else 0",
    "stopped_by": "'converged', 'time limit', 'time limit in tuning' (nutpie: no draws) or "
    "'max_draws'",
    "target_rhat": "the R-hat target",
    "target_ess": "the ESS target",
    "rhat_max": "the largest R-hat over the estimated parameters",
    "rhat_variable": "where it is",
    "ess_bulk_min": "the smallest bulk ESS",
    "ess_bulk_variable": "where it is",
    "ess_tail_min": "the smallest tail ESS",
    "ess_tail_variable": "where it is",
    "divergences": "divergent transitions after tuning",
    "ess_per_second": "the smallest of bulk and tail ESS over wall_time",
    "draws_per_chain": "draws after tuning per chain returned",
    "convergence_checks": "checks made (one every `draws` draws per chain)",
    "sampler": "'nutpie' or 'pymc'",
    "marginalized": "the marginalised parameter ids (recovered into the posterior)",
    "n_starts": "multistart starts drawn from the prior",
    "nominal_start": "1 if the nominal values were a start too",
    "best_start": "where the best optimum's start came from: 'nominal' or 'prior draw'",
    "starts_failed": "starts that failed",
    "starts_out_of_time": "starts stopped by start_time_limit",
    "mode_method": "the local optimiser of the multistart",
    "optima_found": "clusters of optima (distinct optima) the multistart found",
    "modes_found": "modes: those optima joined where no valley deeper than barrier "
    "separates them (optima_found with barrier=None)",
    "mode_log_posteriors": "each mode's best log-posterior (problem's priors), best first",
    "mode_log_likelihoods": "each mode's best log-likelihood (PEtab's)",
    "mode_sizes": "starts per mode",
    "mode_laplace_component": "for each mode, the Laplace component (distinct mode of the "
    "sampled model's density, heaviest 0) its climb ended at; -1: not weighed (outside "
    "MODE_WEIGHT_WINDOW or MAX_WEIGHED_MODES, or no approximation)",
    "laplace_weights": "each Laplace component's share of the Laplace mass, heaviest first: "
    "the chains' starts are drawn with these weights",
    "laplace_log_evidence": "the Laplace estimate of the sampled model's log evidence (the "
    "log of the components' summed masses)",
    "multimodal": "1 if a second Laplace component holds at least MULTIMODAL_WEIGHT of the "
    "mass, or a mode that could not be weighed is within MULTIMODAL_GAP of the best "
    "log-posterior",
    "laplace_hessian": "how the heaviest component's Laplace covariance was computed",
    "whitened": "1 if nutpie sampled in coordinates whitened by the Laplace approximation",
    "time_model": "seconds: building the PyMC model(s)",
    "time_modes": "seconds: the multistart (with its workers' compiles)",
    "time_initialise": "seconds: the Laplace approximations",
    "time_sampling": "seconds: compiling the sampler, tuning, draws and continuations",
    "time_recovery": "seconds: drawing the marginalised parameters",
    "wall_time": "seconds from the call to the result",
}
"""The entries :func:`sample_posterior` writes into ``idata.sample_stats.attrs``."""


def _say(progressbar: bool, text: str) -> None:
    if progressbar:
        print(f"sample_posterior: {text}", file=sys.stderr, flush=True)


def _check_arguments(
    problem,
    marginalize,
    sampler,
    time_limit,
    target_rhat,
    target_ess,
    executor,
    progressbar,
    target_accept,
    nominal_start,
    whiten,
) -> None:
    if not (hasattr(problem, "build_model") and hasattr(problem, "observation_analysis")):
        raise TypeError(
            f"problem: expected a PetabProblem (PetabProblem.from_yaml), got "
            f"{type(problem).__name__}"
        )
    if isinstance(marginalize, str):
        if marginalize != "auto":
            raise ValueError(
                f"marginalize: expected 'auto', a list of parameter ids or None, got "
                f"{marginalize!r}"
            )
    elif marginalize is not None and not (
        isinstance(marginalize, Sequence) and all(isinstance(p, str) for p in marginalize)
    ):
        raise ValueError(
            f"marginalize: expected 'auto', a list of parameter ids or None, got {marginalize!r}"
        )
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler: expected one of {SAMPLERS}, got {sampler!r}")
    if time_limit is not None and not (
        isinstance(time_limit, int | float) and not isinstance(time_limit, bool) and time_limit > 0
    ):
        raise ValueError(f"time_limit: expected a positive number of seconds, got {time_limit!r}")
    if not (
        isinstance(target_rhat, int | float) and target_rhat > 1 and math.isfinite(target_rhat)
    ):
        raise ValueError(f"target_rhat: expected a finite number > 1, got {target_rhat!r}")
    if not (isinstance(target_ess, int | float) and target_ess > 0 and math.isfinite(target_ess)):
        raise ValueError(f"target_ess: expected a positive finite number, got {target_ess!r}")
    if not (isinstance(target_accept, float) and 0 < target_accept < 1):
        raise ValueError(f"target_accept: expected a number in (0, 1), got {target_accept!r}")
    if not isinstance(progressbar, bool):
        raise TypeError(f"progressbar: expected True or False, got {progressbar!r}")
    if not isinstance(nominal_start, bool):
        raise TypeError(f"nominal_start: expected True or False, got {nominal_start!r}")
    if not isinstance(whiten, bool):
        raise TypeError(f"whiten: expected True or False, got {whiten!r}")
    check_executor(executor)


def _nominal_start(problem) -> dict | None:
    """The estimated parameters' nominal values on their scale, when every one is given and
    lies within its bounds (else None: no such start)."""
    import petab.v1 as petab

    parameters = problem.parameters
    values = {}
    for pid, scale, value, low, high in zip(
        parameters.ids, parameters.scales, parameters.nominal, parameters.lower, parameters.upper
    ):
        lower, upper = petab.scale(float(low), scale), petab.scale(float(high), scale)
        if not (math.isfinite(value) and lower <= value <= upper):
            return None
        values[pid] = float(value)
    return values


def _marginalized_ids(problem, marginalize) -> tuple[str, ...] | None:
    """What ``build_model`` is given: ``"auto"`` becomes None when nothing qualifies."""
    if marginalize is None:
        return None
    if isinstance(marginalize, str):
        return "auto" if problem.observation_analysis().candidates else None
    return tuple(marginalize) or None


def _recovery(model: pm.Model, random_seed):
    """``extra_draws`` for :func:`sample_until_converged`: the marginalised parameters of
    a stretch of draws, from their conditional posterior (one generator for all stretches)."""
    import arviz as az

    rng = np.random.default_rng(random_seed)
    free = {rv.name for rv in model.free_RVs}
    recovery = MarginalRecovery(model, compile_kwargs={"mode": "NUMBA"})  # compiled once

    def extra_draws(stretch):
        sampled = stretch[[name for name in stretch.data_vars if name in free]]
        idata = recovery(az.InferenceData(posterior=sampled), random_seed=rng)
        added = [name for name in idata.posterior.data_vars if name not in sampled.data_vars]
        return idata.posterior[added]

    return extra_draws


def _weighed_modes(model: pm.Model, modes, marginal: bool):
    """The Laplace mixture over the modes within MODE_WEIGHT_WINDOW of the best (at most
    MAX_WEIGHED_MODES), at the sampled model's sampler modes next to them: finite
    differences of the exact gradient, else (full models) the Fisher information. Returns
    the mixture, the weighed modes' count and the failures (by mode index)."""
    best = modes.clusters[0].log_posterior
    weighed = [
        c
        for c in modes.clusters[:MAX_WEIGHED_MODES]
        if best - c.log_posterior <= MODE_WEIGHT_WINDOW
    ]
    values = {v.name for v in model.value_vars}
    starts = []
    for cluster in weighed:
        point = modes.objective.sampler_point(cluster.best.x)
        starts.append({name: value for name, value in point.items() if name in values})
    hessians = ("finite-differences",) if marginal else ("finite-differences", "fisher")
    try:
        mixture, failures = laplace_mixture(model, starts, hessians=hessians)
    except ValueError as error:
        raise RuntimeError(
            f"sample_posterior: {error} (the best optimum, to start the chains from); "
            "find_modes' result may not be a strict maximum (more starts, n_starts=...) or the "
            "posterior is improper along some direction"
        ) from None
    return mixture, len(weighed), failures


def sample_posterior(
    problem,
    *,
    marginalize="auto",
    marginal_priors: Mapping | None = None,
    n_starts: int = 10,
    nominal_start: bool = True,
    start_time_limit: float | None = None,
    mode_method: str = "auto",
    barrier: float | None = 1.0,
    chains: int = 4,
    cores: int | None = None,
    sampler: str = "nutpie",
    draws: int | None = None,
    tune: int = 500,
    max_draws: int | None = None,
    time_limit: float | None = None,
    target_rhat: float = 1.01,
    target_ess: float = 400,
    target_accept: float = 0.8,
    whiten: bool = True,
    random_seed: int | None = None,
    executor=None,
    n_workers: int | None = None,
    progressbar: bool = True,
):
    """A posterior of a PEtab problem, checked for convergence, in one call.

    Builds the (marginalised) model, finds the posterior's modes by multistart
    optimisation, weighs the best ones by their Laplace masses and starts each chain at a
    draw of that mixture (:mod:`~pymc_odesens.inference.laplace_mixture`), samples
    with nutpie or PyMC's NUTS, draws the marginalised parameters from their conditional
    posterior, checks R-hat and bulk and tail ESS of every estimated parameter, and
    continues the same chains until the checks pass or ``time_limit`` has passed (see the
    module docstring and docs/petab.md, "One call to a posterior").

    Parameters
    ----------
    problem : PetabProblem
        Read by :meth:`PetabProblem.from_yaml` (the multistart's workers read it again from
        its YAML file; its solver options apply).
    marginalize : "auto", sequence of str or None
        As for :meth:`PetabProblem.build_model`; ``"auto"`` (default) samples the full
        model when no parameter qualifies.
    marginal_priors : dict, optional
        Conjugate-prior hyperparameters of marginalised parameters
        (:meth:`PetabProblem.build_model`).
    n_starts : int
        Multistart starts, drawn from the prior (10).
    nominal_start : bool
        Start the multistart at the parameter table's ``nominalValue`` too (pyPESTO's
        ``x_guesses``; the collection's problems give their published best fit there), when
        every estimated parameter has one within its bounds (True).
    start_time_limit : float, optional
        Seconds per multistart start (:func:`~pymc_odesens.inference.find_modes`); default:
        ``time_limit / 20`` with a ``time_limit``, else none. A start drawn where the ODE is
        stiff can otherwise hold the multistart for many minutes.
    mode_method : str
        The multistart's local optimiser (:func:`~pymc_odesens.inference.find_modes`).
    barrier : float or None
        Log-units (1): optima of the multistart that no valley deeper than this separates
        along the segment between them are one mode
        (:meth:`~pymc_odesens.inference.ModeSearchResult.join_connected`, the hill-valley
        test), so that optima a local optimiser left apart on one ridge or flat region are
        not reported as distinct modes (``modes_found``, ``multimodal``). ``optima_found``
        counts them before joining. None: no joining.
    chains : int
        At least 2 (4).
    cores : int, optional
        PyMC's NUTS: chains sampled in parallel processes (default: as many as the machine
        has CPUs, at most ``chains``). nutpie runs every chain at once in a thread of this
        process (the convergence checks need all chains' draws as they grow).
    sampler : {"nutpie", "pymc"}
        nutpie (default; its own diagonal metric, adapted from the Laplace draws where the
        chains start) or PyMC's NUTS (a dense mass matrix started from the Laplace
        covariance; continuations with one metric pooled from all chains' draws).
    draws : int, optional
        Draws per chain between two convergence checks (default :data:`CHECK_EVERY`: 100
        with nutpie, 500 with PyMC's NUTS).
    tune : int
        Tuning steps per chain (500; nutpie needs at least 1).
    max_draws : int, optional
        At most this many draws per chain (default: 10000, at least ``draws``).
    time_limit : float, optional
        Seconds from the call. Sampling ends at the first check after it, keeping its draws.
        The multistart and the Laplace approximation are not interrupted (each start has
        ``start_time_limit``). With nutpie, a limit that passes while the chains tune ends
        the run there, with no draws (``stopped_by = "time limit in tuning"``; how far
        tuning got is on stderr and in ``warmup_sample_stats``); PyMC's NUTS finishes its
        tuning and stops after its first draws. None: until converged or ``max_draws``.
    target_rhat, target_ess : float
        The convergence target: R-hat <= ``target_rhat`` (1.01) and bulk and tail ESS >=
        ``target_ess`` (400) for every estimated parameter, marginalised ones included.
    target_accept : float
        NUTS' target acceptance rate (0.8).
    whiten : bool
        nutpie: sample in the coordinates whitened by the Laplace approximation
        (:func:`~pymc_odesens.inference.whitened_model.whitened_model`: the same
        posterior, where nutpie's diagonal mass matrix can express the correlations the
        approximation has) (True); False: nutpie adapts its diagonal metric to the
        parameters themselves. PyMC's NUTS takes the approximation as its dense mass
        matrix either way.
    random_seed : int, optional
        Seeds the multistart, the chain starts, the sampler and the recovery.
    executor : None, concurrent.futures.Executor or dask.distributed.Client
        Where the multistart's starts run (:func:`~pymc_odesens.inference.find_modes`;
        ``None``: local worker processes). Only the multistart is distributed: the chains
        run in this process (nutpie's threads) or in PyMC's local processes.
    n_workers : int, optional
        Local worker processes of the multistart when ``executor`` is None (default: the
        CPU count, at most ``n_starts``; 1: in this process).
    progressbar : bool
        A line per phase and per check on stderr, and the sampler's progress bar.

    Returns
    -------
    arviz.InferenceData
        ``posterior``: every estimated parameter by its id on its ``parameterScale``
        (marginalised ones recovered), and the model's other variables;
        ``sample_stats`` with the report in its ``attrs`` (:data:`REPORT_FIELDS`:
        ``converged``, ``rhat_max``, ``ess_bulk_min``, ``ess_tail_min``, the modes found,
        their Laplace weights, ``laplace_log_evidence`` and ``multimodal``, the wall time
        of each phase, ...). A run that did not converge
        returns its draws with ``converged = 0`` and says why on stderr.

    Raises
    ------
    ValueError
        An argument out of its range (named); a parameter of ``marginalize`` that cannot be
        marginalised.
    TypeError
        ``problem`` is not a PetabProblem, ``executor`` of no known type, ``progressbar``
        not a bool.
    RuntimeError
        No Laplace approximation at the best optimum (its Hessian is not negative
        definite). At another mode that is reported on stderr, and the mode is not
        weighed (``mode_laplace_component = -1``).
    """
    called = time.monotonic()
    began = time.perf_counter()
    _check_arguments(
        problem,
        marginalize,
        sampler,
        time_limit,
        target_rhat,
        target_ess,
        executor,
        progressbar,
        target_accept,
        nominal_start,
        whiten,
    )
    n_starts = positive_int("n_starts", n_starts)
    if barrier is not None:
        barrier = positive_number("barrier", barrier, " of log-units")
    chains = positive_int("chains", chains, 2)
    if draws is None:
        draws = CHECK_EVERY[sampler]
    draws = positive_int("draws", draws)
    tune = positive_int("tune", tune, MIN_TUNE[sampler])
    if cores is not None:
        cores = positive_int("cores", cores)
    if max_draws is None:
        max_draws = max(MAX_DRAWS, draws)
    max_draws = positive_int("max_draws", max_draws)
    if max_draws < draws:
        raise ValueError(f"max_draws: expected at least draws ({draws}), got {max_draws}")
    seeds = np.random.SeedSequence(random_seed).generate_state(3)
    modes_seed, sampling_seed, recovery_seed = (int(s) for s in seeds)
    if random_seed is None:
        modes_seed = sampling_seed = recovery_seed = None
    ids = list(problem.parameters.ids)
    times = {}

    # 1. the model
    phase = time.perf_counter()
    chosen = _marginalized_ids(problem, marginalize)
    _say(
        progressbar,
        f"building the model of {problem.name}"
        + ("" if chosen is None else " with marginalised observation parameters"),
    )
    model = None
    if chosen is not None:
        model = problem.build_model(marginalize=chosen, marginal_priors=marginal_priors)
    elif marginal_priors is not None:
        raise ValueError("marginal_priors: given, but no parameter is marginalised")
    marginal = model is not None and bool(marginal_nodes(model))
    marginalized = [pid for pid in ids if model is not None and pid not in model.named_vars]
    times["time_model"] = time.perf_counter() - phase

    # 2. the modes, on the full model
    phase = time.perf_counter()
    given = [_nominal_start(problem)] if nominal_start else []
    given = [point for point in given if point is not None]
    if start_time_limit is None and time_limit is not None:
        start_time_limit = time_limit / 20
    _say(
        progressbar,
        f"finding modes: {n_starts} starts from the prior"
        + (" and one at the nominal values" if given else "")
        + ("" if start_time_limit is None else f", at most {start_time_limit:.0f} s each"),
    )
    modes = find_modes(
        problem,
        n_starts,
        random_seed=modes_seed,
        method=mode_method,
        executor=executor,
        n_workers=n_workers,
        initial_points=given,
        start_time_limit=start_time_limit,
    )
    optima_found = len(modes.clusters)
    if barrier is not None and optima_found > 1:
        modes = modes.join_connected(barrier)
    best = modes.best
    times["time_modes"] = time.perf_counter() - phase
    joined = (
        f"{optima_found} distinct optima, joined where no valley deeper than {barrier:g} "
        f"log-units separates them into {len(modes.clusters)} modes"
        if barrier is not None and optima_found > 1
        else f"{optima_found} distinct optima"
    )
    _say(
        progressbar,
        f"{joined} from {n_starts} starts "
        f"({len(modes.failed)} failed) in {times['time_modes']:.1f} s; best log-likelihood "
        f"{best.log_likelihood:.6g} (log-posterior {best.log_posterior:.6g})",
    )

    # 3. the start: the Laplace mixture over the modes near the best
    phase = time.perf_counter()
    if model is None:
        model = modes.model
    mixture, n_weighed, failures = _weighed_modes(model, modes, marginal)
    laplace = mixture.heaviest
    weights = mixture.weights
    components = [mixture.component_of(i) for i in range(len(modes.clusters))]
    unweighed_near = [
        i
        for i, cluster in enumerate(modes.clusters)
        if components[i] < 0 and best.log_posterior - cluster.log_posterior <= MULTIMODAL_GAP
    ]
    multimodal = bool(np.sum(weights >= MULTIMODAL_WEIGHT) > 1 or unweighed_near)
    times["time_initialise"] = time.perf_counter() - phase
    shares = " / ".join(f"{w:.3g}" for w in weights)
    _say(
        progressbar,
        f"Laplace approximations ({laplace.hessian}) at the sampler's modes next to "
        f"{n_weighed} of the modes in {times['time_initialise']:.1f} s: "
        f"{len(mixture.components)} distinct, weights {shares}, Laplace log evidence "
        f"{mixture.log_evidence:.6g}"
        + (
            "; WARNING: more than one mode holds mass (a multimodal posterior: chains "
            "started in different modes may not meet)"
            if multimodal
            else ""
        )
        + "".join(f"; mode {i} not weighed: {reason}" for i, reason in sorted(failures.items()))
        + f"; sampling {chains} chains with {sampler}",
    )

    # 4. sampling, checks, continuations
    step = None
    whitened = whiten and sampler == "nutpie"
    if sampler == "pymc":
        step = laplace.nuts_step(target_accept=target_accept)  # the heaviest's covariance
    idata, outcome = sample_until_converged(
        model,
        var_names=ids,
        sampler=sampler,
        draws=draws,
        tune=tune,
        chains=chains,
        cores=cores,
        max_draws=max_draws,
        time_limit=time_limit,
        started=called,
        target_rhat=target_rhat,
        target_ess=target_ess,
        random_seed=sampling_seed,
        initvals=None if whitened else mixture.start_values(),
        step=step,
        target_accept=target_accept,
        step_size_tune=min(100, max(tune, 1)),
        extra_draws=_recovery(model, recovery_seed) if marginal else None,
        whiten=mixture if whitened else None,
        progressbar=progressbar,
    )
    times["time_sampling"] = outcome.sampling_time
    times["time_recovery"] = outcome.extra_time
    wall = time.perf_counter() - began
    checks = outcome.checks
    attrs = {
        "converged": int(outcome.converged),
        "stopped_by": outcome.stopped_by,
        "target_rhat": float(target_rhat),
        "target_ess": float(target_ess),
        "rhat_max": checks.rhat_max if checks else math.nan,
        "rhat_variable": checks.rhat_variable if checks else "",
        "ess_bulk_min": checks.ess_bulk_min if checks else math.nan,
        "ess_bulk_variable": checks.ess_bulk_variable if checks else "",
        "ess_tail_min": checks.ess_tail_min if checks else math.nan,
        "ess_tail_variable": checks.ess_tail_variable if checks else "",
        "divergences": checks.divergences if checks else 0,
        "ess_per_second": (min(checks.ess_bulk_min, checks.ess_tail_min) / wall)
        if checks
        else math.nan,
        "draws_per_chain": outcome.draws,
        "convergence_checks": outcome.rounds,
        "sampler": sampler,
        "marginalized": marginalized,
        "n_starts": n_starts,
        "nominal_start": int(bool(given)),
        "best_start": "nominal" if best.index >= n_starts else "prior draw",
        "starts_failed": len(modes.failed),
        "starts_out_of_time": sum("start's time limit" in r.message for r in modes.starts),
        "mode_method": modes.method,
        "optima_found": optima_found,
        "modes_found": len(modes.clusters),
        "mode_log_posteriors": [float(c.log_posterior) for c in modes.clusters],
        "mode_log_likelihoods": [float(c.log_likelihood) for c in modes.clusters],
        "mode_sizes": [int(c.size) for c in modes.clusters],
        "mode_laplace_component": components,
        "laplace_weights": [float(w) for w in weights],
        "laplace_log_evidence": mixture.log_evidence,
        "multimodal": int(multimodal),
        "laplace_hessian": laplace.hessian,
        "whitened": int(whitened),
        **times,
        "wall_time": wall,
    }
    idata.sample_stats.attrs.update(attrs)
    if outcome.converged:
        verdict = "converged"
    else:
        verdict = f"NOT converged (stopped by {outcome.stopped_by})"
    _say(
        progressbar,
        f"{verdict}: {outcome.draws} draws per chain; "
        + (str(checks.lines()[0]) if checks else "no draws")
        + f"; {wall:.1f} s in all",
    )
    return idata
