"""The modes a multistart found, weighed by their Laplace masses, as one start for the chains.

A multistart (:func:`~pymc_odesens.inference.find_modes`) ranks its optima by their
log-posterior, the height of each peak. What a sampler should care about is the mass under
each peak: a lower peak that is much wider can hold more of the posterior, and a peak a few
log-units below the best can hold nothing worth a chain. The Laplace approximation at a mode
``m`` of the sampler's log-density ``log p(x)`` (the sampler's coordinates, transforms'
log-Jacobians included) with covariance ``S`` gives the mass under it::

    log Z_k = log p(m_k) + d/2 log(2 pi) + 1/2 log det S_k

``log p`` is the model's log-density, log-prior plus log-likelihood with every distribution
normalised (the unnormalised posterior), so ``log Z_k`` is
the Laplace approximation of the model evidence restricted to that mode, the weights
``Z_k / sum Z`` are the modes' posterior probabilities under the approximation, and the
log of the sum is the Laplace estimate of the log evidence (on Boehm_JProteomeRes2014:
-170.26, against -170.38 +- 0.52 from tempered SMC; benchmarks/README.md).

:func:`laplace_mixture` climbs from each given start (a multistart optimum) to the sampler's
mode, computes its Laplace approximation (one compiled log-density for all), joins the
starts that climbed to the same mode
(several optima of the log-posterior on a bound or a ridge can lead to one mode of the
sampler's density, which has the Jacobians), and weighs them.
:meth:`LaplaceMixture.start_values` draws each chain's start from the mixture: a chain
starts in a mode with that mode's weight, so the chains are spread over the modes as the
approximation spreads the posterior, and chains that cannot travel between modes of
comparable weight then disagree, which R-hat reports, instead of all starting in one peak
and agreeing about it.

:func:`laplace_mixture` compiles its own log-density per call, so calls from several
threads do not share state; a :class:`LaplaceMixture` is not changed after it is made.

The weights are only as good as the approximation: a mode whose density is far from
Gaussian (a wall, a ridge: docs/smc.md) can hold a different mass; tempered SMC
(:func:`~pymc_odesens.inference.sample_smc`) weighs modes without that assumption.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.linalg import solve_triangular
from scipy.special import logsumexp

from pymc_odesens.inference.laplace_start import LaplaceApproximation, LaplaceApproximator

__all__ = [
    "SAME_MODE_DISTANCE",
    "LaplaceMixture",
    "laplace_log_mass",
    "laplace_mixture",
]

SAME_MODE_DISTANCE = 0.1
"""Two climbs ended at one mode of the sampler's density when their modes are closer than
this in the Mahalanobis distance of the first one's Laplace covariance (in standard
deviations of the approximation: 0.1 is far below the posterior's own spread and far above
the optimiser's tolerance)."""


def laplace_log_mass(laplace: LaplaceApproximation) -> float:
    """``log p(m) + d/2 log(2 pi) + 1/2 log det S``: the log of the Laplace approximation's
    mass under ``laplace``'s mode (its share of the model evidence).

    Raises
    ------
    ValueError
        The covariance is not positive definite.
    """
    covariance = np.asarray(laplace.covariance, dtype=float)
    sign, log_det = np.linalg.slogdet(covariance)
    if sign <= 0 or not np.isfinite(log_det):
        raise ValueError("laplace: its covariance is not positive definite (no Laplace mass)")
    d = covariance.shape[0]
    return float(laplace.mode.log_density + 0.5 * d * np.log(2 * np.pi) + 0.5 * log_det)


def _distance(a: LaplaceApproximation, vector: np.ndarray) -> float:
    """Mahalanobis distance of ``vector`` from ``a``'s mode, in ``a``'s covariance."""
    step = solve_triangular(a.cholesky, vector - a.mode.vector, lower=True)
    return float(np.sqrt(step @ step))


@dataclass(frozen=True)
class LaplaceMixture:
    """Laplace approximations at distinct modes of a model's sampler density, weighed by
    their masses.

    Attributes
    ----------
    components : tuple of LaplaceApproximation
        One per distinct mode, heaviest first.
    log_masses : numpy.ndarray
        Each component's :func:`laplace_log_mass`.
    sources : tuple of tuple of int
        For each component, the indices of the starts (in the order they were given) whose
        climbs ended at its mode.
    """

    components: tuple[LaplaceApproximation, ...]
    log_masses: np.ndarray
    sources: tuple[tuple[int, ...], ...]

    @property
    def heaviest(self) -> LaplaceApproximation:
        """The component of the largest mass."""
        return self.components[0]

    @property
    def log_evidence(self) -> float:
        """The Laplace estimate of the log evidence: the log of the masses' sum."""
        return float(logsumexp(self.log_masses))

    @property
    def weights(self) -> np.ndarray:
        """The components' masses over their sum (each mode's posterior probability under
        the approximation)."""
        weights = np.exp(self.log_masses - self.log_evidence)
        return weights / weights.sum()

    def component_of(self, start: int) -> int:
        """The component the climb from start ``start`` ended at; -1 when it was not
        weighed (not given, or its approximation failed)."""
        for k, members in enumerate(self.sources):
            if start in members:
                return k
        return -1

    def _draw(self):
        """One draw of the mixture, as a PyTensor expression in the sampler's coordinates:
        the component index and the standard normal vector it transforms."""
        n = self.heaviest.mode.vector.size
        k = pt.random.categorical(pt.as_tensor_variable(self.weights))
        return k, pt.random.normal(size=(n,))

    def start_vector(self):
        """A PyTensor expression drawing one point of the mixture (a component with its
        weight, then its normal distribution), the value variables concatenated in the
        order of ``heaviest.mode.value_variables``."""
        k, normal = self._draw()
        means = np.stack([c.mode.vector for c in self.components])
        factors = np.stack([c.cholesky for c in self.components])
        return pt.as_tensor_variable(means)[k] + pt.dot(pt.as_tensor_variable(factors)[k], normal)

    def start_values(self) -> dict:
        """Chain starts drawn from the mixture, as ``initvals`` (each free variable on its
        own scale, by name: a PyTensor expression that PyMC's and nutpie's initial-point
        functions draw once per chain; see
        :meth:`~pymc_odesens.inference.laplace_start.LaplaceApproximation.start_values`)."""
        return self.heaviest.values_of(self.start_vector())

    def whitened_start(self, mean: np.ndarray, cholesky: np.ndarray):
        """A draw of the mixture in coordinates ``z = L^-1 (x - mean)`` (the whitened model of
        :func:`~pymc_odesens.inference.whitened_model.whitened_model`, ``L`` its
        ``cholesky``): a PyTensor expression of shape ``(n,)``."""
        mean = np.asarray(mean, dtype=float)
        cholesky = np.asarray(cholesky, dtype=float)
        n = self.heaviest.mode.vector.size
        if mean.shape != (n,) or cholesky.shape != (n, n):
            raise ValueError(
                f"mean, cholesky: expected shapes ({n},) and ({n}, {n}), got {mean.shape} and "
                f"{cholesky.shape}"
            )
        shifts = np.stack(
            [solve_triangular(cholesky, c.mode.vector - mean, lower=True) for c in self.components]
        )
        factors = np.stack(
            [solve_triangular(cholesky, c.cholesky, lower=True) for c in self.components]
        )
        k, normal = self._draw()
        return pt.as_tensor_variable(shifts)[k] + pt.dot(pt.as_tensor_variable(factors)[k], normal)


def laplace_mixture(
    model: pm.Model,
    starts: Sequence[Mapping[str, np.ndarray]],
    hessians: Sequence[str] = ("finite-differences",),
    same_mode: float = SAME_MODE_DISTANCE,
) -> tuple[LaplaceMixture, dict[int, str]]:
    """The Laplace approximations at the sampler modes reached from ``starts``, weighed.

    The model's log-density is compiled once
    (:class:`~pymc_odesens.inference.laplace_start.LaplaceApproximator`); a climb that ends
    at the mode of an earlier component joins it without a Hessian of its own.

    Parameters
    ----------
    model : pymc.Model
    starts : sequence of dict
        Value variables (transformed scale) by name, one dict per optimum (for example
        :meth:`ModeObjective.sampler_point` of each of :func:`find_modes`' clusters), the
        most important first: a failure at the first one raises, at the others it is
        reported.
    hessians : sequence of str
        The Hessians to try in order at each mode
        (:func:`~pymc_odesens.inference.laplace_start.laplace_approximation`'s ``hessian``).
    same_mode : float
        Climbs whose modes are closer than this (Mahalanobis distance in the earlier
        component's covariance) ended at one mode (:data:`SAME_MODE_DISTANCE`).

    Returns
    -------
    mixture : LaplaceMixture
    failures : dict of int to str
        The starts (by index) that have no approximation, with the reasons.

    Raises
    ------
    ValueError
        ``starts`` is empty, ``hessians`` empty or ``same_mode`` not positive; the first
        start has no approximation with any of ``hessians`` (every reason given).
    """
    if len(starts) == 0:
        raise ValueError("starts: expected at least one start (a dict of value variables)")
    hessians = tuple(hessians)
    if not hessians:
        raise ValueError("hessians: expected at least one of 'fisher', 'finite-differences'")
    if not (np.isfinite(same_mode) and same_mode > 0):
        raise ValueError(f"same_mode: expected a positive distance, got {same_mode!r}")
    approximator = LaplaceApproximator(model)
    components: list[LaplaceApproximation] = []
    masses: list[float] = []
    sources: list[list[int]] = []
    failures: dict[int, str] = {}
    for index, start in enumerate(starts):
        if 0 in failures:  # the first start has none: no mixture to weigh against
            break
        try:
            mode = approximator.climb(start)
        except ValueError as error:
            failures[index] = f"climb: {error}"
            continue
        joined = [
            k for k, other in enumerate(components) if _distance(other, mode.vector) < same_mode
        ]
        if joined:
            sources[joined[0]].append(index)
            continue
        errors = []
        for hessian in hessians:
            try:
                laplace = approximator.at(mode, hessian)
                masses.append(laplace_log_mass(laplace))
            except ValueError as error:
                errors.append(f"{hessian}: {error}")
                continue
            components.append(laplace)
            sources.append([index])
            break
        else:
            failures[index] = "; ".join(errors)
    if 0 in failures:
        raise ValueError(f"no Laplace approximation at the first start ({failures[0]})")
    order = np.argsort(-np.asarray(masses), kind="stable")
    mixture = LaplaceMixture(
        components=tuple(components[k] for k in order),
        log_masses=np.asarray(masses, dtype=float)[order],
        sources=tuple(tuple(sources[k]) for k in order),
    )
    return mixture, failures
