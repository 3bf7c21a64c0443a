"""NUTS whose chains share one dense metric from the draws of all of them."""

import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_odesens
from pymc_odesens.inference.anchored_potential import AnchoredFullAdapt
from pymc_odesens.inference.pooled_metric import pooled_covariance, sampler_coordinates
from tests.inference.test_anchored_potential import _anchored_covariance

COVARIANCE = np.array([[1.0, 0.95, 0.0], [0.95, 1.0, 0.0], [0.0, 0.0, 0.04]])
MEAN = np.array([1.0, -2.0, 0.5])


def test_pooled_covariance_without_an_anchor_is_stan_regularised_sample_covariance():
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(3, 40, 4)) * [1.0, 2.0, 0.5, 3.0]
    flat = draws.reshape(120, 4)
    expected = (120 / 125) * np.cov(flat, rowvar=False) + (1e-3 * 5 / 125) * np.eye(4)
    np.testing.assert_allclose(pooled_covariance(draws), expected, rtol=1e-12)


def test_pooled_covariance_of_an_anchored_step_counts_the_anchor_once_for_all_chains():
    rng = np.random.default_rng(1)
    mean0 = rng.normal(size=5)
    cov0 = np.diag(rng.uniform(0.5, 2.0, size=5))
    potential = AnchoredFullAdapt(5, mean0, cov0, 7)
    # two chains in different places: the pooled estimate spans both
    draws = np.stack([rng.normal(size=(30, 5)) - 2.0, rng.normal(size=(30, 5)) + 2.0])
    expected = _anchored_covariance(mean0, cov0, 7, draws.reshape(60, 5))
    np.testing.assert_allclose(pooled_covariance(draws, potential), expected, rtol=1e-10)
    assert np.all(np.diag(expected) > 4.0)  # the chains' separation, not one chain's spread


def test_pooled_covariance_refuses_draws_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"draws: expected shape \(chains, draws, n\)"):
        pooled_covariance(np.zeros((10, 3)))


def _gaussian_model():
    with pm.Model() as model:
        pm.MvNormal("x", mu=MEAN, cov=COVARIANCE)
    return model


def test_chains_from_far_apart_share_the_metric_and_sample_the_posterior():
    model = _gaussian_model()
    with model:
        step, _ = pymc_odesens.mode_metric_nuts()
        idata = pymc_odesens.sample_pooled_metric(
            1500,
            step=step,
            tune=200,
            pooling_draws=100,
            step_size_tune=100,
            chains=2,
            cores=1,
            random_seed=5,
            initvals=[{"x": MEAN + 6.0}, {"x": MEAN - 6.0}],
            progressbar=False,
        )
    draws = idata.posterior["x"].values  # (chain, draw, 3)
    assert draws.shape == (2, 1500, 3)
    flat = draws.reshape(-1, 3)
    sd = np.sqrt(np.diag(COVARIANCE))
    np.testing.assert_allclose(flat.mean(axis=0), MEAN, atol=0.1 * sd.max())
    np.testing.assert_allclose(np.cov(flat, rowvar=False), COVARIANCE, atol=0.1)
    for chain in draws:  # each chain alone: the same distribution
        np.testing.assert_allclose(chain.mean(axis=0), MEAN, atol=0.15)
    attrs = idata.sample_stats.attrs
    assert attrs["pooled_metric_draws"] == 100
    assert attrs["first_stage_time"] > 0
    assert len(attrs["first_stage_step_sizes"]) == 2
    assert attrs["tuning_steps"] == 100


def test_arguments_are_checked_with_their_names():
    model = _gaussian_model()
    with model:
        nuts = pm.NUTS()
        with pytest.raises(ValueError, match="chains: expected at least 2"):
            pymc_odesens.sample_pooled_metric(10, step=nuts, chains=1)
        with pytest.raises(ValueError, match="pooling_draws: expected a positive count"):
            pymc_odesens.sample_pooled_metric(10, step=nuts, pooling_draws=0)
        with pytest.raises(ValueError, match="step: expected a pymc.NUTS step"):
            pymc_odesens.sample_pooled_metric(10, step=pm.Metropolis())
        with pytest.raises(ValueError, match="nuts_sampler: expected 'pymc'"):
            pymc_odesens.sample_pooled_metric(10, step=nuts, nuts_sampler="nutpie")
        with pytest.raises(ValueError, match="return_inferencedata: sample_pooled_metric"):
            pymc_odesens.sample_pooled_metric(10, step=nuts, return_inferencedata=False)


def test_sampler_coordinates_are_the_transformed_values_pymc_samples():
    with pm.Model() as model:
        width = pm.LogNormal("width", 0.0, 0.5)
        pm.Uniform("inside", -1.0, width, shape=2)  # bounds that depend on another variable
        pm.Normal("free", 0.0, 1.0)
        idata = pymc_odesens.sample(
            60,
            tune=60,
            chains=2,
            cores=1,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
            idata_kwargs={"include_transformed": True},
        )
        value_vars = model.value_vars
    coordinates = sampler_coordinates(idata.posterior, value_vars, model)
    expected = np.concatenate(
        [idata.posterior[v.name].values.reshape(2, 60, -1) for v in value_vars], axis=2
    )
    assert coordinates.shape == (2, 60, 4)
    np.testing.assert_allclose(coordinates, expected, rtol=1e-10, atol=1e-12)
    # a step over some of the variables (one of a compound step): only theirs
    some = sampler_coordinates(idata.posterior, value_vars[1:], model)
    np.testing.assert_allclose(some, expected[:, :, 1:], rtol=1e-10, atol=1e-12)


def _iid_trace(chains: int, draws: int, seed: int):
    """Exact draws of the Gaussian model, as a trace to continue."""
    import arviz as az

    rng = np.random.default_rng(seed)
    x = rng.multivariate_normal(MEAN, COVARIANCE, size=(chains, draws))
    return az.from_dict(
        posterior={"x": x},
        sample_stats={"diverging": np.zeros((chains, draws), bool)},
    )


def test_resumed_chains_keep_the_trace_and_add_draws_of_the_posterior():
    model = _gaussian_model()
    trace = _iid_trace(2, 150, seed=11)
    with model:
        step, _ = pymc_odesens.mode_metric_nuts()
        joined = pymc_odesens.resume_pooled_metric(
            trace, 1500, step=step, step_size_tune=100, cores=1, random_seed=7, progressbar=False
        )
    x = joined.posterior["x"].values
    assert x.shape == (2, 1650, 3)
    np.testing.assert_array_equal(x[:, :150], trace.posterior["x"].values)
    new = x[:, 150:].reshape(-1, 3)
    np.testing.assert_allclose(new.mean(axis=0), MEAN, atol=0.1)
    np.testing.assert_allclose(np.cov(new, rowvar=False), COVARIANCE, atol=0.1)
    attrs = joined.sample_stats.attrs
    assert attrs["resumed_draws"] == 150 and attrs["metric_draws"] == 300
    assert attrs["tuning_steps"] == 100
    assert joined.sample_stats["diverging"].shape == (2, 1650)
    # under the pooled metric of exact draws, a step of about one posterior sd:
    # NUTS needs few leapfrog steps per draw even along the 0.95 correlation
    steps = joined.sample_stats["n_steps"].values[:, 150:]
    assert np.median(steps) <= 7


def test_a_continuation_of_a_continuation_read_from_disk_joins(tmp_path):
    """A joined trace written to NetCDF keeps the attributes that az.concat combined (as
    arrays, from the second continuation on); continuing it again crashed in az.concat after
    all its sampling (2026-11-25's third Bachmann continuation: AttributeError, 'numpy.ndarray'
    object has no attribute 'append'; its checkpoint kept the draws)."""
    model = _gaussian_model()
    trace = _iid_trace(2, 150, seed=11)
    with model:
        for run, draws in enumerate((40, 30, 20)):
            step, _ = pymc_odesens.mode_metric_nuts()
            joined = pymc_odesens.resume_pooled_metric(
                trace,
                draws,
                step=step,
                step_size_tune=20,
                cores=1,
                random_seed=run,
                progressbar=False,
            )
            path = tmp_path / f"run{run}.nc"
            joined.to_netcdf(path)
            previous, trace = trace, az.from_netcdf(path)
            assert trace.posterior.sizes["draw"] == previous.posterior.sizes["draw"] + draws
            np.testing.assert_array_equal(
                trace.posterior["x"].values[:, : previous.posterior.sizes["draw"]],
                previous.posterior["x"].values,
            )
    assert trace.posterior.sizes["draw"] == 240
    assert trace.sample_stats.attrs["resumed_draws"] == 220


def test_resume_arguments_are_checked_with_their_names():
    model = _gaussian_model()
    with model:
        nuts = pm.NUTS()
        with pytest.raises(ValueError, match="trace: expected at least 2 chains"):
            pymc_odesens.resume_pooled_metric(_iid_trace(1, 20, 0), 10, step=nuts)
        for name, value in (("chains", 4), ("tune", 10), ("initvals", {})):
            with pytest.raises(ValueError, match=f"{name}: resume_pooled_metric continues"):
                pymc_odesens.resume_pooled_metric(
                    _iid_trace(2, 20, 0), 10, step=nuts, **{name: value}
                )
        with pytest.raises(ValueError, match="step: expected a pymc.NUTS step"):
            pymc_odesens.resume_pooled_metric(_iid_trace(2, 20, 0), 10, step=pm.Metropolis())
        with pytest.raises(ValueError, match="nuts_sampler: expected 'pymc'"):
            pymc_odesens.resume_pooled_metric(
                _iid_trace(2, 20, 0), 10, step=nuts, nuts_sampler="nutpie"
            )
    with pm.Model():
        pm.Normal("y", shape=3)
        nuts = pm.NUTS()
        with pytest.raises(ValueError, match=r"trace: expected draws of every free and .*'y'"):
            pymc_odesens.resume_pooled_metric(_iid_trace(2, 20, 0), 10, step=nuts)
        with pytest.raises(ValueError, match=r"posterior: expected draws of every free .*'y'"):
            sampler_coordinates(_iid_trace(2, 20, 0).posterior, nuts.vars)
