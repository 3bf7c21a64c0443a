"""The parameter table's estimated parameters: which rows, their scales, bounds and nominal
values, and what is refused (pymc_odesens/petab/parameters.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pymc_odesens.petab import PetabError
from pymc_odesens.petab.parameters import EstimatedParameters


def _table(**changes) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "parameterScale": ["log10", "lin", "log"],
            "lowerBound": [1e-3, -1.0, 1e-2],
            "upperBound": [1e3, 1.0, 1e2],
            "nominalValue": [0.5, 0.25, 1.0],
            "estimate": [1, 0, 1],
        },
        index=pd.Index(["k", "offset", "scale"], name="parameterId"),
    )
    for column, values in changes.items():
        table[column] = values
    return table


def test_estimated_rows_on_their_scales():
    parameters = EstimatedParameters.from_table(_table())
    assert parameters.ids == ("k", "scale")
    assert parameters.positions == (0, 2)
    np.testing.assert_allclose(parameters.nominal, [math.log10(0.5), 0.0])
    np.testing.assert_allclose(parameters.unscale(None), [0.5, 1.0])


@pytest.mark.parametrize(("value", "shown"), [(0.5, "0.5"), (np.nan, "nan"), (-1, "-1")])
def test_an_estimate_other_than_0_or_1_is_named(value, shown):
    with pytest.raises(
        PetabError,
        match=rf"parameter table, row 1 \(offset\), column estimate "
        rf"= {shown}: expected 0 or 1",
    ):
        EstimatedParameters.from_table(_table(estimate=[1, value, 1]))


def test_x_none_without_nominal_values_is_named():
    # PEtab leaves nominalValue optional for estimated parameters: x=None then has no value
    parameters = EstimatedParameters.from_table(_table(nominalValue=[0.5, 0.25, np.nan]))
    with pytest.raises(
        PetabError,
        match=r"x=None means the nominal values, and the parameter table gives no "
        r"nominalValue for row 2 \(scale\): pass x",
    ):
        parameters.check(None)
    np.testing.assert_array_equal(parameters.check([0.1, 0.2]), [0.1, 0.2])


def test_a_nominal_value_outside_the_bounds_warns_with_its_entry():
    with pytest.warns(
        UserWarning,
        match=r"parameter table, row 0 \(k\), column nominalValue = 5000.0 outside "
        r"\[0.001, 1000.0\]",
    ):
        parameters = EstimatedParameters.from_table(_table(nominalValue=[5000.0, 0.25, 1.0]))
    assert parameters.unscale(None)[0] == pytest.approx(5000.0)
