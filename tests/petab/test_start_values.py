"""Chains' starting values near the nominal values: per chain, within the spread and bounds."""

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from pymc.initial_point import make_initial_point_fn

from pymc_odesens.petab.parameters import EstimatedParameters
from pymc_odesens.petab.priors import prior_variable
from pymc_odesens.petab.start_values import start_values

TABLE = pd.DataFrame(
    {
        "parameterScale": ["log10", "log10", "lin", "log"],
        "lowerBound": [1e-8, 1e-3, -2.0, 1e-2],
        "upperBound": [1e8, 1e3, 5.0, 1e2],
        # the second nominal value (log10: 2.97) lies within the spread of its upper bound
        "nominalValue": [3e-3, 10**2.97, 0.5, 1.0],
        "estimate": [1, 1, 1, 1],
    },
    index=pd.Index(["k_fast", "k_near_bound", "offset", "scale"], name="parameterId"),
)
PARAMETERS = EstimatedParameters.from_table(TABLE)


def _model():
    with pm.Model() as model:
        for pid, scale, nominal in zip(PARAMETERS.ids, PARAMETERS.scales, PARAMETERS.nominal):
            prior_variable(pid, TABLE.loc[pid], scale, nominal)
    return model


def _starts(values: dict, seeds) -> np.ndarray:
    """What PyMC's initial-point function (pm.sample's and nutpie's) gives each chain's seed."""
    point = make_initial_point_fn(
        model=_model(), overrides=values, jitter_rvs=set(), return_transformed=False
    )
    return np.array([[point(seed)[pid] for pid in PARAMETERS.ids] for seed in seeds])


def test_each_chain_starts_within_the_spread_and_inside_the_bounds():
    starts = _starts(start_values(PARAMETERS, 0.1), range(40))
    offsets = starts - PARAMETERS.nominal
    assert np.all(np.abs(offsets) <= 0.1)
    assert len({tuple(s) for s in starts}) == 40  # each seed its own start
    # the spread is used on both sides where the bounds allow it
    for j in (0, 2, 3):
        assert offsets[:, j].min() < -0.05 and offsets[:, j].max() > 0.05
    # log10 upper bound 3: the near-bound parameter stays below it (its interval transform
    # is infinite there)
    assert np.all(starts[:, 1] < 3.0) and starts[:, 1].max() > 2.995


def test_spread_zero_is_the_nominal_values_and_bad_spreads_are_refused():
    starts = _starts(start_values(PARAMETERS, 0.0), range(3))
    # through the interval transform and back: exact to rounding
    np.testing.assert_allclose(starts, np.tile(PARAMETERS.nominal, (3, 1)), rtol=0, atol=1e-12)
    for bad in (-0.1, float("nan"), float("inf"), "0.1"):
        with pytest.raises(ValueError, match="spread must be a finite number >= 0"):
            start_values(PARAMETERS, bad)
