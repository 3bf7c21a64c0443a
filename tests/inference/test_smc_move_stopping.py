"""The stopping rule of a stage's HMC moves: the correlation left, against its noise."""

import numpy as np
import pytest

from pymc_odesens.inference.smc_move_stopping import (
    correlation_floor,
    max_correlation,
    stopping_threshold,
)
from pymc_odesens.inference.smc_tempering import effective_sample_size


def test_max_correlation_of_known_positions():
    rng = np.random.default_rng(0)
    start = rng.normal(size=(50, 3))
    weights = np.ones(50)
    assert max_correlation(start, start, weights) == pytest.approx(1.0)
    flipped = start * np.array([1.0, -1.0, 1.0])
    assert max_correlation(start, flipped, weights) == pytest.approx(1.0)  # absolute value
    constant = start.copy()
    constant[:, 0] = 2.0
    other = rng.normal(size=(50, 3))
    other[:, 1:] = start[:, 1:] * 0.0 + rng.normal(size=(50, 2))
    # a coordinate without spread counts 0; the others are the sample correlations
    expected = max(abs(np.corrcoef(constant[:, j], other[:, j])[0, 1]) for j in (1, 2))
    assert max_correlation(constant, other, weights) == pytest.approx(expected, rel=1e-12)
    # weight 0 drops a particle
    w = np.ones(50)
    w[:10] = 0.0
    expected = max(abs(np.corrcoef(start[10:, j], other[10:, j])[0, 1]) for j in range(3))
    assert max_correlation(start, other, w) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("n, d", [(100, 9), (300, 19), (60, 2)])
def test_independent_positions_exceed_the_floor_with_the_stated_probability(n, d):
    """Independent start and end positions: the largest |correlation| over d coordinates
    exceeds the floor in at most about 5 % of replicates (Bonferroni: a little less)."""
    rng = np.random.default_rng(n + d)
    replicates = 4000
    a = rng.normal(size=(replicates, n, d))
    b = rng.normal(size=(replicates, n, d))
    a -= a.mean(axis=1, keepdims=True)
    b -= b.mean(axis=1, keepdims=True)
    r = np.abs((a * b).sum(axis=1)) / np.sqrt((a**2).sum(axis=1) * (b**2).sum(axis=1))
    exceed = np.mean(r.max(axis=1) > correlation_floor(n, d))
    # binomial sd of the share at 5 %: 0.0034
    assert 0.035 < exceed < 0.06


def test_floor_values_and_limits():
    # z = Phi^-1(1 - 0.05 / 18) = 2.7729, tanh(2.7729 / sqrt(97)) = 0.2744
    assert correlation_floor(100, 9) == pytest.approx(0.2744, abs=1e-4)
    assert correlation_floor(100, 9) > correlation_floor(100, 2) > correlation_floor(1000, 2)
    assert correlation_floor(4, 3) == 1.0
    with pytest.raises(ValueError, match="dimension must be >= 1, got 0"):
        correlation_floor(100, 0)
    with pytest.raises(ValueError, match=r"level must be in \(0, 1\), got 1.5"):
        correlation_floor(100, 3, level=1.5)


def test_threshold_is_the_larger_of_the_option_and_the_floor_at_the_weights_ess():
    many = np.zeros(20_000)  # log-weights
    assert stopping_threshold(0.1, effective_sample_size(many), 9) == 0.1  # floor 0.027
    few = np.zeros(100)
    assert stopping_threshold(0.1, effective_sample_size(few), 9) == pytest.approx(
        correlation_floor(100, 9)
    )
    # the weights' effective sample size: half of 200 particles with weight 0 -> 100
    half = np.r_[np.zeros(100), np.full(100, -np.inf)]
    assert stopping_threshold(0.1, effective_sample_size(half), 9) == pytest.approx(
        correlation_floor(100, 9)
    )
    assert stopping_threshold(0.5, effective_sample_size(few), 9) == 0.5
