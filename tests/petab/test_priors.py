"""PEtab priors as PyMC variables on the parameter scale: densities, bounds, draws, errors."""

import math

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from petab.v1.priors import Prior
from scipy import stats

from pymc_odesens.petab import PetabError, PetabUnsupportedError
from pymc_odesens.petab.priors import PRIOR_TYPES, prior_variable

PARAMETERS = {
    "parameterScaleUniform": "-1.5;2.5",
    "parameterScaleNormal": "0.2;0.8",
    "parameterScaleLaplace": "0.1;0.5",
    "uniform": "0.5;50",
    "normal": "3.0;4.0",
    "laplace": "2.0;3.0",
    "logNormal": "0.7;1.1",
    "logLaplace": "0.3;0.9",
}
BOUNDS = {"lin": (0.05, 60.0), "log": (0.05, 60.0), "log10": (0.05, 60.0)}


def _row(kind: str, scale: str) -> pd.Series:
    lower, upper = BOUNDS[scale]
    return pd.Series(
        {
            "parameterScale": scale,
            "lowerBound": lower,
            "upperBound": upper,
            "nominalValue": 1.0,
            "estimate": 1,
            "objectivePriorType": kind,
            "objectivePriorParameters": PARAMETERS[kind],
        }
    )


def _scaled(theta, scale):
    return {"lin": theta, "log": np.log(theta), "log10": np.log10(theta)}[scale]


@pytest.mark.parametrize("scale", ["lin", "log", "log10"])
@pytest.mark.parametrize("kind", PRIOR_TYPES)
def test_density_on_the_parameter_scale_is_petabs(kind, scale):
    row = _row(kind, scale)
    with pm.Model():
        x = prior_variable("p", row, scale)
    petab_prior = Prior.from_par_dict(row.to_dict(), type_="objective")
    for theta in (0.07, 0.9, 4.0, 33.0):
        value = _scaled(theta, scale)
        ours = float(pm.logp(x, value).eval())
        with np.errstate(divide="ignore"):  # outside a uniform prior's support: -inf
            expected = float(np.log(petab_prior.pdf(value, x_scaled=True, rescale=True)))
        if np.isinf(expected):
            # outside the support, or 40 standard deviations out, where petab's density
            # underflows to 0 and ours stays the finite log-density
            assert ours == expected or ours < -700.0, theta
        else:
            assert ours == pytest.approx(expected, rel=1e-6, abs=1e-6), theta


def test_densities_against_scipy():
    # a normal prior on theta for a log10-scaled parameter: the density of x = log10(theta)
    # is the truncated normal density of theta times theta ln 10
    row = _row("normal", "log10")
    with pm.Model():
        x = prior_variable("p", row, "log10")
    lower, upper = BOUNDS["log10"]
    a, b = (lower - 3.0) / 4.0, (upper - 3.0) / 4.0
    theta = 2.5
    expected = stats.truncnorm(a, b, loc=3.0, scale=4.0).logpdf(theta) + math.log(
        theta * math.log(10)
    )
    # (PyMC evaluates the truncated normal's normalising constant to about 1e-7 relative)
    assert float(pm.logp(x, math.log10(theta)).eval()) == pytest.approx(expected, rel=1e-6)
    # a logLaplace prior on a lin-scaled parameter: log(theta) is Laplace(0.3, 0.9)
    row = _row("logLaplace", "lin")
    with pm.Model():
        x = prior_variable("q", row, "lin")
    laplace = stats.laplace(0.3, 0.9)
    mass = laplace.cdf(math.log(upper)) - laplace.cdf(math.log(lower))
    expected = laplace.logpdf(math.log(theta)) - math.log(theta) - math.log(mass)
    assert float(pm.logp(x, theta).eval()) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("kind", ["uniform", "parameterScaleUniform"])
def test_numbers_float32_holds_keep_double_precision(kind):
    # 0 and 10 are exact in float32: PyTensor made them float32 constants, and the
    # density -log(10) was computed in float32 (3.2e-8 off)
    row = pd.Series(
        {
            "parameterScale": "lin",
            "lowerBound": 0.0,
            "upperBound": 10.0,
            "nominalValue": 1.0,
            "estimate": 1,
            "objectivePriorType": kind,
            "objectivePriorParameters": "0;10",
        }
    )
    with pm.Model():
        x = prior_variable("p", row, "lin")
    assert float(pm.logp(x, 2.5).eval()) == pytest.approx(-math.log(10.0), rel=1e-15)


@pytest.mark.parametrize("kind", ["normal", "logLaplace", "parameterScaleNormal"])
def test_draws_stay_in_the_bounds_and_follow_the_prior(kind):
    row = _row(kind, "log10")
    with pm.Model():
        x = prior_variable("p", row, "log10")
    draws = pm.draw(x, 4000, random_seed=2)
    lower, upper = np.log10(BOUNDS["log10"])
    assert draws.min() >= lower and draws.max() <= upper
    petab_prior = Prior.from_par_dict(row.to_dict(), type_="objective")
    grid = np.linspace(lower, upper, 2001)
    density = np.array([petab_prior.pdf(v, x_scaled=True, rescale=True) for v in grid])
    cdf = np.cumsum(density) / density.sum()
    statistic = stats.ks_1samp(draws, lambda v: np.interp(v, grid, cdf)).statistic
    assert statistic < 0.03


def test_no_prior_is_uniform_on_the_bounds_and_the_initial_value_moves_inside():
    row = _row("parameterScaleUniform", "log10")
    row["objectivePriorType"] = np.nan
    row["objectivePriorParameters"] = np.nan
    with pm.Model() as model:
        x = prior_variable("p", row, "log10", initval=math.log10(60.0))
    width = math.log10(60.0) - math.log10(0.05)
    assert float(pm.logp(x, 0.3).eval()) == pytest.approx(-math.log(width))
    start = model.initial_point()["p_interval__"]
    assert np.isfinite(start)


def test_bad_priors_are_named():
    row = _row("normal", "lin")
    row["objectivePriorType"] = "cauchy"
    with pm.Model(), pytest.raises(PetabUnsupportedError, match="'cauchy' of 'p'"):
        prior_variable("p", row, "lin")
    row["objectivePriorType"] = "normal"
    row["objectivePriorParameters"] = "1;2;3"
    with pm.Model(), pytest.raises(PetabError, match="two numbers"):
        prior_variable("p", row, "lin")
    row["objectivePriorParameters"] = np.nan
    with pm.Model(), pytest.raises(PetabError, match="needs objectivePriorParameters"):
        prior_variable("p", row, "lin")


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        (
            {"objectivePriorType": "normal", "objectivePriorParameters": "3.0;0"},
            r"parameter table, parameter 'p', column objectivePriorParameters = '3.0;0': "
            r"expected a standard deviation > 0 for the normal prior, got 0.0",
        ),
        (
            {"objectivePriorType": "logLaplace", "objectivePriorParameters": "0.3;-0.9"},
            r"expected a scale > 0 for the logLaplace prior, got -0.9",
        ),
        (
            {"objectivePriorType": "parameterScaleNormal", "objectivePriorParameters": "nan;1"},
            r"expected two finite numbers for the parameterScaleNormal prior",
        ),
        (
            {"objectivePriorType": "uniform", "objectivePriorParameters": "70;80"},
            r"expected an interval that overlaps the bounds \[0.05, 60.0\]",
        ),
        (
            # parameterScaleUniform's interval is on the parameter scale: log10(60) = 1.78
            {"objectivePriorType": "parameterScaleUniform", "objectivePriorParameters": "2;3"},
            r"expected an interval that overlaps the bounds \[-1.30102999.*, 1.77815.*\]",
        ),
        (
            # no prior: uniform on the bounds on the parameter scale, infinite there
            {
                "objectivePriorType": np.nan,
                "objectivePriorParameters": np.nan,
                "upperBound": math.inf,
            },
            r"parameter table, parameter 'p', column upperBound = inf: expected a bound that "
            r"is finite on the parameterScale log10 \(inf there\)",
        ),
    ],
)
def test_priors_without_a_density_are_named(changes, names):
    # a log-density of NaN, or -inf at every value, is refused where the prior is read
    row = _row("normal", "log10")
    for column, value in changes.items():
        row[column] = value
    with pm.Model(), pytest.raises(PetabError, match=names) as info:
        prior_variable("p", row, "log10")
    assert not isinstance(info.value, PetabUnsupportedError)
