"""NUTS with a dense mass matrix from the Hessian at the mode: the mode, the Hessian, the step."""

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_odesens.inference.mode_metric import (
    find_posterior_mode,
    mode_metric_nuts,
    negative_hessian,
)

# y = A x + noise with x = (a0, a1, b) ~ N(0, 10^2): a Gaussian posterior with strong correlation
A = np.array([[1.0, 1.0, 0.0], [1.0, 1.02, 0.5], [0.0, 1.0, 1.0], [2.0, 2.0, 0.1]])
SIGMA, PRIOR_SD = 0.1, 10.0
Y = np.array([1.0, 1.3, -0.4, 2.1])
PRECISION = np.eye(3) / PRIOR_SD**2 + A.T @ A / SIGMA**2
MEAN = np.linalg.solve(PRECISION, A.T @ Y / SIGMA**2)


def _linear_model():
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, PRIOR_SD, shape=2)
        b = pm.Normal("b", 0.0, PRIOR_SD)
        x = pt.concatenate([a, pt.atleast_1d(b)])
        pm.Normal("y", pt.dot(A, x), SIGMA, observed=Y)
    return model


def test_mode_is_the_posterior_mean_and_the_hessian_its_precision():
    model = _linear_model()
    mode = find_posterior_mode(model, compile_kwargs={})
    assert mode.value_variables == ("a", "b")
    np.testing.assert_allclose(mode.vector, MEAN, atol=1e-6)
    np.testing.assert_allclose(mode.point["a"], MEAN[:2], atol=1e-6)
    assert mode.point["b"].shape == ()
    assert mode.gradient_norm < 1e-4
    assert mode.log_density == pytest.approx(float(model.compile_logp()(mode.point)), abs=1e-9)
    function = model.logp_dlogp_function(ravel_inputs=True)
    function.set_extra_values({})
    hessian = negative_hessian(lambda x: function(x)[1], mode.vector)
    np.testing.assert_allclose(hessian, PRECISION, rtol=1e-6)


def test_mode_is_found_in_the_sampler_coordinates():
    # Gamma(3, 2) sampled as u = log(s): density e^(3u) exp(-2 e^u), maximal at e^u = 3/2
    # (the mode of s itself is 1)
    with pm.Model() as model:
        pm.Gamma("s", alpha=3.0, beta=2.0)
    mode = find_posterior_mode(model, start={"s_log__": 2.0}, compile_kwargs={})
    assert mode.value_variables == ("s_log__",)
    assert float(mode.point["s_log__"]) == pytest.approx(np.log(1.5), abs=1e-6)


def test_step_starts_from_the_laplace_covariance_and_samples_the_posterior():
    model = _linear_model()
    step, mode = mode_metric_nuts(model)  # NUMBA mode, as pymc_odesens.sample
    np.testing.assert_allclose(mode.vector, MEAN, atol=1e-6)
    covariance = np.linalg.inv(PRECISION)
    # the potential's velocity is the mass matrix's inverse (the covariance) times momentum
    velocities = np.array([step.potential.velocity(e) for e in np.eye(3)]).T
    np.testing.assert_allclose(velocities, covariance, rtol=1e-5)
    with model:
        idata = pm.sample(
            draws=1000,
            tune=300,
            chains=2,
            cores=1,
            step=step,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    draws = np.concatenate(
        [idata.posterior["a"].values.reshape(-1, 2), idata.posterior["b"].values.reshape(-1, 1)],
        axis=1,
    )
    summary = az.summary(idata)
    assert summary["r_hat"].max() < 1.01
    standard_errors = np.sqrt(np.diag(covariance) / summary["ess_bulk"].to_numpy())
    assert np.all(np.abs(draws.mean(axis=0) - MEAN) < 4 * standard_errors)
    np.testing.assert_allclose(np.cov(draws.T), covariance, rtol=0.15, atol=1e-6)
    assert int(idata.sample_stats["diverging"].sum()) == 0


def test_arguments_are_checked_with_their_names():
    model = _linear_model()
    with pytest.raises(ValueError, match=r"start: \['c'\] are not value variables"):
        find_posterior_mode(model, start={"c": 1.0}, compile_kwargs={})
    with pytest.raises(ValueError, match="variables: 'c' is not a value variable"):
        find_posterior_mode(model, variables=["c"], compile_kwargs={})
    with pytest.raises(ValueError, match=r"target_accept: expected a number in \(0, 1\)"):
        mode_metric_nuts(model, target_accept=1.5)
    with pytest.raises(ValueError, match="initial_weight: expected a positive count"):
        mode_metric_nuts(model, initial_weight=0)
    with pytest.raises(ValueError, match="step: expected a positive number"):
        negative_hessian(lambda x: x, np.zeros(2), step=0.0)
    with pytest.raises(ValueError, match=r"vector: expected a 1-D array"):
        negative_hessian(lambda x: x, np.zeros((2, 2)))


def _walled_model(centre: float) -> pm.Model:
    """a ~ N(centre, 1) with the log-density -inf beyond a = 5 (as a rejected failed solve)."""
    with pm.Model() as model:
        a = pm.Normal("a", centre, 1.0)
        pm.Potential("wall", pt.switch(a > 5.0, -np.inf, 0.0))
    return model


def test_start_where_the_log_density_is_not_finite_is_refused():
    model = _walled_model(centre=0.0)
    with pytest.raises(ValueError, match="start: the model's log-density is -inf there"):
        find_posterior_mode(model, start={"a": 6.0}, compile_kwargs={})


def test_a_flat_direction_is_refused_not_given_an_invented_scale():
    with pm.Model() as model:
        pm.Normal("a", 0.0, 1.0)
        pm.Flat("f")
    with pytest.raises(ValueError, match="1 eigenvalues that are not positive"):
        mode_metric_nuts(model, compile_kwargs={})


def test_the_search_backs_off_from_points_where_the_log_density_is_not_finite():
    # the likelihood pulls a towards 10, beyond the wall at 5
    model = _walled_model(centre=10.0)
    mode = find_posterior_mode(model, start={"a": 0.0}, compile_kwargs={})
    assert np.isfinite(mode.log_density)
    assert 4.0 < float(mode.point["a"]) <= 5.0


def test_a_step_built_short_of_the_mode_is_announced():
    model = _walled_model(centre=10.0)
    with pytest.warns(UserWarning, match="stopped short of a mode"):
        mode_metric_nuts(model, start={"a": 0.0}, compile_kwargs={})


def test_a_hessian_step_into_a_non_finite_region_is_refused():
    # sqrt(5 - a) is NaN beyond a = 5 and the likelihood pulls a there
    with pm.Model() as model:
        a = pm.Normal("a", 10.0, 1.0)
        pm.Potential("edge", pt.sqrt(5.0 - a))
    with pytest.raises(ValueError, match="fd_step=1.0: the log-density's gradient is not finite"):
        mode_metric_nuts(model, start={"a": 0.0}, fd_step=1.0, compile_kwargs={})
