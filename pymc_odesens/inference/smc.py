"""``sample_smc``: tempered sequential Monte Carlo with exact gradients, and the evidence.

Independent runs, each a population of particles carried from draws of the prior to the
posterior through the tempered densities ``log prior + beta log likelihood``
(:mod:`pymc_odesens.inference.smc_run`): adaptive temperature steps
(:mod:`~pymc_odesens.inference.smc_tempering`), resampling
(:mod:`~pymc_odesens.inference.smc_resampling`) and HMC moves with the model's exact
gradient and a mass matrix from the population (:mod:`~pymc_odesens.inference.smc_hmc`,
:mod:`~pymc_odesens.inference.smc_mass_matrix`), the log-density compiled in PyTensor's
NUMBA mode (:mod:`~pymc_odesens.inference.smc_target`). The runs' evidences combine into
one estimate with its Monte Carlo error (:mod:`~pymc_odesens.inference.smc_evidence`).

Where the work runs: PyTensor's compiled function holds the GIL for the whole call
(measured on the 2-parameter ODE model of tests/inference/test_smc.py, 38 us a call: two
threads making 4000 calls each through their own copies took 1.45 times as long as one
thread making all 8000, on 2 busy cores), so particles are moved in worker *processes*.
The work units (:mod:`~pymc_odesens.inference.smc_work`) carry the model's factory
(:mod:`~pymc_odesens.inference.model_source`), never compiled code, so any
``concurrent.futures.Executor`` can run them. With one core and no executor everything
runs in this process.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import arviz as az
import numpy as np
import pymc as pm

from pymc_odesens.inference.executor_choice import check_executor, work_executor
from pymc_odesens.inference.executors import WorkExecutor
from pymc_odesens.inference.model_source import factory_key, model_source
from pymc_odesens.inference.smc_checkpoint import (
    CHECKED_PARTICLES,
    SmcCheckpoint,
    call_signature,
    check_model,
    with_new_moves,
)
from pymc_odesens.inference.smc_jumps import (
    jump_digest,
    jump_points,
    jump_prior_draws,
    jump_targets,
)
from pymc_odesens.inference.smc_mass_matrix import MASS_MATRICES
from pymc_odesens.inference.smc_posterior import smc_inference_data
from pymc_odesens.inference.smc_progress import StageProgress
from pymc_odesens.inference.smc_resampling import RESAMPLING
from pymc_odesens.inference.smc_run import RunResult, SmcRun, SmcSettings, evaluate_positions
from pymc_odesens.inference.smc_target import ParticleLayout, PriorDraws
from pymc_odesens.inference.smc_tempering import CRITERIA
from pymc_odesens.inference.smc_work import TargetHandle, tempered_target

__all__ = ["KERNELS", "SmcTimeLimitReached", "sample_smc"]

KERNELS = ("auto", "hmc")
"""The mutation kernels of :func:`sample_smc` (its ``kernel``)."""


class SmcTimeLimitReached(RuntimeError):
    """``sample_smc``'s ``time_limit`` passed before every run reached ``beta = 1``.

    Attributes
    ----------
    betas : list of float
        Each run's inverse temperature where it stopped (1.0: finished).
    stages : list of int
        Each run's stages done.
    moves_in_stage : list of int
        Each run's moves done in the stage it stopped in (0: it stopped between stages).
    checkpoint : str or None
        The directory the same call continues from (None: the runs' progress is lost).
    """

    def __init__(self, results: list[RunResult], time_limit: float, checkpoint) -> None:
        self.betas = [float(r.beta) for r in results]
        self.stages = [len(r.stages) for r in results]
        self.moves_in_stage = [int(r.partial_moves) for r in results]
        self.checkpoint = None if checkpoint is None else str(checkpoint)
        where = ", ".join(
            f"run {r.run}: beta {r.beta:.4g} after {len(r.stages)} stages"
            + (f" and {r.partial_moves} moves of the next" if r.partial_moves else "")
            for r in results
        )
        how = (
            f"the same call continues them from {self.checkpoint}"
            if checkpoint is not None
            else "their progress is lost: pass checkpoint= to keep it"
        )
        super().__init__(
            f"sample_smc: time_limit={time_limit:g} s passed before every run reached the "
            f"posterior ({where}); {how}"
        )


def _check(condition: bool, name: str, expected: str, value) -> None:
    if not condition:
        raise ValueError(f"sample_smc: {name} must be {expected}; got {value!r}")


def _settings(
    draws,
    n_leapfrog,
    adapt_n_leapfrog,
    max_leapfrog,
    mass_matrix,
    target_acceptance,
    criterion,
    target_ess,
    resampling,
    resample_threshold,
    moves,
    max_moves,
    correlation_threshold,
    max_stages,
    kernel="auto",
    independent_acceptance=0.3,
    jump_moves=0,
) -> SmcSettings:
    def integer(v):
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

    _check(integer(draws) and draws >= 2, "draws", "an integer >= 2", draws)
    _check(integer(n_leapfrog) and n_leapfrog >= 1, "n_leapfrog", "an integer >= 1", n_leapfrog)
    _check(
        isinstance(adapt_n_leapfrog, (bool, np.bool_)),
        "adapt_n_leapfrog",
        "True or False",
        adapt_n_leapfrog,
    )
    _check(
        integer(max_leapfrog) and max_leapfrog >= n_leapfrog,
        "max_leapfrog",
        f"an integer >= n_leapfrog = {n_leapfrog}",
        max_leapfrog,
    )
    _check(mass_matrix in MASS_MATRICES, "mass_matrix", f"one of {MASS_MATRICES}", mass_matrix)
    _check(0.0 < target_acceptance < 1.0, "target_acceptance", "in (0, 1)", target_acceptance)
    _check(criterion in CRITERIA, "criterion", f"one of {CRITERIA}", criterion)
    _check(0.0 < target_ess < 1.0, "target_ess", "in (0, 1)", target_ess)
    _check(resampling in RESAMPLING, "resampling", f"one of {tuple(RESAMPLING)}", resampling)
    if resample_threshold is None:
        resample_threshold = 1.0 if criterion == "ess" else 0.5
    _check(0.0 < resample_threshold <= 1.0, "resample_threshold", "in (0, 1]", resample_threshold)
    if criterion == "ess":
        _check(
            resample_threshold > target_ess,
            "resample_threshold",
            f"above target_ess = {target_ess} with criterion='ess' (else the next stage "
            "starts below the ESS target; use criterion='cess' to resample less often)",
            resample_threshold,
        )
    _check(
        moves is None or (integer(moves) and moves >= 1), "moves", "None or an integer >= 1", moves
    )
    _check(integer(max_moves) and max_moves >= 1, "max_moves", "an integer >= 1", max_moves)
    _check(
        0.0 < correlation_threshold < 1.0,
        "correlation_threshold",
        "in (0, 1)",
        correlation_threshold,
    )
    _check(integer(max_stages) and max_stages >= 1, "max_stages", "an integer >= 1", max_stages)
    _check(kernel in KERNELS, "kernel", f"one of {KERNELS}", kernel)
    _check(
        isinstance(independent_acceptance, (int, float))
        and not isinstance(independent_acceptance, bool)
        and 0.0 < independent_acceptance < 1.0,
        "independent_acceptance",
        "in (0, 1)",
        independent_acceptance,
    )
    _check(integer(jump_moves) and jump_moves >= 0, "jump_moves", "an integer >= 0", jump_moves)
    return SmcSettings(
        draws=int(draws),
        n_leapfrog=int(n_leapfrog),
        adapt_n_leapfrog=bool(adapt_n_leapfrog),
        max_leapfrog=int(max_leapfrog),
        mass_matrix=mass_matrix,
        target_acceptance=float(target_acceptance),
        criterion=criterion,
        target_ess=float(target_ess),
        resampling=resampling,
        resample_threshold=float(resample_threshold),
        moves=None if moves is None else int(moves),
        max_moves=int(max_moves),
        correlation_threshold=float(correlation_threshold),
        max_stages=int(max_stages),
        kernel=kernel,
        independent_acceptance=float(independent_acceptance),
        jump_moves=int(jump_moves),
    )


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _model_and_factory(model):
    if model is None:
        model = pm.modelcontext(None)
    if hasattr(model, "build_model") and not hasattr(model, "model_factory"):
        model = model.build_model()  # a PEtab problem without a factory: its model, pickled
    return model_source(model)


def _dispatch_inline(model, function, units):
    return [function(unit, model) for unit in units]


def _dispatch_executor(runner: WorkExecutor, function, units):
    return runner.map(function, units, name="smc-batch")


def sample_smc(
    model=None,
    *,
    draws: int = 1000,
    runs: int = 4,
    random_seed=None,
    target_ess: float = 0.5,
    criterion: str = "ess",
    resampling: str = "systematic",
    resample_threshold: float | None = None,
    n_leapfrog: int = 10,
    adapt_n_leapfrog: bool = False,
    max_leapfrog: int = 100,
    mass_matrix: str = "diag",
    target_acceptance: float = 0.65,
    kernel: str = "auto",
    independent_acceptance: float = 0.3,
    jump_modes=None,
    jump_moves: int = 1,
    jump_population_weight: float = 0.2,
    moves: int | None = None,
    max_moves: int = 10,
    correlation_threshold: float = 0.1,
    max_stages: int = 500,
    time_limit: float | None = None,
    checkpoint: str | os.PathLike | None = None,
    change_moves: bool = False,
    cores: int | None = None,
    executor=None,
    progressbar: bool = True,
    compile_kwargs: Mapping | None = None,
    trajectory_model=None,
) -> az.InferenceData:
    """Tempered sequential Monte Carlo from the prior to the posterior, with the evidence.

    Each of ``runs`` independent runs draws ``draws`` particles from the prior and carries
    them through ``log prior + beta log likelihood`` for ``beta`` from 0 to 1: the next
    ``beta`` keeps the effective sample size (or the conditional ESS) of the reweighted
    particles at ``target_ess`` of ``draws``; the particles are resampled and moved by HMC
    (``n_leapfrog`` leapfrog steps with the model's exact gradient, or a number adapted to
    the particles' jumps, the mass matrix from the population's covariance, the step size
    adapted to ``target_acceptance``). The evidence
    (marginal likelihood) is the product of the stages' mean incremental weights. See
    docs/smc.md.

    The prior is the free variables' priors; the likelihood is the observed variables *and
    every potential* (the particles start as prior draws, which know no potentials). A
    failed ODE solve makes the log-likelihood ``-inf``: the particle gets weight 0, a move
    that reaches one is rejected (counted in ``sample_stats.failed_evaluations``).

    Parameters
    ----------
    model : pymc.Model, PEtab problem or callable, optional
        Default: the model in context. A PEtab problem
        (:class:`pymc_odesens.petab.PetabProblem`) samples its ``build_model()``; a callable
        without arguments returning a ``pymc.Model`` is called here and in each worker.
    draws : int
        Particles per run (1000).
    runs : int
        Independent runs (4), the ``chain`` dimension of the result: R-hat across runs and
        the evidence's Monte Carlo error come from their agreement.
    random_seed : int or sequence of int, optional
        The result is the same, bit for bit, for the same seed whatever ``cores`` or
        ``executor``.
    target_ess : float
        The criterion's target at each temperature step, a fraction of ``draws`` (0.5).
    criterion : {"ess", "cess"}
        ``"ess"``: effective sample size of the new weights; ``"cess"``: conditional ESS
        (Zhou, Johansen, Aston 2016).
    resampling : {"systematic", "residual"}
    resample_threshold : float, optional
        Resample when the ESS falls below this fraction of ``draws`` (and always at
        ``beta = 1``). Default 1.0 (every stage) for ``"ess"``, which needs it above
        ``target_ess``; 0.5 for ``"cess"``.
    n_leapfrog : int
        Leapfrog steps per HMC move (10); with ``adapt_n_leapfrog`` the mean number at the
        first move.
    adapt_n_leapfrog : bool
        Draw each particle's number of leapfrog steps uniformly from ``1 ... 2 L`` and
        adapt ``L`` after each move to the largest expected squared jump per
        gradient evaluation (:mod:`~pymc_odesens.inference.smc_trajectory`). False
        (default): ``n_leapfrog`` steps in every move. On a ridge that longer
        trajectories cross it decorrelates the particles in fewer moves; on
        Boehm_JProteomeRes2014 it doubled the wall time without a smaller evidence error
        (docs/smc.md).
    max_leapfrog : int
        The largest mean number of leapfrog steps the adaptation may reach (100).
    mass_matrix : {"diag", "dense"}
        The population's variances or its whole covariance.
    target_acceptance : float
        The mean acceptance rate the step size is adapted to (0.65).
    kernel : {"auto", "hmc"}
        ``"auto"`` (default): independent Metropolis-Hastings moves from a Gaussian fitted to
        the particles (one evaluation per move and particle,
        :mod:`~pymc_odesens.inference.smc_independent`) from the first stage on, as long as
        the previous stage accepted them at ``independent_acceptance`` or more, then HMC
        moves; ``"hmc"``: HMC moves at every stage.
    independent_acceptance : float
        The mean acceptance below which ``kernel="auto"`` takes HMC moves from the next
        stage on (0.3).
    jump_modes : ModeSearchResult, dict, sequence of dict or numpy.ndarray, optional
        Optima the particles may jump to: a multistart's result
        (:func:`~pymc_odesens.inference.find_modes` on the same model; each cluster's best
        start), points keyed by the model's value variables (``model.initial_point()``'s
        keys, the unconstrained coordinates), or an array ``(K, d)`` of raveled points.
        Each stage then begins with ``jump_moves`` independent Metropolis-Hastings moves of
        every particle from a mixture of Gaussians at these optima (the Laplace
        approximation of the tempered posterior there: the tempered likelihood's curvature,
        by central differences of the exact gradient, ``2 d`` evaluations per optimum once
        per call, plus the prior's precision from prior draws) and the population's Gaussian
        (:mod:`~pymc_odesens.inference.smc_jumps`): a run whose particles lost an optimum
        at the hot stages can find it again. Exact whatever the optima are (a poor one
        costs acceptance); ``sample_stats`` has each stage's ``jump_acceptance`` and
        ``jumped`` (particles moved). None (default): no jump moves.
    jump_moves : int
        Jump moves per stage with ``jump_modes`` (1), before the stage's other moves.
    jump_population_weight : float
        The population Gaussian's share of the jump proposal, in [0, 1) (0.2); the
        optima share the rest equally.
    moves : int, optional
        HMC moves per stage; default: until the largest correlation between the particles'
        coordinates at the start of the stage and now is below ``correlation_threshold``
        (or below the correlation that noise alone reaches with the particles' effective
        sample size, when that is higher: :mod:`~pymc_odesens.inference.smc_move_stopping`),
        at most ``max_moves``.
    max_moves : int
        (10)
    correlation_threshold : float
        (0.1)
    max_stages : int
        A run that has not reached ``beta = 1`` after this many stages raises (500).
    time_limit : float, optional
        Seconds from the call: a run that has not reached ``beta = 1`` when they have
        passed stops after its current move (so the call may end up to one move later; a
        move of every particle of a run), and the call raises
        :class:`SmcTimeLimitReached` (naming each run's ``beta``) once every run has ended
        or stopped. With ``checkpoint`` the same call continues the runs where they stopped.
    checkpoint : str or os.PathLike, optional
        A directory for each run's state after every stage
        (:mod:`~pymc_odesens.inference.smc_checkpoint`): a call with the same model and
        options continues the runs where the directory's states end (finished runs are not
        sampled again), with the same result, bit for bit, as a call that never stopped.
        ``random_seed=None`` takes the stored seeds. A directory of another call, or a
        damaged file in it, is a ValueError.
    change_moves : bool
        Continue ``checkpoint``'s runs with this call's moves where they differ from the
        stored call's: ``mass_matrix``, ``n_leapfrog``, ``adapt_n_leapfrog``,
        ``max_leapfrog``, ``target_acceptance``, ``kernel``, ``independent_acceptance``,
        ``moves``, ``max_moves``, ``correlation_threshold`` and ``trajectory_model``
        (say, a long run that a faster move would finish sooner). The particles'
        gradients are evaluated again by this call's target, and the checkpoint keeps
        the new settings. The result samples the same target and its evidence stays
        exact (each stage's moves leave its tempered target invariant, whichever they
        are), but it is no longer the same, bit for bit, as one call with either
        setting. The model, population, seeds and temperature settings must still be the
        stored ones. False (default): the moves must be the stored ones.
    cores : int, optional
        Worker processes when no ``executor`` is given (default: the cores available to
        this process; 1 runs everything here). Workers are started with ``spawn``: a
        script that calls ``sample_smc`` with ``cores > 1`` must guard its main code with
        ``if __name__ == "__main__":``.
    executor : concurrent.futures.Executor or dask.distributed.Client, optional
        Runs the work units (batches of particles) instead of local processes
        (:func:`~pymc_odesens.inference.executor_choice.work_executor`: any executor, or
        the workers of a Dask cluster); the runs proceed concurrently and share it. The
        result is the same, bit for bit; a batch whose worker dies runs again elsewhere.
    progressbar : bool
        One line per stage and run on stderr (stage, beta, ESS, acceptance, step size,
        moves, failed evaluations, time).
    compile_kwargs : dict, optional
        For PyTensor's compile of the log-density (default ``{"mode": "NUMBA"}``).
    trajectory_model : pymc.Model, PEtab problem or callable, optional
        A model with the same free variables whose gradient the HMC moves' leapfrog steps
        follow instead of ``model``'s: for an ODE model, the same model at looser
        tolerances (a PEtab problem read with ``relative_tolerance=1e-6,
        absolute_tolerance=1e-10, gradient_check=False``), whose gradient costs less. The
        end point of each trajectory is evaluated by ``model`` (its log-density without
        sensitivities, plus the trajectory model's gradient), and the acceptance tests,
        weights and evidence are ``model``'s: the result samples ``model`` exactly
        (docs/smc.md, "Cheaper trajectories"); a poor trajectory model lowers the
        acceptance, never the accuracy. Default: ``model``'s own gradient.

    Returns
    -------
    arviz.InferenceData
        ``posterior`` (the final particles, ``chain`` = run, with deterministics),
        ``sample_stats`` (``log_marginal_likelihood`` per run and
        ``log_marginal_likelihood_mcse``; per stage ``beta``, ``ess``,
        ``acceptance_rate``, ``step_size``, ``moves``, ``failed_evaluations``...; the
        combined estimate in the attributes), ``observed_data``
        (:mod:`pymc_odesens.inference.smc_posterior`).

    Raises
    ------
    ValueError
        An option out of its range (named), a model with discrete free variables, a prior
        whose density is not finite at its draws, or every prior draw with log-likelihood
        ``-inf``.
    RuntimeError
        A run did not reach ``beta = 1`` within ``max_stages``.
    SmcTimeLimitReached
        ``time_limit`` passed before every run reached ``beta = 1``.
    """
    started = time.perf_counter()
    _check(
        isinstance(jump_moves, (int, np.integer))
        and not isinstance(jump_moves, bool)
        and jump_moves >= 1,
        "jump_moves",
        "an integer >= 1",
        jump_moves,
    )
    settings = _settings(
        draws,
        n_leapfrog,
        adapt_n_leapfrog,
        max_leapfrog,
        mass_matrix,
        target_acceptance,
        criterion,
        target_ess,
        resampling,
        resample_threshold,
        moves,
        max_moves,
        correlation_threshold,
        max_stages,
        kernel,
        independent_acceptance,
        jump_moves if jump_modes is not None else 0,
    )
    _check(
        isinstance(jump_population_weight, (int, float))
        and not isinstance(jump_population_weight, bool)
        and 0.0 <= jump_population_weight < 1.0,
        "jump_population_weight",
        "in [0, 1)",
        jump_population_weight,
    )
    _check(isinstance(runs, (int, np.integer)) and runs >= 1, "runs", "an integer >= 1", runs)
    _check(
        cores is None or (isinstance(cores, (int, np.integer)) and cores >= 1),
        "cores",
        "None or an integer >= 1",
        cores,
    )
    _check(
        time_limit is None
        or (isinstance(time_limit, (int, float)) and not isinstance(time_limit, bool))
        and time_limit > 0,
        "time_limit",
        "None or a positive number of seconds",
        time_limit,
    )
    _check(
        isinstance(change_moves, (bool, np.bool_)), "change_moves", "True or False", change_moves
    )
    _check(
        not change_moves or checkpoint is not None,
        "change_moves",
        "False without a checkpoint (it continues a checkpoint's runs with other moves)",
        change_moves,
    )
    deadline = None if time_limit is None else time.monotonic() + float(time_limit)
    check_executor(executor)
    local_model, factory = _model_and_factory(model)
    compile_options = {"mode": "NUMBA"} if compile_kwargs is None else dict(compile_kwargs)
    layout = ParticleLayout.of(local_model)
    trajectory_factory = trajectory_key = None
    if trajectory_model is not None:
        local_trajectory, trajectory_factory = _model_and_factory(trajectory_model)
        trajectory_key = factory_key(trajectory_factory)
        layout.require_same(local_trajectory, "sample_smc: trajectory_model")
    handle = TargetHandle(
        factory,
        factory_key(factory),
        tuple(sorted(compile_options.items())),
        trajectory_factory,
        trajectory_key,
    )
    points = None if jump_modes is None else jump_points(jump_modes, layout)
    digest = None if points is None else jump_digest(points, jump_population_weight)
    prior = PriorDraws(local_model)
    store = None if checkpoint is None else SmcCheckpoint(checkpoint)
    stored_entropy = None if store is None else store.stored_entropy()
    if random_seed is None and stored_entropy is not None:
        entropy = stored_entropy
    else:
        entropy = np.random.SeedSequence(random_seed).entropy
    if store is not None:
        store.bind(
            call_signature(
                layout,
                handle.compile_kwargs,
                settings,
                runs,
                entropy,
                trajectory_model=trajectory_model is not None,
                jumps=digest,
            ),
            change_moves=bool(change_moves),
        )
    progress = StageProgress(runs, settings.draws, enabled=progressbar)

    workers = cores if cores is not None else _available_cores()
    runner = None
    if executor is not None or workers > 1:
        # None: spawned local processes (owned: closed below); else the executor passed in
        known = getattr(executor, "_max_workers", None) if executor is not None else None
        runner = work_executor(executor, n_workers=int(known or workers))
    try:
        if runner is None:
            tempered_target(handle, local_model)  # compile once, here
            dispatch = functools.partial(_dispatch_inline, local_model)
            batches = 1
        else:
            dispatch = functools.partial(_dispatch_executor, runner)
            slots = runner.n_workers
            batches = max(1, -(-2 * slots // runs))

        jumps = None
        if points is not None:

            def evaluate_many(positions):
                # split as all runs' batches together: one call, every worker busy
                states = evaluate_positions(handle, dispatch, batches * runs, positions)
                return states.log_prior, states.log_likelihood, states.grad_log_likelihood

            # the prior's precision from draws of their own stream (a one-element spawn
            # key: no run's)
            prior_draws = jump_prior_draws(
                prior, np.random.SeedSequence(entropy, spawn_key=(2**32 - 1,))
            )
            jumps = jump_targets(points, evaluate_many, jump_population_weight, prior_draws)

        saved = [None if store is None else store.load(run) for run in range(runs)]
        starts = [
            None
            if saved[run] is not None
            else prior.draw(settings.draws, np.random.SeedSequence(entropy, spawn_key=(run, 0)))
            for run in range(runs)
        ]

        def one_run(run: int) -> RunResult:
            sampler = SmcRun(
                run,
                settings,
                handle,
                entropy,
                dispatch,
                batches,
                progress.stage,
                progress.move,
                jumps=jumps,
            )
            state = saved[run]
            if state is None:
                state = sampler.initial_state(starts[run])
                if store is not None:
                    store.save(run, state)
            else:
                if change_moves:
                    state = with_new_moves(state, sampler.evaluate, settings, checkpoint, run)
                else:
                    stored = state.states.take(np.arange(min(CHECKED_PARTICLES, settings.draws)))
                    check_model(checkpoint, run, stored, sampler.evaluate(stored.positions))
                moves = 0 if state.partial is None else state.partial.moves
                progress.resumed(run, state.stage, state.beta, state.seconds, moves)
            on_state = None if store is None else functools.partial(store.save, run)
            result = sampler.sample(state, deadline, on_state)
            if result.finished:
                progress.finished(run, result.log_evidence, len(result.stages), result.seconds)
            else:
                progress.stopped(
                    run, result.beta, len(result.stages), result.seconds, result.partial_moves
                )
            return result

        if runner is None or runs == 1:
            results = [one_run(r) for r in range(runs)]
        else:
            with ThreadPoolExecutor(max_workers=runs) as threads:
                results = list(threads.map(one_run, range(runs)))
    finally:
        if runner is not None:
            runner.close()  # shuts down only what work_executor made
    stopped = [r for r in results if not r.finished]
    if stopped:
        raise SmcTimeLimitReached(results, time_limit, checkpoint)
    return smc_inference_data(local_model, layout, results, settings, time.perf_counter() - started)
