"""Writing a trace while it is sampled."""

import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_odesens
from pymc_odesens.inference.checkpoint import TraceCheckpoint
from tests.inference.test_pooled_metric import MEAN, _gaussian_model, _iid_trace


def _normal_model():
    with pm.Model() as model:
        x = pm.Normal("x", 1.0, 2.0, shape=2)
        pm.Deterministic("x_sum", x.sum())
    return model


@pytest.mark.parametrize("cores", [1, 2])
def test_a_checkpoint_holds_the_draws_all_chains_have_at_the_last_multiple(tmp_path, cores):
    path = tmp_path / "run.nc"
    model = _normal_model()
    with model:
        checkpoint = TraceCheckpoint(path, 100, tune=50, chains=2)
        idata = pm.sample(
            250,
            tune=50,
            chains=2,
            cores=cores,
            random_seed=3,
            progressbar=False,
            callback=checkpoint,
        )
    written = az.from_netcdf(path)
    # written at 100 and 200 draws of the slower chain, not at 250
    assert written.posterior["x"].shape == (2, 200, 2)
    assert written.sample_stats.attrs["checkpoint_draws"] == 200
    for name in ("x", "x_sum"):
        np.testing.assert_array_equal(
            written.posterior[name].values, idata.posterior[name].values[:, :200]
        )
    np.testing.assert_array_equal(
        written.sample_stats["step_size"].values, idata.sample_stats["step_size"].values[:, :200]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.nc"]  # no partial file left


def test_a_run_stopped_from_outside_keeps_its_last_checkpoint(tmp_path):
    path = tmp_path / "run.nc"
    seen = []

    def stop_after_130_draws(trace, draw):
        seen.append(draw.draw_idx)
        if draw.chain == 1 and not draw.tuning and len(trace) - 20 == 130:
            raise KeyboardInterrupt

    model = _normal_model()
    with model:
        checkpoint = TraceCheckpoint(path, 60, tune=20, chains=2, then=stop_after_130_draws)
        pm.sample(
            1000,
            tune=20,
            chains=2,
            cores=1,
            random_seed=4,
            progressbar=False,
            callback=checkpoint,
            compute_convergence_checks=False,
        )
    assert seen  # the other callback was called too
    written = az.from_netcdf(path)
    assert written.posterior["x"].shape == (2, 120, 2)
    assert written.sample_stats.attrs["checkpoint_draws"] == 120


def test_a_continuation_checkpoints_the_trace_followed_by_the_new_draws(tmp_path):
    path = tmp_path / "resumed.nc"
    model = _gaussian_model()
    trace = _iid_trace(2, 40, seed=2)
    with model:
        step, _ = pymc_odesens.mode_metric_nuts()
        joined = pymc_odesens.resume_pooled_metric(
            trace,
            90,
            step=step,
            step_size_tune=30,
            cores=1,
            random_seed=6,
            progressbar=False,
            checkpoint=path,
            checkpoint_every=40,
        )
    written = az.from_netcdf(path)
    assert written.posterior["x"].shape == (2, 40 + 80, 3)
    np.testing.assert_array_equal(
        written.posterior["x"].values, joined.posterior["x"].values[:, :120]
    )
    attrs = written.sample_stats.attrs
    assert attrs["resumed_draws"] == 40 and attrs["checkpoint_draws"] == 80
    # the checkpoint can itself be continued
    with model:
        again = pymc_odesens.resume_pooled_metric(
            written, 10, step=step, step_size_tune=10, cores=1, random_seed=8, progressbar=False
        )
    assert again.posterior["x"].shape == (2, 130, 3)
    assert np.all(np.isfinite(again.posterior["x"].values))
    assert np.abs(again.posterior["x"].values.mean(axis=(0, 1)) - MEAN).max() < 1.0


def test_checkpoint_arguments_are_checked_with_their_names(tmp_path):
    model = _gaussian_model()
    with model:
        with pytest.raises(ValueError, match="every: expected a positive number of draws"):
            TraceCheckpoint(tmp_path / "a.nc", 0, tune=10, chains=2)
        with pytest.raises(ValueError, match="tune: expected a count of at least 0"):
            TraceCheckpoint(tmp_path / "a.nc", 10, tune=-1, chains=2)
        with pytest.raises(ValueError, match="chains: expected at least 1"):
            TraceCheckpoint(tmp_path / "a.nc", 10, tune=10, chains=0)
        nuts = pm.NUTS()
        with pytest.raises(ValueError, match="checkpoint_every: expected a positive number"):
            pymc_odesens.resume_pooled_metric(
                _iid_trace(2, 20, 0),
                10,
                step=nuts,
                checkpoint=tmp_path / "a.nc",
                checkpoint_every=2.5,
            )
        with pytest.raises(ValueError, match="checkpoint_every: expected a positive number"):
            pymc_odesens.sample_pooled_metric(10, step=nuts, checkpoint_every=-3)


def test_the_pooled_metric_stage_checkpoints_its_draws(tmp_path):
    path = tmp_path / "pooled.nc"
    with _gaussian_model():
        step, _ = pymc_odesens.mode_metric_nuts()
        idata = pymc_odesens.sample_pooled_metric(
            60,
            step=step,
            tune=50,
            pooling_draws=20,
            step_size_tune=20,
            chains=2,
            cores=1,
            random_seed=9,
            progressbar=False,
            checkpoint=path,
            checkpoint_every=25,
        )
    written = az.from_netcdf(path)
    # the second stage's draws (the result), at 50 of 60; the first stage's are not written
    assert written.sample_stats.attrs["checkpoint_draws"] == 50
    np.testing.assert_array_equal(
        written.posterior["x"].values, idata.posterior["x"].values[:, :50]
    )
