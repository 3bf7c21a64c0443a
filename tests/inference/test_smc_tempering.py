"""The temperature schedule: ESS, conditional ESS, the next inverse temperature, reweighting."""

import numpy as np
import pytest
from scipy.special import logsumexp

from pymc_odesens.inference.smc_tempering import (
    conditional_effective_sample_size,
    effective_sample_size,
    next_temperature,
    reweight,
)


def test_effective_sample_size_of_equal_and_degenerate_weights():
    assert effective_sample_size(np.zeros(10)) == pytest.approx(10.0)
    assert effective_sample_size(np.array([0.0, -np.inf, -np.inf])) == pytest.approx(1.0)
    # two equal weights among zeros
    assert effective_sample_size(
        np.array([-np.inf, np.log(2.0), np.log(2.0), -np.inf])
    ) == pytest.approx(2.0)
    assert effective_sample_size(np.full(3, -np.inf)) == 0.0


def test_conditional_ess_equals_ess_for_uniform_weights_and_is_the_zhou_formula():
    rng = np.random.default_rng(0)
    increments = rng.normal(size=50)
    assert conditional_effective_sample_size(np.zeros(50), increments) == pytest.approx(
        effective_sample_size(increments)
    )
    log_w = rng.normal(size=50)
    W = np.exp(log_w - logsumexp(log_w))
    w = np.exp(increments)
    expected = 50 * (W @ w) ** 2 / (W @ w**2)
    assert conditional_effective_sample_size(log_w, increments) == pytest.approx(expected)


@pytest.mark.parametrize("criterion", ["ess", "cess"])
def test_next_temperature_hits_the_target(criterion):
    rng = np.random.default_rng(1)
    log_likelihood = -50.0 * rng.chisquare(3, size=400)
    log_weights = np.zeros(400)
    beta = next_temperature(0.0, log_likelihood, log_weights, 0.5, criterion)
    assert 0.0 < beta < 1.0
    new, _ = reweight(log_weights, log_likelihood, beta)
    assert effective_sample_size(new) / 400 == pytest.approx(0.5, abs=1e-6)
    # from there, the next step again halves the ESS of the step
    beta2 = next_temperature(beta, log_likelihood, log_weights, 0.5, criterion)
    assert beta2 > beta
    new2, _ = reweight(log_weights, log_likelihood, beta2 - beta)
    assert effective_sample_size(new2) / 400 == pytest.approx(0.5, abs=1e-6)


def test_next_temperature_is_one_when_the_whole_step_keeps_the_target():
    log_likelihood = np.linspace(-1e-3, 0.0, 100)
    assert next_temperature(0.2, log_likelihood, np.zeros(100), 0.5) == 1.0


def test_conditional_ess_targets_the_step_alone_with_unequal_weights():
    rng = np.random.default_rng(2)
    log_likelihood = -20.0 * rng.chisquare(2, size=300)
    log_weights = rng.normal(scale=1.0, size=300)  # not resampled
    beta = next_temperature(0.1, log_likelihood, log_weights, 0.7, "cess")
    increments = (beta - 0.1) * log_likelihood
    assert conditional_effective_sample_size(log_weights, increments) / 300 == pytest.approx(
        0.7, abs=1e-6
    )


def test_failed_particles_get_weight_zero_never_nan():
    log_likelihood = np.array([-1.0, -np.inf, -2.0, -np.inf, -1.5])
    new, increment = reweight(np.zeros(5), log_likelihood, 0.3)
    assert not np.any(np.isnan(new)) and np.isfinite(increment)
    assert np.all(new[[1, 3]] == -np.inf)
    expected = np.log(
        np.mean(np.exp(0.3 * np.array([-1.0, 0.0, -2.0, 0.0, -1.5])) * np.array([1, 0, 1, 0, 1]))
    )
    assert increment == pytest.approx(expected)
    # a zero step leaves every weight as it was
    same, zero = reweight(np.zeros(5), log_likelihood, 0.0)
    assert zero == pytest.approx(0.0) and np.all(np.isfinite(same))


def test_more_failed_particles_than_the_target_allows_still_move_the_schedule():
    # 60 % failed: any step leaves an ESS of at most 40 %, below the target of 50 %;
    # the target then applies to the surviving particles
    rng = np.random.default_rng(3)
    log_likelihood = -10.0 * rng.chisquare(2, size=100)
    log_likelihood[:60] = -np.inf
    beta = next_temperature(0.0, log_likelihood, np.zeros(100), 0.5)
    assert 0.0 < beta < 1.0
    new, _ = reweight(np.zeros(100), log_likelihood, beta)
    assert effective_sample_size(new) == pytest.approx(0.5 * 40, rel=1e-6)


def test_next_temperature_refuses_nan_and_all_failed():
    with pytest.raises(ValueError, match=r"log-likelihood of particles \[1\] is nan"):
        next_temperature(0.0, np.array([0.0, np.nan]), np.zeros(2), 0.5)
    with pytest.raises(ValueError, match="every particle has log-likelihood -inf"):
        next_temperature(0.0, np.full(3, -np.inf), np.zeros(3), 0.5)
    with pytest.raises(ValueError, match="criterion must be one of"):
        next_temperature(0.0, np.zeros(3), np.zeros(3), 0.5, "mcmc")
    with pytest.raises(ValueError, match=r"target must be in \(0, 1\)"):
        next_temperature(0.0, np.zeros(3), np.zeros(3), 1.5)
