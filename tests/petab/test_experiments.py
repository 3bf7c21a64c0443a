"""The experiments' parameter mappings: petab's per-condition mapping, once per condition,
equal to petab's mapping of the whole problem."""

from __future__ import annotations

import math
import warnings

import petab.v1 as petab
import pytest
from petab.v1 import C

from pymc_odesens.model import OdeSystem
from pymc_odesens.petab import experiments as experiments_module
from pymc_odesens.petab.experiments import read_experiments
from tests.petab.benchmark_collection import problem_yaml


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


@pytest.mark.parametrize("name", ["Brannmark_JBC2010", "Isensee_JCB2018"])
def test_mapping_equals_petabs_mapping_of_the_whole_problem(name, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem = petab.Problem.from_yaml(str(problem_yaml(name)))
    system = OdeSystem.from_sbml(problem.model.to_sbml_str(), name=name)
    calls = []
    per_condition = petab.get_parameter_mapping_for_condition

    def counted(**kwargs):
        calls.append((kwargs["condition_id"], kwargs["is_preeq"]))
        return per_condition(**kwargs)

    monkeypatch.setattr(experiments_module.petab, "get_parameter_mapping_for_condition", counted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        experiments = read_experiments(problem, system)
    # each condition mapped once in each role, though it recurs in many experiments
    assert len(calls) == len(set(calls))
    monkeypatch.undo()

    measurements = problem.measurement_df.drop(
        columns=[
            c for c in (C.OBSERVABLE_PARAMETERS, C.NOISE_PARAMETERS) if c in problem.measurement_df
        ]
    )
    measurements[C.PREEQUILIBRATION_CONDITION_ID] = (
        measurements[C.PREEQUILIBRATION_CONDITION_ID].astype(object).fillna("")
    )
    conditions = petab.get_simulation_conditions(measurements)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = petab.get_optimization_to_simulation_parameter_mapping(
            condition_df=problem.condition_df,
            measurement_df=measurements,
            parameter_df=problem.parameter_df,
            model=problem.model,
            simulation_conditions=conditions,
            warn_unmapped=False,
        )
    expected = {}
    for (_, row), (pre_map, sim_map, _, _) in zip(conditions.iterrows(), whole):
        pre = row[C.PREEQUILIBRATION_CONDITION_ID] or None
        expected[(row[C.SIMULATION_CONDITION_ID], pre)] = (sim_map, pre_map)
    # every condition pair is simulated by exactly one experiment ...
    pairs = [pair for e in experiments for pair in e.conditions]
    assert sorted(pairs, key=str) == sorted(expected, key=str)
    assert any(e.preequilibration for e in experiments)
    assert len(calls) < 2 * len(pairs)
    # ... whose settings are those petab maps each of its pairs to
    for experiment in experiments:
        for pair in experiment.conditions:
            sim_map, pre_map = expected[pair]
            for ours, theirs in (
                (experiment.parameters, sim_map),
                (experiment.preequilibration_parameters, pre_map),
            ):
                assert list(ours) == list(theirs)
                assert all(_same(ours[k], theirs[k]) for k in ours), (experiment.label, pair)


@pytest.mark.parametrize(
    "name, pairs, distinct",
    [("Bachmann_MSB2011", 36, 12), ("Schwen_PONE2014", 19, 7), ("Fujita_SciSignal2010", 6, 6)],
)
def test_conditions_with_equal_settings_are_one_experiment(name, pairs, distinct):
    """Counts read off the condition tables: Bachmann's 36 conditions set 12 distinct
    combinations of its 8 condition columns (Schwen's 19: 7)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem = petab.Problem.from_yaml(str(problem_yaml(name)))
        system = OdeSystem.from_sbml(problem.model.to_sbml_str(), name=name)
        experiments = read_experiments(problem, system)
    assert sum(len(e.conditions) for e in experiments) == pairs
    assert len(experiments) == distinct
    columns = [c for c in problem.condition_df.columns if c != C.CONDITION_NAME]
    rows = problem.condition_df[columns].astype(str)
    for experiment in experiments:
        # merged conditions have equal rows; different experiments have different rows
        own = {tuple(rows.loc[sim]) for sim, _ in experiment.conditions}
        assert len(own) == 1, experiment.label
    assert len({tuple(rows.loc[e.simulation]) for e in experiments}) == distinct
