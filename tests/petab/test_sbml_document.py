"""PEtab's values replace the numeric initial assignments of the parameters it sets."""

from __future__ import annotations

import numpy as np
import petab.v1 as petab
import pytest

from pymc_odesens.petab import PetabProblem, PetabUnsupportedError
from pymc_odesens.petab.sbml_document import simulated_sbml
from tests.petab.turnover import turnover_sbml, turnover_solution
from tests.petab.turnover_events import write_problem


def _with_initial_assignment(yaml, formula: str) -> None:
    """The problem's model with ``u`` (the production, set per condition) given by the
    initial assignment ``formula``, its value attribute removed."""
    sbml = turnover_sbml(
        a0=1.0, parameters={"u": (None, True), "v": (1.0, False)}, production="u * v"
    )
    text = sbml.replace(
        "</listOfParameters>",
        '</listOfParameters>\n<listOfInitialAssignments><initialAssignment symbol="u">'
        f"{formula}</initialAssignment></listOfInitialAssignments>",
    )
    (yaml.parent / "model.xml").write_text(text)
    # the parameter table lists only what this model (or a condition) uses
    table = petab.get_parameter_df(str(yaml.parent / "parameters.tsv"))
    keep = [pid for pid in table.index if f'id="{pid}"' in text]
    petab.write_parameter_df(table.loc[keep], yaml.parent / "parameters.tsv")


NUMBER = (
    '<math xmlns="http://www.w3.org/1998/Math/MathML"><apply><times/><cn type="integer">2'
    "</cn><cn> 0.75 </cn></apply></math>"
)
EXPRESSION = (
    '<math xmlns="http://www.w3.org/1998/Math/MathML"><apply><times/><cn>2</cn><ci> k </ci>'
    "</apply></math>"
)


def _problem(tmp_path, formula):
    conditions = {"set": {"u": 3.0}, "other": {"u": 0.5}}
    measurements = [("", "set", [1.0, 2.0]), ("", "other", [1.0, 2.0])]
    yaml = write_problem(tmp_path, [], conditions, measurements)
    _with_initial_assignment(yaml, formula)
    return yaml


def test_a_numeric_initial_assignment_gives_way_to_the_condition_table(tmp_path):
    yaml = _problem(tmp_path, NUMBER)
    text = simulated_sbml(petab.Problem.from_yaml(str(yaml)))
    assert "initialAssignment" not in text and 'id="u" value="1.5"' in text
    problem = PetabProblem.from_yaml(yaml, relative_tolerance=1e-10, absolute_tolerance=1e-12)
    k = dict(zip(problem.parameters.ids, problem.parameters.unscale(None)))["k"]
    df = problem.petab_problem.measurement_df
    # the conditions' values, not the assignment's 2 * 0.75 (the value left in the document)
    u = np.where(df["simulationConditionId"] == "set", 3.0, 0.5)
    expected = [turnover_solution(t, 1.0, ui, k) for t, ui in zip(df["time"], u)]
    np.testing.assert_allclose(problem.simulate()["simulation"], expected, rtol=1e-8)


def test_an_assignment_of_other_quantities_is_kept_and_setting_it_refused(tmp_path):
    yaml = _problem(tmp_path, EXPRESSION)
    text = simulated_sbml(petab.Problem.from_yaml(str(yaml)))
    assert "initialAssignment" in text
    with pytest.raises(PetabUnsupportedError, match="sets or estimates 'u'"):
        PetabProblem.from_yaml(yaml)


def test_a_document_without_such_parameters_is_returned_unchanged(tmp_path):
    yaml = write_problem(tmp_path, [], {"set": {"u": 3.0}}, [("", "set", [1.0])])
    problem = petab.Problem.from_yaml(str(yaml))
    assert simulated_sbml(problem) == problem.model.to_sbml_str()
