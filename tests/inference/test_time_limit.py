"""Stopping a sampling run at a wall-clock limit, keeping its draws."""

import time

import numpy as np
import pymc as pm
import pytest

import pymc_odesens
from pymc_odesens.inference.time_limit import TimeLimit
from tests.inference.test_checkpoint import _normal_model
from tests.inference.test_pooled_metric import _gaussian_model, _iid_trace


def _sample(limit: TimeLimit, draws: int, *, tune: int, chains: int, cores: int, seed: int):
    """``pm.sample`` of the normal model with ``limit`` as its callback."""
    with _normal_model():
        return pm.sample(
            draws,
            tune=tune,
            chains=chains,
            cores=cores,
            random_seed=seed,
            progressbar=False,
            callback=limit,
            compute_convergence_checks=False,
        )


def test_a_run_stops_after_the_limit_with_its_draws():
    seen = []
    limit = TimeLimit(3.0, then=lambda trace, draw: seen.append(draw.tuning))
    began = time.monotonic()
    idata = _sample(limit, 10**7, tune=100, chains=1, cores=1, seed=1)
    took = time.monotonic() - began
    assert limit.stopped
    assert 3.0 < took < 60.0
    draws = idata.posterior.sizes["draw"]
    assert 0 < draws < 10**7
    assert len(seen) == 100 + draws  # the other callback saw every tuning step and draw
    x = idata.posterior["x"].values.reshape(-1, 2)
    if draws >= 500:  # the kept draws are the posterior's
        np.testing.assert_allclose(x.mean(axis=0), 1.0, atol=0.5)


def test_tuning_is_never_cut_short():
    limit = TimeLimit(1e-6)
    idata = _sample(limit, 1000, tune=150, chains=1, cores=1, seed=2)
    assert limit.stopped
    assert idata.posterior.sizes["draw"] == 1  # stopped at the first draw after tuning
    assert idata.sample_stats.attrs["tuning_steps"] == 150


def test_a_continuation_that_loses_a_chain_to_a_stop_says_so():
    # chains one after another: stopped at the first chain's first draw, PyMC keeps one
    with _gaussian_model():
        step, _ = pymc_odesens.mode_metric_nuts()
        with pytest.raises(RuntimeError, match="returned 1 of the trace's 2 chains"):
            pymc_odesens.resume_pooled_metric(
                _iid_trace(2, 30, seed=3),
                50,
                step=step,
                step_size_tune=10,
                cores=1,
                progressbar=False,
                callback=TimeLimit(1e-6),
            )


def test_the_limit_must_be_positive():
    for seconds in (0, -5.0, float("nan")):
        with pytest.raises(ValueError, match="seconds: expected a positive number of seconds"):
            TimeLimit(seconds)


def test_chains_in_parallel_stop_together_and_keep_their_draws():
    limit = TimeLimit(4.0)
    began = time.monotonic()
    idata = _sample(limit, 10**7, tune=100, chains=2, cores=2, seed=5)
    assert limit.stopped
    assert 4.0 < time.monotonic() - began < 90.0
    assert idata.posterior.sizes["chain"] == 2
    assert 0 < idata.posterior.sizes["draw"] < 10**7
