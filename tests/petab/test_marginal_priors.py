"""Default conjugate priors of marginalised parameters from their PEtab priors: normal priors
on the marginalised variable's scale are used exactly, others matched in mean and
variance (closed forms here), the noise variance's inverse gamma matched in ``ln sigma^2``."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.special import digamma, polygamma

from pymc_odesens.petab.errors import PetabError
from pymc_odesens.petab.marginal_priors import column_prior, inverse_gamma_matching, noise_prior


def _row(scale, lower, upper, prior="", parameters=""):
    return pd.Series(
        {
            "parameterScale": scale,
            "lowerBound": lower,
            "upperBound": upper,
            "nominalValue": 1.0,
            "estimate": 1,
            "objectivePriorType": prior,
            "objectivePriorParameters": parameters,
        }
    )


@pytest.mark.parametrize(
    "scale, prior, parameters, variable, expected",
    [
        ("lin", "normal", "2;3", "lin", (2.0, 3.0)),
        ("log10", "normal", "2;3", "lin", (2.0, 3.0)),  # of the linear value, any scale
        ("lin", "parameterScaleNormal", "2;3", "lin", (2.0, 3.0)),
        ("log10", "parameterScaleNormal", "-1;0.5", "log10", (-1.0, 0.5)),
        ("log10", "parameterScaleNormal", "-1;0.5", "log", (-math.log(10), 0.5 * math.log(10))),
        ("log", "parameterScaleNormal", "1;2", "log10", (1 / math.log(10), 2 / math.log(10))),
        ("lin", "logNormal", "0.5;0.2", "log", (0.5, 0.2)),
        ("log10", "logNormal", "0.5;0.2", "log10", (0.5 / math.log(10), 0.2 / math.log(10))),
    ],
)
def test_normal_priors_on_the_right_scale_are_used_exactly(
    scale, prior, parameters, variable, expected
):
    mean, sd, how = column_prior(_row(scale, 1e-3, 1e3, prior, parameters), "p", scale, variable)
    assert (mean, sd) == pytest.approx(expected, rel=1e-12)
    assert how == "the PEtab prior"


def test_a_uniform_prior_is_matched_in_mean_and_variance():
    # uniform on [-3, 3] of log10 s, theta = log10 s: Normal(0, 3)
    mean, sd, how = column_prior(_row("log10", 1e-3, 1e3), "p", "log10", "log10")
    assert mean == pytest.approx(0.0, abs=1e-10) and sd == pytest.approx(math.sqrt(3), rel=1e-9)
    assert how == "moments of the PEtab prior"
    # the same prior, theta = s: the moments of 10^u, u ~ uniform(-8, 8)
    mean, sd, _ = column_prior(_row("log10", 1e-8, 1e8), "p", "log10", "lin")
    c = 16 * math.log(10)
    expected_mean = (1e8 - 1e-8) / c
    expected_var = (1e16 - 1e-16) / (2 * c) - expected_mean**2
    assert mean == pytest.approx(expected_mean, rel=1e-8)
    assert sd == pytest.approx(math.sqrt(expected_var), rel=1e-8)
    # a uniform of s on [0, 2], theta = ln s (its positive part): mean ln 2 - 1, variance 1
    mean, sd, _ = column_prior(_row("lin", 0.0, 2.0), "p", "lin", "log")
    assert mean == pytest.approx(math.log(2) - 1, rel=1e-7) and sd == pytest.approx(1, rel=1e-6)


def test_the_noise_prior_matches_ln_sigma_squared():
    # log10 sigma uniform on [-5, 5]: ln sigma^2 uniform on 2 ln 10 [-5, 5]
    alpha, beta, _ = noise_prior(_row("log10", 1e-5, 1e5), "sd", "log10")
    variance = (20 * math.log(10)) ** 2 / 12
    assert float(polygamma(1, alpha)) == pytest.approx(variance, rel=1e-8)
    assert math.log(beta) - float(digamma(alpha)) == pytest.approx(0.0, abs=1e-8)


@pytest.mark.parametrize("mean, variance", [(-3.0, 0.01), (0.0, 1.0), (2.0, 500.0)])
def test_inverse_gamma_matching(mean, variance):
    alpha, beta = inverse_gamma_matching(mean, variance)
    assert float(polygamma(1, alpha)) == pytest.approx(variance, rel=1e-9)
    assert math.log(beta) - float(digamma(alpha)) == pytest.approx(mean, abs=1e-9)
    # against draws: ln v of InverseGamma(alpha, beta)
    rng = np.random.default_rng(0)
    draws = np.log(beta / rng.standard_gamma(alpha, 200000))
    assert draws.mean() == pytest.approx(mean, abs=5 * math.sqrt(variance / 200000))


def test_no_finite_moments_is_an_error_that_names_the_parameter():
    with pytest.raises(PetabError, match=r"'wide'.*marginal_priors=\{'wide'"):
        column_prior(_row("lin", 0.0, 1e300), "wide", "lin", "lin")
    with pytest.raises(ValueError, match="positive variance"):
        inverse_gamma_matching(0.0, 0.0)
