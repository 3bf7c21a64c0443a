"""The population's mass matrix: weighted covariance, momenta from N(0, Sigma^-1)."""

import numpy as np
import pytest

from pymc_odesens.inference.smc_mass_matrix import population_metric

COVARIANCE = np.array([[4.0, 1.2, 0.0], [1.2, 1.0, 0.0], [0.0, 0.0, 1e-6]])


def _draws(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.multivariate_normal([1.0, -2.0, 0.5], COVARIANCE, size=n)


def test_dense_metric_is_the_shrunk_covariance():
    x = _draws()
    metric = population_metric(x, np.ones(len(x)), "dense")
    sigma = metric.cholesky @ metric.cholesky.T
    sample = np.cov(x, rowvar=False)
    shrink = len(x) / (len(x) + 5.0)
    expected = shrink * sample + (1 - shrink) * np.diag(np.diag(sample))
    expected += 1e-10 * np.diag(sample).max() * np.eye(3)
    np.testing.assert_allclose(sigma, expected, rtol=1e-6, atol=1e-14)
    # the tiny variance of the third coordinate is kept (no absolute floor)
    assert sigma[2, 2] == pytest.approx(1e-6, rel=0.1)


def test_weighted_diag_metric_equals_the_resampled_population():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 2))
    weights = np.array([1.0, 2.0, 0.0, 1.0, 3.0, 1.0])
    metric = population_metric(x, weights, "diag")
    w = weights / weights.sum()
    mean = w @ x
    expected = (w @ (x - mean) ** 2) / (1 - np.sum(w**2))
    np.testing.assert_allclose(metric.variances, expected + 1e-10 * expected.max(), rtol=1e-12)


@pytest.mark.parametrize("kind", ["diag", "dense"])
def test_momenta_have_covariance_sigma_inverse_and_energy_matches_velocity(kind):
    metric = population_metric(_draws(), np.ones(4000), kind)
    rng = np.random.default_rng(2)
    p = np.array([metric.draw_momentum(rng) for _ in range(40000)])
    sigma = np.diag(metric.variances) if kind == "diag" else metric.cholesky @ metric.cholesky.T
    # whitened by Sigma's Cholesky factor the momenta are standard normal: Cov(L' p) = I
    # (each entry's standard error is about 1 / sqrt(40000) = 0.005)
    factor = np.linalg.cholesky(sigma)
    np.testing.assert_allclose(np.cov(p @ factor, rowvar=False), np.eye(3), atol=0.03)
    q = p[0]
    assert metric.kinetic_energy(q) == pytest.approx(0.5 * q @ sigma @ q)
    np.testing.assert_allclose(metric.velocity(q), sigma @ q, rtol=1e-10)
    delta = np.array([0.3, -1.0, 2e-3])
    expected = delta @ np.linalg.solve(sigma, delta)
    assert metric.squared_distance(delta) == pytest.approx(expected, rel=1e-8)


def test_metric_refuses_unknown_kind():
    with pytest.raises(ValueError, match=r"mass_matrix must be one of \('diag', 'dense'\)"):
        population_metric(np.zeros((3, 2)), np.ones(3), "full")
