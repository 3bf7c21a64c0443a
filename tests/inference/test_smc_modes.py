"""smc_modes and sample_smc_modes: the modes of an SMC population with their weights, and
NUTS in each mode weighted by them, against quadrature on a bimodal ODE posterior."""

import arviz as az
import numpy as np
import pytest
import xarray as xr
from scipy import integrate

from pymc_odesens.inference import sample_smc, sample_smc_modes, smc_mode_sampling, smc_modes
from pymc_odesens.inference.mode_search import ModeSearchResult
from pymc_odesens.inference.smc_modes import run_weighted_shares
from tests.inference.smc_models import SMC_OPTIONS, X, Y, linear_model
from tests.inference.test_smc import (
    positive_mode_weight,
    symmetric_decay_model,
    symmetric_log_density,
)


def conjugate_posterior():
    """Mean and covariance of (a, b) of the linear-Gaussian model."""
    design = np.column_stack([np.ones_like(X), X])
    precision = np.diag([1.0, 0.25]) + design.T @ design / 0.25
    covariance = np.linalg.inv(precision)
    return covariance @ design.T @ Y / 0.25, covariance


def posterior_mean_k() -> float:
    """E[k | y] of the symmetric decay model by quadrature (x0 integrated out exactly)."""
    log_density = symmetric_log_density
    peaks = [-np.sqrt(0.7), np.sqrt(0.7)]
    shift = max(log_density(k) for k in peaks)
    mass, _ = integrate.quad(
        lambda k: np.exp(log_density(k) - shift), -5, 5, points=peaks, limit=400
    )
    first, _ = integrate.quad(
        lambda k: k * np.exp(log_density(k) - shift), -5, 5, points=peaks, limit=400
    )
    return first / mass


@pytest.fixture(scope="module")
def linear_modes():
    fit = sample_smc(linear_model(), random_seed=4, **{**SMC_OPTIONS, "runs": 3})
    return smc_modes(linear_model(), fit, particles_per_run=6, random_seed=1, n_workers=1)


def test_a_unimodal_population_is_one_mode_of_weight_one(linear_modes):
    assert len(linear_modes.modes) == 1
    (mode,) = linear_modes.modes
    assert mode.weight == 1.0 and mode.weight_se == 0.0
    np.testing.assert_array_equal(mode.run_weights, [1.0, 1.0, 1.0])
    assert mode.optimum.size == 18 and linear_modes.failed_share == 0.0
    assert len(mode.particles) == 3 * SMC_OPTIONS["draws"]  # every particle joins it
    mean, covariance = conjugate_posterior()
    # the optimum is the exact MAP (= the conjugate mean)
    optimum = mode.optimum.parameters
    np.testing.assert_allclose([optimum["a"], optimum["b"]], mean, atol=1e-4)
    # the particles' mean and covariance: within Monte Carlo error of the conjugate ones
    approximation = mode.approximation
    assert approximation.hessian == "population"
    sd = np.sqrt(np.diag(covariance))
    assert np.all(np.abs(approximation.mode.vector - mean) < 4 * sd / np.sqrt(100))
    np.testing.assert_allclose(np.sqrt(np.diag(approximation.covariance)), sd, rtol=0.25)


def test_runs_of_equal_evidence_weigh_equally():
    shares = np.array([[0.7, 0.3], [0.6, 0.4], [0.9, 0.1], [0.8, 0.2]])
    weight, weight_se, run_weight, effective = run_weighted_shares(shares, np.full(4, -12.5))
    np.testing.assert_allclose(run_weight, 0.25)
    assert effective == pytest.approx(4.0)
    np.testing.assert_allclose(weight, shares.mean(axis=0))
    np.testing.assert_allclose(weight_se, shares.std(axis=0, ddof=1) / 2.0)


def test_the_weights_error_matches_the_spread_of_repeated_runs():
    """Runs whose log evidence scatters by 0.5 and whose shares scatter around 0.7: the
    delta-method error of the evidence-weighted shares (root mean square) against the
    spread of the estimate over 4000 repetitions of 8 runs (measured: 0.0373 against
    0.0394; 0.0396 against 0.0487 when the log evidences scatter by 1)."""
    rng = np.random.default_rng(11)
    estimates, errors = [], []
    for _ in range(4000):
        log_z = rng.normal(-40.0, 0.5, size=8)
        share = rng.beta(14.0, 6.0, size=8)
        weight, weight_se, _, effective = run_weighted_shares(
            np.column_stack([share, 1.0 - share]), log_z
        )
        assert effective > 2.0
        estimates.append(weight[0])
        errors.append(weight_se[0])
    assert np.mean(estimates) == pytest.approx(0.7, abs=0.005)
    assert np.sqrt(np.mean(np.square(errors))) == pytest.approx(np.std(estimates), rel=0.1)


def test_a_run_that_lost_the_heavy_mode_does_not_count():
    weight, weight_se, run_weight, effective = run_weighted_shares(
        np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([-180.0, -373.0])
    )
    np.testing.assert_allclose(weight, [1.0, np.exp(-193.0)], rtol=1e-12)
    assert np.isnan(weight_se).all()
    assert run_weight[0] == pytest.approx(1.0) and effective == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"per_run: expected finite log evidences"):
        run_weighted_shares(np.array([[1.0], [1.0]]), np.array([-1.0, np.nan]))


def two_run_population(log_evidence, negative_in_run_1: int = 12) -> az.InferenceData:
    """Particles of the symmetric decay model: run 0 all at k > 0, run 1 with
    ``negative_in_run_1`` of its 12 at k < 0."""
    rng = np.random.default_rng(5)
    magnitude = np.sqrt(0.7) + 0.03 * rng.normal(size=(2, 12))
    sign = np.ones((2, 12))
    sign[1, :negative_in_run_1] = -1.0
    k = magnitude * sign
    x0 = 2.1 + 0.05 * rng.normal(size=(2, 12))
    posterior = xr.Dataset({"k": (("chain", "draw"), k), "x0": (("chain", "draw"), x0)})
    stats = xr.Dataset({"log_marginal_likelihood": ("chain", np.asarray(log_evidence, float))})
    return az.InferenceData(posterior=posterior, sample_stats=stats)


def spy_on_sampling(monkeypatch, module) -> list[dict]:
    """Replaces ``module.sample`` by a record of each call's arguments; each call returns a
    posterior of one chain whose draws are the chains' starts."""
    calls = []

    def record(draws, **kwargs):
        calls.append(dict(kwargs, draws=draws))
        starts = kwargs["initvals"]
        return az.from_dict(
            posterior={name: np.array([[start[name] for start in starts]]) for name in starts[0]}
        )

    monkeypatch.setattr(module, "sample", record)
    return calls


def decay_modes(log_evidence, **options) -> object:
    return smc_modes(
        symmetric_decay_model(),
        two_run_population(log_evidence),
        particles_per_run=3,
        random_seed=1,
        n_workers=1,
        **options,
    )


def test_modes_are_weighted_by_the_runs_evidence(monkeypatch):
    agreeing = decay_modes([-9.0, -9.0])
    assert len(agreeing.modes) == 2
    assert [m.weight for m in agreeing.modes] == pytest.approx([0.5, 0.5])
    assert [m.weight_se for m in agreeing.modes] == pytest.approx([0.5, 0.5])
    with pytest.warns(RuntimeWarning, match=r"log evidences \[-9.0, -60.0\] disagree: 1.00"):
        lost = decay_modes([-9.0, -60.0], min_run_weight=0.0)
    positive = [m for m in lost.modes if m.optimum.parameters["k"] > 0][0]
    negative = [m for m in lost.modes if m.optimum.parameters["k"] < 0][0]
    assert positive.weight == pytest.approx(1.0) and np.isnan(positive.weight_se)
    assert negative.weight == pytest.approx(np.exp(-51.0), rel=1e-9) and lost.skipped_runs == ()
    # NUTS runs in the positive mode only: the other weighs exp(-51) < min_weight = 1e-6
    calls = spy_on_sampling(monkeypatch, smc_mode_sampling)
    samples = sample_smc_modes(lost, chains_per_mode=2, cores=1, progressbar=False)
    sampled = [[start["k"] for start in call["initvals"]] for call in calls]
    assert len(sampled) == 1 and np.all(np.array(sampled[0]) > 0)
    assert samples.weights == {positive.rank: 1.0}
    np.testing.assert_allclose(lost.evidence_weights, [1.0, np.exp(-51.0)], rtol=1e-12)
    assert "1 effective runs" in repr(lost)
    no_evidence = az.InferenceData(posterior=two_run_population([0.0, 0.0]).posterior)
    with pytest.raises(
        ValueError, match="no sample_stats.log_marginal_likelihood per run; the runs are weighed"
    ):
        smc_modes(symmetric_decay_model(), no_evidence, particles_per_run=1, n_workers=1)


def test_runs_without_evidence_weight_are_not_optimised():
    """Run 1 (evidence weight exp(-51)) holds the only particles at k < 0: below
    min_run_weight it is not optimised, its particles join no mode, and the weights differ
    from those of every run optimised by less than its weight."""
    with pytest.warns(RuntimeWarning, match=r"log evidences \[-9.0, -60.0\] disagree"):
        skipped = decay_modes([-9.0, -60.0])
    assert skipped.skipped_runs == (1,)
    assert [run for run, _ in skipped.optimised] == [0, 0, 0]
    (mode,) = skipped.modes
    assert mode.optimum.parameters["k"] > 0 and mode.weight == 1.0
    assert sorted({run for run, _ in mode.particles}) == [0] and len(mode.particles) == 12
    np.testing.assert_array_equal(mode.run_weights, [1.0, np.nan])
    np.testing.assert_array_equal(skipped.evidence_weights, [1.0, 0.0])
    with pytest.warns(RuntimeWarning, match="disagree"):
        kept = decay_modes([-9.0, -60.0], min_run_weight=1e-30)
    assert kept.skipped_runs == () and len(kept.modes) == 2
    assert skipped.optimised == tuple(o for o in kept.optimised if o[0] == 0)  # same particles
    assert abs(max(m.weight for m in kept.modes) - mode.weight) < np.exp(-51.0) * 1.0001
    with pytest.raises(ValueError, match=r"min_run_weight: expected a number in \[0, 1\), got 1.0"):
        decay_modes([-9.0, -9.0], min_run_weight=1.0)


def test_a_mode_of_few_particles_is_approximated_only_when_read(monkeypatch):
    """Two particles of 24 at k < 0 (fewer than coordinates + 1): that mode's Laplace
    approximation is computed when read, so smc_modes does not fail where it would."""

    def not_a_maximum(self, hessian="fisher", cluster=0, fd_step=1e-3):
        raise ValueError("the negative Hessian has 1 eigenvalues that are not positive")

    monkeypatch.setattr(ModeSearchResult, "laplace", not_a_maximum)
    modes = smc_modes(
        symmetric_decay_model(),
        two_run_population([-9.0, -9.0], negative_in_run_1=2),
        particles_per_run=12,
        random_seed=1,
        n_workers=1,
    )
    positive = [m for m in modes.modes if m.optimum.parameters["k"] > 0][0]
    negative = [m for m in modes.modes if m.optimum.parameters["k"] < 0][0]
    assert (len(positive.particles), len(negative.particles)) == (22, 2)
    assert negative.weight == pytest.approx(1.0 / 12.0)
    assert positive.approximation.hessian == "population"
    np.testing.assert_allclose(positive.approximation.mode.vector, positive.centre)
    with pytest.raises(ValueError, match=r"mode 1: its 2 particles are too few .* not positive"):
        negative.approximation  # noqa: B018


def test_start_values_are_particles_of_the_mode(linear_modes):
    starts = linear_modes.start_values(0, 4, random_seed=2)
    assert len(starts) == 4 and all(set(s) == {"a", "b"} for s in starts)
    population = set(
        zip(
            linear_modes.posterior["a"].values.ravel().tolist(),
            linear_modes.posterior["b"].values.ravel().tolist(),
        )
    )
    assert {(float(s["a"]), float(s["b"])) for s in starts} <= population


def test_the_table_has_a_row_per_mode(linear_modes):
    table = linear_modes.to_dataframe()
    assert list(table.index) == [0]
    assert {"weight", "weight_se", "log_posterior", "log_likelihood", "a", "b"} <= set(
        table.columns
    )


def test_arguments_are_checked(linear_modes):
    with pytest.raises(ValueError, match="idata: expected the result of sample_smc"):
        smc_modes(linear_model(), object())
    fit = type("Fit", (), {"posterior": linear_modes.posterior})()
    with pytest.raises(ValueError, match="particles_per_run: expected an integer >= 1, got 0"):
        smc_modes(linear_model(), fit, particles_per_run=0)
    with pytest.raises(ValueError, match="barrier: expected a positive number of log-units"):
        smc_modes(linear_model(), fit, barrier=-1.0)
    with pytest.raises(ValueError, match=r"free variables \['k', 'x0'\]"):
        smc_modes(symmetric_decay_model(), fit)
    with pytest.raises(TypeError, match="modes: expected the result of smc_modes"):
        sample_smc_modes(object())
    with pytest.raises(ValueError, match="chains_per_mode: expected an integer >= 1"):
        sample_smc_modes(linear_modes, chains_per_mode=0)
    with pytest.raises(ValueError, match=r"min_weight: expected a number in \[0, 1\), got 1.0"):
        sample_smc_modes(linear_modes, min_weight=1.0)


@pytest.mark.slow
def test_nuts_in_each_mode_of_a_bimodal_posterior_weighted_as_quadrature():
    fit = sample_smc(symmetric_decay_model(), random_seed=7, **SMC_OPTIONS)
    modes = smc_modes(symmetric_decay_model(), fit, particles_per_run=30, random_seed=3)
    assert len(modes.modes) == 2
    positive = [m for m in modes.modes if m.optimum.parameters["k"] > 0][0]
    negative = [m for m in modes.modes if m.optimum.parameters["k"] < 0][0]
    exact = positive_mode_weight()
    assert 0.0 < positive.weight_se < 0.1
    assert abs(positive.weight - exact) < 3.0 * positive.weight_se, (positive.weight, exact)
    assert abs(positive.weight + negative.weight - 1.0) < 1e-12
    # each particle joined the mode of its sign
    for mode, sign in ((positive, 1.0), (negative, -1.0)):
        k = np.array([fit.posterior["k"].values[rc] for rc in mode.particles])
        assert np.all(np.sign(k) == sign)

    samples = sample_smc_modes(
        modes, draws=500, tune=300, chains_per_mode=2, cores=1, random_seed=5, progressbar=False
    )
    table = samples.summary()
    assert (table["rhat_max"] < 1.01).all(), table
    assert (table["ess_bulk_min"] > 200).all(), table
    assert (table["leakage"] == 0.0).all(), table
    # NUTS stays in its mode; each mode at the rate the data fix (k^2 = 0.7)
    for mode, sign in ((positive, 1.0), (negative, -1.0)):
        k = samples.samples[mode.rank].posterior["k"].values
        assert np.all(np.sign(k) == sign)
        assert abs(float(np.median(sign * k)) - np.sqrt(0.7)) < 0.1
    mixture = samples.mixture(random_seed=1)
    k = mixture.posterior["k"].values.ravel()
    share = float(np.mean(k > 0))
    assert abs(share - positive.weight) < 2.0 / k.size + 1e-12
    # the mixture's P(k > 0) against quadrature, within the weight's error
    assert abs(share - exact) < 3.0 * positive.weight_se
    # its mean of k against quadrature: the weight's error times the modes' distance
    distance = 2.0 * np.sqrt(0.7)
    exact_mean = posterior_mean_k()
    assert abs(exact_mean) > 0.3  # the weights matter to it
    assert abs(float(k.mean()) - exact_mean) < 3.0 * distance * positive.weight_se + 0.02
