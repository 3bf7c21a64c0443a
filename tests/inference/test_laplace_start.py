"""The Laplace approximation at a mode as chain starts and mass matrix."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from pymc.initial_point import make_initial_point_fn
from pymc.step_methods.hmc.quadpotential import QuadPotentialFull

from pymc_odesens.inference import find_modes, laplace_approximation
from pymc_odesens.inference.anchored_potential import AnchoredFullAdapt
from tests.inference.test_mode_metric import MEAN, PRECISION, _linear_model


@pytest.mark.parametrize("hessian", ["fisher", "finite-differences"])
def test_the_covariance_of_a_gaussian_posterior_is_its_inverse_precision(hessian):
    model = _linear_model()
    laplace = laplace_approximation(model, {"a": np.zeros(2), "b": np.array(0.0)}, hessian)
    np.testing.assert_allclose(laplace.mode.vector, MEAN, atol=1e-6)
    np.testing.assert_allclose(laplace.covariance, np.linalg.inv(PRECISION), rtol=1e-5)
    assert isinstance(laplace.potential(), AnchoredFullAdapt)
    assert isinstance(laplace.potential(adapt=False), QuadPotentialFull)


def _starts(model, initvals, seeds, transformed: bool = False):
    """The initial points PyMC draws from ``initvals`` with each seed, concatenated (the
    variables' own scale, or the sampler's with ``transformed``)."""
    function = make_initial_point_fn(
        model=model, overrides=initvals, jitter_rvs=set(), return_transformed=transformed
    )
    return np.array(
        [np.concatenate([np.ravel(v) for v in function(seed).values()]) for seed in seeds]
    )


def test_chain_starts_are_draws_of_the_laplace_approximation():
    model = _linear_model()
    laplace = laplace_approximation(model, {"a": np.zeros(2), "b": np.array(0.0)})
    draws = _starts(model, laplace.start_values(), range(400))
    assert len({tuple(d) for d in draws}) == 400  # every chain its own start
    covariance = np.linalg.inv(PRECISION)
    sd = np.sqrt(np.diag(covariance))
    # mean and covariance of 400 draws within 5 standard errors
    np.testing.assert_array_less(np.abs(draws.mean(axis=0) - MEAN), 5 * sd / np.sqrt(400))
    np.testing.assert_allclose(np.cov(draws.T), covariance, rtol=0.25, atol=0.1 * sd.min() ** 2)
    at_mode = _starts(model, laplace.start_values(spread=0.0), range(2))
    np.testing.assert_allclose(at_mode, [MEAN, MEAN], atol=1e-6)


def test_a_map_on_a_bound_gives_a_finite_sampler_mode_and_a_positive_covariance():
    # the likelihood rises towards a = 0, the lower bound: the MAP is on the bound, the
    # sampler's mode (with the interval's log-Jacobian) inside it
    with pm.Model() as model:
        a = pm.Uniform("a", 0.0, 5.0)
        pm.Normal("y", a, 1.0, observed=[-2.0, -1.5])
    result = find_modes(model, 3, random_seed=1, n_workers=1, method="L-BFGS-B")
    assert result.best.parameters["a"] == 0.0
    laplace = result.laplace()
    u = float(laplace.mode.vector[0])
    assert np.isfinite(u) and u < -1.0
    assert laplace.covariance[0, 0] > 0
    starts = _starts(model, laplace.start_values(), range(20))
    assert np.all((starts > 0) & (starts < 5))
