"""sample_smc end to end: the evidence against closed forms and quadrature, R-hat across runs,
bit-identical repeats (also split over workers), failed solves as rejections, the options'
errors."""

from concurrent.futures import ThreadPoolExecutor

import arviz as az
import numpy as np
import pymc as pm
import pytest
from scipy import integrate, stats

from pymc_odesens import OdeSystem, ode_solution
from pymc_odesens.inference import log_evidence, sample_smc
from pymc_odesens.inference.smc_move_stopping import correlation_floor
from tests.inference.smc_models import SMC_OPTIONS, X, Y, exact_log_evidence, linear_model


@pytest.fixture(scope="module")
def linear_fit():
    return sample_smc(linear_model(), random_seed=11, **SMC_OPTIONS)


def test_log_evidence_of_a_linear_gaussian_model_within_its_error(linear_fit):
    estimate, mcse = log_evidence(linear_fit)
    exact = exact_log_evidence()
    assert 0.0 < mcse < 0.1  # a real error bar, small enough to mean something
    assert abs(estimate - exact) < 3.0 * mcse, (estimate, mcse, exact)
    stats_ = linear_fit.sample_stats
    assert stats_["log_marginal_likelihood"].shape == (6,)
    assert float(stats_["log_marginal_likelihood_mcse"]) == pytest.approx(mcse)
    assert stats_.attrs["log_marginal_likelihood"] == pytest.approx(estimate)
    # the schedule ends at beta = 1 in every run and is increasing
    beta = stats_["beta"].values
    for row in beta:
        row = row[np.isfinite(row)]
        assert row[-1] == 1.0 and np.all(np.diff(row) > 0)
    assert np.all(stats_["failed_evaluations"].values[np.isfinite(beta)] == 0)


def test_posterior_is_the_conjugate_one_and_runs_agree(linear_fit):
    design = np.column_stack([np.ones_like(X), X])
    precision = np.diag([1.0, 0.25]) + design.T @ design / 0.25
    covariance = np.linalg.inv(precision)
    mean = covariance @ design.T @ Y / 0.25
    posterior = linear_fit.posterior
    assert posterior["a"].shape == (6, 200)
    draws = np.column_stack([posterior["a"].values.ravel(), posterior["b"].values.ravel()])
    # 1200 draws of ESS at least a few hundred: means within 4 standard errors of 300 draws
    sd = np.sqrt(np.diag(covariance))
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * sd / np.sqrt(300))
    np.testing.assert_allclose(draws.std(axis=0), sd, rtol=0.15)
    rhat = az.rhat(linear_fit)
    assert float(rhat["a"]) < 1.05 and float(rhat["b"]) < 1.05


@pytest.mark.slow  # a sampling run; the checkpoint tests run a trajectory model by default
def test_a_trajectory_model_leaves_the_evidence_and_posterior_exact():
    """The HMC moves follow the gradient of a model with twice the noise (a likelihood 4
    times flatter: a poor guide), the acceptance tests and weights use the model's own
    density: the evidence and the posterior are still the model's, exactly."""
    options = {**SMC_OPTIONS, "kernel": "hmc"}
    fit = sample_smc(
        linear_model(), trajectory_model=linear_model(noise=1.0), random_seed=12, **options
    )
    estimate, mcse = log_evidence(fit)
    exact = exact_log_evidence()
    assert 0.0 < mcse < 0.1
    assert abs(estimate - exact) < 3.0 * mcse, (estimate, mcse, exact)
    # far from the trajectory model's own evidence
    assert abs(exact_log_evidence_with_noise(1.0) - exact) > 20 * mcse
    design = np.column_stack([np.ones_like(X), X])
    covariance = np.linalg.inv(np.diag([1.0, 0.25]) + design.T @ design / 0.25)
    mean = covariance @ design.T @ Y / 0.25
    draws = np.column_stack([fit.posterior["a"].values.ravel(), fit.posterior["b"].values.ravel()])
    sd = np.sqrt(np.diag(covariance))
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * sd / np.sqrt(300))
    np.testing.assert_allclose(draws.std(axis=0), sd, rtol=0.15)
    # the moves did follow the other gradient: their acceptance differs from the model's own
    own = sample_smc(linear_model(), random_seed=12, **options)
    accepted = fit.sample_stats["acceptance_rate"].values
    assert not np.allclose(
        accepted[np.isfinite(accepted)][:5],
        own.sample_stats["acceptance_rate"].values[np.isfinite(accepted)][:5],
    )


def exact_log_evidence_with_noise(noise: float) -> float:
    design = np.column_stack([np.ones_like(X), X])
    covariance = design @ np.diag([1.0, 4.0]) @ design.T + noise**2 * np.eye(8)
    return float(stats.multivariate_normal(np.zeros(8), covariance).logpdf(Y))


def test_a_trajectory_model_with_other_variables_is_refused_by_name():
    with pytest.raises(ValueError, match=r"sample_smc: trajectory_model must have the model's"):
        sample_smc(linear_model(), trajectory_model=linear_model(slope=False), **SMC_OPTIONS)


def test_moves_stop_once_the_correlation_left_is_below_its_noise(linear_fit):
    """200 particles, 2 coordinates: the noise floor (0.16) is above correlation_threshold
    (0.1) and is the threshold; a stage stops its moves below it, or at max_moves."""
    stats_ = linear_fit.sample_stats
    finite = np.isfinite(stats_["beta"].values)
    threshold = stats_["stopping_threshold"].values[finite]
    np.testing.assert_allclose(threshold, correlation_floor(200, 2), rtol=1e-12)
    moves = stats_["moves"].values[finite]
    correlation = stats_["correlation"].values[finite]
    early = moves < 10
    assert np.all(correlation[early] < threshold[early])
    assert np.all(correlation[~early] >= threshold[~early])
    assert early.mean() > 0.5  # the rule fires: not every stage takes max_moves


def test_the_same_seed_repeats_bit_for_bit_whatever_the_workers(linear_fit):
    again = sample_smc(linear_model(), random_seed=11, **SMC_OPTIONS)
    with ThreadPoolExecutor(max_workers=2) as executor:
        split = sample_smc(linear_model(), random_seed=11, **{**SMC_OPTIONS, "executor": executor})
    for other in (again, split):
        for name in ("a", "b"):
            np.testing.assert_array_equal(
                other.posterior[name].values, linear_fit.posterior[name].values
            )
        np.testing.assert_array_equal(
            other.sample_stats["log_marginal_likelihood"].values,
            linear_fit.sample_stats["log_marginal_likelihood"].values,
        )
    different = sample_smc(linear_model(), random_seed=12, **{**SMC_OPTIONS, "runs": 1})
    assert not np.array_equal(different.posterior["a"].values, linear_fit.posterior["a"].values[:1])


@pytest.mark.slow  # a third SMC run; lighter sibling: test_executors.py's Dask test
def test_a_dask_cluster_gives_the_same_result_bit_for_bit(linear_fit, dask_client):
    # each batch of particles is a task on the cluster's workers, which build the model
    # from its pickled factory
    on_dask = sample_smc(linear_model(), random_seed=11, **{**SMC_OPTIONS, "executor": dask_client})
    for name in ("a", "b"):
        np.testing.assert_array_equal(
            on_dask.posterior[name].values, linear_fit.posterior[name].values
        )
    np.testing.assert_array_equal(
        on_dask.sample_stats["log_marginal_likelihood"].values,
        linear_fit.sample_stats["log_marginal_likelihood"].values,
    )


@pytest.mark.slow
def test_two_worker_processes_give_the_same_result_bit_for_bit(linear_fit):
    # the default route when several cores are available: spawned processes, each building
    # the model from its pickled factory
    split = sample_smc(linear_model(), random_seed=11, **{**SMC_OPTIONS, "cores": 2})
    for name in ("a", "b"):
        np.testing.assert_array_equal(
            split.posterior[name].values, linear_fit.posterior[name].values
        )
    np.testing.assert_array_equal(
        split.sample_stats["log_marginal_likelihood"].values,
        linear_fit.sample_stats["log_marginal_likelihood"].values,
    )


# x' = -k x, x(0) = x0: observations y_j = x0 exp(-k t_j) + N(0, 0.1^2) are linear in x0, so
# with x0 ~ N(2, 0.5^2) the evidence given k is a normal density in closed form and the
# evidence a one-dimensional integral over k's prior
DECAY = OdeSystem(lambda t, y, p: [-p[0] * y[0]], states=["x"], params=["k"], name="decay_smc")
TIMES = np.linspace(0.5, 4.0, 6)
DECAY_DATA = 2.1 * np.exp(-0.7 * TIMES) + 0.1 * np.random.default_rng(1).normal(size=6)


def decay_model() -> pm.Model:
    with pm.Model() as model:
        k = pm.LogNormal("k", np.log(0.5), 0.5)
        x0 = pm.Normal("x0", 2.0, 0.5)
        x = ode_solution(
            DECAY,
            [x0],
            TIMES,
            [k],
            method="rk45",
            relative_tolerance=1e-9,
            absolute_tolerance=1e-9,
            max_num_steps=2000,  # far-out leapfrog trajectories fail fast (rejected)
        )
        pm.Normal("y", x[:, 0], 0.1, observed=DECAY_DATA)
    return model


def decay_log_evidence() -> float:
    def log_integrand(k):
        g = np.exp(-k * TIMES)
        covariance = 0.25 * np.outer(g, g) + 0.01 * np.eye(len(TIMES))
        return stats.lognorm(0.5, scale=0.5).logpdf(k) + stats.multivariate_normal(
            2.0 * g, covariance
        ).logpdf(DECAY_DATA)

    grid = np.linspace(0.01, 5.0, 2000)
    values = np.array([log_integrand(k) for k in grid])
    peak, shift = grid[np.argmax(values)], values.max()
    integral, error = integrate.quad(
        lambda k: np.exp(log_integrand(k) - shift), 0.0, 10.0, points=[peak], limit=200
    )
    assert error < 1e-8 * integral
    return float(np.log(integral) + shift)


def test_log_evidence_of_an_ode_model_against_quadrature():
    fit = sample_smc(decay_model(), random_seed=3, **SMC_OPTIONS)
    estimate, mcse = log_evidence(fit)
    exact = decay_log_evidence()
    assert 0.0 < mcse < 0.1
    assert abs(estimate - exact) < 3.0 * mcse, (estimate, mcse, exact)
    assert float(az.rhat(fit)["k"]) < 1.05


def symmetric_decay_model() -> pm.Model:
    """x' = -k^2 x: the data fix k^2, so the posterior has a mode at each sign of k, weighted
    by k's prior (centred at 0.3: the positive mode has about three quarters of the mass)."""
    with pm.Model() as model:
        k = pm.Normal("k", 0.3, 0.6)
        x0 = pm.Normal("x0", 2.0, 0.5)
        x = ode_solution(
            DECAY,
            [x0],
            TIMES,
            [k**2],
            method="rk45",
            relative_tolerance=1e-9,
            absolute_tolerance=1e-9,
            max_num_steps=2000,  # far-out leapfrog trajectories fail fast (rejected)
        )
        pm.Normal("y", x[:, 0], 0.1, observed=DECAY_DATA)
    return model


def symmetric_log_density(k: float) -> float:
    """log p(k, y) of the symmetric decay model, x0 integrated out in closed form."""
    g = np.exp(-(k**2) * TIMES)
    covariance = 0.25 * np.outer(g, g) + 0.01 * np.eye(len(TIMES))
    return stats.norm(0.3, 0.6).logpdf(k) + stats.multivariate_normal(2.0 * g, covariance).logpdf(
        DECAY_DATA
    )


def positive_mode_weight() -> float:
    """P(k > 0 | y) by quadrature (x0 integrated out in closed form, as above)."""
    log_integrand = symmetric_log_density
    grid = np.linspace(0.01, 3.0, 2000)
    peak = grid[np.argmax([log_integrand(k) for k in grid])]
    shift = log_integrand(peak)
    mass = {}
    for sign in (1.0, -1.0):
        mass[sign], _ = integrate.quad(
            lambda k, s=sign: np.exp(log_integrand(s * k) - shift),
            0.0,
            5.0,
            points=[peak],
            limit=200,
        )
    return mass[1.0] / (mass[1.0] + mass[-1.0])


@pytest.mark.slow
def test_both_modes_of_a_bimodal_ode_posterior_with_their_weights():
    fit = sample_smc(symmetric_decay_model(), random_seed=7, **SMC_OPTIONS)
    k = fit.posterior["k"].values  # (runs, particles)
    positive = (k > 0).mean(axis=1)
    # every run holds both modes
    assert np.all((positive > 0.0) & (positive < 1.0)), positive
    weight, error = positive.mean(), positive.std(ddof=1) / np.sqrt(len(positive))
    exact = positive_mode_weight()
    assert 0.6 < exact < 0.9  # the question is not trivial
    assert 0.0 < error < 0.05
    assert abs(weight - exact) < 3.0 * error, (weight, error, exact)
    # each mode at the rate k^2 the data fix (0.7 made them)
    for mode in (k[k > 0], -k[k < 0]):
        assert abs(float(np.median(mode)) - np.sqrt(0.7)) < 0.1


def failing_model() -> pm.Model:
    """x' = -k x by rk45 with at most 20 steps between output times: a solve with k above
    about 15 fails, where the prior puts about a tenth of its mass."""
    with pm.Model() as model:
        k = pm.LogNormal("k", np.log(3.0), 1.2)
        x = ode_solution(DECAY, [1.0], TIMES, [k], method="rk45", max_num_steps=20)
        pm.Normal("y", x[:, 0], 0.05, observed=np.exp(-1.5 * TIMES))
    return model


def test_failed_solves_are_rejections_never_nan_weights():
    fit = sample_smc(failing_model(), random_seed=5, **{**SMC_OPTIONS, "runs": 2})
    stats_ = fit.sample_stats
    failed = int(np.nansum(stats_["failed_evaluations"].values)) + int(
        stats_["prior_failures"].values.sum()
    )
    assert failed > 0
    assert np.all(np.isfinite(stats_["log_marginal_likelihood"].values))
    assert np.all(np.isfinite(stats_["particle_log_likelihood"].values))
    beta = stats_["beta"].values
    assert not np.any(np.isnan(stats_["ess"].values[np.isfinite(beta)]))
    # the posterior lies where the solves succeed, around the data's k = 1.5
    k = fit.posterior["k"].values
    assert np.all(k < 10.0) and abs(float(np.median(k)) - 1.5) < 0.1


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("draws", 1, "draws must be an integer >= 2"),
        ("target_ess", 1.0, r"target_ess must be in \(0, 1\)"),
        ("criterion", "mcmc", "criterion must be one of"),
        ("resampling", "stratified", "resampling must be one of"),
        ("mass_matrix", "full", "mass_matrix must be one of"),
        ("runs", 0, "runs must be an integer >= 1"),
        ("resample_threshold", 0.3, "resample_threshold must be above target_ess"),
        ("cores", 0, "cores must be None or an integer >= 1"),
        ("adapt_n_leapfrog", "yes", "adapt_n_leapfrog must be True or False"),
        ("max_leapfrog", 4, "max_leapfrog must be an integer >= n_leapfrog = 5"),
    ],
)
def test_options_out_of_range_are_named(option, value, message):
    with pytest.raises(ValueError, match=f"sample_smc: {message}"):
        sample_smc(linear_model(), **{**SMC_OPTIONS, option: value})


def test_discrete_free_variables_are_refused():
    with pm.Model() as model:
        pm.Poisson("n", 3.0)
        pm.Normal("y", 0.0, 1.0, observed=1.0)
    with pytest.raises(ValueError, match=r"free variables \['n'\] are discrete"):
        sample_smc(model, **SMC_OPTIONS)
