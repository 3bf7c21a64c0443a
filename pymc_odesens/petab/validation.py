"""The petab library's checks of a problem's tables, as errors that name the entry.

:func:`check_tables` runs, when a problem is read, the checks that ``petab.v1.lint``'s
``lint_problem`` is made of (``check_observable_df``, ``check_condition_df``,
``check_measurement_df``, ``check_parameter_df``,
``assert_measurement_conditions_present_in_condition_table``,
``assert_model_parameters_in_condition_or_parameter_table`` and the observable ids that
shadow model ids), table by table: the observable table first, then in ``lint_problem``'s
order. ``lint_problem`` itself only logs what it finds and returns a bool; the checks
raise, but their messages rarely say where. A failed check is therefore located with the
same petab checks: each of the finer ``check_*`` / ``assert_*`` functions it consists of
is run on its own, the first one that fails names the column, and its first offending row
is the shortest leading part of the table on which it fails (found by bisection; a check
that fails on an empty table names no row). The
:class:`~pymc_odesens.petab.errors.PetabError` says table, row (with its id), column, the
entry, what is expected there and petab's own message.

The checks of the condition and parameter tables read the observable table's formulas
for their names only (petab's ``get_output_parameters``), parsing every formula again in
each pass (Chen_MSB2009's three observables take 80 ms a formula): they are given each
formula as the sum of its names, parsed once. The importer reads an observable's own id in
its ``noiseFormula`` as the observable's value (PEtab v2 allows it; petab's v1 checks
would ask for a parameter of that name): those checks see the names of the observable
formula in its place.

Not run here: the SBML model's validity (``OdeSystem.from_sbml`` runs libsbml's consistency
checks), the visualization table (not read), and the count of ``observableParameters`` /
``noiseParameters`` per measurement and the positivity of measurements under a ``log``
transformation, which the importer checks per row where it reads them
(:mod:`pymc_odesens.petab.measurements`, :mod:`pymc_odesens.petab.likelihood_kernel`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import petab.v1 as petab
from petab.v1 import C, lint
from petab.v1.parameters import (
    get_required_parameters_for_parameter_table,
    get_valid_parameters_for_parameter_table,
)

from pymc_odesens.petab.errors import PetabError, table_location
from pymc_odesens.petab.observables import petab_formula

__all__ = ["check_tables"]

_FINDINGS = (AssertionError, ValueError, TypeError, KeyError)
"""What petab's checks raise on a finding (a conversion such as ``int('yes')`` included)."""

_ID = "letters, digits and underscores, not starting with a digit"
_UNIQUE = "an id no other row has"
_NO_SPACES = "no spaces before or after the entry"


@dataclass(frozen=True)
class _Check:
    """One of petab's finer checks, with what it is about.

    ``run(frame)`` raises one of :data:`_FINDINGS` on a finding; ``frame`` is the table the
    check is about (``table``), restricted to leading rows (``axis="rows"``) or columns
    (``axis="columns"``) while the first offending one is searched. A finding that is not
    in the table it is about (a parameter the parameter table lacks) is located by
    ``locate(error)`` instead, where the problem uses it.
    """

    table: str
    frame: pd.DataFrame
    run: Callable[[pd.DataFrame], None]
    column: str | tuple | None = None
    expected: str = ""
    axis: str = "rows"
    locate: Callable[[BaseException], PetabError] | None = None


@dataclass(frozen=True)
class _Group:
    """petab's checks of one table (``whole``, run on every problem) and the finer checks
    it consists of (``parts``, run in order only to locate a finding)."""

    table: str
    whole: Callable[[], None]
    parts: tuple


def _fails(run: Callable[[pd.DataFrame], None], frame: pd.DataFrame) -> BaseException | None:
    try:
        run(frame)
    except _FINDINGS as error:
        return error
    return None


def _first_offender(check: _Check) -> int | None:
    """The position of the first row (column) such that the check fails on the table up to
    and including it and passes on the part before it; None when it fails on an empty
    table (the finding is about the table as a whole)."""
    frame = check.frame
    if check.axis == "rows":
        size, take = len(frame), lambda k: frame.iloc[:k]
    else:
        size, take = frame.shape[1], lambda k: frame.iloc[:, :k]
    if _fails(check.run, take(0)) is not None or _fails(check.run, take(size)) is None:
        return None
    passing, failing = 0, size
    while failing - passing > 1:
        middle = (passing + failing) // 2
        if _fails(check.run, take(middle)) is None:
            passing = middle
        else:
            failing = middle
    return failing - 1


def _petab_message(error: BaseException) -> str:
    text = str(error) if not isinstance(error, KeyError) else f"no entry {error}"
    return " ".join(text.split()) or type(error).__name__


def _row_label(table: str, frame: pd.DataFrame, row: int) -> str:
    if table == "measurement":
        value = frame[C.OBSERVABLE_ID].iloc[row] if C.OBSERVABLE_ID in frame else None
        return str(value)
    return str(frame.index[row])


def _entry(frame: pd.DataFrame, row: int, column) -> str:
    columns = column if isinstance(column, tuple) else (column,)
    if not all(c in frame.columns for c in columns):
        return ""
    values = [frame[c].iloc[row] for c in columns]
    return " = " + " and ".join(repr(v.item() if hasattr(v, "item") else v) for v in values)


def _located(check: _Check, error: BaseException) -> PetabError:
    if check.locate is not None:
        return check.locate(error)
    position = _first_offender(check)
    row = label = None
    column = check.column
    if position is not None and check.axis == "columns":
        column = str(check.frame.columns[position])
    elif position is not None:
        row, label = position, _row_label(check.table, check.frame, position)
    if isinstance(column, tuple):
        where = table_location(check.table, row, label) + ", columns " + " and ".join(column)
    else:
        where = table_location(check.table, row, label, column)
    if row is not None and column is not None:
        where += _entry(check.frame, row, column)
    if check.expected:
        return PetabError(
            f"{where}: expected {check.expected} (petab's check: {_petab_message(error)})"
        )
    return PetabError(f"{where}: {_petab_message(error)} (petab's check)")


def _whitespace(table: str, frame: pd.DataFrame, columns) -> list[_Check]:
    return [
        _Check(
            table,
            frame,
            lambda d, c=c: lint.assert_no_leading_trailing_whitespace(d[c].values, c),
            c,
            _NO_SPACES,
        )
        for c in columns
        if c in frame and pd.api.types.is_string_dtype(frame[c].dtype)
    ]


def _observable_shadows_no_model_id(frame: pd.DataFrame, model) -> None:
    """``lint_problem``'s check that no observable id is an id of the model."""
    for oid in frame.index:
        if model.has_entity_with_id(oid):
            raise AssertionError(f"Observable ID {oid} shadows model entity.")


def _first_use(problem: petab.Problem, names: set) -> tuple[str, str] | None:
    """Where the problem first uses one of ``names`` (ids the parameter table lacks): an
    observable's formula, a measurement's overrides, a condition's entry."""
    observables = problem.observable_df
    for r, oid in enumerate(observables.index):
        for column in (C.OBSERVABLE_FORMULA, C.NOISE_FORMULA):
            if column not in observables:
                continue
            text = observables[column].iloc[r]
            used = {s.name for s in petab_formula(str(text)).free_symbols} & names
            if used:
                where = table_location("observable", r, str(oid), column)
                return f"{where} = {text!r}", sorted(used)[0]
    measurements = problem.measurement_df
    for column in (C.OBSERVABLE_PARAMETERS, C.NOISE_PARAMETERS):
        if column not in measurements:
            continue
        for r, cell in enumerate(measurements[column].tolist()):
            used = set(map(str, petab.split_parameter_replacement_list(cell))) & names
            if used:
                oid = measurements[C.OBSERVABLE_ID].iloc[r]
                where = table_location("measurement", r, str(oid), column)
                return f"{where} = {cell!r}", sorted(used)[0]
    conditions = problem.condition_df
    for column in conditions.columns:
        for r, cell in enumerate(conditions[column].tolist()):
            if isinstance(cell, str) and cell.strip() in names:
                where = table_location("condition", r, str(conditions.index[r]), column)
                return f"{where} = {cell!r}", cell.strip()
    return None


def _distinct_overrides(measurement_df: pd.DataFrame) -> pd.DataFrame:
    """The measurement rows with distinct observable, conditions and overrides: all that
    petab's parameter-table checks read of the measurement table (Beer_MolBioSystems2014's
    27132 rows are 38 such rows; petab walks them one by one)."""
    columns = [
        c
        for c in (
            C.OBSERVABLE_ID,
            C.SIMULATION_CONDITION_ID,
            C.PREEQUILIBRATION_CONDITION_ID,
            C.OBSERVABLE_PARAMETERS,
            C.NOISE_PARAMETERS,
        )
        if c in measurement_df
    ]
    return measurement_df.drop_duplicates(subset=columns) if columns else measurement_df


def _names_only(observable_df: pd.DataFrame) -> pd.DataFrame:
    """The observable table with each formula replaced by the sum of the names in it (each
    formula parsed once), and an observable's own id in its noise formula by the names of
    its observable formula; what petab's condition- and parameter-table checks read of it.
    Call after petab's check of the observable table (every formula parses)."""
    if C.NOISE_FORMULA not in observable_df or C.OBSERVABLE_FORMULA not in observable_df:
        return observable_df

    def names(text) -> set:
        return {s.name for s in petab_formula(str(text)).free_symbols}

    def written(symbols: set) -> str:
        return " + ".join(sorted(symbols)) or "0"

    formulas, noises = [], []
    for oid, formula, noise in zip(
        observable_df.index, observable_df[C.OBSERVABLE_FORMULA], observable_df[C.NOISE_FORMULA]
    ):
        own = names(formula)
        in_noise = names(noise)
        if oid in in_noise:
            in_noise = (in_noise - {oid}) | own
        formulas.append(written(own))
        noises.append(written(in_noise))
    return observable_df.assign(**{C.OBSERVABLE_FORMULA: formulas, C.NOISE_FORMULA: noises})


def _condition_group(problem: petab.Problem, observables: pd.DataFrame) -> _Group:
    conditions, model = problem.condition_df, problem.model

    def run(d):
        lint.check_condition_df(
            d, model=model, observable_df=observables, mapping_df=problem.mapping_df
        )

    def whole():
        # the output parameters (a pass of petab's parser over every formula) only widen
        # the columns allowed: needed only when the model's ids are not enough
        try:
            lint.check_condition_df(conditions, model=model, mapping_df=problem.mapping_df)
        except _FINDINGS:
            run(conditions)

    return _Group(
        "condition",
        whole,
        (
            _Check("condition", conditions, lambda d: lint.check_condition_df(d.iloc[:0])),
            _Check(
                "condition",
                conditions,
                lambda d: lint.check_ids(d.index.values, kind="condition"),
                C.CONDITION_ID,
                _ID,
            ),
            _Check("condition", conditions, lint.check_condition_df, C.CONDITION_ID, _UNIQUE),
            _Check(
                "condition",
                conditions,
                run,
                expected="a column named by an id of the model or an output parameter",
                axis="columns",
            ),
        ),
    )


def _observable_group(problem: petab.Problem) -> _Group:
    observables, model = problem.observable_df, problem.model
    parts = [
        _Check("observable", observables, lambda d: lint.check_observable_df(d.iloc[:0])),
        _Check(
            "observable",
            observables,
            lambda d: lint.check_ids(d.index.values, kind="observable"),
            C.OBSERVABLE_ID,
            _ID,
        ),
        *_whitespace(
            "observable", observables, C.OBSERVABLE_DF_REQUIRED_COLS + C.OBSERVABLE_DF_OPTIONAL_COLS
        ),
    ]
    for column, allowed in (
        (C.OBSERVABLE_TRANSFORMATION, C.OBSERVABLE_TRANSFORMATIONS),
        (C.NOISE_DISTRIBUTION, C.NOISE_MODELS),
    ):
        parts.append(
            _Check(
                "observable",
                observables,
                lambda d, c=column: lint.assert_noise_distributions_valid(
                    d[[c]] if c in d else d.iloc[:, :0]
                ),
                column,
                f"one of {', '.join(allowed)} or empty",
            )
        )
    parts += [
        _Check(
            "observable", observables, lint.assert_unique_observable_ids, C.OBSERVABLE_ID, _UNIQUE
        ),
        # the formulas: petab parses both in one loop; with every noise formula replaced by
        # a number, a finding is the observable formula's
        _Check(
            "observable",
            observables,
            lambda d: lint.check_observable_df(d.assign(**{C.NOISE_FORMULA: "1"})),
            C.OBSERVABLE_FORMULA,
            "a formula petab can read",
        ),
        _Check(
            "observable",
            observables,
            lint.check_observable_df,
            C.NOISE_FORMULA,
            "a formula petab can read, not empty or infinite",
        ),
        _Check(
            "observable",
            observables,
            lambda d: _observable_shadows_no_model_id(d, model),
            C.OBSERVABLE_ID,
            "an id that is not an id of the SBML model",
        ),
    ]

    def whole():
        lint.check_observable_df(observables)
        _observable_shadows_no_model_id(observables, model)

    return _Group("observable", whole, tuple(parts))


def _measurement_group(problem: petab.Problem) -> _Group:
    measurements = problem.measurement_df
    observables, conditions = problem.observable_df, problem.condition_df

    def conditions_present(d):
        lint.assert_measurement_conditions_present_in_condition_table(d, conditions)

    def whole():
        # check_measurement_df without observable table, in its parts, the whitespace
        # check on each column's distinct entries (Beer_MolBioSystems2014's 27132 rows:
        # 0.45 s cell by cell)
        lint.check_measurement_df(measurements.iloc[:0])
        for column in C.MEASUREMENT_DF_REQUIRED_COLS + C.MEASUREMENT_DF_OPTIONAL_COLS:
            if column in measurements and pd.api.types.is_string_dtype(measurements[column].dtype):
                distinct = measurements[column].drop_duplicates().values
                lint.assert_no_leading_trailing_whitespace(distinct, column)
        lint.assert_measurements_not_null(measurements)
        lint.assert_measurements_numeric(measurements)
        lint.assert_measured_observables_defined(measurements, observables)
        conditions_present(measurements)

    number = "a number"
    condition = "a conditionId of the condition table"
    parts = (
        _Check("measurement", measurements, lambda d: lint.check_measurement_df(d.iloc[:0])),
        *_whitespace(
            "measurement",
            measurements,
            C.MEASUREMENT_DF_REQUIRED_COLS + C.MEASUREMENT_DF_OPTIONAL_COLS,
        ),
        _Check(
            "measurement", measurements, lint.assert_measurements_not_null, C.MEASUREMENT, number
        ),
        _Check(
            "measurement", measurements, lint.assert_measurements_numeric, C.MEASUREMENT, number
        ),
        _Check(
            "measurement",
            measurements,
            lambda d: lint.assert_measured_observables_defined(d, observables),
            C.OBSERVABLE_ID,
            "an observableId of the observable table",
        ),
        _Check(
            "measurement",
            measurements,
            lambda d: conditions_present(
                d.drop(columns=[C.PREEQUILIBRATION_CONDITION_ID], errors="ignore")
            ),
            C.SIMULATION_CONDITION_ID,
            condition,
        ),
        _Check(
            "measurement",
            measurements,
            conditions_present,
            C.PREEQUILIBRATION_CONDITION_ID,
            condition + " or empty",
        ),
    )
    return _Group("measurement", whole, parts)


def _parameter_group(problem: petab.Problem, observables: pd.DataFrame) -> _Group:
    parameters, model = problem.parameter_df, problem.model
    measurements = _distinct_overrides(problem.measurement_df)

    def whole():
        lint.check_parameter_df(
            parameters,
            model,
            observables,
            measurements,
            problem.condition_df,
            problem.mapping_df,
        )

    def without(*columns):
        return lambda d: d.drop(columns=list(columns), errors="ignore")

    def required() -> set:
        return set(
            get_required_parameters_for_parameter_table(
                model=model,
                condition_df=problem.condition_df,
                observable_df=observables,
                measurement_df=measurements,
                mapping_df=problem.mapping_df,
            )
        )

    def missing(d):
        if absent := required() - set(d.index):
            raise AssertionError(
                f"Missing parameter(s) in the model or the parameters table: {absent}"
            )

    def where_missing(error: BaseException) -> PetabError:
        absent = required() - set(parameters.index)
        message = f"(petab's check: {_petab_message(error)})"
        use = _first_use(problem, absent)
        if use is None:
            return PetabError(f"parameter table: no row for {sorted(absent)} {message}")
        where, name = use
        return PetabError(
            f"{where}: {name!r} is neither an id of the parameter table nor of the model {message}"
        )

    def extraneous(d):
        allowed = get_valid_parameters_for_parameter_table(
            model=model,
            condition_df=problem.condition_df,
            observable_df=observables,
            measurement_df=measurements,
            mapping_df=problem.mapping_df,
        )
        if unknown := set(d.index) - set(allowed):
            raise AssertionError(f"Extraneous parameter(s) in parameter table: {unknown}")

    objective = (C.OBJECTIVE_PRIOR_TYPE, C.OBJECTIVE_PRIOR_PARAMETERS)
    initialization = (C.INITIALIZATION_PRIOR_TYPE, C.INITIALIZATION_PRIOR_PARAMETERS)
    prior_types = f"one of {', '.join(C.PRIOR_TYPES)} or empty"
    prior_parameters = "two numbers separated by ';' (empty only for parameterScaleUniform)"
    parts = (
        _Check("parameter", parameters, lambda d: lint.check_parameter_df(d.iloc[:0])),
        _Check(
            "parameter",
            parameters,
            lambda d: lint.check_ids(d.index.values, kind="parameter"),
            C.PARAMETER_ID,
            _ID,
        ),
        *_whitespace("parameter", parameters, C.PARAMETER_DF_REQUIRED_COLS[1:]),
        _Check(
            "parameter",
            parameters,
            lint.assert_parameter_scale_is_valid,
            C.PARAMETER_SCALE,
            f"one of {C.LIN}, {C.LOG}, {C.LOG10}",
        ),
        _Check(
            "parameter",
            parameters,
            lambda d: lint.assert_parameter_bounds_are_numeric(d.assign(**{C.UPPER_BOUND: 0.0})),
            C.LOWER_BOUND,
            "a number",
        ),
        _Check(
            "parameter",
            parameters,
            lint.assert_parameter_bounds_are_numeric,
            C.UPPER_BOUND,
            "a number",
        ),
        _Check(
            "parameter",
            parameters,
            lint.assert_parameter_estimate_is_boolean,
            C.ESTIMATE,
            "0 or 1",
        ),
        _Check("parameter", parameters, lint.assert_unique_parameter_ids, C.PARAMETER_ID, _UNIQUE),
        _Check(
            "parameter",
            parameters,
            lint.check_parameter_bounds,
            (C.LOWER_BOUND, C.UPPER_BOUND),
            "lowerBound <= upperBound, both > 0 on a log or log10 parameterScale",
        ),
        _Check(
            "parameter",
            parameters,
            lambda d: lint.assert_parameter_prior_type_is_valid(without(*initialization)(d)),
            C.OBJECTIVE_PRIOR_TYPE,
            prior_types,
        ),
        _Check(
            "parameter",
            parameters,
            lint.assert_parameter_prior_type_is_valid,
            C.INITIALIZATION_PRIOR_TYPE,
            prior_types,
        ),
        _Check(
            "parameter",
            parameters,
            lambda d: lint.assert_parameter_prior_parameters_are_valid(without(*initialization)(d)),
            C.OBJECTIVE_PRIOR_PARAMETERS,
            prior_parameters,
        ),
        _Check(
            "parameter",
            parameters,
            lambda d: lint.assert_parameter_prior_parameters_are_valid(without(*objective)(d)),
            C.INITIALIZATION_PRIOR_PARAMETERS,
            prior_parameters,
        ),
        # what check_parameter_df checks itself: numeric nominal values of fixed parameters
        _Check("parameter", parameters, lint.check_parameter_df),
        _Check("parameter", parameters, missing, locate=where_missing),
        _Check(
            "parameter",
            parameters,
            extraneous,
            C.PARAMETER_ID,
            "an id that the model, an observable, a measurement or a condition uses",
        ),
    )
    return _Group("parameter", whole, parts)


def _model_parameters_group(problem: petab.Problem) -> _Group:
    model, conditions, parameters = problem.model, problem.condition_df, problem.parameter_df

    def run(c, p):
        lint.assert_model_parameters_in_condition_or_parameter_table(
            model, c, p, problem.mapping_df
        )

    expected = (
        "a model parameter that no rule sets, in the parameter table or the condition "
        "table, not both"
    )
    return _Group(
        "parameter",
        lambda: run(conditions, parameters),
        (
            _Check("parameter", parameters, lambda d: run(conditions, d), C.PARAMETER_ID, expected),
            _Check(
                "condition", conditions, lambda d: run(d, parameters), None, expected, "columns"
            ),
        ),
    )


def check_tables(problem: petab.Problem) -> None:
    """Run petab's checks of the problem's tables; raise the first finding, located.

    Parameters
    ----------
    problem : petab.v1.Problem
        With all four tables and an SBML model (the caller checks that first).

    Raises
    ------
    PetabError
        Naming the table, the row (counted from 0 below the header, with its id) and the
        column where petab's check locates the finding, the entry, what is expected there
        and petab's message.
    """
    _run(_observable_group(problem))
    observables = _names_only(problem.observable_df)
    _run(_condition_group(problem, observables))
    _run(_measurement_group(problem))
    _run(_parameter_group(problem, observables))
    _run(_model_parameters_group(problem))


def _run(group: _Group) -> None:
    try:
        group.whole()
    except _FINDINGS as error:
        for check in group.parts:
            found = _fails(check.run, check.frame)
            if found is not None:
                raise _located(check, found) from error
        raise PetabError(f"{group.table} table: {_petab_message(error)} (petab's check)") from error
