"""When a stage's HMC moves have decorrelated the particles enough to stop.

After each move of a stage, :func:`max_correlation` measures how much of the particles'
positions at the start of the stage the moves have kept: the largest weighted correlation,
over the coordinates, between the start and now. The moves stop when it falls below a
threshold.

A sample correlation is noisy: over ``n`` independent pairs its Fisher transform
``atanh(r)`` is close to normal with standard deviation ``1 / sqrt(n - 3)``, so the largest
of ``d`` coordinates' correlations exceeds ``0.1`` from noise alone when ``n`` is a few
hundred or less (about ``0.2`` for 9 coordinates and 100 particles). A fixed threshold of
``0.1`` then never fires, and every stage takes ``max_moves`` however well the moves mix.
:func:`correlation_floor` is the value that the largest correlation of ``d`` coordinates
of *independent* positions exceeds with probability ``level`` (two-sided, Bonferroni over
the coordinates) for the weights' effective sample size ``n``; the moves stop below
``max(correlation_threshold, floor)`` (:func:`stopping_threshold`): once the correlation
that is left cannot be told from none with the particles at hand.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtri

__all__ = ["max_correlation", "correlation_floor", "stopping_threshold"]

NOISE_LEVEL = 0.05
"""The probability that independent positions' largest correlation exceeds the floor."""


def max_correlation(start: np.ndarray, now: np.ndarray, weights: np.ndarray) -> float:
    """The largest weighted correlation, over the coordinates, of the particles' positions at
    the start of the stage and now (a coordinate without spread counts 0).

    Parameters
    ----------
    start, now : numpy.ndarray
        Positions ``(N, d)``.
    weights : numpy.ndarray
        The particles' weights ``(N,)`` (not necessarily normalised).
    """
    w = weights / weights.sum()
    a = start - w @ start
    b = now - w @ now
    covariance = w @ (a * b)
    scale = np.sqrt((w @ a**2) * (w @ b**2))
    with np.errstate(invalid="ignore", divide="ignore"):
        correlation = np.where(scale > 0, np.abs(covariance) / scale, 0.0)
    return float(np.max(correlation)) if correlation.size else 0.0


def correlation_floor(effective_size: float, dimension: int, level: float = NOISE_LEVEL) -> float:
    """The largest absolute sample correlation of ``dimension`` coordinates of independent
    pairs, exceeded with probability ``level``, for ``effective_size`` pairs.

    ``tanh(z / sqrt(n - 3))`` with ``z`` the standard normal quantile of
    ``1 - level / (2 d)`` (Fisher's transform, Bonferroni over the ``d`` coordinates); 1 for
    ``n <= 4`` (too few particles to tell any correlation from none).

    Raises
    ------
    ValueError
        ``dimension`` below 1 or ``level`` outside (0, 1).
    """
    if dimension < 1:
        raise ValueError(f"correlation_floor: dimension must be >= 1, got {dimension}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"correlation_floor: level must be in (0, 1), got {level}")
    if not effective_size > 4.0:
        return 1.0
    z = float(ndtri(1.0 - level / (2.0 * dimension)))
    return math.tanh(z / math.sqrt(effective_size - 3.0))


def stopping_threshold(
    correlation_threshold: float, effective_size: float, dimension: int
) -> float:
    """``max(correlation_threshold, correlation_floor(effective_size, dimension))``: the
    correlation below which a stage's moves stop (``effective_size`` the particles' weights'
    ESS, :func:`~pymc_odesens.inference.smc_tempering.effective_sample_size`)."""
    return max(float(correlation_threshold), correlation_floor(effective_size, dimension))
