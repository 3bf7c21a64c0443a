"""The work units of tempered SMC: a batch of one run's particles to evaluate or to move.

A unit carries what a worker needs and nothing compiled: the model's factory
(:mod:`pymc_odesens.inference.model_source`: a PEtab problem's YAML file and options, a
``pymc.Model`` pickled by cloudpickle, or the user's callable), the particles, and for a
move the temperature, the stage's metric and step size and the seeds. A worker (this
process, a local process or a machine of a distributed executor) builds the model and
compiles its :class:`~pymc_odesens.inference.smc_target.TemperedTarget` once (a
per-process cache keyed by the factory's digest and the compile options); the kernels load
from the disk cache.

Particle ``i`` of move ``m`` at stage ``t`` of run ``r`` draws its random numbers from
``SeedSequence(entropy, spawn_key=(r, t, 1 + m, i))``: a particle's move depends on nothing
but its own state and stream, so the result is the same, bit for bit, however the particles
are split into batches and whichever worker runs them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pymc_odesens.inference.smc_hmc import hmc_move
from pymc_odesens.inference.smc_independent import PopulationGaussian, independent_move
from pymc_odesens.inference.smc_jumps import GaussianMixture
from pymc_odesens.inference.smc_mass_matrix import PopulationMetric
from pymc_odesens.inference.smc_target import Evaluation, TemperedTarget
from pymc_odesens.inference.smc_trajectory import draw_leapfrog_steps

__all__ = [
    "TargetHandle",
    "ParticleStates",
    "EvaluationBatch",
    "MoveBatch",
    "MoveResults",
    "run_evaluation_batch",
    "run_move_batch",
    "particle_rng",
]


@dataclass(frozen=True)
class TargetHandle:
    """How a worker gets the tempered target: the factory, its digest, the compile options,
    and the trajectory model's factory and digest when there is one
    (:class:`~pymc_odesens.inference.smc_target.TemperedTarget`)."""

    factory: Callable
    key: str
    compile_kwargs: tuple = field(default=())
    trajectory_factory: Callable | None = None
    trajectory_key: str | None = None


# per process: compiled targets by (factory digest, compile options), shared by the threads
# of a thread-pool executor (each calls its own copy of the compiled function); the most
# recently used few are kept (a process that samples many models does not keep them all)
_TARGETS: OrderedDict[tuple, TemperedTarget] = OrderedDict()
_TARGETS_KEPT = 4
_TARGETS_LOCK = threading.Lock()


def tempered_target(handle: TargetHandle, model=None) -> TemperedTarget:
    """This process's compiled target for ``handle`` (built from ``model`` when given, else
    from the factory, on first use)."""
    key = (handle.key, handle.compile_kwargs, handle.trajectory_key)
    with _TARGETS_LOCK:
        target = _TARGETS.get(key)
        if target is None:
            built = model if model is not None else handle.factory()
            trajectory = None
            if handle.trajectory_factory is not None:
                trajectory = handle.trajectory_factory()
            target = TemperedTarget(built, dict(handle.compile_kwargs), trajectory)
            _TARGETS[key] = target
            while len(_TARGETS) > _TARGETS_KEPT:
                _TARGETS.popitem(last=False)
        _TARGETS.move_to_end(key)
    return target


def particle_rng(entropy: int, spawn_key: tuple) -> np.random.Generator:
    """The generator of one particle's stream (module docstring)."""
    return np.random.Generator(
        np.random.PCG64(np.random.SeedSequence(entropy, spawn_key=spawn_key))
    )


@dataclass
class ParticleStates:
    """Particles with their prior and likelihood terms and gradients (rows are particles)."""

    positions: np.ndarray
    log_prior: np.ndarray
    log_likelihood: np.ndarray
    grad_log_prior: np.ndarray
    grad_log_likelihood: np.ndarray

    @classmethod
    def of(cls, positions: np.ndarray, evaluations: list[Evaluation]) -> ParticleStates:
        n, d = positions.shape
        return cls(
            np.array(positions, dtype=float),
            np.array([e.log_prior for e in evaluations], dtype=float).reshape(n),
            np.array([e.log_likelihood for e in evaluations], dtype=float).reshape(n),
            np.array([e.grad_log_prior for e in evaluations], dtype=float).reshape(n, d),
            np.array([e.grad_log_likelihood for e in evaluations], dtype=float).reshape(n, d),
        )

    def __len__(self) -> int:
        return len(self.log_prior)

    def evaluation(self, i: int) -> Evaluation:
        return Evaluation(
            float(self.log_prior[i]),
            float(self.log_likelihood[i]),
            self.grad_log_prior[i],
            self.grad_log_likelihood[i],
        )

    def take(self, indices: np.ndarray) -> ParticleStates:
        """The particles ``indices`` (copies)."""
        return ParticleStates(
            self.positions[indices].copy(),
            self.log_prior[indices].copy(),
            self.log_likelihood[indices].copy(),
            self.grad_log_prior[indices].copy(),
            self.grad_log_likelihood[indices].copy(),
        )

    def put(self, indices: np.ndarray, other: ParticleStates) -> None:
        """Write ``other``'s particles into rows ``indices``."""
        self.positions[indices] = other.positions
        self.log_prior[indices] = other.log_prior
        self.log_likelihood[indices] = other.log_likelihood
        self.grad_log_prior[indices] = other.grad_log_prior
        self.grad_log_likelihood[indices] = other.grad_log_likelihood

    def finite(self) -> np.ndarray:
        """Per particle: both terms finite."""
        return np.isfinite(self.log_prior) & np.isfinite(self.log_likelihood)


@dataclass(frozen=True)
class EvaluationBatch:
    """Evaluate the target at ``positions`` (rows)."""

    handle: TargetHandle
    positions: np.ndarray


@dataclass(frozen=True)
class MoveBatch:
    """Move the particles ``states`` (rows ``indices`` of their run) once at ``beta``."""

    handle: TargetHandle
    states: ParticleStates
    indices: np.ndarray
    beta: float
    metric: PopulationMetric
    step_size: float
    n_leapfrog: int
    entropy: int
    spawn_prefix: tuple
    random_steps: bool = False
    """Each particle's number of steps drawn with mean ``n_leapfrog``
    (:mod:`~pymc_odesens.inference.smc_trajectory`), else ``n_leapfrog`` for all."""
    proposal: PopulationGaussian | GaussianMixture | None = None
    """Given: an independent Metropolis-Hastings move with this proposal
    (:mod:`~pymc_odesens.inference.smc_independent`, or the jump moves' mixture of
    :mod:`~pymc_odesens.inference.smc_jumps`) instead of an HMC move."""


@dataclass
class MoveResults:
    """The moved particles and, per particle, the move's statistics."""

    states: ParticleStates
    acceptance: np.ndarray
    failed: np.ndarray
    divergent: np.ndarray
    gradient_evaluations: np.ndarray
    leapfrog_steps: np.ndarray
    """The number of leapfrog steps each particle's trajectory was given (0: not moved)."""
    squared_jumps: np.ndarray
    """Each particle's squared jump in the population's standard deviations."""


def run_evaluation_batch(batch: EvaluationBatch, model=None) -> ParticleStates:
    """The states of the particles of ``batch`` (``model``: this process's model, if any)."""
    target = tempered_target(batch.handle, model)
    positions = np.asarray(batch.positions, dtype=float)
    return ParticleStates.of(positions, [target.evaluate(x) for x in positions])


def run_move_batch(batch: MoveBatch, model=None) -> MoveResults:
    """One move of each particle of ``batch``; a particle whose terms are not finite (weight
    0, never resampled) stays where it is."""
    target = tempered_target(batch.handle, model)
    states = batch.states
    n = len(states)
    positions, evaluations = [], []
    acceptance = np.zeros(n)
    failed = np.zeros(n, dtype=np.int64)
    divergent = np.zeros(n, dtype=bool)
    gradients = np.zeros(n, dtype=np.int64)
    steps = np.zeros(n, dtype=np.int64)
    jumps = np.zeros(n)
    alive = states.finite()
    for row in range(n):
        if not alive[row]:
            positions.append(states.positions[row].copy())
            evaluations.append(states.evaluation(row))
            continue
        rng = particle_rng(batch.entropy, (*batch.spawn_prefix, int(batch.indices[row])))
        if batch.proposal is not None:
            outcome = independent_move(
                target.evaluate,
                states.positions[row],
                states.evaluation(row),
                batch.beta,
                batch.proposal,
                rng,
            )
        else:
            n_leapfrog = (
                draw_leapfrog_steps(batch.n_leapfrog, rng)
                if batch.random_steps
                else batch.n_leapfrog
            )
            outcome = hmc_move(
                target.evaluate,
                states.positions[row],
                states.evaluation(row),
                batch.beta,
                batch.metric,
                batch.step_size,
                n_leapfrog,
                rng,
                trajectory=target.trajectory if target.has_trajectory_model else None,
            )
            steps[row] = n_leapfrog
        if outcome.accepted:
            jumps[row] = batch.metric.squared_distance(outcome.position - states.positions[row])
        positions.append(outcome.position)
        evaluations.append(outcome.evaluation)
        acceptance[row] = outcome.acceptance
        failed[row] = int(outcome.failed)
        divergent[row] = outcome.divergent
        gradients[row] = outcome.gradient_evaluations
    d = states.positions.shape[1]
    moved = ParticleStates.of(np.array(positions).reshape(n, d), evaluations)
    return MoveResults(moved, acceptance, failed, divergent, gradients, steps, jumps)
