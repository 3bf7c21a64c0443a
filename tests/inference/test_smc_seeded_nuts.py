"""sample_nuts_from_smc: NUTS started at an SMC population's particles with their covariance
as mass matrix, the runs weighed by their evidence."""

import arviz as az
import numpy as np
import pytest

from pymc_odesens.inference import sample_nuts_from_smc, sample_smc, smc_seeded_nuts
from tests.inference.smc_models import SMC_OPTIONS, linear_model
from tests.inference.test_smc import symmetric_decay_model
from tests.inference.test_smc_modes import (
    conjugate_posterior,
    spy_on_sampling,
    two_run_population,
)


def test_nuts_from_the_population_reaches_the_conjugate_posterior():
    fit = sample_smc(linear_model(), random_seed=4, **{**SMC_OPTIONS, "runs": 3})
    nuts = sample_nuts_from_smc(
        linear_model(),
        fit,
        draws=500,
        tune=150,
        chains=2,
        cores=1,
        random_seed=1,
        progressbar=False,
    )
    assert nuts.posterior.sizes == {"chain": 2, "draw": 500}
    assert float(az.rhat(nuts).to_array().max()) < 1.01
    draws = np.column_stack([nuts.posterior[v].values.ravel() for v in ("a", "b")])
    mean, covariance = conjugate_posterior()
    ess = float(az.ess(nuts).to_array().min())
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4.0 * np.sqrt(np.diag(covariance) / ess))
    np.testing.assert_allclose(np.cov(draws.T), covariance, rtol=0.25, atol=0.02)
    assert len(nuts.posterior.attrs["smc_evidence_weights"]) == 3
    assert 2.0 < nuts.posterior.attrs["smc_effective_runs"] <= 3.0
    # the population is the posterior: about 1 / (N + 1) of the draws above every particle
    stats = fit.sample_stats
    distinct = np.unique((stats["particle_log_prior"] + stats["particle_log_likelihood"]).values)
    expected = nuts.posterior.attrs["smc_draws_above_particles_expected"]
    assert expected == pytest.approx(1.0 / (distinct.size + 1))
    assert nuts.posterior.attrs["smc_draws_above_particles"] <= 10.0 * expected


def _lower_half(fit: az.InferenceData) -> az.InferenceData:
    """``fit`` with each run's particles replaced by those of its lower half in log-density
    (each twice): a population that lost the posterior's densest region."""
    damaged = fit.copy()
    stats = damaged.sample_stats
    log_density = (stats["particle_log_prior"] + stats["particle_log_likelihood"]).values
    count = log_density.shape[1]
    for run, row in enumerate(log_density):
        lower = np.argsort(row)[: count // 2]
        take = np.resize(lower, count)
        for name in damaged.posterior.data_vars:
            damaged.posterior[name].values[run] = damaged.posterior[name].values[run][take]
        for name in ("particle_log_prior", "particle_log_likelihood"):
            stats[name].values[run] = stats[name].values[run][take]
    return damaged


def test_draws_above_every_particle_say_that_the_population_missed_density():
    fit = sample_smc(linear_model(), random_seed=4, **{**SMC_OPTIONS, "runs": 3})
    damaged = _lower_half(fit)
    with pytest.warns(RuntimeWarning, match=r"of the NUTS draws have a higher log-density than"):
        nuts = sample_nuts_from_smc(
            linear_model(),
            damaged,
            draws=300,
            tune=100,
            chains=2,
            cores=1,
            random_seed=1,
            progressbar=False,
        )
    # every particle is below the population's median: about half the draws are above them
    assert 0.3 < nuts.posterior.attrs["smc_draws_above_particles"] < 0.7


def _spy(monkeypatch) -> tuple[dict, list]:
    """Replaces the sampling by a record of its arguments (and a posterior of the starts),
    and records the mass matrix's approximation."""
    calls = spy_on_sampling(monkeypatch, smc_seeded_nuts)
    seen = {}
    approximate = smc_seeded_nuts.population_approximation

    def approximation(*args, **kwargs):
        seen["approximation"] = approximate(*args, **kwargs)
        return seen["approximation"]

    monkeypatch.setattr(smc_seeded_nuts, "population_approximation", approximation)
    return seen, calls


def test_a_run_that_lost_the_heavy_mode_gives_no_start_and_no_covariance(monkeypatch):
    seen, calls = _spy(monkeypatch)
    lost = two_run_population([-9.0, -60.0])  # run 0 at k > 0, run 1 at k < 0
    with pytest.warns(RuntimeWarning, match=r"log evidences \[-9.0, -60.0\] disagree: 1.00"):
        sample_nuts_from_smc(symmetric_decay_model(), lost, chains=6, random_seed=2)
    starts = np.array([start["k"] for start in calls[-1]["initvals"]])
    assert np.all(starts > 0) and len(set(starts)) == 6
    # the mass matrix: run 0's particles alone (k's sd 0.03; with run 1's, 0.85)
    k_sd = np.sqrt(seen["approximation"].covariance[0, 0])
    assert k_sd == pytest.approx(np.std(lost.posterior["k"].values[0], ddof=1), rel=0.1)
    assert seen["approximation"].mode.vector[0] == pytest.approx(
        lost.posterior["k"].values[0].mean(), rel=1e-6
    )

    agreeing = two_run_population([-9.0, -9.0])
    sample_nuts_from_smc(symmetric_decay_model(), agreeing, chains=6, random_seed=2)
    starts = np.array([start["k"] for start in calls[-1]["initvals"]])
    assert np.any(starts > 0) and np.any(starts < 0)
    assert np.sqrt(seen["approximation"].covariance[0, 0]) > 0.5


def test_arguments_are_checked():
    population = two_run_population([-9.0, -9.0])
    with pytest.raises(ValueError, match="idata: expected the result of sample_smc"):
        sample_nuts_from_smc(symmetric_decay_model(), object())
    with pytest.raises(ValueError, match="chains: expected an integer >= 1, got 0"):
        sample_nuts_from_smc(symmetric_decay_model(), population, chains=0)
    with pytest.raises(ValueError, match="tune: expected an integer >= 0, got -1"):
        sample_nuts_from_smc(symmetric_decay_model(), population, tune=-1)
    with pytest.raises(ValueError, match=r"free variables \['a', 'b'\]"):
        sample_nuts_from_smc(linear_model(), population)
    no_evidence = az.InferenceData(posterior=population.posterior)
    with pytest.raises(ValueError, match="no sample_stats.log_marginal_likelihood per run"):
        sample_nuts_from_smc(symmetric_decay_model(), no_evidence)
