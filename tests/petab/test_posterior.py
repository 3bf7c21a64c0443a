"""One call to a posterior (``sample_posterior``) on Boehm_JProteomeRes2014: every estimated
parameter in the posterior (the marginalised ones recovered), an honest report, arguments
refused by name (default run); the slow tests sample: a run stopped by its time limit
reports honestly, Boehm converges to the targets, a Dask cluster gives the local bits."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import numpy as np
import pytest

from pymc_odesens.petab import PetabProblem, sample_posterior
from pymc_odesens.petab.posterior import REPORT_FIELDS, _nominal_start
from tests.petab.benchmark_collection import problem_yaml

BOEHM = "Boehm_JProteomeRes2014"
BOEHM_NOISE = ("sd_pSTAT5A_rel", "sd_pSTAT5B_rel", "sd_rSTAT5A_rel")


@pytest.fixture(scope="module")
def boehm():
    return PetabProblem.from_yaml(problem_yaml(BOEHM))


@pytest.fixture(scope="module")
def limited(boehm):
    """A run whose time limit has passed before sampling starts: it stops at the first
    look that finds draws, with few of them (tiny settings: one start in this process, two
    chains, one tuning step: nutpie's least; a machine that has not finished its tuning by
    the first look, 1 s in, stops in tuning with no draws, which another test covers)."""
    return sample_posterior(
        boehm,
        n_starts=1,
        n_workers=1,
        mode_method="L-BFGS-B",
        chains=2,
        draws=40,
        tune=1,
        time_limit=1e-3,
        random_seed=3,
        progressbar=False,
    )


@pytest.mark.slow  # a (short) sampling run: python -m pytest -m slow
def test_every_estimated_parameter_is_in_the_posterior(boehm, limited):
    posterior = limited.posterior
    for pid in boehm.parameters.ids:
        assert pid in posterior, pid
        assert posterior[pid].dims == ("chain", "draw")
    assert posterior.sizes["chain"] == 2
    # the noise parameters were marginalised and recovered on their log10 scale, finite
    attrs = limited.sample_stats.attrs
    assert list(attrs["marginalized"]) == list(BOEHM_NOISE)
    for pid in BOEHM_NOISE:
        values = posterior[pid].values
        assert np.all(np.isfinite(values))
        # Boehm's noise sds are near 10**0.6 to 10**0.9 at its optima: far inside [-5, 5]
        assert np.all((values > -3.0) & (values < 3.0)), (pid, values)
    # the kinetic parameters inside their bounds (log10 [-5, 5])
    for pid in boehm.parameters.ids:
        assert np.all(np.abs(posterior[pid].values) <= 5.0), pid


@pytest.mark.slow  # a (short) sampling run: python -m pytest -m slow
def test_a_run_stopped_by_its_time_limit_reports_not_converged(limited):
    attrs = limited.sample_stats.attrs
    assert attrs["converged"] == 0
    assert attrs["stopped_by"] == "time limit"
    draws = limited.posterior.sizes["draw"]
    assert draws == attrs["draws_per_chain"]
    # stopped at the first look with draws: the draws so far, or the first check's 40
    # when the chains had that many by then (a check at the limit that fails ends the run)
    assert 1 <= draws <= 40
    assert limited.sample_stats.sizes["draw"] == draws
    assert attrs["convergence_checks"] == 1
    # the report has every field, each of its type
    assert set(REPORT_FIELDS) <= set(attrs)
    assert attrs["sampler"] == "nutpie"
    assert attrs["n_starts"] == 1 and attrs["starts_failed"] == 0
    assert attrs["mode_method"] == "L-BFGS-B"
    # the prior draw's start and the nominal one end at Boehm's best optimum: one mode of
    # both starts (L-BFGS-B may stop them at points its clustering keeps apart, 2 optima,
    # which the valley test joins: seen on one machine, not on another)
    assert attrs["modes_found"] == 1 and 1 <= attrs["optima_found"] <= 2
    assert list(attrs["mode_sizes"]) == [2] and attrs["multimodal"] == 0
    assert len(attrs["mode_log_likelihoods"]) == 1
    # the mode's log-likelihood is PEtab's, above Boehm's floor of local optima
    assert -260.0 < attrs["mode_log_likelihoods"][0] <= -138.2219757 + 1e-3
    assert attrs["laplace_hessian"] == "finite-differences"
    # one mode, all the Laplace mass; its evidence as tempered SMC's (-170.38 +- 0.52,
    # benchmarks/README.md) at Boehm's best optimum
    assert list(attrs["mode_laplace_component"]) == [0]
    assert list(attrs["laplace_weights"]) == [1.0]
    if attrs["mode_log_likelihoods"][0] > -138.2219757 - 1e-3:
        assert attrs["laplace_log_evidence"] == pytest.approx(-170.256, abs=0.02)
    phases = [attrs[k] for k in REPORT_FIELDS if k.startswith("time_")]
    assert all(t >= 0 for t in phases)
    assert sum(phases) <= attrs["wall_time"] + 1e-6
    # too few draws to pass: not a number above the target, or no number at all
    assert not (attrs["rhat_max"] <= 1.01 and attrs["ess_bulk_min"] >= 400)
    assert math.isnan(attrs["ess_per_second"]) or attrs["ess_per_second"] >= 0


@pytest.mark.slow  # a (short) sampling run: python -m pytest -m slow
def test_the_result_can_be_written_as_netcdf(limited, tmp_path):
    import arviz as az

    path = tmp_path / "boehm.nc"
    limited.to_netcdf(str(path))
    again = az.from_netcdf(str(path))
    assert int(again.sample_stats.attrs["converged"]) == 0
    assert list(again.sample_stats.attrs["marginalized"]) == list(BOEHM_NOISE)


@pytest.mark.parametrize(
    ("argument", "value", "error", "message"),
    [
        ("marginalize", "all", ValueError, "marginalize: expected 'auto'"),
        ("marginalize", 3, ValueError, "marginalize: expected 'auto'"),
        ("sampler", "stan", ValueError, "sampler: expected one of"),
        ("chains", 1, ValueError, "chains: expected an integer >= 2"),
        ("n_starts", 0, ValueError, "n_starts: expected an integer >= 1"),
        ("draws", 2.5, ValueError, "draws: expected an integer >= 1"),
        ("tune", -1, ValueError, "tune: expected an integer >= 1, got -1"),
        # nutpie (the default sampler) panics in its threads without a tuning step
        ("tune", 0, ValueError, "tune: expected an integer >= 1, got 0"),
        ("max_draws", 10, ValueError, "max_draws: expected at least draws"),
        ("time_limit", 0, ValueError, "time_limit: expected a positive number"),
        ("target_rhat", 1.0, ValueError, "target_rhat: expected a finite number > 1"),
        ("target_ess", -4, ValueError, "target_ess: expected a positive"),
        ("target_accept", 1.5, ValueError, "target_accept: expected a number in"),
        ("cores", 0, ValueError, "cores: expected an integer >= 1"),
        ("executor", "dask", TypeError, "executor: expected None"),
        ("progressbar", "yes", TypeError, "progressbar: expected True or False"),
        ("nominal_start", 1, TypeError, "nominal_start: expected True or False"),
        ("barrier", 0.0, ValueError, "barrier: expected a positive number of log-units"),
        ("barrier", "1", ValueError, "barrier: expected a positive number of log-units"),
    ],
)
def test_arguments_are_refused_by_name(boehm, argument, value, error, message):
    kwargs = {argument: value}
    if argument == "max_draws":
        kwargs["draws"] = 20
    with pytest.raises(error, match=message):
        sample_posterior(boehm, **kwargs)


def test_pymcs_nuts_may_skip_tuning(boehm):
    with pytest.raises(ValueError, match="tune: expected an integer >= 0, got -1"):
        sample_posterior(boehm, sampler="pymc", tune=-1)


def test_the_nominal_start_is_the_parameter_tables_values_within_their_bounds(boehm):
    start = _nominal_start(boehm)
    assert list(start) == list(boehm.parameters.ids)
    np.testing.assert_array_equal(list(start.values()), boehm.parameters.nominal)
    # Boehm's best fit is its nominal values: k_exp_hetero just inside its lower bound
    assert -5.0 < start["k_exp_hetero"] < -4.999
    outside = copy.copy(boehm)
    nominal = boehm.parameters.nominal.copy()
    nominal[0] = math.log10(boehm.parameters.upper[0]) + 1.0
    object.__setattr__(outside, "parameters", replace(boehm.parameters, nominal=nominal))
    assert _nominal_start(outside) is None
    nominal[0] = math.nan
    assert _nominal_start(outside) is None


def test_a_parameter_that_cannot_be_marginalised_is_named(boehm):
    with pytest.raises(ValueError, match="'k_phos' cannot be marginalised"):
        sample_posterior(boehm, marginalize=["k_phos"], n_workers=1, progressbar=False)


def test_the_problem_must_be_a_petab_problem():
    with pytest.raises(TypeError, match="problem: expected a PetabProblem"):
        sample_posterior("Boehm.yaml")


@pytest.mark.slow  # sampling run: python -m pytest -m slow
@pytest.mark.parametrize("marginalize", ["auto", None])
def test_boehm_converges(boehm, marginalize):
    idata = sample_posterior(boehm, marginalize=marginalize, random_seed=1, time_limit=1200)
    attrs = idata.sample_stats.attrs
    assert attrs["converged"] == 1, dict(attrs)
    assert attrs["rhat_max"] <= 1.01
    assert attrs["ess_bulk_min"] >= 400 and attrs["ess_tail_min"] >= 400
    import arviz as az

    summary = az.summary(idata, var_names=list(boehm.parameters.ids), round_to="none")
    assert summary["r_hat"].max() <= 1.01
    assert summary["ess_bulk"].min() >= 400 and summary["ess_tail"].min() >= 400


@pytest.mark.slow  # two short sampling runs: python -m pytest -m slow
def test_a_dask_cluster_gives_the_local_posterior_bit_for_bit(boehm, dask_client):
    """``executor=`` (issue 39): the multistart on a 2-worker LocalCluster finds the same
    optima, and the chains (nutpie, seeded) draw the same numbers, as the local run."""
    settings = dict(
        n_starts=4,
        mode_method="L-BFGS-B",
        chains=2,
        draws=40,
        tune=20,
        max_draws=40,
        random_seed=11,
        progressbar=False,
    )
    local = sample_posterior(boehm, n_workers=1, **settings)
    on_dask = sample_posterior(boehm, executor=dask_client, **settings)
    a, b = local.sample_stats.attrs, on_dask.sample_stats.attrs
    assert a["stopped_by"] == b["stopped_by"] == "max_draws"
    assert list(a["mode_log_likelihoods"]) == list(b["mode_log_likelihoods"])
    for pid in boehm.parameters.ids:
        np.testing.assert_array_equal(local.posterior[pid].values, on_dask.posterior[pid].values)
