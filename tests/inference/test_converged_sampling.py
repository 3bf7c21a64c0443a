"""Sampling until converged (``sample_until_converged``) on a conjugate normal model whose
posterior is known: both samplers stop at the first check that meets the targets, with the
draws that met them, the posterior right within Monte Carlo error, extra variables added per
stretch and checked, a time limit honoured, every chain sampled although there are fewer
cores than chains."""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytest
import xarray as xr

from pymc_odesens.inference.converged_sampling import sample_until_converged

Y = np.random.default_rng(7).normal(1.5, 1.0, size=20)
POSTERIOR_MEAN = Y.sum() / (Y.size + 1)  # mu ~ N(0, 1), y ~ N(mu, 1)
POSTERIOR_SD = 1.0 / math.sqrt(Y.size + 1)


def normal_model() -> pm.Model:
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=Y)
    return model


def _assert_posterior_right(idata, outcome):
    draws = idata.posterior["mu"].values
    assert draws.shape[1] == outcome.draws
    ess = outcome.checks.ess_bulk_min
    assert abs(draws.mean() - POSTERIOR_MEAN) < 4 * POSTERIOR_SD / math.sqrt(ess)
    assert draws.std() == pytest.approx(POSTERIOR_SD, rel=0.15)


@pytest.mark.parametrize(
    "sampler",
    ["nutpie", pytest.param("pymc", marks=pytest.mark.slow)],  # slow: PyMC's compile
)
def test_it_stops_at_the_first_check_that_meets_the_targets(sampler):
    seen = []

    def extra_draws(stretch: xr.Dataset) -> xr.Dataset:
        seen.append(stretch.sizes["draw"])
        return xr.Dataset({"mu_twice": 2.0 * stretch["mu"]})

    idata, outcome = sample_until_converged(
        normal_model(),
        var_names=["mu", "mu_twice"],
        sampler=sampler,
        draws=100,
        tune=200,
        chains=3,
        cores=1,  # nutpie still runs all three chains at once
        max_draws=5000,
        target_ess=400,
        random_seed=5,
        extra_draws=extra_draws,
        progressbar=False,
    )
    assert outcome.converged and outcome.stopped_by == "converged"
    assert outcome.draws % 100 == 0 and outcome.draws < 5000
    assert outcome.rounds == len(outcome.history) == outcome.draws // 100
    # the last check met the targets, every earlier one did not
    for k, (upto, rhat, bulk, tail) in enumerate(outcome.history):
        met = rhat <= 1.01 and bulk >= 400 and tail >= 400
        assert met == (k == len(outcome.history) - 1), outcome.history
        assert upto == 100 * (k + 1)
    assert outcome.checks.rhat_max <= 1.01 and outcome.checks.ess_tail_min >= 400
    _assert_posterior_right(idata, outcome)
    # the extra variable: one stretch per check, all draws covered, checked too
    assert sum(seen) == outcome.draws
    np.testing.assert_array_equal(idata.posterior["mu_twice"], 2.0 * idata.posterior["mu"])
    assert idata.posterior.sizes["chain"] == 3


def test_a_time_limit_ends_the_run_with_the_draws_so_far():
    idata, outcome = sample_until_converged(
        normal_model(),
        var_names=["mu"],
        draws=100,
        tune=50,
        chains=2,
        max_draws=10**6,
        time_limit=1e-3,
        target_ess=10**7,  # never met
        random_seed=1,
        progressbar=False,
    )
    assert not outcome.converged and outcome.stopped_by == "time limit"
    assert 1 <= outcome.draws < 10**6
    assert idata.posterior["mu"].shape == (2, outcome.draws)
    assert np.all(np.isfinite(idata.posterior["mu"].values))


def test_nutpie_stops_in_tuning_at_the_limit_and_says_how_far_it_got(capsys):
    idata, outcome = sample_until_converged(
        normal_model(),
        var_names=["mu"],
        draws=100,
        tune=10**8,  # would tune for hours
        chains=2,
        max_draws=1000,
        time_limit=3.0,
        random_seed=1,
        progressbar=True,
    )
    assert not outcome.converged and outcome.stopped_by == "time limit in tuning"
    assert outcome.draws == 0 and outcome.checks is None
    assert idata.posterior["mu"].shape == (2, 0)
    steps = idata.warmup_sample_stats["n_steps"].values
    assert np.isfinite(steps).any()  # tuning's statistics are kept
    assert "time limit: the chains were still tuning (" in capsys.readouterr().err


def test_nutpie_needs_a_tuning_step():
    # nuts-rs would panic in its threads ("assertion failed: early_end < num_tune")
    with pm.Model() as model:
        pm.Normal("a")
    with pytest.raises(ValueError, match="tune: nutpie needs at least 1 tuning step .* got 0"):
        sample_until_converged(model, var_names=["a"], tune=0, progressbar=False)


def test_looks_are_timed_for_the_next_check():
    from pymc_odesens.inference import converged_sampling as cs

    # 100 iterations in 10 s: the next check's 300th iteration is 20 s away
    assert cs._next_pause(100, 300, 10.0, 0.01, (0.0, 0), None) == pytest.approx(20.0)
    # never sooner than ten times a look's cost, never later than 30 s
    assert cs._next_pause(100, 110, 10.0, 0.5, (0.0, 0), None) == pytest.approx(5.0)
    assert cs._next_pause(100, 10**6, 10.0, 0.01, (0.0, 0), None) == pytest.approx(30.0)
    # no rate yet: 4 s; a check already due: at once (the lower bound, 1 s)
    assert cs._next_pause(0, 300, 1.0, 0.01, None, None) == pytest.approx(4.0)
    assert cs._next_pause(400, 300, 10.0, 0.01, (0.0, 0), None) == pytest.approx(1.0)


def test_max_draws_ends_the_run_after_every_check(monkeypatch):
    from pymc_odesens.inference import converged_sampling as cs

    monkeypatch.setattr(cs, "_CATCH_UP_SECONDS", 0.0)  # one check per look
    idata, outcome = sample_until_converged(
        normal_model(),
        var_names=["mu"],
        draws=100,
        tune=50,
        chains=2,
        max_draws=300,
        target_ess=10**7,  # never met
        random_seed=2,
        progressbar=False,
    )
    assert not outcome.converged and outcome.stopped_by == "max_draws"
    assert outcome.draws == 300 and [h[0] for h in outcome.history] == [100, 200, 300]
    assert idata.posterior["mu"].shape == (2, 300)
