"""Systematic and residual resampling: copies with mean N W_i, none of a weight-0 particle."""

import numpy as np
import pytest

from pymc_odesens.inference.smc_resampling import (
    resample,
    residual_resampling,
    systematic_resampling,
)

WEIGHTS = np.array([0.05, 0.0, 0.4, 0.15, 0.0, 0.3, 0.1])


@pytest.mark.parametrize("method", [systematic_resampling, residual_resampling])
def test_copies_are_floor_or_ceil_of_n_w_and_sorted(method):
    rng = np.random.default_rng(0)
    n = len(WEIGHTS)
    for _ in range(200):
        ancestors = method(WEIGHTS * 3.0, rng)  # any normalisation
        assert len(ancestors) == n and np.all(np.diff(ancestors) >= 0)
        copies = np.bincount(ancestors, minlength=n)
        assert np.all(copies[WEIGHTS == 0] == 0)
        if method is systematic_resampling:
            assert np.all(copies >= np.floor(n * WEIGHTS)) and np.all(
                copies <= np.ceil(n * WEIGHTS)
            )
        else:
            assert np.all(copies >= np.floor(n * WEIGHTS))


@pytest.mark.parametrize("name", ["systematic", "residual"])
def test_mean_copies_are_n_w(name):
    rng = np.random.default_rng(1)
    n = len(WEIGHTS)
    total = np.zeros(n)
    repeats = 20000
    for _ in range(repeats):
        total += np.bincount(resample(name, WEIGHTS, rng), minlength=n)
    # the standard error of each mean is at most 0.5 / sqrt(repeats) for systematic, and
    # below sqrt(n / 4 / repeats) for the residual's multinomial part
    np.testing.assert_allclose(total / repeats, n * WEIGHTS, atol=0.04)


def test_resampling_refuses_bad_weights_and_methods():
    rng = np.random.default_rng(2)
    with pytest.raises(ValueError, match="every weight is 0"):
        systematic_resampling(np.zeros(3), rng)
    with pytest.raises(ValueError, match="finite and non-negative"):
        residual_resampling(np.array([1.0, np.nan]), rng)
    with pytest.raises(ValueError, match="resampling must be one of"):
        resample("stratified", np.ones(3), rng)
