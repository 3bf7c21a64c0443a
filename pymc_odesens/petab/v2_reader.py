"""PEtab v2 problems: read and checked by the petab library, given to the layer in v1 form.

PEtab v2 (the format AMICI 1.x reads natively) replaces the condition-pair columns of the
measurement table by an experiment table of *periods* (a start time and the conditions
applied then; ``-inf``: simulate to a steady state first), writes conditions as rows of
``(conditionId, targetId, targetValue)``, folds the observable transformation into the
noise distribution (``log-normal``, ``log-laplace``), lists each observable's placeholders,
and drops ``parameterScale`` (priors say the scale: ``log-uniform``, ``log-normal``, ...).
:func:`read_v2_problem` reads a v2 problem with ``petab.v2.Problem.from_yaml``, runs
petab's v2 checks (``Problem.validate``, what ``petab.v2.lint_problem`` runs) and writes
the problem in the v1 form the rest of the layer reads (:func:`v1_form`), so that one
internal representation serves both versions:

- an experiment ``E`` with at most one pre-equilibration period (time ``-inf``) and one
  period at time 0 is the condition pair (``simulationConditionId = E``,
  ``preequilibrationConditionId`` = the pre-equilibration period's conditions). A
  condition's changes persist until a later period changes the target again (v2), so the
  model parameters the pre-equilibration period sets keep their values in ``E`` unless
  its own conditions set them; the species it sets start the pre-equilibration and are
  not set again (the simulation continues from the steady state, v1's NaN). A measurement
  without experiment simulates the model as it is (a condition that changes nothing);
- ``targetValue`` must be a number or an id of the parameter table (v1's cells);
- ``noiseDistribution`` ``normal``, ``laplace``, ``log-normal``, ``log-laplace`` are v1's
  ``normal`` / ``laplace`` with ``observableTransformation`` ``lin`` / ``log``;
- the placeholders an observable lists are renamed ``observableParameter<k>_<id>`` /
  ``noiseParameter<k>_<id>`` (k: their position in the list) in its formulas;
- ``estimate`` ``true`` / ``false`` is 1 / 0; a parameter whose prior is ``log-normal``,
  ``log-laplace`` or ``log-uniform`` is estimated on the natural-log scale
  (``parameterScale = log``, the prior ``parameterScaleNormal`` / ``parameterScaleLaplace``
  / ``parameterScaleUniform`` of ``log(theta)``: the same density of ``theta``), every other
  parameter on the linear scale; ``uniform``, ``normal`` and ``laplace`` priors are v1's.

Refused by name (:class:`~pymc_odesens.petab.errors.PetabUnsupportedError`): several models,
a model other than SBML, extensions, mapping-table aliases, experiments with several periods
after the pre-equilibration or whose simulation starts at a time other than 0, condition
values that are expressions or model entities, references between observables, priors
v1 has no counterpart for (``cauchy``, ``chisquare``, ``exponential``, ``gamma``,
``rayleigh``), and v1 columns that v2 dropped (``observableTransformation``,
``parameterScale``) with a value other than ``lin``.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import petab.v1 as petab
import petab.v2 as petab2
from petab.v1 import C
from petab.v1.math import sympify_petab

from pymc_odesens.petab.errors import PetabError, PetabUnsupportedError, table_location

__all__ = ["NOISE_DISTRIBUTIONS", "PRIOR_DISTRIBUTIONS", "read_v2_problem", "v1_form"]

NOISE_DISTRIBUTIONS = {
    petab2.C.NORMAL: (C.LIN, C.NORMAL),
    petab2.C.LAPLACE: (C.LIN, C.LAPLACE),
    petab2.C.LOG_NORMAL: (C.LOG, C.NORMAL),
    petab2.C.LOG_LAPLACE: (C.LOG, C.LAPLACE),
}
"""v2 ``noiseDistribution`` -> v1 (``observableTransformation``, ``noiseDistribution``)."""

PRIOR_DISTRIBUTIONS = {
    petab2.C.UNIFORM: (C.LIN, C.UNIFORM),
    petab2.C.NORMAL: (C.LIN, C.NORMAL),
    petab2.C.LAPLACE: (C.LIN, C.LAPLACE),
    petab2.C.LOG_UNIFORM: (C.LOG, C.PARAMETER_SCALE_UNIFORM),
    petab2.C.LOG_NORMAL: (C.LOG, C.PARAMETER_SCALE_NORMAL),
    petab2.C.LOG_LAPLACE: (C.LOG, C.PARAMETER_SCALE_LAPLACE),
}
"""v2 ``priorDistribution`` -> v1 (``parameterScale``, ``objectivePriorType``)."""

_PREEQUILIBRATION = petab2.C.TIME_PREEQUILIBRATION
_MODEL_AS_IS = "model_as_is"
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


def read_v2_problem(path: Path) -> tuple[petab2.Problem, petab.Problem]:
    """Read and check the PEtab v2 problem of the problem file ``path``.

    Returns
    -------
    problem : petab.v2.Problem
        As the petab library reads it.
    v1 : petab.v1.Problem
        Its v1 form (:func:`v1_form`).

    Raises
    ------
    PetabError
        The petab library cannot read the problem, or its v2 checks find an error (each
        named with petab's check and message).
    PetabUnsupportedError
        A v2 feature the importer does not cover (named; see the module's docstring).
    """
    with warnings.catch_warnings():
        # pandas' and pydantic's deprecations of what petab calls: not the user's to act on
        warnings.filterwarnings("ignore", module=r"petab\.")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        try:
            problem = petab2.Problem.from_yaml(str(path))
        except (ValueError, KeyError, TypeError, OSError) as error:
            raise PetabError(
                f"{path}: the petab library cannot read this PEtab v2 problem: {error}"
            ) from error
        _refuse_problem_features(problem, path)
        _check(problem, path)
        return problem, v1_form(problem, _tables(problem))


def _refuse_problem_features(problem: petab2.Problem, path: Path) -> None:
    models = problem.models
    if len(models) != 1:
        ids = ", ".join(repr(m.model_id) for m in models)
        if not models:
            raise PetabError(f"{path}: the problem has no model (model_files is empty)")
        raise PetabUnsupportedError(
            f"{path}: model_files lists {len(models)} models ({ids}); only problems with one "
            "model are supported"
        )
    if getattr(models[0], "type_id", None) != petab2.MODEL_TYPE_SBML:
        raise PetabUnsupportedError(
            f"{path}: the model {models[0].model_id!r} is a {models[0].type_id} model; only "
            "SBML models are supported"
        )
    extensions = problem.config.extensions if problem.config is not None else None
    if extensions:
        names = ", ".join(map(repr, extensions if isinstance(extensions, dict) else extensions))
        raise PetabUnsupportedError(
            f"{path}: the problem uses PEtab extensions ({names}); none is supported"
        )
    aliases = [m for m in problem.mappings if m.model_id is not None and m.model_id != m.petab_id]
    if aliases:
        pairs = ", ".join(f"{m.petab_id!r} -> {m.model_id!r}" for m in aliases)
        raise PetabUnsupportedError(
            f"{path}: the mapping table aliases model entities ({pairs}); mapping tables "
            "are supported only where they map ids onto themselves (names only)"
        )


def _check(problem: petab2.Problem, path: Path) -> None:
    """petab's v2 checks (``Problem.validate``); the errors as one PetabError."""
    from petab.v2.lint import ValidationIssueSeverity

    issues = problem.validate()
    errors = [i for i in issues if i.level >= ValidationIssueSeverity.ERROR]
    if errors:
        found = "; ".join(f"{i.message.strip()} [{i.task}]" for i in errors)
        raise PetabError(f"{path}: petab's checks of this PEtab v2 problem: {found}")


# the tables as petab's readers give them (numbers read exactly, as the v1 reader does) ----
def _location(config, entry) -> str | Path:
    text = str(entry)
    if "://" in text and not text.startswith("file:"):
        return text
    base = str(config.base_path) if config.base_path is not None else ""
    if "://" in base:
        return f"{base.rstrip('/')}/{text}"
    entry_path = Path(text.removeprefix("file:"))
    return entry_path if entry_path.is_absolute() or not base else Path(base) / entry_path


def _tables(problem: petab2.Problem) -> dict:
    config = problem.config

    def files(entries) -> list:
        return [_location(config, f) for f in entries or []]

    def concatenated(read, entries, index: str | None = None) -> pd.DataFrame | None:
        frames = [read(f) for f in files(entries)]
        if not frames:
            return None
        if index is not None:
            frames = [f.reset_index() if f.index.name == index else f for f in frames]
        frame = pd.concat(frames, ignore_index=True)
        return frame.set_index(index) if index is not None else frame

    parameter_files = files(config.parameter_files)
    return {
        "measurement": concatenated(petab2.get_measurement_df, config.measurement_files),
        "parameter": petab2.get_parameter_df(parameter_files) if parameter_files else None,
        "observable": concatenated(
            petab2.get_observable_df, config.observable_files, petab2.C.OBSERVABLE_ID
        ),
        "condition": concatenated(petab2.get_condition_df, config.condition_files),
    }


# the v1 form ----------------------------------------------------------------------------
def _blank(value) -> bool:
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (isinstance(value, str) and not value.strip())
    )


def _text(value) -> str:
    return "" if _blank(value) else str(value).strip()


def v1_form(problem: petab2.Problem, tables: dict) -> petab.Problem:
    """The PEtab v1 problem that the v2 ``problem`` states (see the module's docstring).

    Parameters
    ----------
    problem : petab.v2.Problem
        A problem that passed petab's v2 checks.
    tables : dict of str to pandas.DataFrame
        Its measurement, parameter, observable and condition tables as petab's readers
        give them (``"measurement"``, ``"parameter"``, ``"observable"``, ``"condition"``).

    Raises
    ------
    PetabUnsupportedError
        A feature the v1 form cannot state (named).
    """
    model = problem.model
    parameter_df = _parameter_table(tables["parameter"])
    observable_df = _observable_table(tables["observable"], problem, set(parameter_df.index))
    condition_df, pairs = _condition_table(
        problem, tables["condition"], tables["measurement"], set(parameter_df.index), model
    )
    measurement_df = _measurement_table(tables["measurement"], pairs)
    return petab.Problem(
        model=model,
        condition_df=condition_df,
        measurement_df=measurement_df,
        parameter_df=parameter_df,
        observable_df=observable_df,
    )


def _parameter_table(df: pd.DataFrame) -> pd.DataFrame:
    """estimate as 0/1, the scale and v1 prior of each v2 prior."""
    rows = []
    for position, (pid, row) in enumerate(df.iterrows()):
        where = lambda column, p=position, i=pid: table_location("parameter", p, i, column)  # noqa: E731
        old_scale = _text(row.get(C.PARAMETER_SCALE))
        if old_scale and old_scale != C.LIN:
            raise PetabUnsupportedError(
                f"{where(C.PARAMETER_SCALE)} = {old_scale!r}: PEtab v2 has no parameterScale "
                "(the scale is the prior's: log-uniform, log-normal or log-laplace estimate "
                "on the log scale)"
            )
        estimate = row.get(petab2.C.ESTIMATE)
        if isinstance(estimate, str):
            estimate = estimate.strip().lower() == "true"
        kind = _text(row.get(petab2.C.PRIOR_DISTRIBUTION))
        parameters = _text(row.get(petab2.C.PRIOR_PARAMETERS))
        scale, prior, prior_parameters = C.LIN, math.nan, math.nan
        if kind:
            if kind not in PRIOR_DISTRIBUTIONS:
                raise PetabUnsupportedError(
                    f"{where(petab2.C.PRIOR_DISTRIBUTION)} = {kind!r}: only the priors "
                    f"{', '.join(PRIOR_DISTRIBUTIONS)} are supported"
                )
            scale, prior = PRIOR_DISTRIBUTIONS[kind]
            prior_parameters = parameters
            if kind == petab2.C.LOG_UNIFORM and parameters:
                values = [float(v) for v in parameters.split(petab2.C.PARAMETER_SEPARATOR)]
                if any(v <= 0 for v in values):
                    raise PetabError(
                        f"{where(petab2.C.PRIOR_PARAMETERS)} = {parameters!r}: a log-uniform "
                        "prior needs positive bounds"
                    )
                prior_parameters = petab2.C.PARAMETER_SEPARATOR.join(
                    repr(math.log(v)) for v in values
                )
        elif parameters:
            raise PetabError(
                f"{where(petab2.C.PRIOR_PARAMETERS)} = {parameters!r}: priorParameters without "
                "a priorDistribution"
            )
        rows.append(
            {
                C.PARAMETER_ID: pid,
                C.PARAMETER_NAME: row.get(petab2.C.PARAMETER_NAME, math.nan),
                C.PARAMETER_SCALE: scale,
                C.LOWER_BOUND: row.get(petab2.C.LOWER_BOUND, math.nan),
                C.UPPER_BOUND: row.get(petab2.C.UPPER_BOUND, math.nan),
                C.NOMINAL_VALUE: row.get(petab2.C.NOMINAL_VALUE, math.nan),
                C.ESTIMATE: 1 if bool(estimate) else 0,
                C.OBJECTIVE_PRIOR_TYPE: prior,
                C.OBJECTIVE_PRIOR_PARAMETERS: prior_parameters,
            }
        )
    table = pd.DataFrame(rows).set_index(C.PARAMETER_ID)
    for column in (C.OBJECTIVE_PRIOR_TYPE, C.OBJECTIVE_PRIOR_PARAMETERS, C.PARAMETER_NAME):
        if table[column].isna().all():
            table = table.drop(columns=column)
    return table


def _renamed(text: str, names: dict) -> str:
    """``text`` with the identifiers in ``names`` replaced (all at once)."""
    if not names:
        return text
    return _IDENTIFIER.sub(lambda m: names.get(m.group(0), m.group(0)), text)


def _observable_table(df: pd.DataFrame, problem: petab2.Problem, parameter_ids: set):
    declared = {o.id: o for o in problem.observables}
    observable_ids = set(declared)
    rows = []
    for position, (oid, row) in enumerate(df.iterrows()):
        where = lambda column, p=position, i=oid: table_location("observable", p, i, column)  # noqa: E731
        old = _text(row.get(C.OBSERVABLE_TRANSFORMATION))
        if old and old != C.LIN:
            raise PetabUnsupportedError(
                f"{where(C.OBSERVABLE_TRANSFORMATION)} = {old!r}: PEtab v2 has no "
                "observableTransformation (noiseDistribution log-normal or log-laplace gives "
                "the log scale)"
            )
        distribution = _text(row.get(petab2.C.NOISE_DISTRIBUTION)) or petab2.C.NORMAL
        if distribution not in NOISE_DISTRIBUTIONS:
            raise PetabUnsupportedError(
                f"{where(petab2.C.NOISE_DISTRIBUTION)} = {distribution!r}: only "
                f"{', '.join(NOISE_DISTRIBUTIONS)} are supported"
            )
        transformation, noise = NOISE_DISTRIBUTIONS[distribution]
        observable = declared[oid]
        formula = _text(row[petab2.C.OBSERVABLE_FORMULA])
        noise_formula = _text(row.get(petab2.C.NOISE_FORMULA))
        in_formula = {s.name for s in observable.formula.free_symbols}
        in_noise = (
            {s.name for s in observable.noise_formula.free_symbols}
            if observable.noise_formula is not None
            else set()
        )
        for column, used, allowed in (
            (petab2.C.OBSERVABLE_FORMULA, in_formula, set()),
            (petab2.C.NOISE_FORMULA, in_noise, {oid}),
        ):
            others = sorted((used & observable_ids) - allowed)
            if others:
                raise PetabUnsupportedError(
                    f"{where(column)}: uses the observable(s) {', '.join(map(repr, others))}; "
                    "references between observables are not supported (an observable's own "
                    "id in its noiseFormula is)"
                )
        names = {}
        for kind, placeholders, column, used in (
            (
                "observable",
                observable.observable_placeholders,
                petab2.C.OBSERVABLE_PLACEHOLDERS,
                in_formula,
            ),
            ("noise", observable.noise_placeholders, petab2.C.NOISE_PLACEHOLDERS, in_noise),
        ):
            for k, symbol in enumerate(placeholders, start=1):
                if symbol.name not in used:
                    formula_column = (
                        petab2.C.OBSERVABLE_FORMULA
                        if kind == "observable"
                        else petab2.C.NOISE_FORMULA
                    )
                    raise PetabUnsupportedError(
                        f"{where(column)}: the placeholder {symbol.name!r} does not occur in the "
                        f"{formula_column}; each listed placeholder must (its values are "
                        "matched to the placeholders the formula uses)"
                    )
                names[symbol.name] = f"{kind}Parameter{k}_{oid}"
        renamed_names = set(names.values()) - set(names)
        clash = sorted(renamed_names & ((in_formula | in_noise) | parameter_ids))
        if clash:
            raise PetabUnsupportedError(
                f"{where(None)}: the placeholders are read under the names "
                f"{', '.join(map(repr, clash))}, which the problem uses otherwise"
            )
        rows.append(
            {
                C.OBSERVABLE_ID: oid,
                C.OBSERVABLE_NAME: row.get(petab2.C.OBSERVABLE_NAME, math.nan),
                C.OBSERVABLE_FORMULA: _renamed(formula, names),
                C.OBSERVABLE_TRANSFORMATION: transformation,
                C.NOISE_FORMULA: _renamed(noise_formula, names) if noise_formula else math.nan,
                C.NOISE_DISTRIBUTION: noise,
            }
        )
    return pd.DataFrame(rows).set_index(C.OBSERVABLE_ID)


def _target_value(value, where: str, parameter_ids: set):
    """A ``targetValue`` as a v1 condition cell: a float or a parameter-table id."""
    number = petab.core.to_float_if_float(value)
    if isinstance(number, (int, float, np.number)) and not isinstance(number, bool):
        return float(number)
    text = str(value).strip()
    expression = sympify_petab(text)
    if expression.is_Symbol and expression.name in parameter_ids:
        return expression.name
    if expression.is_number and expression.is_real:
        return float(expression)
    raise PetabUnsupportedError(
        f"{where} = {text!r}: only a number or an id of the parameter table is supported "
        "(PEtab v2 evaluates other expressions with the model's current values at the "
        "period's start)"
    )


class _Ids:
    """Condition ids of the v1 form, none equal to another."""

    def __init__(self, taken) -> None:
        self.taken = set(taken)

    def fresh(self, base: str) -> str:
        name = base
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name


def _condition_table(problem, df, measurement_df, parameter_ids: set, model):
    """The v1 condition table, and each experiment id's (simulation, pre-equilibration)
    condition ids (the key ``""``: measurements without experiment)."""
    changes: dict[str, dict] = {}
    if df is not None:
        operation = "operationType"
        for position, row in df.iterrows():
            cid = row[petab2.C.CONDITION_ID]
            target = row[petab2.C.TARGET_ID]
            where = table_location("condition", position, cid, petab2.C.TARGET_VALUE)
            kind = _text(row.get(operation))
            if kind and kind != "setCurrentValue":
                raise PetabUnsupportedError(
                    f"{table_location('condition', position, cid, operation)} = {kind!r}: "
                    "only setCurrentValue is supported"
                )
            per_condition = changes.setdefault(cid, {})
            if target in per_condition:
                raise PetabError(f"{where}: condition {cid!r} sets {target!r} twice")
            per_condition[target] = (row[petab2.C.TARGET_VALUE], f"{where} (target {target!r})")

    experiments = {e.id: e for e in problem.experiments}
    used = []
    for value in measurement_df.get(petab2.C.EXPERIMENT_ID, pd.Series(dtype=object)).tolist():
        key = _text(value)
        if key not in used:
            used.append(key)
    if petab2.C.EXPERIMENT_ID not in measurement_df:
        used = [""]
    ids = _Ids(experiments)
    rows: dict[str, dict] = {}
    preequilibrations: dict[tuple, str] = {}
    pairs: dict[str, tuple[str, str]] = {}

    represented: set[str] = set()

    def merged(period, experiment_id: str) -> dict:
        values: dict = {}
        for cid in period.condition_ids:
            represented.add(cid)
            for target, (value, where) in changes.get(cid, {}).items():
                if target in values:
                    raise PetabError(
                        f"experiment table: experiment {experiment_id!r} sets {target!r} twice "
                        f"at time {period.time} (condition {cid!r} and another)"
                    )
                values[target] = _target_value(value, where, parameter_ids)
        return values

    for key in used:
        if not key:
            simulation = ids.fresh(_MODEL_AS_IS)
            rows[simulation] = {}
            pairs[key] = (simulation, "")
            continue
        experiment = experiments[key]
        periods = experiment.sorted_periods
        pre = [p for p in periods if p.time == _PREEQUILIBRATION]
        main = [p for p in periods if p.time != _PREEQUILIBRATION]
        if len(main) != 1:
            times = ", ".join(repr(p.time) for p in main) or "none"
            raise PetabUnsupportedError(
                f"experiment table: experiment {key!r} has {len(main)} periods after the "
                f"pre-equilibration (start times: {times}); supported is one period at time "
                "0, optionally after one at -inf (condition changes during a simulation are "
                "not)"
            )
        if main[0].time != 0:
            raise PetabUnsupportedError(
                f"experiment table: experiment {key!r} starts its simulation at time "
                f"{main[0].time!r}; supported are simulations that start at time 0"
            )
        values = {}
        preequilibration = ""
        if pre:
            before = merged(pre[0], key)
            ids_key = tuple(pre[0].condition_ids)
            if ids_key not in preequilibrations:
                name = ids.fresh("__".join(ids_key) or f"{_MODEL_AS_IS}_preequilibration")
                preequilibrations[ids_key] = name
                rows[name] = before
            preequilibration = preequilibrations[ids_key]
            # changes persist: the parameters (not the species) the pre-equilibration set
            values = {t: v for t, v in before.items() if not model.is_state_variable(t)}
        values.update(merged(main[0], key))
        rows[key] = values
        ids.taken.add(key)
        pairs[key] = (key, preequilibration)

    # the conditions no measured experiment applies: rows of their own, so that the
    # parameters only they name stay used (they change no simulation; a value the v1 form
    # cannot state is left out of them)
    for cid, per_condition in changes.items():
        if cid in represented:
            continue
        cells = {}
        for target, (value, where) in per_condition.items():
            try:
                cells[target] = _target_value(value, where, parameter_ids)
            except PetabUnsupportedError:
                continue
        rows[ids.fresh(cid)] = cells

    targets: list[str] = []
    for values in rows.values():
        targets += [t for t in values if t not in targets]
    table = pd.DataFrame(
        [[values.get(t, math.nan) for t in targets] for values in rows.values()],
        index=pd.Index(list(rows), name=C.CONDITION_ID),
        columns=targets,
        dtype=object,
    )
    for column in targets:
        if all(isinstance(v, float) for v in table[column]):
            table[column] = table[column].astype(float)
    return table, pairs


def _measurement_table(df: pd.DataFrame, pairs: dict) -> pd.DataFrame:
    keys = (
        [_text(v) for v in df[petab2.C.EXPERIMENT_ID].tolist()]
        if petab2.C.EXPERIMENT_ID in df
        else [""] * len(df)
    )
    df = df.drop(columns=[petab2.C.EXPERIMENT_ID, petab2.C.MODEL_ID], errors="ignore")
    df.insert(1, C.SIMULATION_CONDITION_ID, [pairs[k][0] for k in keys])
    preequilibration = [pairs[k][1] or math.nan for k in keys]  # empty cells: NaN
    if any(pairs[k][1] for k in keys):
        df.insert(2, C.PREEQUILIBRATION_CONDITION_ID, preequilibration)
    return df.reset_index(drop=True)
