"""The HMC mass matrix of an SMC stage, estimated from the particle population.

At each temperature the particles are (weighted) draws from the tempered target, so their
covariance ``Sigma`` is an estimate of the target's, and ``M = Sigma^{-1}`` is the mass
matrix that makes HMC's steps equally long in every direction (Stan's choice after its
warm-up; here no warm-up is needed). ``"diag"`` keeps the variances only, ``"dense"`` the
whole covariance. The dense estimate is shrunk towards its diagonal with the population's
effective sample size ``n``, ``(n / (n + 5)) Sigma + (5 / (n + 5)) diag(Sigma)`` (positive
definite when ``n`` is below the dimension); both add ``1e-10`` times the largest variance
(positive definite when particles coincide after resampling). Unlike Stan's regularisation
towards ``1e-3 I`` nothing here has an absolute scale: posterior widths of ``1e-4`` on a
log10 scale (PEtab) are kept as they are.

Momenta are drawn from ``N(0, M)``; the position moves along ``M^{-1} p = Sigma p``, and the
kinetic energy is ``p' Sigma p / 2``. With ``Sigma = L L'`` (Cholesky), ``p = L^{-T} z`` for
standard normal ``z``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

__all__ = ["MASS_MATRICES", "PopulationMetric", "population_covariance", "population_metric"]

MASS_MATRICES = ("diag", "dense")


@dataclass(frozen=True)
class PopulationMetric:
    """The inverse mass matrix ``Sigma`` of one stage.

    Attributes
    ----------
    kind : {"diag", "dense"}
    variances : numpy.ndarray or None
        ``diag(Sigma)`` for ``"diag"``.
    cholesky : numpy.ndarray or None
        The lower Cholesky factor ``L`` of ``Sigma`` for ``"dense"``.
    """

    kind: str
    variances: np.ndarray | None = None
    cholesky: np.ndarray | None = None

    def velocity(self, momentum: np.ndarray) -> np.ndarray:
        """``Sigma p``."""
        if self.kind == "diag":
            return self.variances * momentum
        return self.cholesky @ (self.cholesky.T @ momentum)

    def kinetic_energy(self, momentum: np.ndarray) -> float:
        """``p' Sigma p / 2``."""
        if self.kind == "diag":
            return 0.5 * float(np.dot(momentum, self.variances * momentum))
        half = self.cholesky.T @ momentum
        return 0.5 * float(np.dot(half, half))

    def draw_momentum(self, rng: np.random.Generator) -> np.ndarray:
        """A draw from ``N(0, Sigma^{-1})``."""
        z = rng.standard_normal(self.size)
        if self.kind == "diag":
            return z / np.sqrt(self.variances)
        return solve_triangular(self.cholesky, z, lower=True, trans="T")

    def squared_distance(self, delta: np.ndarray) -> float:
        """``delta' Sigma^{-1} delta``: a displacement's squared length in the population's
        standard deviations."""
        if self.kind == "diag":
            return float(np.dot(delta, delta / self.variances))
        z = solve_triangular(self.cholesky, delta, lower=True)
        return float(np.dot(z, z))

    @property
    def size(self) -> int:
        """The dimension."""
        return len(self.variances) if self.kind == "diag" else self.cholesky.shape[0]


def population_covariance(positions: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The particles' weighted covariance, unbiased, shrunk towards its diagonal by
    ``n / (n + 5)`` (``n`` the weights' effective sample size) and regularised, as the
    dense :func:`population_metric` uses it.

    Parameters
    ----------
    positions : numpy.ndarray
        ``(N, d)`` particles in the unconstrained coordinates.
    weights : numpy.ndarray
        ``(N,)`` non-negative weights (any normalisation).
    """
    variances, centred, w, unbiased, floor = _weighted_moments(positions, weights)
    n = 1.0 / float(np.sum(w**2))
    covariance = unbiased * ((centred * w[:, None]).T @ centred)
    shrink = n / (n + 5.0)
    covariance = shrink * covariance + (1.0 - shrink) * np.diag(variances)
    return 0.5 * (covariance + covariance.T) + floor * np.eye(centred.shape[1])


def _weighted_moments(positions, weights):
    """``(variances, centred positions, normalised weights, unbiasing factor, floor)``."""
    positions = np.asarray(positions, dtype=float)
    w = np.asarray(weights, dtype=float)
    w = w / w.sum()
    centred = positions - w @ positions
    # the unbiased weighted estimate (N / (N - 1) for equal weights)
    unbiased = 1.0 / max(1.0 - float(np.sum(w**2)), 1e-12)
    variances = unbiased * (w @ centred**2)
    floor = 1e-10 * max(float(np.max(variances)), 1e-300)
    return variances, centred, w, unbiased, floor


def population_metric(positions: np.ndarray, weights: np.ndarray, kind: str) -> PopulationMetric:
    """The regularised weighted covariance of the particles as a :class:`PopulationMetric`:
    its diagonal (``kind="diag"``) or :func:`population_covariance` (``"dense"``); ``positions``
    and ``weights`` as there."""
    if kind not in MASS_MATRICES:
        raise ValueError(f"mass_matrix must be one of {MASS_MATRICES}; got {kind!r}")
    if kind == "diag":
        variances, _, _, _, floor = _weighted_moments(positions, weights)
        return PopulationMetric("diag", variances=variances + floor)
    covariance = population_covariance(positions, weights)
    return PopulationMetric("dense", cholesky=np.linalg.cholesky(covariance))
