"""One run of tempered SMC: from draws of the prior to the posterior, stage by stage.

Each stage (:meth:`SmcRun.stage`):

1. the next inverse temperature ``beta'`` (:func:`~pymc_odesens.inference.smc_tempering.
   next_temperature`), the particles reweighted by ``exp((beta' - beta) log L)`` and the log
   evidence increment added;
2. resampling (:mod:`~pymc_odesens.inference.smc_resampling`) when the effective sample
   size fell below ``resample_threshold * N``, and always at ``beta' = 1`` (the final
   particles are equally weighted);
3. the mass matrix from the population (:mod:`~pymc_odesens.inference.smc_mass_matrix`);
4. moves of every particle, in batches sent to the workers: with ``kernel="auto"``
   independent Metropolis-Hastings moves from a Gaussian fitted to the particles
   (:mod:`~pymc_odesens.inference.smc_independent`, one evaluation each) from the first
   stage on, as long as the previous stage accepted them at ``independent_acceptance`` or
   more, then (and with ``kernel="hmc"`` from the start) HMC moves
   (:mod:`~pymc_odesens.inference.smc_hmc`); after each HMC move the step size follows
   the population's mean acceptance rate,
   ``step *= exp(mean acceptance - target_acceptance)``, and with
   ``adapt_n_leapfrog`` the mean number of leapfrog steps follows the particles' jumps
   (:mod:`~pymc_odesens.inference.smc_trajectory`); with ``moves=None`` the moves
   go on until the largest correlation over the coordinates between the particles at the
   start of the stage and now is below ``correlation_threshold``, or below what that
   correlation reaches from noise alone with the particles at hand when that is higher
   (:mod:`~pymc_odesens.inference.smc_move_stopping`), at most ``max_moves``.

A deadline (``sample_smc``'s ``time_limit``) is looked at before each stage and after each
move: a stage stopped between two moves leaves a :class:`StagePartial` in the run's state
(the moves done, the particles where they are, the step size and the statistics so far).
Steps 1-3 depend only on the state before the stage and the stage's number, so a run
continued from that state redoes them, gets the same ``beta``, resampling and mass matrix,
and goes on with the next move.

The run's random numbers come from ``SeedSequence(entropy, spawn_key=(run, ...))``: the
prior draws ``(run, 0)``, the resampling of stage ``t`` ``(run, t, 0)``, the moves
(:mod:`~pymc_odesens.inference.smc_work`) ``(run, t, 1 + m, particle)``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pymc_odesens.inference.smc_independent import PopulationGaussian
from pymc_odesens.inference.smc_jumps import GaussianMixture, JumpTargets
from pymc_odesens.inference.smc_mass_matrix import population_metric
from pymc_odesens.inference.smc_move_stopping import max_correlation, stopping_threshold
from pymc_odesens.inference.smc_resampling import resample
from pymc_odesens.inference.smc_tempering import (
    effective_sample_size,
    next_temperature,
    reweight,
)
from pymc_odesens.inference.smc_trajectory import next_leapfrog_mean
from pymc_odesens.inference.smc_work import (
    EvaluationBatch,
    MoveBatch,
    MoveResults,
    ParticleStates,
    TargetHandle,
    particle_rng,
    run_evaluation_batch,
    run_move_batch,
)

__all__ = [
    "SmcSettings",
    "StageRecord",
    "StagePartial",
    "RunResult",
    "RunState",
    "SmcRun",
    "evaluate_positions",
    "split_rows",
]


def _now() -> float:
    """The clock the deadline is read from (``time.monotonic``)."""
    return time.monotonic()


@dataclass(frozen=True)
class SmcSettings:
    """The options of :func:`pymc_odesens.inference.sample_smc` that a run uses."""

    draws: int
    n_leapfrog: int
    adapt_n_leapfrog: bool
    max_leapfrog: int
    mass_matrix: str
    target_acceptance: float
    criterion: str
    target_ess: float
    resampling: str
    resample_threshold: float
    moves: int | None
    max_moves: int
    correlation_threshold: float
    max_stages: int
    kernel: str = "auto"
    independent_acceptance: float = 0.3
    jump_moves: int = 0
    """Moves of each stage's start from the mixture at the jump targets
    (:mod:`~pymc_odesens.inference.smc_jumps`; 0: none)."""


@dataclass(frozen=True)
class StageRecord:
    """What one stage did (the ``sample_stats`` per stage)."""

    beta: float
    ess: float
    resampled: bool
    log_evidence_increment: float
    acceptance_rate: float
    step_size: float
    n_leapfrog: int
    moves: int
    correlation: float
    stopping_threshold: float
    failed_evaluations: int
    divergences: int
    gradient_evaluations: int
    seconds: float
    independent: bool = False
    """The stage's moves were independent Metropolis-Hastings moves (else HMC)."""
    jump_moves: int = 0
    """Moves from the mixture at the jump targets before the others (``moves`` counts
    both)."""
    jump_acceptance: float = float("nan")
    """Their mean acceptance probability."""
    jumped: int = 0
    """Particles those moves moved (accepted proposals)."""


@dataclass
class StagePartial:
    """Where a stage's moves are: the running totals of the move loop, and what a stage
    stopped between two moves by the deadline keeps.

    Attributes
    ----------
    moves : int
        Moves done.
    states : ParticleStates
        The particles after them.
    step_size : float
    n_leapfrog : int
        The step size and mean number of leapfrog steps of the next move.
    acceptances : list of float
        Each move's mean acceptance.
    failed, divergent, gradients : int
        The stage's failed evaluations, divergences and gradient evaluations so far.
    correlation : float
        The largest correlation after the last move.
    seconds : float
        The stage's wall time so far.
    """

    moves: int
    states: ParticleStates
    step_size: float
    n_leapfrog: int
    acceptances: list[float]
    failed: int
    divergent: int
    gradients: int
    correlation: float
    seconds: float
    jumped: int = 0
    """Accepted jump moves so far."""
    jump_moves: int = 0
    """The stage's jump moves (its first moves), fixed when it began."""


@dataclass
class RunResult:
    """The particles of a run where it ended, its log evidence and its stages (``beta``
    below 1: stopped by the time limit; ``partial_moves`` moves of the next stage done)."""

    run: int
    states: ParticleStates
    log_evidence: float
    stages: list[StageRecord] = field(default_factory=list)
    prior_failures: int = 0
    seconds: float = 0.0
    beta: float = 1.0
    partial_moves: int = 0

    @property
    def finished(self) -> bool:
        """Whether the run reached the posterior (``beta = 1``)."""
        return self.beta >= 1.0


@dataclass
class RunState:
    """A run between two stages: what the next stage starts from (and a checkpoint holds).

    Attributes
    ----------
    stage : int
        Stages done (0: the prior draws, evaluated).
    beta, log_evidence : float
    log_weights : numpy.ndarray
        ``(N,)``, normalised.
    states : ParticleStates
    step_size : float
    n_leapfrog : int
        The mean number of leapfrog steps of the next move.
    records : list of StageRecord
    prior_failures : int
    seconds : float
        The run's wall time so far (over every call that advanced it).
    partial : StagePartial or None
        Stage ``stage + 1``, stopped between two moves (None: the state is between stages;
        ``beta``, ``log_evidence``, ``log_weights`` and ``states`` are those before it).
    """

    stage: int
    beta: float
    log_evidence: float
    log_weights: np.ndarray
    states: ParticleStates
    step_size: float
    n_leapfrog: int
    records: list[StageRecord]
    prior_failures: int
    seconds: float
    partial: StagePartial | None = None


Dispatch = Callable[[Callable, list], list]
"""``dispatch(function, units)``: ``[function(unit) for unit in units]``, maybe elsewhere."""


def split_rows(n: int, batches: int) -> list[np.ndarray]:
    """Row indices ``0 .. n-1`` in at most ``batches`` non-empty, contiguous parts."""
    return [b for b in np.array_split(np.arange(n), max(1, batches)) if len(b)]


def evaluate_positions(
    handle: TargetHandle, dispatch: Dispatch, batches: int, positions: np.ndarray
) -> ParticleStates:
    """The states at ``positions`` ``(M, d)``, evaluated in ``batches`` units by
    ``dispatch`` (the particles of a run, or any other points of the target)."""
    parts = split_rows(len(positions), batches)
    results = dispatch(run_evaluation_batch, [EvaluationBatch(handle, positions[p]) for p in parts])
    m, d = positions.shape
    states = ParticleStates(
        np.array(positions, dtype=float),
        np.empty(m),
        np.empty(m),
        np.empty((m, d)),
        np.empty((m, d)),
    )
    for p, result in zip(parts, results):
        states.put(p, result)
    return states


class SmcRun:
    """One run (a "chain" of the output): its population and schedule.

    Parameters
    ----------
    run : int
        The run's index (its streams' first spawn key).
    settings : SmcSettings
    handle : TargetHandle
    entropy : int
        The root entropy of the call's seeds.
    dispatch : callable
        How units run (:data:`Dispatch`).
    batches : int
        How many units a population is split into.
    on_stage : callable, optional
        ``on_stage(run, stage, record)`` after each stage (the progress display).
    on_move : callable, optional
        ``on_move(run, stage, moves, acceptance, failed, seconds)`` after each move: the
        moves done in the stage, the last move's mean acceptance and failed evaluations,
        the stage's time so far (the progress display of slow stages).
    jumps : JumpTargets, optional
        The optima of the jump moves (``settings.jump_moves`` of them at each stage's
        start; :mod:`~pymc_odesens.inference.smc_jumps`).
    """

    def __init__(
        self,
        run: int,
        settings: SmcSettings,
        handle: TargetHandle,
        entropy: int,
        dispatch: Dispatch,
        batches: int,
        on_stage: Callable | None = None,
        on_move: Callable | None = None,
        jumps: JumpTargets | None = None,
    ) -> None:
        self.run = run
        self.settings = settings
        self.handle = handle
        self.entropy = entropy
        self.dispatch = dispatch
        self.batches = max(1, min(int(batches), settings.draws))
        self.on_stage = on_stage
        self.on_move = on_move
        self.jumps = jumps if settings.jump_moves > 0 else None

    def _split(self, n: int) -> list[np.ndarray]:
        return split_rows(n, self.batches)

    def evaluate(self, positions: np.ndarray) -> ParticleStates:
        return evaluate_positions(self.handle, self.dispatch, self.batches, positions)

    def initial_state(self, positions: np.ndarray) -> RunState:
        """The state before the first stage: the prior draws ``positions`` ``(N, d)``
        evaluated, equally weighted, at ``beta = 0``.

        Raises
        ------
        ValueError
            The prior's log-density is not finite at a draw.
        """
        started = time.perf_counter()
        states = self.evaluate(positions)
        bad_prior = ~np.isfinite(states.log_prior)
        if np.any(bad_prior):
            raise ValueError(
                f"sample_smc: the prior's log-density is {states.log_prior[bad_prior][0]} at a "
                "draw from the prior; the free variables' priors must have finite density "
                "where they draw"
            )
        n, d = positions.shape
        return RunState(
            stage=0,
            beta=0.0,
            log_evidence=0.0,
            log_weights=np.full(n, -np.log(n)),
            states=states,
            step_size=float(d) ** -0.25,
            n_leapfrog=self.settings.n_leapfrog,
            records=[],
            prior_failures=int(np.count_nonzero(~np.isfinite(states.log_likelihood))),
            seconds=time.perf_counter() - started,
        )

    def sample(
        self,
        state: RunState,
        deadline: float | None = None,
        on_state: Callable[[RunState], None] | None = None,
    ) -> RunResult:
        """Carry ``state`` (:meth:`initial_state`, or a checkpoint's) stage by stage to
        ``beta = 1``, or until ``deadline`` (``time.monotonic()``) passes: the run stops
        before the next stage, or after the current move with the stage's progress in
        ``state.partial``.

        ``on_state(state)`` after each stage and when the run stops in a stage (the
        checkpoint). The stages' and moves' random streams depend on their numbers only, so
        a run continued from a checkpoint's state ends with the same particles and evidence,
        bit for bit, as one that never stopped.

        Raises
        ------
        RuntimeError
            ``beta`` has not reached 1 after ``max_stages`` stages.
        """
        began = time.perf_counter() - state.seconds
        while state.beta < 1.0:
            if state.stage >= self.settings.max_stages:
                raise RuntimeError(
                    f"sample_smc: run {self.run} reached max_stages={self.settings.max_stages} "
                    f"at beta = {state.beta:.3g}; raise max_stages, or lower target_ess "
                    "(fewer, longer temperature steps)"
                )
            if deadline is not None and _now() >= deadline:
                break
            state = self._stage(state, deadline)
            state.seconds = time.perf_counter() - began
            if state.partial is not None:
                if on_state is not None:
                    on_state(state)
                break
            if self.on_stage is not None:
                self.on_stage(self.run, state.stage, state.records[-1])
            if on_state is not None:
                on_state(state)
        return RunResult(
            self.run,
            state.states,
            state.log_evidence,
            list(state.records),
            state.prior_failures,
            state.seconds,
            beta=state.beta,
            partial_moves=0 if state.partial is None else state.partial.moves,
        )

    def _stage(self, state: RunState, deadline: float | None = None) -> RunState:
        """One stage (module docstring) from ``state``, or its moves from where
        ``state.partial`` stopped; stopped after a move once ``deadline`` has passed (the
        returned state's ``partial``)."""
        settings = self.settings
        partial = state.partial
        t0 = time.perf_counter() - (0.0 if partial is None else partial.seconds)
        stage = state.stage + 1
        states, beta, log_weights = state.states, state.beta, state.log_weights
        step_size, n_leapfrog = state.step_size, state.n_leapfrog
        n, d = states.positions.shape
        new_beta = next_temperature(
            beta, states.log_likelihood, log_weights, settings.target_ess, settings.criterion
        )
        log_weights, increment = reweight(log_weights, states.log_likelihood, new_beta - beta)
        beta = new_beta
        log_evidence = state.log_evidence + increment
        ess = effective_sample_size(log_weights)
        resampled = beta >= 1.0 or ess < settings.resample_threshold * n
        if resampled:
            rng = particle_rng(self.entropy, (self.run, stage, 0))
            ancestors = resample(settings.resampling, np.exp(log_weights), rng)
            states = states.take(ancestors)
            log_weights = np.full(n, -np.log(n))
        weights = np.exp(log_weights)
        metric = population_metric(states.positions, weights, settings.mass_matrix)
        proposal = (
            PopulationGaussian.of(states.positions, weights)
            if self._independent_stage(state.records)
            else None
        )
        start = states.positions.copy()
        threshold = stopping_threshold(
            settings.correlation_threshold, effective_sample_size(log_weights), d
        )
        planned = 0 if self.jumps is None else settings.jump_moves
        done = (
            StagePartial(0, states, step_size, n_leapfrog, [], 0, 0, 0, 1.0, 0.0, 0, planned)
            if partial is None
            else dataclasses.replace(partial, acceptances=list(partial.acceptances))
        )
        # a stage continued from a checkpoint keeps the jump moves it began with (those
        # made, if this call has no jump targets)
        jump_moves = done.jump_moves if self.jumps is not None else min(done.jump_moves, done.moves)
        jump = (
            self.jumps.proposal(states.positions, weights, beta)
            if self.jumps is not None and done.moves < jump_moves
            else None
        )
        limit = jump_moves + (settings.moves if settings.moves is not None else settings.max_moves)
        for move in range(done.moves, limit):
            jumping = move < jump_moves and jump is not None
            results = self._move(
                done.states,
                beta,
                metric,
                done.step_size,
                done.n_leapfrog,
                stage,
                move,
                jump if jumping else proposal,
            )
            acceptance = float(weights @ results.acceptance / weights.sum())
            done.acceptances.append(acceptance)
            done.failed += int(results.failed.sum())
            done.divergent += int(results.divergent.sum())
            done.gradients += int(results.gradient_evaluations.sum())
            if jumping:
                moved = np.any(results.states.positions != done.states.positions, axis=1)
                done.jumped += int(np.count_nonzero(moved))
            done.states = results.states
            if proposal is None and not jumping:
                done.step_size *= float(np.exp(acceptance - settings.target_acceptance))
            if (
                proposal is None
                and not jumping
                and settings.adapt_n_leapfrog
                and acceptance >= 0.5 * settings.target_acceptance
            ):
                done.n_leapfrog = next_leapfrog_mean(
                    results.leapfrog_steps,
                    results.squared_jumps,
                    results.gradient_evaluations,
                    done.n_leapfrog,
                    settings.max_leapfrog,
                )
            done.moves = move + 1
            if self.on_move is not None:
                self.on_move(
                    self.run,
                    stage,
                    done.moves,
                    acceptance,
                    int(results.failed.sum()),
                    time.perf_counter() - t0,
                )
            done.correlation = max_correlation(start, done.states.positions, weights)
            if settings.moves is None and not jumping and done.correlation < threshold:
                break
            if done.moves < limit and deadline is not None and _now() >= deadline:
                done.seconds = time.perf_counter() - t0
                return dataclasses.replace(state, partial=done)
        record = StageRecord(
            beta=beta,
            ess=ess,
            resampled=bool(resampled),
            log_evidence_increment=increment,
            acceptance_rate=float(np.mean(done.acceptances[jump_moves:]))
            if done.acceptances[jump_moves:]
            else float("nan"),
            step_size=done.step_size,
            n_leapfrog=done.n_leapfrog,
            moves=done.moves,
            correlation=done.correlation,
            stopping_threshold=threshold,
            failed_evaluations=done.failed,
            divergences=done.divergent,
            gradient_evaluations=done.gradients,
            seconds=time.perf_counter() - t0,
            independent=proposal is not None,
            jump_moves=jump_moves,
            jump_acceptance=float(np.mean(done.acceptances[:jump_moves]))
            if jump_moves
            else float("nan"),
            jumped=done.jumped,
        )
        return RunState(
            stage=stage,
            beta=beta,
            log_evidence=log_evidence,
            log_weights=log_weights,
            states=done.states,
            step_size=done.step_size,
            n_leapfrog=done.n_leapfrog,
            records=[*state.records, record],
            prior_failures=state.prior_failures,
            seconds=state.seconds,
        )

    def _independent_stage(self, records: list[StageRecord]) -> bool:
        """Whether the next stage moves by independent Metropolis-Hastings: with
        ``kernel="auto"``, from the first stage on as long as the previous stage's
        independent moves were accepted at ``independent_acceptance`` or more."""
        if self.settings.kernel != "auto":
            return False
        if not records:
            return True
        last = records[-1]
        return last.independent and last.acceptance_rate >= self.settings.independent_acceptance

    def _move(
        self,
        states: ParticleStates,
        beta,
        metric,
        step_size,
        n_leapfrog,
        stage,
        move,
        proposal: PopulationGaussian | GaussianMixture | None = None,
    ) -> MoveResults:
        parts = self._split(len(states))
        units = [
            MoveBatch(
                self.handle,
                states.take(p),
                p,
                beta,
                metric,
                step_size,
                n_leapfrog,
                self.entropy,
                (self.run, stage, 1 + move),
                self.settings.adapt_n_leapfrog,
                proposal,
            )
            for p in parts
        ]
        results = self.dispatch(run_move_batch, units)
        n = len(states)
        merged = ParticleStates(
            states.positions.copy(),
            states.log_prior.copy(),
            states.log_likelihood.copy(),
            states.grad_log_prior.copy(),
            states.grad_log_likelihood.copy(),
        )
        acceptance = np.zeros(n)
        failed = np.zeros(n, dtype=np.int64)
        divergent = np.zeros(n, dtype=bool)
        gradients = np.zeros(n, dtype=np.int64)
        steps = np.zeros(n, dtype=np.int64)
        jumps = np.zeros(n)
        for p, r in zip(parts, results):
            merged.put(p, r.states)
            acceptance[p] = r.acceptance
            failed[p] = r.failed
            divergent[p] = r.divergent
            gradients[p] = r.gradient_evaluations
            steps[p] = r.leapfrog_steps
            jumps[p] = r.squared_jumps
        return MoveResults(merged, acceptance, failed, divergent, gradients, steps, jumps)
