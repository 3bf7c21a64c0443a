"""The dense metric anchored to the mode's covariance in every tuning window."""

import numpy as np
import pytest
import scipy.linalg

from pymc_odesens.inference.anchored_potential import AnchoredFullAdapt

N, WINDOW, WEIGHT = 12, 5, 4


def _anchor(rng):
    factor = rng.normal(size=(N, N))
    return rng.normal(size=N), factor @ factor.T / N + 0.5 * np.eye(N)


def _anchored_covariance(mean0, cov0, weight, draws):
    """The estimate of ``weight`` pseudo-draws with mean0 and cov0 pooled with ``draws``."""
    total = weight + len(draws)
    pooled_mean = (weight * mean0 + draws.sum(axis=0)) / total
    scatter = weight * cov0 + weight * np.outer(mean0 - pooled_mean, mean0 - pooled_mean)
    centred = draws - pooled_mean
    return (scatter + centred.T @ centred) / (total - 1)


def test_every_window_estimate_pools_the_anchor_with_that_window_draws():
    rng = np.random.default_rng(0)
    mean0, cov0 = _anchor(rng)
    potential = AnchoredFullAdapt(N, mean0, cov0, WEIGHT, adaptation_window=WINDOW)
    draws = rng.normal(size=(40, N)) * 3.0 + 1.0
    # windows of 5, 10, 20 draws: switches after draws 5 and 15; from draw 16 the metric
    # is estimated from the draws since draw 6 (those the window collected) and the anchor
    for index, draw in enumerate(draws):
        potential.update(draw, None, tune=True)
        if 16 <= index <= 35:
            expected = _anchored_covariance(mean0, cov0, WEIGHT, draws[6 : index + 1])
            np.testing.assert_allclose(potential._cov, expected, rtol=1e-10)
        if index == 16:  # 11 draws in 12 coordinates: singular without the anchor
            np.testing.assert_allclose(
                potential._chol @ potential._chol.T, potential._cov, rtol=1e-10
            )
    assert potential._chol_error is None


def test_after_tuning_the_metric_is_fixed():
    rng = np.random.default_rng(1)
    mean0, cov0 = _anchor(rng)
    potential = AnchoredFullAdapt(N, mean0, cov0, WEIGHT, adaptation_window=WINDOW)
    for draw in rng.normal(size=(3 * WINDOW, N)):
        potential.update(draw, None, tune=True)
    tuned = potential._cov.copy()
    for draw in rng.normal(size=(10, N)) * 100:
        potential.update(draw, None, tune=False)
    np.testing.assert_array_equal(potential._cov, tuned)


def test_many_draws_outweigh_the_anchor():
    rng = np.random.default_rng(2)
    mean0, cov0 = _anchor(rng)
    target = np.diag(np.linspace(0.5, 4.0, N))
    potential = AnchoredFullAdapt(N, mean0, cov0, WEIGHT, adaptation_window=WINDOW)
    draws = rng.multivariate_normal(np.zeros(N), target, size=WINDOW + 1 + 4000)
    for draw in draws:
        potential.update(draw, None, tune=True)
    # the last window switch was after draw 1275: 2730 draws against the anchor's 4
    np.testing.assert_allclose(np.diag(potential._cov), np.diag(target), rtol=0.15)
    np.testing.assert_allclose(potential._cov - np.diag(np.diag(potential._cov)), 0, atol=0.4)
    assert scipy.linalg.eigvalsh(potential._cov).min() > 0


def test_the_weight_is_checked_by_name():
    mean0, cov0 = _anchor(np.random.default_rng(3))
    with pytest.raises(ValueError, match=r"anchor_weight: expected a positive count, got 0"):
        AnchoredFullAdapt(N, mean0, cov0, 0)
