"""The whitened model: the original posterior in coordinates z with x = m + L z.

On a Gaussian posterior the Laplace approximation is exact, so the whitened density must be
the standard normal's up to a constant; on a model with transforms and deterministics the
whitened density is the original's plus log |det L| and every original variable comes back
by name; nutpie sampling the whitened model gives the original posterior.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pymc as pm
import pytest

from pymc_odesens.inference import laplace_approximation
from pymc_odesens.inference.converged_sampling import sample_until_converged
from pymc_odesens.inference.whitened_model import WHITENED_NAME, whitened_model
from tests.inference.test_mode_metric import MEAN, PRECISION, _linear_model


def _log_density_and_gradient(model: pm.Model):
    function = model.logp_dlogp_function(ravel_inputs=True)
    function.set_extra_values({})
    return function


def test_a_gaussian_posterior_becomes_the_standard_normal():
    model = _linear_model()
    laplace = laplace_approximation(model, {"a": np.zeros(2), "b": np.array(0.0)})
    white = whitened_model(laplace)
    np.testing.assert_allclose(white.cholesky @ white.cholesky.T, np.linalg.inv(PRECISION))
    function = _log_density_and_gradient(white.model)
    rng = np.random.default_rng(3)
    zs = rng.normal(size=(5, 3))
    values = [function(z) for z in zs]
    # log N(z; 0, I) up to one constant, and its gradient -z
    constants = [lp + 0.5 * z @ z for (lp, _), z in zip(values, zs, strict=True)]
    np.testing.assert_allclose(constants, constants[0], rtol=0, atol=1e-7)
    for (_, gradient), z in zip(values, zs, strict=True):
        np.testing.assert_allclose(gradient, -z, atol=1e-6)
    # the map and its inverse
    x = white.from_whitened(zs[0])
    np.testing.assert_allclose(white.to_whitened(x), zs[0], atol=1e-12)
    np.testing.assert_allclose(white.from_whitened(np.zeros(3)), MEAN, atol=1e-6)


def _transformed_model() -> pm.Model:
    with pm.Model(coords={"site": ["a", "b"]}) as model:
        k = pm.LogNormal("k", 0.0, 1.0)
        b = pm.Normal("b", k, 1.0, dims="site")
        pm.Deterministic("total", k * b.sum())
        pm.Normal("y", b.sum() + k, 0.3, observed=[1.0, 1.2])
    return model


def test_the_density_is_the_original_one_and_every_variable_comes_back():
    model = _transformed_model()
    laplace = laplace_approximation(model, model.initial_point(), hessian="finite-differences")
    white = whitened_model(laplace)
    assert white.value_variables == ("k_log__", "b")
    assert white.recorded == ("k", "b", "total")
    assert [v.name for v in white.model.free_RVs] == [WHITENED_NAME]
    assert white.model.named_vars_to_dims["b"] == ("site",)
    original = _log_density_and_gradient(model)
    whitened = _log_density_and_gradient(white.model)
    values = white.model.compile_fn(
        white.model.replace_rvs_by_values(white.model.deterministics),
        inputs=white.model.value_vars,
        on_unused_input="ignore",
    )
    log_det = np.sum(np.log(np.diag(white.cholesky)))
    rng = np.random.default_rng(11)
    for z in rng.normal(size=(4, 3)):
        x = white.from_whitened(z)
        lp_x, grad_x = original(x)
        lp_z, grad_z = whitened(z)
        assert lp_z == pytest.approx(lp_x + log_det, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(grad_z, white.cholesky.T @ grad_x, rtol=1e-10, atol=1e-12)
        k, b, total = values({WHITENED_NAME: z})
        assert float(k) == pytest.approx(math.exp(x[0]), rel=1e-12)
        np.testing.assert_allclose(b, x[1:], rtol=1e-12)
        assert float(total) == pytest.approx(math.exp(x[0]) * x[1:].sum(), rel=1e-12)


def test_errors_name_the_argument():
    model = _linear_model()
    laplace = laplace_approximation(model, {"a": np.zeros(2), "b": np.array(0.0)})
    with pytest.raises(TypeError, match="laplace: expected a LaplaceApproximation"):
        whitened_model({"covariance": np.eye(3)})
    bad = dataclasses.replace(laplace, covariance=-np.eye(3))
    with pytest.raises(ValueError, match="laplace: its covariance is not positive definite"):
        whitened_model(bad)
    wrong = dataclasses.replace(laplace, covariance=np.eye(2))
    with pytest.raises(ValueError, match=r"laplace: covariance of shape \(2, 2\) for a mode of 3"):
        whitened_model(wrong)
    with pytest.raises(ValueError, match="whiten: only for sampler='nutpie'"):
        sample_until_converged(model, var_names=["a"], sampler="pymc", whiten=laplace)
    with pytest.raises(ValueError, match="initvals: must be None with whiten"):
        sample_until_converged(model, var_names=["a"], initvals={"b": 0.0}, whiten=laplace)
    with pytest.raises(ValueError, match="whiten: an approximation of another model"):
        sample_until_converged(_linear_model(), var_names=["a"], whiten=laplace)


@pytest.mark.slow  # a sampling run; the density test above and test_laplace_mixture's
# nutpie run cover the whitened model by default
def test_nutpie_on_the_whitened_model_samples_the_original_posterior():
    model = _linear_model()
    laplace = laplace_approximation(model, {"a": np.zeros(2), "b": np.array(0.0)})
    idata, outcome = sample_until_converged(
        model,
        var_names=["a", "b"],
        draws=200,
        tune=200,
        chains=2,
        max_draws=2000,
        target_ess=400,
        random_seed=4,
        whiten=laplace,
        progressbar=False,
    )
    assert outcome.converged
    posterior = idata.posterior
    assert set(posterior.data_vars) == {"a", "b"}  # the original variables only
    draws = np.concatenate(
        [posterior["a"].values.reshape(-1, 2), posterior["b"].values.reshape(-1, 1)], axis=1
    )
    covariance = np.linalg.inv(PRECISION)
    sd = np.sqrt(np.diag(covariance))
    ess = outcome.checks.ess_bulk_min
    np.testing.assert_array_less(np.abs(draws.mean(axis=0) - MEAN), 5 * sd / np.sqrt(ess))
    np.testing.assert_allclose(np.cov(draws.T), covariance, rtol=0.2, atol=0.1 * sd.min() ** 2)
    # the chains started apart, at draws of the approximation
    first = draws.reshape(2, -1, 3)[:, 0, :]
    assert not np.allclose(first[0], first[1])
    assert "observed_data" in idata.groups()
