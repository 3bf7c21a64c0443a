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
    assert len(experiments) == len(expected)
    assert any(e.preequilibration for e in experiments)
    assert len(calls) < 2 * len(experiments)
    for experiment in experiments:
        sim_map, pre_map = expected[(experiment.simulation, experiment.preequilibration)]
        for ours, theirs in (
            (experiment.parameters, sim_map),
            (experiment.preequilibration_parameters, pre_map),
        ):
            assert list(ours) == list(theirs)
            assert all(_same(ours[k], theirs[k]) for k in ours), experiment.label
