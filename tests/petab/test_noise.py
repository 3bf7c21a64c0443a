"""PEtab's noise models as distributions of the measurements: PEtab's own log-likelihood."""

import numpy as np
import pymc as pm
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
