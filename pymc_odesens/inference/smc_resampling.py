"""Resampling the particle population: systematic and residual.

Both return the ancestors' indices in increasing order (copies of one particle are
neighbours), draw the number of copies of particle ``i`` with mean ``N W_i``, and give a
particle of weight 0 no copy. Systematic resampling uses one uniform number; residual
resampling keeps ``floor(N W_i)`` copies of each particle and draws the rest by
multinomial sampling of the residual weights (Douc, Cappé, Moulines 2005 compare both:
both have lower variance than multinomial resampling).
"""

from __future__ import annotations

import numpy as np

__all__ = ["RESAMPLING", "systematic_resampling", "residual_resampling", "resample"]


def _normalised(weights: np.ndarray) -> np.ndarray:
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 1 or len(weights) == 0:
        raise ValueError(f"weights: expected a non-empty vector; got shape {weights.shape}")
    if np.any(~np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("weights must be finite and non-negative")
    total = weights.sum()
    if total <= 0.0:
        raise ValueError("weights: every weight is 0")
    return weights / total


def _ancestors(cumulative: np.ndarray, positions: np.ndarray) -> np.ndarray:
    cumulative = cumulative.copy()
    cumulative[-1] = 1.0  # the rounding of the last partial sum must not lose the last particle
    return np.searchsorted(cumulative, positions, side="right").astype(np.int64)


def systematic_resampling(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``N`` ancestors: particle ``i`` is copied ``floor(N W_i)`` or one more time.

    Parameters
    ----------
    weights : numpy.ndarray
        Non-negative weights (any normalisation) of the ``N`` particles.
    rng : numpy.random.Generator
    """
    w = _normalised(weights)
    n = len(w)
    positions = (rng.uniform() + np.arange(n)) / n
    return _ancestors(np.cumsum(w), positions)


def residual_resampling(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``N`` ancestors: ``floor(N W_i)`` copies of particle ``i``, the remaining
    ``N - sum floor(N W_i)`` drawn from the residual weights ``N W_i - floor(N W_i)``.

    Parameters
    ----------
    weights : numpy.ndarray
        Non-negative weights (any normalisation) of the ``N`` particles.
    rng : numpy.random.Generator
    """
    w = _normalised(weights)
    n = len(w)
    copies = np.floor(n * w).astype(np.int64)
    rest = n - int(copies.sum())
    if rest > 0:
        residual = n * w - copies
        draws = np.sort(rng.uniform(size=rest))
        extra = _ancestors(np.cumsum(residual / residual.sum()), draws)
        copies += np.bincount(extra, minlength=n)
    return np.repeat(np.arange(n, dtype=np.int64), copies)


RESAMPLING = {"systematic": systematic_resampling, "residual": residual_resampling}


def resample(method: str, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The ancestors' indices by ``method`` (``"systematic"`` or ``"residual"``)."""
    if method not in RESAMPLING:
        raise ValueError(f"resampling must be one of {tuple(RESAMPLING)}; got {method!r}")
    return RESAMPLING[method](weights, rng)
