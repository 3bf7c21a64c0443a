"""Jump moves of tempered SMC between given optima: the mixture proposal's density and
draws, the likelihood's curvature at the optima, the points' forms and errors, and a
posterior whose narrow mode the runs lose without jumps and weigh right with them."""

import dataclasses
import io

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats

from pymc_odesens.inference import log_evidence, sample_smc
from pymc_odesens.inference.smc_checkpoint import SmcCheckpoint
from pymc_odesens.inference.smc_jumps import GaussianMixture, JumpTargets, jump_points, jump_targets
from pymc_odesens.inference.smc_progress import StageProgress
from pymc_odesens.inference.smc_target import ParticleLayout
from tests.inference.smc_models import SMC_OPTIONS, linear_model
from tests.inference.test_smc_progress import RECORD

# the likelihood of the spike model: 0.3 N(x; -2, 1) + 0.7 N(x; 4, 0.01^2), prior N(0, 3^2)
WEIGHTS = np.array([0.3, 0.7])
SPIKE_SD = 0.01


def spike_model() -> pm.Model:
    """A broad mode at -2 and a narrow one at 4 that holds 55 % of the posterior: at the hot
    stages the narrow mode's tempered mass is small, and a run's particles may lose it."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 3.0)
        pm.NormalMixture(
            "y",
            w=WEIGHTS,
            mu=pt.stack([x + 2.0, x - 4.0]),
            sigma=np.array([1.0, SPIKE_SD]),
            observed=0.0,
        )
    return model


def spike_masses() -> np.ndarray:
    broad = WEIGHTS[0] * stats.norm(0.0, np.sqrt(1.0 + 9.0)).pdf(-2.0)
    narrow = WEIGHTS[1] * stats.norm(0.0, np.sqrt(SPIKE_SD**2 + 9.0)).pdf(4.0)
    return np.array([broad, narrow])


def test_the_mixture_density_is_normalised_and_its_draws_follow_it():
    rng = np.random.default_rng(0)
    covariances = [np.array([[1.0, 0.6], [0.6, 2.0]]), np.diag([0.04, 0.09])]
    means = np.array([[0.0, 0.0], [3.0, -1.0]])
    weights = np.array([0.3, 0.7])
    mixture = GaussianMixture(
        np.log(weights),
        means,
        np.array([np.linalg.cholesky(np.linalg.inv(c)) for c in covariances]),
    )
    for x in rng.normal(size=(5, 2)) * 2.0:
        exact = np.log(
            sum(
                w * stats.multivariate_normal(m, c).pdf(x)
                for w, m, c in zip(weights, means, covariances)
            )
        )
        assert mixture.log_density(x) == pytest.approx(exact, rel=1e-12)
    draws = np.array([mixture.draw(rng) for _ in range(20000)])
    in_second = np.linalg.norm(draws - means[1], axis=1) < 1.5
    assert abs(in_second.mean() - 0.7) < 4 * np.sqrt(0.21 / 20000)
    second = draws[in_second]
    np.testing.assert_allclose(second.mean(axis=0), means[1], atol=4 * 0.3 / np.sqrt(len(second)))
    np.testing.assert_allclose(np.cov(second.T), covariances[1], atol=0.01)


def quadratic(precision: np.ndarray, centre: np.ndarray):
    """``evaluate_many`` of the log-likelihood ``-(x - c)' P (x - c) / 2``."""

    def evaluate_many(positions):
        d = positions - centre
        log_likelihood = -0.5 * np.einsum("ni,ij,nj->n", d, precision, d)
        return np.zeros(len(positions)), log_likelihood, -d @ precision

    return evaluate_many


PRIOR_DRAWS_2D = np.random.default_rng(7).normal(size=(4000, 2)) * [3.0, 0.5]


def test_the_curvature_at_an_optimum_is_the_likelihoods_precision_and_never_negative():
    precision = np.array([[4.0, 1.0], [1.0, 3.0]])
    targets = jump_targets(
        np.array([[0.5, -0.5]]), quadratic(precision, np.zeros(2)), 0.2, PRIOR_DRAWS_2D
    )
    np.testing.assert_allclose(targets.curvatures[0], precision, atol=1e-8)
    # a saddle: only the curved direction is kept (a ridge's flat direction takes the
    # prior's spread in the proposal)
    saddle = np.diag([2.0, -1.0])
    targets = jump_targets(np.zeros((1, 2)), quadratic(saddle, np.zeros(2)), 0.2, PRIOR_DRAWS_2D)
    np.testing.assert_allclose(targets.curvatures[0], np.diag([2.0, 0.0]), atol=1e-8)
    # the prior's precision from its draws
    np.testing.assert_allclose(
        np.linalg.inv(targets.prior_precision), np.diag([9.0, 0.25]), rtol=0.06, atol=0.08
    )


def test_the_proposal_tempers_the_curvature_and_takes_the_priors_spread_where_it_is_flat():
    # the population (narrow, elsewhere) shapes only its own component
    positions = np.random.default_rng(1).normal(size=(400, 2)) * [0.2, 0.05] + [-2.0, 0.0]
    weights = np.ones(400)
    prior = np.diag([9.0, 0.25])
    targets = JumpTargets(
        np.array([[3.0, 1.0]]), np.array([np.diag([100.0, 0.0])]), 0.25, np.linalg.inv(prior)
    )
    mixture = targets.proposal(positions, weights, beta=0.01)
    assert np.exp(mixture.log_weights) == pytest.approx([0.25, 0.75])
    np.testing.assert_allclose(mixture.means[1], [3.0, 1.0])
    covariance = np.linalg.inv(mixture.precision_choleskys[1] @ mixture.precision_choleskys[1].T)
    # along the curved direction 1 / (beta 100 + 1 / 9), along the flat one the prior's
    np.testing.assert_allclose(covariance, np.diag([1.0 / (1.0 + 1.0 / 9.0), 0.25]), rtol=1e-12)
    population = np.linalg.inv(mixture.precision_choleskys[0] @ mixture.precision_choleskys[0].T)
    np.testing.assert_allclose(np.diag(population), [0.04, 0.0025], rtol=0.2)


def two_gaussian_optima(beta: float, d: int = 19):
    """Two optima of equal tempered mass under a Gaussian prior N(0, 1.8^2 I): A at 0 with
    curvatures 1-1e4, B elsewhere with others and three flat directions; the tempered
    posterior's population at A (exact draws) and ``log pi_beta``."""
    rng = np.random.default_rng(0)
    prior_precision = np.eye(d) / 1.8**2
    curvature_a, curvature_b = 10 ** rng.uniform(0, 4, d), 10 ** rng.uniform(0, 4, d)
    curvature_b[:3] = 0.0
    centre_b = rng.normal(0.0, 1.5, d)

    def log_mass(curvature, centre):
        sign, log_det = np.linalg.slogdet(beta * np.diag(curvature) + prior_precision)
        return -0.5 * log_det - 0.5 * centre @ prior_precision @ centre

    height = (log_mass(curvature_a, np.zeros(d)) - log_mass(curvature_b, centre_b)) / beta

    def log_target(x):
        a = -0.5 * np.sum(curvature_a * x**2)
        b = height - 0.5 * np.sum(curvature_b * (x - centre_b) ** 2)
        return -0.5 * x @ prior_precision @ x + beta * np.logaddexp(a, b)

    population = rng.multivariate_normal(
        np.zeros(d), np.diag(1.0 / (beta * curvature_a + 1.0 / 1.8**2)), 400
    )
    targets = JumpTargets(
        np.array([np.zeros(d), centre_b]),
        np.array([np.diag(curvature_a), np.diag(curvature_b)]),
        0.2,
        prior_precision,
    )
    return targets, population, log_target, centre_b


@pytest.mark.parametrize("beta", [0.001, 0.01, 0.1, 1.0])
def test_particles_jump_into_an_optimum_of_equal_mass_at_every_temperature(beta):
    # the components keep the tempered posterior's width at every beta: with the
    # population's precision in place of the prior's (the curvature counted twice), the
    # share that jumped fell from 0.11 at beta 0.001 to 0.005 at 0.1 and 0.002 at 1 (here
    # 0.27-0.32)
    targets, population, log_target, centre_b = two_gaussian_optima(beta)
    mixture = targets.proposal(population, np.ones(len(population)), beta)
    rng = np.random.default_rng(1)
    into_b = 0.0
    for x in population:
        y = mixture.draw(rng)
        log_ratio = log_target(y) - log_target(x) + mixture.log_density(x) - mixture.log_density(y)
        if np.linalg.norm(y - centre_b) < np.linalg.norm(y):
            into_b += np.exp(min(log_ratio, 0.0))
    # 0.4 of the proposals come from B's component; at most half of the mass is there
    assert 0.2 < into_b / len(population) < 0.45, into_b / len(population)


def test_a_failed_solve_next_to_an_optimum_is_named():
    def evaluate_many(positions):
        values = np.zeros(len(positions))
        values[-1] = -np.inf
        return np.zeros(len(positions)), values, np.zeros_like(positions)

    with pytest.raises(ValueError, match=r"jump_modes: .* not finite next to optimum 1"):
        jump_targets(np.zeros((2, 2)), evaluate_many, 0.2, PRIOR_DRAWS_2D)


def test_prior_draws_that_give_no_precision_are_refused():
    evaluate_many = quadratic(np.eye(2), np.zeros(2))
    with pytest.raises(
        ValueError, match=r"at least d \+ 1 draws of shape \(M, d\), got shape \(2, 2\)"
    ):
        jump_targets(np.zeros((1, 2)), evaluate_many, 0.2, np.ones((2, 2)))
    fixed = PRIOR_DRAWS_2D.copy()
    fixed[:, 1] = 0.5
    with pytest.raises(ValueError, match=r"do not vary in coordinates \[1\]"):
        jump_targets(np.zeros((1, 2)), evaluate_many, 0.2, fixed)
    with pytest.raises(ValueError, match=r"prior_draws have 3 coordinates, the points 2"):
        jump_targets(
            np.zeros((1, 2)), evaluate_many, 0.2, np.ones((10, 3)) * np.arange(10)[:, None]
        )
    broken = PRIOR_DRAWS_2D.copy()
    broken[3, 0] = np.nan
    with pytest.raises(ValueError, match=r"a prior draw is not finite"):
        jump_targets(np.zeros((1, 2)), evaluate_many, 0.2, broken)


def test_points_by_value_variable_or_raveled_and_their_errors():
    layout = ParticleLayout(("a", "b_log__"), ((), (2,)), 3)
    point = {"a": 1.0, "b_log__": np.array([2.0, 3.0])}
    np.testing.assert_array_equal(jump_points(point, layout), [[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(jump_points([point, point], layout).shape, (2, 3))
    np.testing.assert_array_equal(jump_points(np.ones((2, 3)), layout), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"point 0 lacks the value variables \['b_log__'\]"):
        jump_points([{"a": 1.0, "b": [1.0, 2.0]}], layout)
    with pytest.raises(ValueError, match=r"point 0's b_log__ has shape \(3,\), expected \(2,\)"):
        jump_points({"a": 1.0, "b_log__": np.ones(3)}, layout)
    with pytest.raises(ValueError, match=r"expected an array of shape \(K, 3\)"):
        jump_points(np.ones((2, 4)), layout)
    with pytest.raises(ValueError, match="expected at least one point"):
        jump_points([], layout)
    with pytest.raises(ValueError, match="expected finite points"):
        jump_points(np.array([[1.0, np.nan, 0.0]]), layout)


def test_a_stage_line_shows_the_jumps():
    stream = io.StringIO()
    record = dataclasses.replace(RECORD, jump_moves=1, jump_acceptance=0.412, jumped=57)
    StageProgress(runs=4, draws=100, stream=stream).stage(0, 3, record)
    assert "moves 4  jumps 57 (acceptance 0.41)  failed 3" in stream.getvalue()


def in_spike(x: np.ndarray) -> np.ndarray:
    """Particles of the narrow mode (10 of its standard deviations; the broad mode's
    density there is 6 of its own below its peak)."""
    return np.abs(x - 4.0) < 10 * SPIKE_SD


@pytest.fixture(scope="module")
def spike_fits():
    options = {**SMC_OPTIONS, "random_seed": 3}
    without = sample_smc(spike_model(), **options)
    with_jumps = sample_smc(spike_model(), jump_modes=np.array([[4.0], [-2.0]]), **options)
    return without, with_jumps


@pytest.mark.slow  # two sampling runs; the unit tests of the jump move stay by default
def test_jumps_let_every_run_weigh_a_narrow_mode_that_runs_lose_without_them(spike_fits):
    without, with_jumps = spike_fits
    masses = spike_masses()
    exact = masses[1] / masses.sum()
    assert 0.5 < exact < 0.6
    # without jumps the runs disagree: some lost the narrow mode at the hot stages
    lost = in_spike(without.posterior["x"].values).mean(axis=1)
    assert lost.min() < 0.05 and lost.max() - lost.min() > 0.4, lost
    # with one jump move per stage every run holds both modes, each near its weight
    found = in_spike(with_jumps.posterior["x"].values).mean(axis=1)
    assert np.all(np.abs(found - exact) < 0.1), (found, exact)
    # the evidence within its error of the exact one, and runs that agree on it
    estimate, mcse = log_evidence(with_jumps)
    assert 0.0 < mcse < 0.2
    assert abs(estimate - np.log(masses.sum())) < 3.0 * mcse, (estimate, mcse)
    stats_ = with_jumps.sample_stats
    staged = np.isfinite(stats_["beta"].values)
    assert np.all(stats_["jump_moves"].values[staged] == 1)
    assert np.all(stats_["jumped"].values[staged] >= 0)
    assert np.nansum(stats_["jumped"].values) > 100
    acceptance = stats_["jump_acceptance"].values[staged]
    assert np.all((acceptance >= 0.0) & (acceptance <= 1.0))
    plain = without.sample_stats
    assert np.all(plain["jump_moves"].values[np.isfinite(plain["beta"].values)] == 0)


def test_jump_options_are_named():
    with pytest.raises(ValueError, match=r"sample_smc: jump_moves must be an integer >= 1"):
        sample_smc(linear_model(), jump_modes=np.zeros((1, 2)), jump_moves=0, **SMC_OPTIONS)
    with pytest.raises(ValueError, match=r"sample_smc: jump_population_weight must be in \[0, 1\)"):
        sample_smc(
            linear_model(), jump_modes=np.zeros((1, 2)), jump_population_weight=1.0, **SMC_OPTIONS
        )
    with pytest.raises(ValueError, match=r"jump_modes: point 0 lacks the value variables \['b'\]"):
        sample_smc(linear_model(), jump_modes={"a": 0.0}, **SMC_OPTIONS)


def test_a_run_with_jumps_stopped_between_moves_continues_bit_for_bit(tmp_path, monkeypatch):
    from tests.inference.test_smc_checkpoint import OPTIONS, _assert_same, _stop_after_two_moves

    # two optima of the linear model (one near its posterior mean, one off it); three
    # moves per stage after the jump: the clock stops run 0 after its jump and one move
    options = {**OPTIONS, "moves": 3, "jump_modes": np.array([[0.3, 1.2], [-1.0, 0.0]])}
    straight = sample_smc(linear_model(), random_seed=21, **options)
    assert np.all(straight.sample_stats["moves"].values[:, 0] == 4)
    _stop_after_two_moves(monkeypatch, tmp_path, 21, options)
    stored = SmcCheckpoint(tmp_path).load(0)
    assert stored.partial.moves == 2 and stored.partial.jump_moves == 1
    continued = sample_smc(linear_model(), random_seed=None, checkpoint=tmp_path, **options)
    _assert_same(continued, straight)
    for name in ("jump_acceptance", "jumped", "acceptance_rate"):
        np.testing.assert_array_equal(
            continued.sample_stats[name].values, straight.sample_stats[name].values
        )
    # other optima are another call's moves: refused, unless change_moves
    other = {**options, "jump_modes": np.array([[0.0, 0.0]])}
    with pytest.raises(ValueError, match=r"jumps: stored '[0-9a-f]+'.*change_moves=True"):
        sample_smc(linear_model(), random_seed=21, checkpoint=tmp_path, **other)
    again = sample_smc(
        linear_model(), random_seed=21, checkpoint=tmp_path, change_moves=True, **other
    )
    _assert_same(again, straight)  # finished runs are not sampled again


def wall_model(slope: float = 100.0):
    """``evaluate_many`` of a rate ``k`` on (-8, 8) (the unconstrained ``u = logit((k + 8) /
    16)``) whose likelihood rises linearly towards its lower bound, ``-slope (k + 8)``, and a
    normal coordinate ``m`` with curvature 100; the prior uniform in ``k``, N(0, 1) in
    ``m``."""

    def evaluate_many(positions):
        u, m = positions[:, 0], positions[:, 1]
        sigma = 1.0 / (1.0 + np.exp(-u))
        log_prior = np.log(sigma) + np.log1p(-sigma) - 0.5 * m**2
        log_likelihood = -slope * 16.0 * sigma - 50.0 * m**2
        gradient = np.column_stack([-slope * 16.0 * sigma * (1.0 - sigma), -100.0 * m])
        return log_prior, log_likelihood, gradient

    return evaluate_many


@pytest.mark.parametrize("beta", [0.01, 1.0])
def test_a_coordinate_on_a_bound_takes_its_tempered_profiles_mean_and_spread(beta):
    # the optimiser stops a hair inside the bound (u = logit(1e-6) = -13.8), where the
    # likelihood's curvature in u vanishes; the tempered posterior of u peaks near
    # -log(beta 1600) instead: a Laplace component would propose where it has no mass
    rng = np.random.default_rng(3)
    u = rng.logistic(size=4000)
    prior_draws = np.column_stack([u, rng.normal(size=4000)])
    optimum = np.array([[np.log(1e-6), 0.0]])
    targets = jump_targets(optimum, wall_model(), 0.2, prior_draws)
    assert [p.coordinate for p in targets.profiles[0]] == [0]
    mean, precision = targets.component(0, beta)
    # the exact tempered conditional of u by quadrature
    grid = np.linspace(-30.0, 15.0, 20001)
    lp, ll, _ = wall_model()(np.column_stack([grid, np.zeros_like(grid)]))
    density = np.exp(lp + beta * ll - np.max(lp + beta * ll))
    density /= density.sum()
    exact_mean = density @ grid
    exact_variance = density @ (grid - exact_mean) ** 2
    if beta == 1.0:  # far from the bound's other side: a Gumbel
        assert exact_variance == pytest.approx(np.pi**2 / 6, rel=0.02)
    assert mean[0] == pytest.approx(exact_mean, abs=0.15), (mean[0], exact_mean)
    assert 1.0 / precision[0, 0] == pytest.approx(exact_variance, rel=0.15)
    # the curved coordinate keeps its Laplace precision, apart from the flat one
    assert mean[1] == 0.0 and precision[0, 1] == 0.0
    assert precision[1, 1] == pytest.approx(beta * 100.0 + 1.0, rel=0.1)
    # a curved optimum has no profile
    curved = jump_targets(
        np.zeros((1, 2)), quadratic(np.eye(2) * 4.0, np.zeros(2)), 0.2, prior_draws
    )
    assert curved.profiles == ((),)
