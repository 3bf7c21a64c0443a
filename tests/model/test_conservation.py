"""Linear conservation laws: found exactly from the structure or the stoichiometry."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import pymc_odesens.model.system as system_module
from pymc_odesens import OdeSystem, solve
from pymc_odesens import math as om


@pytest.fixture(autouse=True)
def without_disk_cache(monkeypatch):
    """These tests check the finder: laws stored by an earlier run must not stand in for it
    (the disk cache has its own tests, test_conservation_cache.py)."""
    monkeypatch.setattr(system_module, "cached_conservation_laws", lambda system, find: find())


def enzyme_system() -> OdeSystem:
    """S + E <-> C -> P + E (mass action)."""

    def rhs(t, y, p):
        substrate, enzyme, complex_, product = y
        v1 = p.kf * substrate * enzyme - p.kr * complex_
        v2 = p.kcat * complex_
        return [-v1, -v1 + v2, v1 - v2, v2]

    return OdeSystem(rhs, states=["S", "E", "C", "P"], params=["kf", "kr", "kcat"])


def test_enzyme_laws_from_structure():
    laws = enzyme_system().conservation_laws
    assert laws.source == "structure"
    assert laws.n_laws == 2
    assert laws.exact == sp.Matrix([[1, 0, 1, 1], [0, 1, 1, 0]])
    np.testing.assert_array_equal(laws.dependent, [0, 1])
    assert laws.unresolved == 0
    assert laws.describe() == ["S + C + P = const", "E + C = const"]
    np.testing.assert_allclose(laws.totals([1.0, 2.0, 3.0, 4.0]), [8.0, 5.0])


def test_laws_hold_along_a_trajectory():
    system = enzyme_system()
    y0 = np.array([2.0, 0.5, 0.1, 0.0])
    solution = solve(system, y0, np.linspace(0, 5, 6), [3.0, 1.0, 2.0], method="bdf")
    laws = system.conservation_laws
    np.testing.assert_allclose(solution.y @ laws.matrix.T, np.tile(laws.totals(y0), (6, 1)))


def test_rational_coefficients_and_constant_states():
    # 2 A <-> B conserves A + 2 B; a state with zero derivative is a law of its own
    system = OdeSystem(
        lambda t, y, p: [-2 * (p.kf * y.A**2 - p.kr * y.B), p.kf * y.A**2 - p.kr * y.B, 0],
        states=["A", "B", "X"],
        params=["kf", "kr"],
    )
    assert system.conservation_laws.describe() == ["A + 2*B = const", "X = const"]


def test_stoichiometry_gives_the_laws():
    system = enzyme_system()
    system.stoichiometry = np.array([[-1, 0], [-1, 1], [1, -1], [0, 1]])
    laws = system.conservation_laws
    assert laws.source == "stoichiometry"
    assert laws.exact == sp.Matrix([[1, 0, 1, 1], [0, 1, 1, 0]])
    assert system.stoichiometry.shape == (4, 2)
    system.stoichiometry = None  # back to the structure
    assert system.conservation_laws.source == "structure"


def test_stoichiometry_inconsistent_with_rhs_is_refused():
    system = enzyme_system()
    system.stoichiometry = [[-1, 0], [-1, 1], [1, -1], [0, 2]]
    with pytest.raises(ValueError, match=r"1/2\*P = const that it implies does not hold"):
        _ = system.conservation_laws


@pytest.mark.parametrize(
    "value, message",
    [
        ([[1, 0], [0, 1]], r"shape \(4, R\)"),
        ([[1], [sp.Symbol("V")], [0], [0]], r"stoichiometry\[1, 0\] must be a finite number"),
        ([[1], [np.nan], [0], [0]], r"stoichiometry\[1, 0\] must be a finite number"),
    ],
)
def test_bad_stoichiometry_is_named(value, message):
    with pytest.raises(ValueError, match=message):
        enzyme_system().stoichiometry = value


def test_no_laws_in_an_open_system():
    system = OdeSystem(lambda t, y, p: [p[0] - p[1] * y[0], p[1] * y[0] - p[2] * y[1]], 2, 3)
    laws = system.conservation_laws
    assert laws.n_laws == 0 and laws.matrix.shape == (0, 2)
    assert laws.unresolved == 0


def test_inflow_null_vector_is_not_a_law():
    # J_y has the left null vector (1, 1), but y0 + y1 grows with the inflow p0
    system = OdeSystem(lambda t, y, p: [p[0] - p[1] * y[0], p[1] * y[0]], 2, 2)
    laws = system.conservation_laws
    assert laws.n_laws == 0
    assert laws.unresolved == 1


def test_parameter_dependent_law_is_reported_unresolved():
    # V1 y0 + V2 y1 is conserved, with coefficients that are parameters
    system = OdeSystem(
        lambda t, y, p: [-p.k * y[0] / p.V1, p.k * y[0] / p.V2], 2, params=["k", "V1", "V2"]
    )
    laws = system.conservation_laws
    assert laws.n_laws == 0
    assert laws.unresolved == 1


def test_law_hidden_from_the_term_structure_is_found_numerically_and_proved():
    # -2 sinh(y0) and exp(y0) - exp(-y0) share no term, yet cancel
    system = OdeSystem(
        lambda t, y, p: [-2 * p[0] * om.sinh(y[0]), p[0] * (om.exp(y[0]) - om.exp(-y[0]))], 2, 1
    )
    laws = system.conservation_laws
    assert laws.describe() == ["y0 + y1 = const"]
    assert laws.unresolved == 0


def test_awkward_names():
    # a state called t (not time) and one called lambda (a Python keyword)
    system = OdeSystem(
        lambda t, y, p: [-p.k * y["t"] * t, p.k * y["t"] * t],
        states=["t", "lambda"],
        params=["k"],
    )
    laws = system.conservation_laws
    assert laws.describe() == ["t + lambda = const"]
    assert laws.unresolved == 0
