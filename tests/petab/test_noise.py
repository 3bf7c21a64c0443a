"""PEtab's noise models as distributions of the measurements: PEtab's own log-likelihood."""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from petab.v1.calculate import calculate_single_llh

from pymc_odesens.petab.noise import measurement_distribution, observed_measurements

CASES = [(d, t) for d in ("normal", "laplace") for t in ("lin", "log", "log10")]


@pytest.mark.parametrize("distribution, transformation", CASES)
def test_log_density_is_petabs(distribution, transformation):
    m = np.array([0.4, 1.3, 2.7, 10.0])
    h = np.array([0.5, 1.0, 3.0, 7.5])
    sigma = np.array([0.2, 0.05, 0.7, 1.3])
    dist = measurement_distribution(distribution, transformation, h, sigma)
    ours = pm.logp(dist, m).eval()
    expected = [
        calculate_single_llh(mi, hi, transformation, distribution, si)
        for mi, hi, si in zip(m, h, sigma)
    ]
    np.testing.assert_allclose(ours, expected, rtol=1e-12)


@pytest.mark.parametrize("distribution, transformation", CASES)
def test_observed_draws_have_the_noise_model(distribution, transformation):
    # draws of the observed variable: on the transformed scale, centred at h with the
    # spread of the noise model (normal: sd sigma; laplace: mean absolute deviation sigma)
    h, sigma = 2.0, 0.1
    with pm.Model():
        obs = observed_measurements("y", distribution, transformation, np.full(1, h), sigma, [2.0])
    draws = pm.draw(obs, 20000, random_seed=1)[:, 0]
    scaled = {"lin": lambda v: v, "log": np.log, "log10": np.log10}[transformation]
    centred = scaled(draws) - scaled(h)
    spread = np.std(centred) if distribution == "normal" else np.mean(np.abs(centred))
    assert abs(np.median(centred)) < 0.005
    assert abs(spread - sigma) < 0.004


@pytest.mark.parametrize("distribution", ["normal", "laplace"])
@pytest.mark.parametrize("transformation", ["log", "log10"])
def test_non_positive_simulation_on_a_log_scale(distribution, transformation):
    # a positive measurement has density zero where h <= 0: -inf, with a finite gradient
    h = pt.dvector("h")
    with pm.Model() as model:
        obs = observed_measurements("y", distribution, transformation, h, 0.3, [1.0, 2.0, 0.5])
    assert "y_simulation_not_positive" in model.named_vars
    logp = model.logp()
    f = pytensor.function([h], [logp, pytensor.grad(logp, h)])
    value, gradient = f(np.array([1.2, 1.5, 0.4]))
    expected = sum(
        calculate_single_llh(m, hi, transformation, distribution, 0.3)
        for m, hi in zip([1.0, 2.0, 0.5], [1.2, 1.5, 0.4])
    )
    assert value == pytest.approx(expected, rel=1e-12)  # the potential is 0 here
    for bad in ([0.0, 1.5, 0.4], [1.2, -1.0, 0.4], [1.2, 1.5, np.nan]):
        value, gradient = f(np.array(bad))
        assert value == -np.inf
        assert np.all(np.isfinite(gradient)), bad
    # draws where h = 0 are the measurement's limit, 0 (about the smallest normal float)
    draws = pm.draw(obs, 200, givens={h: np.array([0.0, 2.0, 1.0])}, random_seed=2)
    assert np.all(draws[:, 0] >= 0.0) and np.all(draws[:, 0] < 1e-290)
    assert np.all(draws[:, 1] > 1e-6)  # the others as before
