"""The convergence report flags every check that fails its usual threshold, and only those."""

from __future__ import annotations

import arviz as az
import numpy as np

from pymc_odesens.inference.convergence import ESS_MIN, RHAT_MAX, convergence_report


def sample(shift: float = 0.0, chains: int = 4, draws: int = 1000, diverging: int = 0, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(chains, draws, 2))
    if shift:
        x[1] += shift  # one chain elsewhere: the chains disagree
    divergent = np.zeros((chains, draws), dtype=bool)
    divergent.flat[:diverging] = True
    return az.from_dict(
        posterior={"theta": x}, sample_stats={"diverging": divergent}, dims={"theta": ["k"]}
    )


def test_a_good_sample_passes_every_check():
    report = convergence_report(sample())
    assert report.passed and report.problems == []
    assert report.rhat_max <= RHAT_MAX and report.ess_bulk_min >= ESS_MIN
    assert report.lines()[1].startswith("convergence checks passed (R-hat <= 1.01")


def test_an_rhat_above_1_01_is_flagged_with_the_variable():
    report = convergence_report(sample(shift=0.5))
    assert report.rhat_max > RHAT_MAX
    assert not report.passed
    text = str(report)
    assert f"R-hat max {report.rhat_max:.4f}" in text.splitlines()[0]
    flagged = [line for line in text.splitlines() if line.startswith("WARNING: R-hat")]
    assert len(flagged) == 1
    assert "is above 1.01 (2 of 2 above): the chains do not agree yet" in flagged[0]
    assert report.rhat_variable in flagged[0] and report.rhat_variable.startswith("theta[")


def test_few_effective_draws_and_divergences_are_flagged():
    report = convergence_report(sample(draws=60, diverging=3))
    text = str(report)
    assert "WARNING: bulk ESS" in text and "is below 400" in text
    assert "WARNING: tail ESS" in text
    assert "WARNING: 3 divergent transition(s)" in text
    assert report.divergences == 3


def test_one_chain_has_no_rhat_and_says_so():
    report = convergence_report(sample(chains=1))
    assert "WARNING: R-hat could not be computed" in str(report)


def test_an_rhat_just_above_the_threshold_is_not_rounded_away():
    # ArviZ's summary shows two decimals by default: 1.0104 would read 1.01
    report = convergence_report(sample(shift=0.3, seed=0))  # R-hat 1.0104
    assert report.rhat_max > RHAT_MAX
    assert f"{report.rhat_max:.2f}" == "1.01"
    assert "WARNING: R-hat" in str(report)
