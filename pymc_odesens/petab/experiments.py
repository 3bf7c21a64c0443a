"""Simulation conditions as experiments: what each one sets, read with the petab library.

An *experiment* is one combination of a ``simulationConditionId`` and an optional
``preequilibrationConditionId`` of the measurement table
(``petab.get_simulation_conditions``). For each, the petab library's parameter mapping
(``get_parameter_mapping_for_condition``, once per distinct condition) gives every model
parameter's value during pre-equilibration and simulation: a number, or the id of an
estimated parameter.
Condition-table columns that name species set initial values instead (a number, a
parameter id, or NaN: keep the model's value). Experiments with pre-equilibration come
after those without, so each group is one contiguous block of the experiment axis.

Condition pairs whose settings are all equal (every model parameter's value and every
initial value, in both roles) are one simulation: they become one experiment, simulated
once at the union of their measurement times, and :attr:`Experiment.conditions` lists the
pairs it stands for. The measurements keep their own condition ids; observable and noise
parameters are resolved per measurement, so the measurements of merged conditions may
still differ in them. (Bachmann_MSB2011's 36 simulation conditions are 12 distinct
simulations.)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace

import pandas as pd
import petab.v1 as petab
from petab.v1 import C

from pymc_odesens.model import OdeSystem
from pymc_odesens.petab.errors import PetabError, PetabUnsupportedError

__all__ = ["Experiment", "condition_label", "read_experiments"]

_NAN_MARKER = ("NaN",)  # a tuple: values are numbers or parameter ids (strings)


def condition_label(simulation: str, preequilibration: str | None) -> str:
    """A condition pair as messages and plots name it: ``pre -> simulation``, or
    ``simulation`` alone without pre-equilibration."""
    return f"{preequilibration} -> {simulation}" if preequilibration else simulation


@dataclass(frozen=True)
class Experiment:
    """One simulation condition (optionally after a pre-equilibration condition).

    Attributes
    ----------
    simulation : str
        The ``simulationConditionId``.
    preequilibration : str or None
        The ``preequilibrationConditionId``.
    parameters, preequilibration_parameters : dict of str to float or str
        Each model parameter's value in the simulation (pre-equilibration) condition: a
        number on the linear scale or the id of an estimated parameter (petab's mapping).
    species : dict of str to float or str
        Initial values the simulation condition sets (species id to number or parameter
        id; NaN: keep the model's, or after pre-equilibration the steady state's, value).
    preequilibration_species : dict of str to float or str
        The same for the pre-equilibration condition.
    conditions : tuple of (str, str or None)
        Every (``simulationConditionId``, ``preequilibrationConditionId``) pair of the
        measurement table that this experiment simulates, its own first: pairs whose
        settings are all equal share one simulation.
    """

    simulation: str
    preequilibration: str | None
    parameters: dict = field(repr=False)
    preequilibration_parameters: dict = field(repr=False)
    species: dict = field(repr=False)
    preequilibration_species: dict = field(repr=False)
    conditions: tuple = ()

    def __post_init__(self) -> None:
        own = (self.simulation, self.preequilibration)
        if not self.conditions:
            object.__setattr__(self, "conditions", (own,))
        elif self.conditions[0] != own:
            raise ValueError(
                f"conditions must start with the experiment's own pair {own!r}, "
                f"got {self.conditions[0]!r}"
            )

    @property
    def label(self) -> str:
        """The condition pairs it simulates (:func:`condition_label`), joined by ``" = "``."""
        return " = ".join(condition_label(*pair) for pair in self.conditions)

    def settings_key(self) -> tuple:
        """Everything that the simulation depends on, hashable (NaN, which equals nothing,
        as a marker no parameter id can be): equal keys, equal simulations."""

        def frozen(mapping: dict) -> tuple:
            return tuple(
                (k, _NAN_MARKER if isinstance(v, float) and math.isnan(v) else v)
                for k, v in sorted(mapping.items())
            )

        return (
            self.preequilibration is not None,
            frozen(self.parameters),
            frozen(self.preequilibration_parameters),
            frozen(self.species),
            frozen(self.preequilibration_species),
        )


def _condition_entry(condition_df: pd.DataFrame, condition_id: str, column: str):
    if condition_id not in condition_df.index:
        raise PetabError(f"condition table: no condition {condition_id!r}")
    value = petab.core.to_float_if_float(condition_df.loc[condition_id, column])
    if isinstance(value, numbers.Number):
        return float(value)
    if isinstance(value, str) and value.strip() == "":
        return math.nan
    return value


def _state_columns(system: OdeSystem, condition_df: pd.DataFrame, model) -> list[str]:
    """Condition-table columns that set initial values (species), checked."""
    kinds, roles = system.sbml.kinds, system.sbml.roles
    columns = []
    for column in condition_df.columns:
        if column == C.CONDITION_NAME or not model.is_state_variable(column):
            continue
        kind = kinds.get(column)
        if kind == "compartment":
            raise PetabUnsupportedError(
                f"condition table: column {column!r} sets the size of a compartment; "
                "compartment sizes are constants of the imported SBML model, so condition-"
                "specific sizes are not supported"
            )
        if kind != "species" or roles.get(column) != "state":
            raise PetabUnsupportedError(
                f"condition table: column {column!r} sets the {kind or 'entity'} {column!r}, "
                f"which the imported model holds as a {roles.get(column, 'constant')}, not a "
                "state; only initial values of species that are states can be set"
            )
        columns.append(column)
    return columns


class _ConditionMapping:
    """Each model parameter's value in one condition (petab's
    ``get_parameter_mapping_for_condition``), computed once per condition and role.

    Measurement-specific overrides (``observableParameters``, ``noiseParameters``) are
    resolved per measurement (:mod:`pymc_odesens.petab.measurements`), so the mapping of a
    condition depends on the condition alone: not on the experiment it is part of. petab's
    ``get_optimization_to_simulation_parameter_mapping`` maps both conditions of every
    experiment; the same condition recurs in many experiments (a pre-equilibration
    condition typically in all of them).
    """

    def __init__(self, problem: petab.Problem) -> None:
        self.problem = problem
        self.model_parameters = dict(problem.model.get_free_parameter_ids_with_values())
        self._mappings: dict[tuple[str, bool], dict] = {}

    def __call__(self, condition_id: str, preequilibration: bool) -> dict:
        key = (condition_id, preequilibration)
        found = self._mappings.get(key)
        if found is None:
            values, _ = petab.get_parameter_mapping_for_condition(
                condition_id=condition_id,
                is_preeq=preequilibration,
                cur_measurement_df=None,
                model=self.problem.model,
                condition_df=self.problem.condition_df,
                parameter_df=self.problem.parameter_df,
                simulation_parameters=self.model_parameters,
                warn_unmapped=False,
                scaled_parameters=False,
                fill_fixed_parameters=True,
            )
            found = self._mappings[key] = values
        return dict(found)


def read_experiments(problem: petab.Problem, system: OdeSystem) -> list[Experiment]:
    """The experiments of a PEtab problem, those without pre-equilibration first; condition
    pairs with equal settings merged into one experiment (see the module's docstring).

    Parameters
    ----------
    problem : petab.v1.Problem
    system : OdeSystem
        The model imported from the problem's SBML file.

    Returns
    -------
    list of Experiment
    """
    measurement_df = problem.measurement_df
    conditions = petab.get_simulation_conditions(measurement_df)
    mapping = _ConditionMapping(problem)
    species_columns = _state_columns(system, problem.condition_df, problem.model)
    experiments = []
    for _, row in conditions.iterrows():
        simulation = row[C.SIMULATION_CONDITION_ID]
        pre = row.get(C.PREEQUILIBRATION_CONDITION_ID, "")
        pre = pre if isinstance(pre, str) and pre else None
        experiments.append(
            Experiment(
                simulation=simulation,
                preequilibration=pre,
                parameters=mapping(simulation, preequilibration=False),
                preequilibration_parameters=mapping(pre, preequilibration=True) if pre else {},
                species={
                    s: _condition_entry(problem.condition_df, simulation, s)
                    for s in species_columns
                },
                preequilibration_species={
                    s: _condition_entry(problem.condition_df, pre, s) for s in species_columns
                }
                if pre
                else {},
            )
        )
    return sorted(_merge_equal(experiments), key=lambda e: e.preequilibration is not None)


def _merge_equal(experiments: list[Experiment]) -> list[Experiment]:
    """One experiment per distinct :meth:`Experiment.settings_key`, in first-seen order."""
    merged: dict[tuple, list[Experiment]] = {}
    for experiment in experiments:
        merged.setdefault(experiment.settings_key(), []).append(experiment)
    return [
        replace(same[0], conditions=tuple(pair for e in same for pair in e.conditions))
        for same in merged.values()
    ]
