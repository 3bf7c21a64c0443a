"""compare_models: log Bayes factors with their errors, against the closed-form evidences of
two linear-Gaussian models (with and without a slope)."""

import numpy as np
import pandas as pd
import pytest

from pymc_odesens.inference import compare_models, log_evidence, sample_smc
from tests.inference.smc_models import SMC_OPTIONS, exact_log_evidence, linear_model


@pytest.fixture(scope="module")
def table():
    with_slope = sample_smc(linear_model(slope=True), random_seed=21, **SMC_OPTIONS)
    # a model (not a result) is sampled by compare_models with the options given
    return compare_models(
        {"slope": with_slope, "intercept only": linear_model(slope=False)},
        random_seed=22,
        **SMC_OPTIONS,
    ), with_slope


def test_log_bayes_factor_matches_the_closed_form_within_its_error(table):
    result, with_slope = table
    assert isinstance(result, pd.DataFrame)
    assert list(result.columns) == [
        "log_evidence",
        "mcse",
        "log_bayes_factor",
        "log_bayes_factor_se",
        "probability",
    ]
    # the data have a slope of 1.2: the model with the slope is far ahead, listed first
    assert list(result.index) == ["slope", "intercept only"]
    assert result.index.name == "model"
    exact = exact_log_evidence(False) - exact_log_evidence(True)
    row = result.loc["intercept only"]
    assert row["log_bayes_factor_se"] == pytest.approx(
        np.hypot(row["mcse"], result.loc["slope", "mcse"])
    )
    assert 0.0 < row["log_bayes_factor_se"] < 0.15
    assert abs(row["log_bayes_factor"] - exact) < 3.0 * row["log_bayes_factor_se"]
    assert result.loc["slope", "log_bayes_factor"] == 0.0
    assert result.loc["slope", "log_bayes_factor_se"] == 0.0
    assert result.loc["slope", "log_evidence"] == pytest.approx(log_evidence(with_slope)[0])
    np.testing.assert_allclose(result["probability"].sum(), 1.0)
    assert result.loc["intercept only", "probability"] == pytest.approx(
        1.0 / (1.0 + np.exp(-row["log_bayes_factor"]))
    )


def test_a_named_reference_and_refusals(table):
    result, with_slope = table
    against = compare_models({"a": with_slope, "b": with_slope}, reference="b")
    assert np.all(against["log_bayes_factor"] == 0.0)
    with pytest.raises(ValueError, match="method: only 'evidence' is supported; got 'waic'"):
        compare_models({"a": with_slope}, method="waic")
    with pytest.raises(ValueError, match=r"reference: 'c' is not one of \['a'\]"):
        compare_models({"a": with_slope}, reference="c")
    with pytest.raises(ValueError, match="models: give at least one"):
        compare_models({})
    no_evidence = with_slope.copy()
    del no_evidence.sample_stats["log_marginal_likelihood"]
    with pytest.raises(ValueError, match="no sample_stats.log_marginal_likelihood"):
        compare_models({"a": no_evidence})
