"""The mutation kernel of tempered SMC: one Hamiltonian Monte Carlo move of one particle.

The move leaves the tempered target ``log prior + beta log likelihood`` invariant: a momentum
is drawn from ``N(0, M)`` (the stage's population metric,
:mod:`pymc_odesens.inference.smc_mass_matrix`), ``n_leapfrog`` leapfrog steps of size
``step_size * U(0.8, 1.2)`` (the jitter keeps a fixed number of steps from hitting a period
of the dynamics) follow the exact gradient, and the end point is accepted with probability
``min(1, exp(H_start - H_end))``.

With ``trajectory`` (:meth:`~pymc_odesens.inference.smc_target.TemperedTarget.trajectory`:
a trajectory model's terms, for instance the ODE solved at looser tolerances), the steps
inside the trajectory evaluate it instead of ``evaluate``; the end point is evaluated by
``evaluate``, whose log-density (the model's own) decides the acceptance and whose gradient
is the same function as ``trajectory``'s. The particle's stored gradient is then the
trajectory model's too, so every leapfrog update uses one deterministic function of the
position: the trajectory is reversible and preserves volume, and the move leaves the
model's tempered target invariant (:mod:`~pymc_odesens.inference.smc_target`).

A point where the log-density or its gradient is not finite ends the trajectory and the
proposal is rejected: this is what a failed ODE solve gives (the model's failure potential
is ``-inf``, :func:`pymc_odesens.ode_solution`), and the move counts it as a failed
evaluation. The particle stays where it was, with its finite log-density: a failure is
never a NaN weight. An energy error above ``max_energy_error``, at the end or at any point
of the trajectory, counts as a divergence: the trajectory stops there and is rejected (as it
would be with probability ``1 - exp(-1000)`` anyway), so a trajectory that runs away does
not go on to parameters where each solve is expensive.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pymc_odesens.inference.smc_mass_matrix import PopulationMetric
from pymc_odesens.inference.smc_target import Evaluation

__all__ = ["MoveOutcome", "hmc_move", "STEP_SIZE_JITTER"]

STEP_SIZE_JITTER = 0.2
"""Each move's step size is ``step_size * U(1 - STEP_SIZE_JITTER, 1 + STEP_SIZE_JITTER)``."""


@dataclass(frozen=True)
class MoveOutcome:
    """Where one particle is after one move.

    Attributes
    ----------
    position : numpy.ndarray
    evaluation : Evaluation
        The prior and likelihood terms there.
    acceptance : float
        ``min(1, exp(H_start - H_end))`` (0 for a failed or divergent trajectory).
    accepted : bool
    failed : bool
        The trajectory reached a point where the log-density or its gradient is not finite.
    divergent : bool
        The energy error exceeded ``max_energy_error``.
    gradient_evaluations : int
    """

    position: np.ndarray
    evaluation: Evaluation
    acceptance: float
    accepted: bool
    failed: bool
    divergent: bool
    gradient_evaluations: int


def hmc_move(
    evaluate: Callable[[np.ndarray], Evaluation],
    position: np.ndarray,
    evaluation: Evaluation,
    beta: float,
    metric: PopulationMetric,
    step_size: float,
    n_leapfrog: int,
    rng: np.random.Generator,
    max_energy_error: float = 1000.0,
    trajectory: Callable[[np.ndarray], Evaluation] | None = None,
) -> MoveOutcome:
    """One HMC move of a particle at inverse temperature ``beta`` (module docstring).

    Parameters
    ----------
    evaluate : callable
        ``x -> Evaluation`` (:meth:`TemperedTarget.evaluate`).
    position : numpy.ndarray
        The particle (unconstrained coordinates).
    evaluation : Evaluation
        The terms at ``position`` (finite).
    beta : float
    metric : PopulationMetric
    step_size : float
    n_leapfrog : int
    rng : numpy.random.Generator
        The particle's own stream (the move is reproducible from it alone).
    max_energy_error : float
    trajectory : callable, optional
        ``x -> Evaluation`` at the steps before the last (module docstring); default
        ``evaluate``. Its gradient must be ``evaluate``'s.
    """
    inner = evaluate if trajectory is None else trajectory
    momentum = metric.draw_momentum(rng)
    epsilon = step_size * rng.uniform(1.0 - STEP_SIZE_JITTER, 1.0 + STEP_SIZE_JITTER)
    log_u = np.log(rng.uniform())
    log_density, gradient = evaluation.tempered(beta)
    start_energy = -log_density + metric.kinetic_energy(momentum)
    x = np.array(position, dtype=float)
    p = momentum + 0.5 * epsilon * gradient
    current = evaluation
    for step in range(n_leapfrog):
        x = x + epsilon * metric.velocity(p)
        current = inner(x) if step < n_leapfrog - 1 else evaluate(x)
        if not current.finite:
            return _stay(position, evaluation, failed=True, evaluations=step + 1)
        log_density, gradient = current.tempered(beta)
        if step < n_leapfrog - 1:
            # the energy error at this point (momentum a half step on): a trajectory that
            # runs away stops here instead of going on to parameters where a solve takes
            # its max_num_steps before it fails
            energy = -log_density + metric.kinetic_energy(p + 0.5 * epsilon * gradient)
            if energy - start_energy > max_energy_error:
                return _stay(position, evaluation, divergent=True, evaluations=step + 1)
        p = p + (epsilon if step < n_leapfrog - 1 else 0.5 * epsilon) * gradient
    log_ratio = start_energy - (-log_density + metric.kinetic_energy(p))
    if not np.isfinite(log_ratio):
        return _stay(position, evaluation, failed=True, evaluations=n_leapfrog)
    if -log_ratio > max_energy_error:
        return _stay(position, evaluation, divergent=True, evaluations=n_leapfrog)
    acceptance = float(min(1.0, np.exp(log_ratio)))
    if log_u < log_ratio:
        return MoveOutcome(x, current, acceptance, True, False, False, n_leapfrog)
    return MoveOutcome(
        np.array(position, dtype=float), evaluation, acceptance, False, False, False, n_leapfrog
    )


def _stay(position, evaluation, *, failed=False, divergent=False, evaluations=0) -> MoveOutcome:
    return MoveOutcome(
        np.array(position, dtype=float), evaluation, 0.0, False, failed, divergent, evaluations
    )
