"""The temperature schedule of tempered SMC: the next inverse temperature and the weights.

Between two inverse temperatures ``beta < beta'`` a particle of log-likelihood ``l`` gets
the incremental weight ``exp((beta' - beta) l)``; the log evidence grows by the logarithm
of the weighted mean of the incremental weights (the particles' normalised weights ``W``):
``log sum_i W_i exp((beta' - beta) l_i)``. The next ``beta'`` is chosen by bisection so that a
criterion of the new weights hits a target fraction of the number of particles ``N``:

- ``"ess"``: the effective sample size of the new normalised weights,
  ``1 / sum_i W'_i^2``, over ``N``;
- ``"cess"``: the conditional ESS of Zhou, Johansen and Aston (2016, J. Comput. Graph.
  Stat. 25:701), ``(sum_i W_i w_i)^2 / sum_i W_i w_i^2`` with ``w`` the incremental weights:
  the quality of the step alone, which stays meaningful when the particles are not
  resampled at every step (it equals the ESS fraction when ``W`` is uniform).

A particle whose log-likelihood is ``-inf`` (a failed ODE solve) gets weight 0 at any
``beta' > beta``; its weight never becomes NaN. When such particles make the criterion fall
below the target however small the step, the target is taken relative to the particles
that keep a weight (the criterion's limit as ``beta' -> beta``), so the schedule moves on
and the failed particles are dropped at the next resampling.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "CRITERIA",
    "effective_sample_size",
    "conditional_effective_sample_size",
    "next_temperature",
    "reweight",
]

CRITERIA = ("ess", "cess")

# bisection steps on [beta, 1]: 2**-64 of the interval is below a double's resolution
_BISECTION_STEPS = 64


def effective_sample_size(log_weights: np.ndarray) -> float:
    """``1 / sum W_i^2`` of the normalised weights ``W`` (``0`` when every weight is 0)."""
    log_weights = np.asarray(log_weights, dtype=float)
    total = logsumexp(log_weights)
    if not np.isfinite(total):
        return 0.0
    return float(np.exp(-logsumexp(2.0 * (log_weights - total))))


def conditional_effective_sample_size(log_weights: np.ndarray, log_increments: np.ndarray) -> float:
    """``N (sum W_i w_i)^2 / sum W_i w_i^2`` (Zhou, Johansen, Aston 2016), ``W`` the normalised
    ``exp(log_weights)``, ``w = exp(log_increments)``; ``0`` when every ``W_i w_i`` is 0."""
    log_weights = np.asarray(log_weights, dtype=float)
    log_increments = np.asarray(log_increments, dtype=float)
    log_w = log_weights - logsumexp(log_weights)
    first = logsumexp(log_w + log_increments)
    second = logsumexp(log_w + 2.0 * log_increments)
    if not np.isfinite(first):
        return 0.0
    return float(len(log_weights) * np.exp(2.0 * first - second))


def _increments(log_likelihood: np.ndarray, delta: float) -> np.ndarray:
    """``delta * l`` with ``0 * (-inf) = -inf`` for ``delta > 0`` and ``0`` for ``delta = 0``."""
    if delta == 0.0:
        return np.zeros_like(log_likelihood)
    with np.errstate(invalid="ignore"):
        return delta * log_likelihood


def _criterion(kind: str, log_weights, log_likelihood, delta) -> float:
    increments = _increments(log_likelihood, delta)
    n = len(log_weights)
    if kind == "ess":
        return effective_sample_size(log_weights + increments) / n
    return conditional_effective_sample_size(log_weights, increments) / n


def next_temperature(
    beta: float,
    log_likelihood: np.ndarray,
    log_weights: np.ndarray,
    target: float,
    criterion: str = "ess",
) -> float:
    """The next inverse temperature after ``beta``: 1, or where the criterion hits ``target``.

    Parameters
    ----------
    beta : float
        The current inverse temperature (in ``[0, 1)``).
    log_likelihood : numpy.ndarray
        The particles' log-likelihoods (``-inf`` allowed, NaN not).
    log_weights : numpy.ndarray
        The particles' current log-weights (any normalisation).
    target : float
        The criterion's target, a fraction of the number of particles in ``(0, 1)``.
    criterion : {"ess", "cess"}

    Returns
    -------
    float
        ``beta' > beta``.

    Raises
    ------
    ValueError
        A log-likelihood is NaN or ``+inf``, every particle has weight 0 at any step (all
        log-likelihoods ``-inf``), or the criterion or target is not one of the above.
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}; got {criterion!r}")
    if not 0.0 < target < 1.0:
        raise ValueError(f"target must be in (0, 1); got {target!r}")
    log_likelihood = np.asarray(log_likelihood, dtype=float)
    log_weights = np.asarray(log_weights, dtype=float)
    bad = np.isnan(log_likelihood) | (log_likelihood == np.inf)
    if np.any(bad):
        raise ValueError(
            f"log-likelihood of particles {np.flatnonzero(bad)[:10].tolist()} is "
            f"{log_likelihood[bad][0]}: the model's log-likelihood must be finite or -inf"
        )
    alive = np.isfinite(log_likelihood) & np.isfinite(log_weights)
    if not np.any(alive):
        raise ValueError(
            "every particle has log-likelihood -inf (or weight 0): the model's likelihood "
            "(observed variables and potentials) is -inf everywhere the particles are; a "
            "failed ODE solve at every prior draw points to a prior that allows parameters "
            "the solver cannot integrate"
        )
    # the criterion's value just above beta: the failed particles already have weight 0
    limit = _criterion(criterion, log_weights[alive], log_likelihood[alive], 0.0) * (
        np.count_nonzero(alive) / len(alive)
        if criterion == "ess"
        else _alive_mass(log_weights, alive)
    )
    goal = target if limit > target else target * limit
    if _criterion(criterion, log_weights, log_likelihood, 1.0 - beta) >= goal:
        return 1.0
    low, high = beta, 1.0
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if _criterion(criterion, log_weights, log_likelihood, middle - beta) >= goal:
            low = middle
        else:
            high = middle
    return low if low > beta else high


def _alive_mass(log_weights: np.ndarray, alive: np.ndarray) -> float:
    """The share of the normalised weight held by the particles in ``alive``."""
    return float(np.exp(logsumexp(log_weights[alive]) - logsumexp(log_weights)))


def reweight(
    log_weights: np.ndarray, log_likelihood: np.ndarray, delta: float
) -> tuple[np.ndarray, float]:
    """The normalised log-weights after a step ``delta`` of beta, and the log evidence increment.

    Returns
    -------
    (numpy.ndarray, float)
        ``log W'`` (``logsumexp(log W') = 0``; ``-inf`` for a failed particle) and
        ``log sum_i W_i exp(delta l_i)``.
    """
    log_weights = np.asarray(log_weights, dtype=float)
    normalised = log_weights - logsumexp(log_weights)
    new = normalised + _increments(np.asarray(log_likelihood, dtype=float), delta)
    increment = float(logsumexp(new))
    return new - increment, increment
