"""Wrong PEtab tables are refused when a problem is read, each by a ``PetabError`` that names
the table, row (with its id), column and entry: petab's own checks
(pymc_odesens/petab/validation.py) and the priors', bounds' and times' that petab lacks.
Each case edits one entry of the small turnover problem (tests/petab/turnover.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import petab.v1 as petab
import pytest

from pymc_odesens.petab import PetabError, PetabProblem, PetabUnsupportedError
from pymc_odesens.petab.validation import check_tables
from tests.petab.benchmark_collection import problem_yaml
from tests.petab.turnover import edited_turnover_problem


def _set(row: int, column: str, value):
    def edit(df: pd.DataFrame) -> None:
        if column not in df:
            df[column] = ""
        df[column] = df[column].astype(object)
        df.loc[row, column] = value

    return edit


def _drop_row(row: int):
    return lambda df: df.drop(index=row)


def _append_parameter(df: pd.DataFrame) -> None:
    df.loc[len(df)] = ["unused", "lin", 0.0, 1.0, 0.5, 1, "", ""]


def _duplicate_observable(df: pd.DataFrame) -> None:
    df.loc[len(df)] = df.loc[1]
    df.loc[len(df) - 1, "observableFormula"] = "A + 2 * offset"


# (table file, edit, the message's names as a regular expression); every case is a
# PetabError that is not a PetabUnsupportedError: the table is wrong, not unsupported
CASES = {
    # estimate = 2 was read as "not 1": the parameter silently fixed
    "estimate_2": (
        "parameters.tsv",
        _set(0, "estimate", 2),
        r"parameter table, row 0 \(k\), column estimate = 2: expected 0 or 1 \(petab's check",
    ),
    # one 'yes' made the column text: no parameter was estimated at all
    "estimate_yes": (
        "parameters.tsv",
        _set(0, "estimate", "yes"),
        r"parameter table, row 0 \(k\), column estimate = 'yes': expected 0 or 1",
    ),
    # petab's check reads int(0.5) as 0
    "estimate_half": (
        "parameters.tsv",
        _set(2, "estimate", 0.5),
        r"parameter table, row 2 \(scale\), column estimate = 0.5: expected 0 or 1$",
    ),
    # the last of two observables with one id won
    "duplicate_observable": (
        "observables.tsv",
        _duplicate_observable,
        r"observable table, row 4 \(obs_laplace\), column observableId: expected an id no "
        r"other row has",
    ),
    "observable_shadows_a_species": (
        "observables.tsv",
        _set(0, "observableId", "A"),
        r"observable table, row 0 \(A\), column observableId: expected an id that is not an "
        r"id of the SBML model",
    ),
    "unknown_transformation": (
        "observables.tsv",
        _set(2, "observableTransformation", "log2"),
        r"observable table, row 2 \(obs_log_laplace\), column observableTransformation = "
        r"'log2': expected one of lin, log, log10 or empty",
    ),
    "noise_formula_that_does_not_parse": (
        "observables.tsv",
        _set(1, "noiseFormula", "sigma_abs +* 2"),
        r"observable table, row 1 \(obs_laplace\), column noiseFormula = 'sigma_abs \+\* 2'",
    ),
    # a normal prior with sd -1 gave a log-density of NaN
    "prior_sd_negative": (
        "parameters.tsv",
        _set(0, "objectivePriorParameters", "0.8;-1"),
        r"parameter table, row 0 \(k\), column objectivePriorParameters = '0.8;-1': expected "
        r"a standard deviation > 0 for the normal prior, got -1.0",
    ),
    "prior_scale_zero": (
        "parameters.tsv",
        _set(3, "objectivePriorParameters", "0.0;0"),
        r"parameter table, row 3 \(offset\), column objectivePriorParameters = '0.0;0': "
        r"expected a scale > 0 for the laplace prior",
    ),
    "prior_parameters_not_numbers": (
        "parameters.tsv",
        _set(0, "objectivePriorParameters", "a;b"),
        r"parameter table, row 0 \(k\), column objectivePriorParameters = 'a;b': expected two "
        r"numbers separated by ';'",
    ),
    "prior_parameter_infinite": (
        "parameters.tsv",
        _set(1, "objectivePriorParameters", "inf;0.4"),
        r"parameter table, row 1 \(u_stim\), column objectivePriorParameters = 'inf;0.4': "
        r"expected two finite numbers for the logNormal prior",
    ),
    "uniform_prior_reversed": (
        "parameters.tsv",
        _set(5, "objectivePriorParameters", "1.0;0.0"),
        r"parameter table, row 5 \(sigma_abs\), column objectivePriorParameters = '1.0;0.0': "
        r"expected a lower end < the upper end for the uniform prior",
    ),
    "uniform_prior_outside_the_bounds": (
        "parameters.tsv",
        _set(5, "objectivePriorParameters", "5;6"),
        r"parameter table, row 5 \(sigma_abs\), column objectivePriorParameters = '5;6': "
        r"expected an interval that overlaps the bounds \[0.0, 2.0\]",
    ),
    # a log10-scaled parameter with lower bound 0: -inf everywhere
    "log10_lower_bound_zero": (
        "parameters.tsv",
        _set(0, "lowerBound", 0.0),
        r"parameter table, row 0 \(k\), columns lowerBound and upperBound = 0.0 and 1000.0: "
        r"expected lowerBound <= upperBound, both > 0 on a log or log10 parameterScale",
    ),
    "lower_bound_above_upper_bound": (
        "parameters.tsv",
        _set(1, "lowerBound", 20.0),
        r"parameter table, row 1 \(u_stim\), columns lowerBound and upperBound = 20.0 and "
        r"10.0: expected lowerBound <= upperBound",
    ),
    "bound_not_a_number": (
        "parameters.tsv",
        _set(4, "upperBound", "one"),
        r"parameter table, row 4 \(sigma_rel\), column upperBound = 'one': expected a number",
    ),
    "unknown_parameter_scale": (
        "parameters.tsv",
        _set(8, "parameterScale", "ln"),
        r"parameter table, row 8 \(d\), column parameterScale = 'ln': expected one of lin, "
        r"log, log10",
    ),
    "parameter_nothing_uses": (
        "parameters.tsv",
        _append_parameter,
        r"parameter table, row 10 \(unused\), column parameterId: expected an id that the "
        r"model, an observable, a measurement or a condition uses",
    ),
    # where the problem uses it: the first observable formula, measurement or condition
    "missing_parameter": (
        "parameters.tsv",
        _drop_row(3),
        r"observable table, row 1 \(obs_laplace\), column observableFormula = 'A \+ offset': "
        r"'offset' is neither an id of the parameter table nor of the model \(petab's check: "
        r"Missing parameter\(s\)",
    ),
    "measurement_override_nothing_defines": (
        "measurements.tsv",
        _set(11, "noiseParameters", "0.2;sigma_nope"),
        r"measurement table, row 11 \(obs_log_b\), column noiseParameters = '0.2;sigma_nope': "
        r"'sigma_nope' is neither an id of the parameter table nor of the model",
    ),
    # a measurement in a condition the condition table does not have was simulated with
    # the model's defaults (or raised a raw KeyError: 'c_nope')
    "unknown_simulation_condition": (
        "measurements.tsv",
        _set(0, "simulationConditionId", "c_nope"),
        r"measurement table, row 0 \(obs_log10\), column simulationConditionId = 'c_nope': "
        r"expected a conditionId of the condition table",
    ),
    "unknown_preequilibration_condition": (
        "measurements.tsv",
        _set(4, "preequilibrationConditionId", "p_nope"),
        r"measurement table, row 4 \(obs_laplace\), column preequilibrationConditionId = "
        r"'p_nope': expected a conditionId of the condition table or empty",
    ),
    "measurement_not_a_number": (
        "measurements.tsv",
        _set(2, "measurement", "abc"),
        r"measurement table, row 2 \(obs_log10\), column measurement = 'abc': expected a "
        r"number",
    ),
    "measurement_missing": (
        "measurements.tsv",
        _set(5, "measurement", np.nan),
        r"measurement table, row 5 \(obs_laplace\), column measurement = nan: expected a "
        r"number",
    ),
    "unknown_observable": (
        "measurements.tsv",
        _set(6, "observableId", "obs_nope"),
        r"measurement table, row 6 \(obs_nope\), column observableId = 'obs_nope': expected "
        r"an observableId of the observable table",
    ),
    "time_not_a_number": (
        "measurements.tsv",
        _set(1, "time", "abc"),
        r"measurement table, row 1 \(obs_log10\), column time = 'abc': expected a number",
    ),
    "condition_column_for_nothing": (
        "conditions.tsv",
        lambda df: df.insert(len(df.columns), "nothing", 1.0),
        r"condition table, column nothing: expected a column named by an id of the model",
    ),
    "duplicate_condition": (
        "conditions.tsv",
        _set(3, "conditionId", "set"),
        r"condition table, row 3 \(set\), column conditionId: expected an id no other row has",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_wrong_entries_are_named(case, tmp_path):
    table, edit, names = CASES[case]
    yaml = edited_turnover_problem(tmp_path, table, edit)
    with pytest.raises(PetabError) as info:
        PetabProblem.from_yaml(yaml)
    assert type(info.value) is PetabError, info.value
    info.match(names)


def test_a_log_scaled_lower_bound_of_zero_without_prior_is_refused(tmp_path):
    # with an initializationPriorType petab's check lets a bound of 0 through; the
    # default prior (uniform on the bounds on the log scale) is then -inf everywhere
    def edit(df):
        df["initializationPriorType"] = "parameterScaleUniform"
        df.loc[8, "lowerBound"] = 0.0

    yaml = edited_turnover_problem(tmp_path, "parameters.tsv", edit)
    with pytest.raises(PetabError) as info:
        PetabProblem.from_yaml(yaml)
    info.match(
        r"parameter table, row 8 \(d\), column lowerBound = 0.0: expected a bound that is "
        r"finite on the parameterScale log \(-inf there\)"
    )


def test_a_log_scaled_lower_bound_of_zero_under_a_proper_prior_is_read(tmp_path):
    # a normal prior on k's linear value is proper on (0, 1000]: nothing to refuse
    def edit(df):
        df["initializationPriorType"] = "parameterScaleUniform"
        df.loc[0, "lowerBound"] = 0.0

    problem = PetabProblem.from_yaml(edited_turnover_problem(tmp_path, "parameters.tsv", edit))
    assert problem.parameters.lower[0] == 0.0


def test_a_nominal_value_outside_the_bounds_is_named_in_a_warning(tmp_path):
    # PEtab allows it (the benchmark collection's Lang_PLOSComputBiol2024 has one)
    yaml = edited_turnover_problem(tmp_path, "parameters.tsv", _set(1, "nominalValue", 20.0))
    with pytest.warns(
        UserWarning,
        match=r"parameter table, row 1 \(u_stim\), column nominalValue = 20.0 outside "
        r"\[0.0, 10.0\]",
    ):
        problem = PetabProblem.from_yaml(yaml)
    assert problem.parameters.unscale(None)[1] == 20.0


def test_an_unsupported_noise_distribution_is_not_a_petab_one(tmp_path):
    yaml = edited_turnover_problem(tmp_path, "observables.tsv", _set(0, "noiseDistribution", "x"))
    with pytest.raises(PetabError) as info:
        PetabProblem.from_yaml(yaml)
    assert not isinstance(info.value, PetabUnsupportedError)
    info.match(
        r"observable table, row 0 \(obs_log10\), column noiseDistribution = 'x': expected one "
        r"of normal, laplace or empty"
    )


@pytest.mark.parametrize("name", ["Boehm_JProteomeRes2014", "Bachmann_MSB2011"])
def test_benchmark_problems_pass_petabs_checks(name):
    # the benchmark collection's tables are right: nothing is found (Bachmann: 20
    # observables with placeholders, time-point-specific overrides, priors)
    check_tables(petab.Problem.from_yaml(str(problem_yaml(name))))
