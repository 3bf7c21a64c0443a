"""The independent Metropolis-Hastings move of SMC: invariant for the tempered target with a
proposal that is not the target; a failed proposal is a rejection; sample_smc's
kernel="auto" takes them at the hot stages and HMC moves after."""

import numpy as np
import pytest

from pymc_odesens.inference import sample_smc
from pymc_odesens.inference.smc_independent import PopulationGaussian, independent_move
from tests.inference.smc_models import SMC_OPTIONS, exact_log_evidence, linear_model
from tests.inference.test_smc_hmc import CENTRE, LIK_VAR, PRIOR_VAR, failing_beyond, gaussian


def test_moves_keep_the_tempered_target_invariant_with_another_gaussian_proposal():
    beta = 0.5
    precision = 1 / PRIOR_VAR + beta / LIK_VAR
    mean = (beta * CENTRE / LIK_VAR) / precision
    # a proposal off the target's centre and wider than it: the acceptance ratio corrects
    proposal = PopulationGaussian(np.array([0.3, -0.2]), np.diag([1.5, 1.0]))
    rng = np.random.default_rng(3)
    x = mean + rng.normal(size=(6000, 2)) / np.sqrt(precision)
    moved, accepted = [], 0
    for row in x:
        outcome = independent_move(gaussian, row, gaussian(row), beta, proposal, rng)
        moved.append(outcome.position)
        accepted += outcome.accepted
        assert outcome.gradient_evaluations == 1
        assert outcome.evaluation.log_likelihood == gaussian(outcome.position).log_likelihood
    moved = np.array(moved)
    assert 0.2 < accepted / 6000 < 0.9
    # standard errors of the mean 0.013 sd, of the variance 1.8 %
    assert np.all(np.abs(moved.mean(axis=0) - mean) < 4 * 0.013 / np.sqrt(precision))
    np.testing.assert_allclose(moved.var(axis=0), 1 / precision, rtol=0.08)


def test_the_proposal_is_the_particles_weighted_mean_and_covariance():
    rng = np.random.default_rng(0)
    positions = rng.normal(size=(4000, 2)) @ np.array([[2.0, 0.0], [0.6, 0.5]]).T + [1.0, -3.0]
    weights = np.ones(4000)
    proposal = PopulationGaussian.of(positions, weights)
    np.testing.assert_allclose(proposal.mean, positions.mean(axis=0), rtol=1e-12)
    covariance = proposal.cholesky @ proposal.cholesky.T
    # population_covariance shrinks towards the diagonal by n / (n + 5)
    expected = np.cov(positions.T)
    shrink = 4000 / 4005
    expected = shrink * expected + (1 - shrink) * np.diag(np.diag(expected))
    np.testing.assert_allclose(covariance, expected, rtol=1e-6)
    # log q up to its constant: -z'z / 2
    assert proposal.log_density(proposal.mean) == 0.0


def test_a_failed_proposal_is_a_rejection_with_finite_values():
    failing = failing_beyond(0.0)
    proposal = PopulationGaussian(np.zeros(2), np.eye(2))
    rng = np.random.default_rng(1)
    start = np.array([-0.5, 0.0])
    failures = 0
    for _ in range(200):
        outcome = independent_move(failing, start, failing(start), 1.0, proposal, rng)
        if outcome.failed:
            failures += 1
            assert not outcome.accepted and outcome.acceptance == 0.0
            np.testing.assert_array_equal(outcome.position, start)
        assert np.isfinite(outcome.evaluation.log_likelihood)
    assert 70 < failures < 130  # half the proposals land where the solve fails


@pytest.fixture(scope="module")
def kernels():
    options = {**SMC_OPTIONS, "runs": 4, "draws": 200}
    return {
        "auto": sample_smc(linear_model(), random_seed=5, **options),
        # the linear model's Gaussian fit accepts about 0.9 of the proposals at every
        # stage: a threshold above that makes the runs switch to HMC after their first stage
        "auto, switching": sample_smc(
            linear_model(), random_seed=5, independent_acceptance=0.97, **options
        ),
        "hmc": sample_smc(linear_model(), random_seed=5, kernel="hmc", **options),
    }


@pytest.mark.parametrize("name, threshold", [("auto", 0.3), ("auto, switching", 0.97)])
def test_auto_moves_independently_while_accepted_then_by_hmc(kernels, name, threshold):
    stats = kernels[name].sample_stats
    independent = stats["independent"].values
    acceptance = stats["acceptance_rate"].values
    for run in range(independent.shape[0]):
        done = ~np.isnan(independent[run])
        flags = independent[run][done].astype(bool)
        assert flags[0]  # the first stage moves independently
        # independent stages first, then HMC only; the switch follows a stage whose
        # acceptance fell below independent_acceptance
        switch = int(np.argmin(flags)) if not flags.all() else len(flags)
        assert flags[:switch].all() and not flags[switch:].any()
        assert np.all(acceptance[run][: switch - 1] >= threshold)
        if switch < len(flags):
            assert acceptance[run][switch - 1] < threshold
        if name == "auto, switching":
            assert switch == 1
        # an independent move costs one evaluation per particle
        moves = stats["moves"].values[run][:switch]
        np.testing.assert_array_equal(
            stats["gradient_evaluations"].values[run][:switch], 200 * moves
        )
    assert not np.nansum(kernels["hmc"].sample_stats["independent"].values)


def test_both_kernels_give_the_closed_form_evidence(kernels):
    exact = exact_log_evidence()
    for idata in kernels.values():
        estimate = float(idata.sample_stats.attrs["log_marginal_likelihood"])
        error = float(idata.sample_stats.attrs["log_marginal_likelihood_mcse"])
        assert abs(estimate - exact) < 4 * error + 0.05


def test_an_unknown_kernel_is_named():
    with pytest.raises(ValueError, match=r"kernel must be one of \('auto', 'hmc'\); got 'nuts'"):
        sample_smc(linear_model(), kernel="nuts", **SMC_OPTIONS)
    with pytest.raises(ValueError, match=r"independent_acceptance must be in \(0, 1\)"):
        sample_smc(linear_model(), independent_acceptance=1.0, **SMC_OPTIONS)
