"""Independent Metropolis-Hastings moves of tempered SMC, for the hot stages.

At the first stages of a run ``beta`` is tiny (on Fujita_SciSignal2010 the first was 3e-12
to 8e-11: the prior's log-likelihoods span ten decades) and the tempered target is close to
the prior, which the particles already represent. An HMC move there costs ``n_leapfrog``
gradients per particle at parameters where the solves are slowest. An independent move
costs one: the proposal is a draw from ``N(m, S)``, the particles' weighted mean and
covariance (:func:`~pymc_odesens.inference.smc_mass_matrix.population_covariance`), as PyMC's
``IMH`` kernel proposes, and it is accepted with probability

    min(1, exp(log pi_beta(x') - log pi_beta(x) + log q(x) - log q(x'))),

``pi_beta = prior * likelihood^beta`` on the unconstrained coordinates and ``q`` the
proposal's density, so the move leaves the tempered target invariant whatever ``m`` and
``S`` are. A proposal whose solve fails (log-likelihood ``-inf``) is rejected and counted.
The acceptance falls as the target narrows; ``sample_smc(kernel="auto")`` then takes HMC
moves (:mod:`~pymc_odesens.inference.smc_run`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from pymc_odesens.inference.smc_hmc import MoveOutcome
from pymc_odesens.inference.smc_mass_matrix import population_covariance
from pymc_odesens.inference.smc_target import Evaluation

__all__ = ["PopulationGaussian", "independent_move"]


@dataclass(frozen=True)
class PopulationGaussian:
    """The proposal ``N(mean, L L')`` of the independent moves.

    Attributes
    ----------
    mean : numpy.ndarray
        ``(d,)``.
    cholesky : numpy.ndarray
        ``(d, d)`` lower-triangular ``L``.
    """

    mean: np.ndarray
    cholesky: np.ndarray

    @classmethod
    def of(cls, positions: np.ndarray, weights: np.ndarray) -> PopulationGaussian:
        """The particles' weighted mean and regularised covariance (``positions`` ``(N, d)``,
        ``weights`` ``(N,)``, any normalisation)."""
        w = np.asarray(weights, dtype=float)
        mean = (w / w.sum()) @ np.asarray(positions, dtype=float)
        covariance = population_covariance(positions, weights)
        return cls(mean, np.linalg.cholesky(covariance))

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One draw."""
        return self.mean + self.cholesky @ rng.standard_normal(len(self.mean))

    def log_density(self, x: np.ndarray) -> float:
        """``log q(x)`` up to the constant the acceptance ratio cancels."""
        z = solve_triangular(self.cholesky, np.asarray(x, dtype=float) - self.mean, lower=True)
        return -0.5 * float(np.dot(z, z))


def independent_move(
    evaluate: Callable[[np.ndarray], Evaluation],
    position: np.ndarray,
    evaluation: Evaluation,
    beta: float,
    proposal,
    rng: np.random.Generator,
) -> MoveOutcome:
    """One independent Metropolis-Hastings move of one particle (module docstring).

    ``proposal``: a :class:`PopulationGaussian`, or anything with ``draw(rng)`` and
    ``log_density(x)`` (up to a constant common to ``x``: the jumps' normalised
    :class:`~pymc_odesens.inference.smc_jumps.GaussianMixture`).

    ``acceptance`` is the acceptance probability (0 for a failed proposal); one uniform draw
    follows the proposal's normal draws in ``rng``.
    """
    proposed = proposal.draw(rng)
    u = rng.uniform()
    found = evaluate(proposed)
    target_now = evaluation.log_prior + beta * evaluation.log_likelihood
    finite = math.isfinite(found.log_prior) and math.isfinite(found.log_likelihood)
    if finite:
        finite = bool(
            np.all(np.isfinite(found.grad_log_prior))
            and np.all(np.isfinite(found.grad_log_likelihood))
        )
    if not finite:
        return MoveOutcome(position, evaluation, 0.0, False, True, False, 1)
    log_ratio = (
        found.log_prior
        + beta * found.log_likelihood
        - target_now
        + proposal.log_density(position)
        - proposal.log_density(proposed)
    )
    acceptance = 1.0 if log_ratio >= 0.0 else math.exp(log_ratio)
    if u == 0.0 or math.log(u) < log_ratio:
        return MoveOutcome(proposed, found, acceptance, True, False, False, 1)
    return MoveOutcome(position, evaluation, acceptance, False, False, False, 1)
