"""The HMC move of SMC: invariant for the tempered target; a failed evaluation is a rejection."""

import numpy as np
import pytest

from pymc_odesens.inference.smc_hmc import hmc_move
from pymc_odesens.inference.smc_mass_matrix import PopulationMetric
from pymc_odesens.inference.smc_target import Evaluation

# prior N(0, diag(4, 1)), likelihood N(x; (1, -1), diag(1, 0.25)): at beta = 0.5 the tempered
# target is Gaussian with precision diag(1/4 + 1/2, 1 + 2) and mean precision^-1 (0.5, -2)
PRIOR_VAR = np.array([4.0, 1.0])
LIK_VAR = np.array([1.0, 0.25])
CENTRE = np.array([1.0, -1.0])


def gaussian(x):
    x = np.asarray(x, dtype=float)
    return Evaluation(
        float(-0.5 * np.sum(x**2 / PRIOR_VAR)),
        float(-0.5 * np.sum((x - CENTRE) ** 2 / LIK_VAR)),
        -x / PRIOR_VAR,
        -(x - CENTRE) / LIK_VAR,
    )


def test_moves_keep_the_tempered_target_invariant():
    beta = 0.5
    precision = 1 / PRIOR_VAR + beta / LIK_VAR
    mean = (beta * CENTRE / LIK_VAR) / precision
    metric = PopulationMetric("diag", variances=1.0 / precision)
    rng = np.random.default_rng(0)
    # start from exact draws of the target: the moves must keep their distribution
    x = mean + rng.normal(size=(4000, 2)) / np.sqrt(precision)
    moved, accepted = [], 0
    for row in x:
        outcome = hmc_move(gaussian, row, gaussian(row), beta, metric, 0.9, 5, rng)
        moved.append(outcome.position)
        accepted += outcome.accepted
        there = gaussian(outcome.position)
        assert outcome.evaluation.log_likelihood == there.log_likelihood
        np.testing.assert_array_equal(outcome.evaluation.grad_log_prior, there.grad_log_prior)
    moved = np.array(moved)
    assert 0.3 < accepted / 4000 < 1.0
    # standard errors of the mean 0.016 sd, of the variance ~2.2 %
    assert np.all(np.abs(moved.mean(axis=0) - mean) < 4 * 0.016 / np.sqrt(precision))
    np.testing.assert_allclose(moved.var(axis=0), 1 / precision, rtol=0.1)
    # and the particles moved
    assert np.mean(np.all(moved != x, axis=1)) > 0.3


def failing_beyond(edge: float):
    """``gaussian`` whose likelihood is -inf (a failed solve: zero gradient) where
    ``x[0] > edge``."""

    def failing(x):
        e = gaussian(x)
        if x[0] > edge:
            return Evaluation(e.log_prior, -np.inf, e.grad_log_prior, np.zeros(2))
        return e

    return failing


def test_a_failed_evaluation_is_a_rejection_with_finite_values():
    failing = failing_beyond(0.5)
    metric = PopulationMetric("diag", variances=np.ones(2))
    rng = np.random.default_rng(1)
    start = np.array([0.45, 0.0])
    failures = 0
    for _ in range(200):
        outcome = hmc_move(failing, start, failing(start), 1.0, metric, 0.5, 10, rng)
        if outcome.failed:
            failures += 1
            assert not outcome.accepted and outcome.acceptance == 0.0
            np.testing.assert_array_equal(outcome.position, start)
            assert outcome.evaluation.finite
        assert np.all(np.isfinite(outcome.position))
        assert np.isfinite(outcome.evaluation.log_likelihood)
    assert failures > 20


def test_a_huge_energy_error_is_a_divergence():
    metric = PopulationMetric("diag", variances=np.ones(2))
    outcome = hmc_move(
        gaussian,
        np.zeros(2),
        gaussian(np.zeros(2)),
        1.0,
        metric,
        50.0,
        10,
        np.random.default_rng(2),
    )
    assert outcome.divergent and not outcome.accepted
    # the trajectory stops at the first point past the energy error limit: its first step
    assert outcome.gradient_evaluations == 1
    assert outcome.acceptance == pytest.approx(0.0)


def test_a_trajectory_of_another_gradient_keeps_the_model_s_target_invariant():
    """The leapfrog steps follow a trajectory density whose gradients are wrong (variances 3
    times too large, the likelihood's centre shifted); the end point's acceptance uses the
    model's density. The moved draws keep the model's tempered target, not the trajectory
    density's (whose variances are about 3 times as large: the test would see them)."""
    beta = 0.5
    precision = 1 / PRIOR_VAR + beta / LIK_VAR
    mean = (beta * CENTRE / LIK_VAR) / precision
    shifted = CENTRE + np.array([0.5, 0.3])

    def trajectory(x):
        x = np.asarray(x, dtype=float)
        return Evaluation(
            float(-0.5 * np.sum(x**2 / (3 * PRIOR_VAR))),
            float(-0.5 * np.sum((x - shifted) ** 2 / (3 * LIK_VAR))),
            -x / (3 * PRIOR_VAR),
            -(x - shifted) / (3 * LIK_VAR),
        )

    calls = {"trajectory": 0, "evaluate": 0}

    def counted_trajectory(x):
        calls["trajectory"] += 1
        return trajectory(x)

    def evaluate(x):
        """The model's terms with the trajectory density's gradients (TemperedTarget)."""
        calls["evaluate"] += 1
        own, guide = gaussian(x), trajectory(x)
        return Evaluation(
            own.log_prior, own.log_likelihood, guide.grad_log_prior, guide.grad_log_likelihood
        )

    metric = PopulationMetric("diag", variances=1.0 / precision)
    rng = np.random.default_rng(1)
    x = mean + rng.normal(size=(4000, 2)) / np.sqrt(precision)
    moved, accepted = [], 0
    for row in x:
        outcome = hmc_move(
            evaluate, row, evaluate(row), beta, metric, 0.5, 5, rng, trajectory=counted_trajectory
        )
        moved.append(outcome.position)
        accepted += outcome.accepted
        assert outcome.evaluation.log_likelihood == gaussian(outcome.position).log_likelihood
    moved = np.array(moved)
    # 4 inner steps by the trajectory density and the end point by evaluate, per move
    assert calls["trajectory"] == 4 * 4000 and calls["evaluate"] == 2 * 4000
    assert 0.3 < accepted / 4000 < 1.0
    assert np.all(np.abs(moved.mean(axis=0) - mean) < 4 * 0.016 / np.sqrt(precision))
    np.testing.assert_allclose(moved.var(axis=0), 1 / precision, rtol=0.1)
    assert np.mean(np.all(moved != x, axis=1)) > 0.3
