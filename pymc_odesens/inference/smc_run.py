"""One run of tempered SMC: from draws of the prior to the posterior, stage by stage.

Each stage (:meth:`SmcRun.stage`):

1. the next inverse temperature ``beta'`` (:func:`~pymc_odesens.inference.smc_tempering.
   next_temperature`), the particles reweighted by ``exp((beta' - beta) log L)`` and the log
   evidence increment added;
2. resampling (:mod:`~pymc_odesens.inference.smc_resampling`) when the effective sample
   size fell below ``resample_threshold * N``, and always at ``beta' = 1`` (the final
   particles are equally weighted);
3. the mass matrix from the population (:mod:`~pymc_odesens.inference.smc_mass_matrix`);
4. HMC moves of every particle (:mod:`~pymc_odesens.inference.smc_hmc`), in batches sent to
   the workers; after each move the step size follows the population's mean acceptance
   rate, ``step *= exp(mean acceptance - target_acceptance)``, and with
   ``adapt_n_leapfrog`` the mean number of leapfrog steps follows the particles' jumps
   (:mod:`~pymc_odesens.inference.smc_trajectory`); with ``moves=None`` the moves
   go on until the largest correlation over the coordinates between the particles at the
   start of the stage and now is below ``correlation_threshold``, or below what that
   correlation reaches from noise alone with the particles at hand when that is higher
   (:mod:`~pymc_odesens.inference.smc_move_stopping`), at most ``max_moves``.

The run's random numbers come from ``SeedSequence(entropy, spawn_key=(run, ...))``: the
prior draws ``(run, 0)``, the resampling of stage ``t`` ``(run, t, 0)``, the moves
(:mod:`~pymc_odesens.inference.smc_work`) ``(run, t, 1 + m, particle)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

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

__all__ = ["SmcSettings", "StageRecord", "RunResult", "SmcRun"]


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


@dataclass
class RunResult:
    """The final particles of a run, its log evidence and its stages."""

    run: int
    states: ParticleStates
    log_evidence: float
    stages: list[StageRecord] = field(default_factory=list)
    prior_failures: int = 0
    seconds: float = 0.0


Dispatch = Callable[[Callable, list], list]
"""``dispatch(function, units)``: ``[function(unit) for unit in units]``, maybe elsewhere."""


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
    ) -> None:
        self.run = run
        self.settings = settings
        self.handle = handle
        self.entropy = entropy
        self.dispatch = dispatch
        self.batches = max(1, min(int(batches), settings.draws))
        self.on_stage = on_stage

    def _split(self, n: int) -> list[np.ndarray]:
        return [b for b in np.array_split(np.arange(n), self.batches) if len(b)]

    def evaluate(self, positions: np.ndarray) -> ParticleStates:
        parts = self._split(len(positions))
        units = [EvaluationBatch(self.handle, positions[p]) for p in parts]
        results = self.dispatch(run_evaluation_batch, units)
        d = positions.shape[1]
        states = ParticleStates(
            np.array(positions, dtype=float),
            np.empty(len(positions)),
            np.empty(len(positions)),
            np.empty((len(positions), d)),
            np.empty((len(positions), d)),
        )
        for p, result in zip(parts, results):
            states.put(p, result)
        return states

    def sample(self, positions: np.ndarray) -> RunResult:
        """Run from the prior draws ``positions`` ``(N, d)`` to ``beta = 1``.

        Raises
        ------
        RuntimeError
            ``beta`` has not reached 1 after ``max_stages`` stages.
        """
        settings = self.settings
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
        log_weights = np.full(n, -np.log(n))
        beta, log_evidence = 0.0, 0.0
        step_size = float(d) ** -0.25
        n_leapfrog = settings.n_leapfrog
        result = RunResult(self.run, states, 0.0)
        result.prior_failures = int(np.count_nonzero(~np.isfinite(states.log_likelihood)))
        for stage in range(1, settings.max_stages + 1):
            t0 = time.perf_counter()
            new_beta = next_temperature(
                beta, states.log_likelihood, log_weights, settings.target_ess, settings.criterion
            )
            log_weights, increment = reweight(log_weights, states.log_likelihood, new_beta - beta)
            beta = new_beta
            log_evidence += increment
            ess = effective_sample_size(log_weights)
            resampled = beta >= 1.0 or ess < settings.resample_threshold * n
            if resampled:
                rng = particle_rng(self.entropy, (self.run, stage, 0))
                ancestors = resample(settings.resampling, np.exp(log_weights), rng)
                states = states.take(ancestors)
                log_weights = np.full(n, -np.log(n))
            weights = np.exp(log_weights)
            metric = population_metric(states.positions, weights, settings.mass_matrix)
            start = states.positions.copy()
            threshold = stopping_threshold(
                settings.correlation_threshold, effective_sample_size(log_weights), d
            )
            totals = {"failed": 0, "divergent": 0, "gradients": 0}
            acceptances, correlation, moves = [], 1.0, 0
            limit = settings.moves if settings.moves is not None else settings.max_moves
            for move in range(limit):
                results = self._move(states, beta, metric, step_size, n_leapfrog, stage, move)
                acceptance = float(weights @ results.acceptance / weights.sum())
                acceptances.append(acceptance)
                totals["failed"] += int(results.failed.sum())
                totals["divergent"] += int(results.divergent.sum())
                totals["gradients"] += int(results.gradient_evaluations.sum())
                states = results.states
                step_size *= float(np.exp(acceptance - settings.target_acceptance))
                if settings.adapt_n_leapfrog and acceptance >= 0.5 * settings.target_acceptance:
                    n_leapfrog = next_leapfrog_mean(
                        results.leapfrog_steps,
                        results.squared_jumps,
                        results.gradient_evaluations,
                        n_leapfrog,
                        settings.max_leapfrog,
                    )
                moves = move + 1
                correlation = max_correlation(start, states.positions, weights)
                if settings.moves is None and correlation < threshold:
                    break
            record = StageRecord(
                beta=beta,
                ess=ess,
                resampled=bool(resampled),
                log_evidence_increment=increment,
                acceptance_rate=float(np.mean(acceptances)) if acceptances else float("nan"),
                step_size=step_size,
                n_leapfrog=n_leapfrog,
                moves=moves,
                correlation=correlation,
                stopping_threshold=threshold,
                failed_evaluations=totals["failed"],
                divergences=totals["divergent"],
                gradient_evaluations=totals["gradients"],
                seconds=time.perf_counter() - t0,
            )
            result.stages.append(record)
            if self.on_stage is not None:
                self.on_stage(self.run, stage, record)
            if beta >= 1.0:
                result.states = states
                result.log_evidence = log_evidence
                result.seconds = time.perf_counter() - started
                return result
        raise RuntimeError(
            f"sample_smc: run {self.run} reached max_stages={settings.max_stages} at beta = "
            f"{beta:.3g}; raise max_stages, or lower target_ess (fewer, longer temperature "
            "steps)"
        )

    def _move(
        self, states: ParticleStates, beta, metric, step_size, n_leapfrog, stage, move
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
