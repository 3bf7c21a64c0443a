"""Jumps between known optima: independent Metropolis-Hastings moves of tempered SMC from a
mixture of Gaussians at given points (multistart optima) and the population's Gaussian.

A run of tempered SMC keeps only the optima its population holds when, at some small
``beta``, they separate: local moves (HMC) cannot reach an optimum the particles have
lost, and independent runs then disagree (Fujita_SciSignal2010: four runs, log evidences
683 log-units apart, one run holding the best optimum). Optima found by a multistart
(:func:`~pymc_odesens.inference.find_modes`) are where the posterior's mass may be, even
where the particles are not. So with ``sample_smc(jump_modes=...)``, each stage begins with
``jump_moves`` independent Metropolis-Hastings moves of every particle from the mixture

    q(x) = w N(x; m, S) + (1 - w) / K sum_k N(x; x_k, (beta H_k + P_0)^-1),

``m, S`` the particles' weighted mean and covariance
(:func:`~pymc_odesens.inference.smc_mass_matrix.population_covariance`), ``x_k`` the ``K``
given optima, ``H_k`` the positive semi-definite part of minus the log-likelihood's
Hessian at ``x_k`` (central differences of the exact gradient, computed once per call),
``P_0`` the prior's precision (the inverse covariance of prior draws, once per call) and
``w`` the ``population_weight``. A component is the Laplace approximation of the tempered
posterior ``p_0(x) L(x)^beta`` at the optimum, its prior taken as Gaussian: the tempered
likelihood's curvature where it has one, the prior's spread where it is tempered away
(small ``beta``).

Where the curvature along a coordinate is flat at the optimum (below 1 % of the prior's
precision), the Laplace approximation says nothing about where the mass is: an optimum on
a bound is reported a hair inside it (``logit(1e-6) = -13.8`` in the unconstrained
coordinate), where the interval transform's Jacobian leaves no prior mass, and the
likelihood may rise steeply against the bound (Fujita's ``reaction_2_k1``: 66.58 on the
bound, 65.35 0.01 log10-units inside, -281.5 0.16 inside). Along such a coordinate the
component takes the mean and variance of the tempered one-dimensional profile
``p_0 L^beta`` through the optimum (:class:`FlatProfile`: log-prior and log-likelihood on
a grid over the prior's +- 10 standard deviations, evaluated once per call), apart from
the other coordinates: on Fujita its mean moves from -5.9 at ``beta = 0.005`` to -8.5 at
``beta = 1``, a Gumbel-like profile against the bound.

Not the population's precision ``S^-1`` in place of ``P_0``: once the likelihood shapes the
population (``beta`` past about 0.005 on Fujita), ``S^-1`` already holds about ``beta H``
of the optimum the particles are at, so ``beta H_k + S^-1`` counts the curvature twice and
each component is about ``sqrt 2`` too narrow in every curved direction: in 19
dimensions the share of a population that jumped into an optimum of equal mass fell from
0.11 at ``beta = 0.001`` to 0.013 at 0.01, 0.005 at 0.1 and 0.002 at 1 (two Gaussian
optima, one move per particle; with ``P_0``: 0.27-0.32 at every ``beta``;
``tests/inference/test_smc_jumps.py``), as Fujita's runs jumped only before ``beta``
0.005.

The move is accepted with probability

    min(1, exp(log pi_beta(x') - log pi_beta(x) + log q(x) - log q(x'))),

with ``q`` normalised (its components differ), so it leaves every stage's tempered target
invariant, whatever the optima are: a wrong or missing optimum costs acceptance, never
exactness. The evidence's weights do not involve the moves. A proposal whose solve fails
is rejected and counted, as in :mod:`~pymc_odesens.inference.smc_independent`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import logsumexp

from pymc_odesens.inference.smc_mass_matrix import population_covariance
from pymc_odesens.inference.smc_target import ParticleLayout, PriorDraws

__all__ = [
    "JUMP_FLAT_CURVATURE",
    "JUMP_PRIOR_DRAWS",
    "JUMP_PROFILE_POINTS",
    "JUMP_STEP",
    "FlatProfile",
    "GaussianMixture",
    "JumpTargets",
    "jump_digest",
    "jump_points",
    "jump_prior_draws",
    "jump_targets",
    "prior_covariance",
]

JUMP_STEP = 1e-4
"""The central differences' step of :func:`jump_targets`, in the unconstrained
coordinates."""

JUMP_PRIOR_DRAWS = 2000
"""Prior draws for the prior's precision ``P_0`` (at least ``20 d``): once per call."""

JUMP_FLAT_CURVATURE = 0.01
"""A coordinate of an optimum is flat where the likelihood's curvature along it is below
this share of the prior's precision (:func:`jump_targets`)."""

JUMP_PROFILE_POINTS = 81
"""Grid points of a flat coordinate's profile (:class:`FlatProfile`)."""

_LOG_2PI = math.log(2.0 * math.pi)


@dataclass(frozen=True)
class GaussianMixture:
    """A mixture of Gaussians, each given by its mean and the Cholesky factor of its
    precision matrix.

    Attributes
    ----------
    log_weights : numpy.ndarray
        ``(C,)``, normalised (``logsumexp = 0``).
    means : numpy.ndarray
        ``(C, d)``.
    precision_choleskys : numpy.ndarray
        ``(C, d, d)``, lower-triangular ``R`` with ``R R'`` the component's precision.
    """

    log_weights: np.ndarray
    means: np.ndarray
    precision_choleskys: np.ndarray
    _cumulative: np.ndarray = field(init=False, repr=False)
    _log_coefficients: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # each component's log weight plus its normalising constant, and the weights'
        # running sum: once, not at every draw and density
        d = self.means.shape[1]
        log_dets = np.log(np.diagonal(self.precision_choleskys, axis1=1, axis2=2)).sum(axis=1)
        coefficients = self.log_weights + log_dets - 0.5 * d * _LOG_2PI
        object.__setattr__(self, "_log_coefficients", coefficients)
        object.__setattr__(self, "_cumulative", np.cumsum(np.exp(self.log_weights)))

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One draw: the component by one uniform, then ``d`` normal draws."""
        u = rng.uniform()
        c = int(np.searchsorted(self._cumulative, u, side="right"))
        c = min(c, len(self.log_weights) - 1)
        z = rng.standard_normal(self.means.shape[1])
        # x = mean + R'^-1 z has covariance (R R')^-1
        return self.means[c] + solve_triangular(
            self.precision_choleskys[c], z, lower=True, trans="T"
        )

    def log_density(self, x: np.ndarray) -> float:
        """``log q(x)``, normalised."""
        x = np.asarray(x, dtype=float)
        # z_c = R_c' (x - mean_c), for every component at once
        z = np.einsum("cij,ci->cj", self.precision_choleskys, x - self.means)
        return float(logsumexp(self._log_coefficients - 0.5 * np.einsum("cj,cj->c", z, z)))


@dataclass(frozen=True)
class FlatProfile:
    """The log-prior and log-likelihood along one coordinate of an optimum, the others held
    there: for a coordinate along which the likelihood's curvature at the optimum is flat.

    Attributes
    ----------
    coordinate : int
    grid : numpy.ndarray
        ``(G,)`` equally spaced values of the coordinate.
    log_prior, log_likelihood : numpy.ndarray
        ``(G,)`` at the grid's points (``-inf`` where a solve failed).
    """

    coordinate: int
    grid: np.ndarray
    log_prior: np.ndarray
    log_likelihood: np.ndarray

    def moments(self, beta: float) -> tuple[float, float] | None:
        """Mean and variance of ``exp(log_prior + beta log_likelihood)`` on the grid (each
        point standing for its cell: the variance includes ``spacing^2 / 12``); None if
        no point is finite."""
        log_density = self.log_prior + float(beta) * self.log_likelihood
        finite = np.isfinite(log_density)
        if not np.any(finite):
            return None
        weights = np.exp(log_density[finite] - logsumexp(log_density[finite]))
        values = self.grid[finite]
        mean = float(weights @ values)
        spacing = float(self.grid[1] - self.grid[0])
        return mean, float(weights @ (values - mean) ** 2) + spacing**2 / 12.0


@dataclass(frozen=True)
class JumpTargets:
    """The optima the jumps go to, with the likelihood's curvature there.

    Attributes
    ----------
    points : numpy.ndarray
        ``(K, d)`` optima in the particles' unconstrained coordinates.
    curvatures : numpy.ndarray
        ``(K, d, d)``: the positive semi-definite part of minus the log-likelihood's
        Hessian at each (:func:`jump_targets`).
    population_weight : float
        The population Gaussian's share of the mixture, in ``[0, 1)``.
    prior_precision : numpy.ndarray
        ``(d, d)``: the prior's precision ``P_0``, positive definite (the inverse of
        :func:`prior_covariance`).
    profiles : tuple of tuple of FlatProfile
        For each optimum, its flat coordinates' profiles (:func:`jump_targets`); empty:
        none (the component is the Laplace approximation in every coordinate).
    """

    points: np.ndarray
    curvatures: np.ndarray
    population_weight: float
    prior_precision: np.ndarray
    profiles: tuple = ()

    def component(self, k: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """Optimum ``k``'s component at ``beta``: ``(mean, precision)``."""
        mean = self.points[k].copy()
        precision = float(beta) * self.curvatures[k] + self.prior_precision
        for profile in self.profiles[k] if self.profiles else ():
            moments = profile.moments(beta)
            if moments is None:
                continue
            j = profile.coordinate
            # the tempered profile's mean and variance, apart from the other coordinates
            mean[j] = moments[0]
            precision[j, :] = 0.0
            precision[:, j] = 0.0
            precision[j, j] = 1.0 / moments[1]
        return mean, 0.5 * (precision + precision.T)

    def proposal(self, positions: np.ndarray, weights: np.ndarray, beta: float) -> GaussianMixture:
        """The mixture of the module docstring at inverse temperature ``beta`` for the
        population ``positions`` ``(N, d)`` with ``weights`` ``(N,)`` (any normalisation)."""
        means, choleskys, log_weights = [], [], []
        if self.population_weight > 0.0:
            w = np.asarray(weights, dtype=float)
            means.append((w / w.sum()) @ np.asarray(positions, dtype=float))
            choleskys.append(np.linalg.cholesky(_precision(population_covariance(positions, w))))
            log_weights.append(math.log(self.population_weight))
        share = math.log((1.0 - self.population_weight) / len(self.points))
        for k in range(len(self.points)):
            mean, precision = self.component(k, beta)
            means.append(mean)
            choleskys.append(np.linalg.cholesky(precision))
            log_weights.append(share)
        return GaussianMixture(np.array(log_weights), np.array(means), np.array(choleskys))


def _precision(covariance: np.ndarray) -> np.ndarray:
    """``covariance^-1`` through its Cholesky factor ``L``: ``(L L')^-1 = L'^-1 L^-1``."""
    d = covariance.shape[0]
    inverse_l = solve_triangular(np.linalg.cholesky(covariance), np.eye(d), lower=True)
    return inverse_l.T @ inverse_l


def jump_prior_draws(prior: PriorDraws, seed: np.random.SeedSequence) -> np.ndarray:
    """The prior draws :func:`jump_targets` takes the prior's precision from:
    :data:`JUMP_PRIOR_DRAWS`, at least ``20 d``."""
    return prior.draw(max(JUMP_PRIOR_DRAWS, 20 * prior.layout.size), seed)


def jump_digest(points: np.ndarray, population_weight: float) -> str:
    """A digest of the jumps' optima and the population's weight (what a checkpoint's
    signature holds of them)."""
    h = hashlib.sha256(np.ascontiguousarray(points, dtype=float).tobytes())
    h.update(repr(float(population_weight)).encode())
    return h.hexdigest()


def prior_covariance(draws: np.ndarray) -> np.ndarray:
    """The prior's covariance from its draws ``(M, d)`` in the particles' unconstrained
    coordinates (equal weights; shrunk and regularised as
    :func:`~pymc_odesens.inference.smc_mass_matrix.population_covariance`).

    Raises
    ------
    ValueError
        Fewer than ``d + 1`` draws, a draw not finite, or a coordinate the draws do not
        vary in (a prior with no spread).
    """
    draws = np.asarray(draws, dtype=float)
    if draws.ndim != 2 or len(draws) <= draws.shape[1]:
        raise ValueError(
            f"prior_covariance: expected at least d + 1 draws of shape (M, d), got shape "
            f"{draws.shape}"
        )
    if not np.all(np.isfinite(draws)):
        raise ValueError("prior_covariance: a prior draw is not finite")
    flat = np.flatnonzero(np.ptp(draws, axis=0) == 0.0)
    if len(flat):
        raise ValueError(
            f"prior_covariance: the prior draws do not vary in coordinates {flat.tolist()} "
            f"(a prior without spread); expected a proper prior in every coordinate"
        )
    return population_covariance(draws, np.ones(len(draws)))


def jump_targets(
    points: np.ndarray,
    evaluate_many: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
    population_weight: float,
    prior_draws: np.ndarray,
    step: float = JUMP_STEP,
) -> JumpTargets:
    """The :class:`JumpTargets` of ``points`` ``(K, d)``: at each, the positive
    semi-definite part of minus the log-likelihood's Hessian by central differences of its
    exact gradient (``2 d`` evaluations per point); the prior's precision from
    ``prior_draws``; and for each coordinate along which that curvature is flat (below
    :data:`JUMP_FLAT_CURVATURE` of the prior's precision: a parameter on a bound, a
    saturated rate), the log-prior and log-likelihood along it on a grid of
    :data:`JUMP_PROFILE_POINTS` over the prior's +- 10 standard deviations, the other
    coordinates at the optimum (:class:`FlatProfile`). All evaluations in two calls of
    ``evaluate_many``.

    Parameters
    ----------
    points : numpy.ndarray
        ``(K, d)`` optima in the particles' unconstrained coordinates.
    evaluate_many : callable
        ``positions (M, d) -> (log_prior (M,), log_likelihood (M,),
        grad_log_likelihood (M, d))``.
    population_weight : float
        :attr:`JumpTargets.population_weight`.
    prior_draws : numpy.ndarray
        ``(M, d)`` draws from the prior in the same coordinates, ``M > d``
        (:func:`prior_covariance`).
    step : float
        The differences' step.

    Raises
    ------
    ValueError
        The log-likelihood or its gradient is not finite next to a point (a failed solve
        there; the point named); ``prior_draws`` as :func:`prior_covariance` refuses them
        or of another dimension than the points.
    """
    points = np.atleast_2d(np.asarray(points, dtype=float))
    k, d = points.shape
    covariance = prior_covariance(prior_draws)
    if covariance.shape != (d, d):
        raise ValueError(
            f"jump_targets: prior_draws have {covariance.shape[0]} coordinates, the points {d}"
        )
    prior_precision = _precision(covariance)
    offsets = step * np.eye(d)
    positions = np.concatenate([np.concatenate([x + offsets, x - offsets]) for x in points])
    _, log_likelihood, gradients = evaluate_many(positions)
    curvatures = np.empty((k, d, d))
    for j, point in enumerate(points):
        rows = slice(2 * d * j, 2 * d * (j + 1))
        values, grads = np.asarray(log_likelihood[rows]), np.asarray(gradients[rows])
        if not (np.all(np.isfinite(values)) and np.all(np.isfinite(grads))):
            raise ValueError(
                f"jump_modes: the log-likelihood or its gradient is not finite next to "
                f"optimum {j} ({point.tolist()}): a failed solve there; leave it out"
            )
        # row i of the plus block: the gradient at x + step e_i
        hessian = (grads[:d] - grads[d:]) / (2.0 * step)
        minus_hessian = -0.5 * (hessian + hessian.T)
        eigenvalues, vectors = np.linalg.eigh(minus_hessian)
        curvatures[j] = (vectors * np.clip(eigenvalues, 0.0, None)) @ vectors.T
    profiles = _flat_profiles(points, curvatures, prior_draws, covariance, evaluate_many)
    return JumpTargets(points, curvatures, float(population_weight), prior_precision, profiles)


def _flat_profiles(points, curvatures, prior_draws, covariance, evaluate_many) -> tuple:
    """Each optimum's :class:`FlatProfile` s (:func:`jump_targets`)."""
    variances = np.diag(covariance)
    centre = np.mean(prior_draws, axis=0)
    unit = np.linspace(-10.0, 10.0, JUMP_PROFILE_POINTS)
    wanted = []  # (optimum, coordinate, grid)
    for k, curvature in enumerate(curvatures):
        for j in np.flatnonzero(np.diag(curvature) * variances < JUMP_FLAT_CURVATURE):
            wanted.append((k, int(j), centre[j] + np.sqrt(variances[j]) * unit))
    if not wanted:
        return tuple(() for _ in points)
    positions = []
    for k, j, grid in wanted:
        block = np.repeat(points[k][None, :], len(grid), axis=0)
        block[:, j] = grid
        positions.append(block)
    log_prior, log_likelihood, _ = evaluate_many(np.concatenate(positions))
    log_prior = np.where(np.isfinite(log_prior), log_prior, -np.inf)
    log_likelihood = np.where(np.isfinite(log_likelihood), log_likelihood, -np.inf)
    found: list[list[FlatProfile]] = [[] for _ in points]
    g = JUMP_PROFILE_POINTS
    for i, (k, j, grid) in enumerate(wanted):
        rows = slice(g * i, g * (i + 1))
        found[k].append(FlatProfile(j, grid, log_prior[rows], log_likelihood[rows]))
    return tuple(tuple(p) for p in found)


def jump_points(jump_modes, layout: ParticleLayout) -> np.ndarray:
    """``jump_modes`` as a ``(K, d)`` array of raveled unconstrained points.

    ``jump_modes``: a :class:`~pymc_odesens.inference.ModeSearchResult` (the best start of
    each cluster, in the sampler's coordinates), one point or a sequence of points keyed by
    the model's value variables (``k_log__``: ``model.initial_point()``'s keys), or an
    array ``(K, d)`` of raveled points.

    Raises
    ------
    ValueError
        No point, a point without one of the value variables or with another shape, or
        not finite (named).
    """
    if hasattr(jump_modes, "clusters") and hasattr(jump_modes, "objective"):
        objective = jump_modes.objective
        jump_modes = [objective.sampler_point(c.best.x) for c in jump_modes.clusters]
    if isinstance(jump_modes, Mapping):
        jump_modes = [jump_modes]
    if isinstance(jump_modes, np.ndarray):
        points = np.atleast_2d(np.asarray(jump_modes, dtype=float))
        if points.ndim != 2 or points.shape[1] != layout.size:
            raise ValueError(
                f"jump_modes: expected an array of shape (K, {layout.size}) (raveled points "
                f"of {list(layout.names)}), got shape {np.shape(jump_modes)}"
            )
    else:
        rows = []
        for j, point in enumerate(list(jump_modes)):
            if not isinstance(point, Mapping):
                raise ValueError(
                    f"jump_modes: point {j} is a {type(point).__name__}; expected a dict by "
                    f"value variable ({list(layout.names)})"
                )
            missing = [name for name in layout.names if name not in point]
            if missing:
                raise ValueError(
                    f"jump_modes: point {j} lacks the value variables {missing} (expected "
                    f"keys {list(layout.names)}, the sampler's coordinates)"
                )
            for name, shape in zip(layout.names, layout.shapes):
                if np.shape(point[name]) != shape:
                    raise ValueError(
                        f"jump_modes: point {j}'s {name} has shape {np.shape(point[name])}, "
                        f"expected {shape}"
                    )
            rows.append(layout.join(point))
        points = np.array(rows, dtype=float).reshape(len(rows), layout.size)
    if len(points) == 0:
        raise ValueError("jump_modes: expected at least one point, got none")
    if not np.all(np.isfinite(points)):
        raise ValueError("jump_modes: expected finite points, got non-finite values")
    return points
