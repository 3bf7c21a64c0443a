"""Reading outputs off a solution: OdeSolution[name] and evaluate (direct and compiled)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from pymc_odesens import solve


@pytest.fixture(scope="module")
def akar4_solution(reference_system):
    system = reference_system("akar4")
    times = np.linspace(0, 100, 11)
    return system, solve(system, system.x0, times, system.p_nominal, method="bdf")


def test_outputs_and_states_by_name(akar4_solution):
    system, solution = akar4_solution
    akar4p = solution.y[:, system.states.index("AKAR4p")]
    np.testing.assert_allclose(solution["AKAR4pOUT"], 108 + 380 * akar4p, rtol=1e-14)
    np.testing.assert_array_equal(solution["AKAR4p"], akar4p)
    with pytest.raises(KeyError, match="no state named 'nothing'.*outputs are"):
        solution["nothing"]


def test_evaluate_direct_and_compiled_paths_agree(akar4_solution):
    system, solution = akar4_solution
    t = system.t
    y = dict(zip(system.states, system.state_symbols))
    p = dict(zip(system.params, system.param_symbols))
    k = system.p_nominal
    expressions = [
        y["C"],  # a state
        3 * y["AKAR4"],  # a multiple of a state
        p[system.params[0]] * 2,  # a constant
        sp.exp(-t / 50) * y["AKAR4_C"] + p[system.params[1]] * y["AKAR4p"] ** 2,  # compiled
    ]
    values = solution.evaluate(expressions)
    column = {name: solution.y[:, i] for i, name in enumerate(system.states)}
    np.testing.assert_array_equal(values[:, 0], column["C"])
    np.testing.assert_allclose(values[:, 1], 3 * column["AKAR4"], rtol=1e-15)
    np.testing.assert_allclose(values[:, 2], 2 * k[0], rtol=1e-15)
    expected = np.exp(-solution.t / 50) * column["AKAR4_C"] + k[1] * column["AKAR4p"] ** 2
    np.testing.assert_allclose(values[:, 3], expected, rtol=1e-13)
    assert values.shape == (11, 4)


def test_species_units_need_an_sbml_system(akar4_solution):
    _, solution = akar4_solution
    with pytest.raises(ValueError, match="not read from SBML"):
        solution.amount("C")
