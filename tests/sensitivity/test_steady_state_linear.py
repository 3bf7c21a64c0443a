"""The bordered Jacobian of steady states, dense and sparse: same matrix, same results.

The sparse path factorises the same matrix with other pivots and another order of
operations; Newton's iterates stop at a fraction of the tolerance, so the steady states
of the two paths agree far below the tolerance, and the sensitivities (solves with the
factors at that state) to rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens import OdeSystem, steady_state
from pymc_odesens.codegen import compile_kernels
from pymc_odesens.sensitivity.steady_state_controls import resolve_steady_state_controls
from pymc_odesens.sensitivity.steady_state_linear import (
    bordered_pattern,
    bordered_structure,
    factor_bordered_jacobian,
    solve_bordered,
    solve_bordered_transpose,
)
from pymc_odesens.sensitivity.steady_state_problem import SteadyStateProblem
from pymc_odesens.solvers.newton_matrix import new_newton_factor, structure_kind, structure_size
from tests.sensitivity.networks import mass_action_network

TIGHT = dict(relative_tolerance=1e-12, absolute_tolerance=1e-14)


def enzyme_cycle() -> OdeSystem:
    """E + S <-> C -> E + P, P -> S: the enzyme total E + C and the substrate total
    S + C + P are conserved."""

    def rhs(t, y, p):
        bind = p.kf * y.E * y.S - p.kr * y.C
        cat = p.kcat * y.C
        back = p.kp * y.P
        return [-bind + cat, -bind + back, bind - cat, cat - back]

    return OdeSystem(
        rhs, states=["E", "S", "C", "P"], params=["kf", "kr", "kcat", "kp"], name="enzyme_cycle"
    )


ENZYME_P = np.array([3.0, 1.0, 0.7, 0.4])
ENZYME_Y0 = np.array([1.0, 5.0, 0.0, 0.0])


def linear_system() -> OdeSystem:
    """``y' = A(p) y + b(p)`` (no conservation law): ``y* = -A^-1 b``."""

    def rhs(t, y, p):
        a = [[-p[0], 1.0, 0.0], [0.5, -3.0, 1.0], [0.0, 1.0, -1.5]]
        return [sum(a[i][j] * y[j] for j in range(3)) + p[1 + i] for i in range(3)]

    return OdeSystem(rhs, 3, 4, name="linear")


def relative_difference(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def both_paths(system, y0, p, **controls):
    controls = TIGHT | controls
    results = {
        kind: steady_state(system, y0, p, linear_solver=kind, **controls)
        for kind in ("dense", "sparse")
    }
    return results["dense"], results["sparse"]


def assert_paths_agree(dense, sparse, bound=1e-10):
    assert relative_difference(sparse.y, dense.y) < bound
    assert relative_difference(sparse.S, dense.S) < bound
    assert relative_difference(sparse.S_y0, dense.S_y0) < bound
    w = np.random.default_rng(3).normal(size=dense.y.size)
    g_dense, g_sparse = dense.vjp(w), sparse.vjp(w)
    assert relative_difference(g_sparse.params, g_dense.params) < bound
    assert relative_difference(g_sparse.params, sparse.S.T @ w) < bound  # adjoint = forward
    if np.abs(g_dense.y0).max() > 0:
        assert relative_difference(g_sparse.y0, g_dense.y0) < bound
    assert sparse.reciprocal_condition == pytest.approx(dense.reciprocal_condition, rel=0.5)


def test_bordered_values_are_the_jacobian_with_the_law_rows_replaced():
    system = enzyme_cycle()
    kernels = compile_kernels(system)
    laws = system.conservation_laws
    cons = np.ascontiguousarray(laws.matrix, dtype=float)
    dependent = np.ascontiguousarray(laws.dependent, dtype=np.int64)
    y = np.array([0.4, 2.0, 0.6, 1.5])
    jac = kernels.evaluate("jac_y", 0.0, y, ENZYME_P)
    expected = jac.copy()
    expected[dependent] = cons
    rows, cols, source = bordered_pattern(*kernels.jacobian_pattern, cons, dependent)
    jac_values = kernels.evaluate("jac_y_values", 0.0, y, ENZYME_P)
    from_law = source < 0
    values = jac_values[np.where(from_law, 0, source)]
    values[from_law] = cons.ravel()[-1 - source[from_law]]
    assembled = np.zeros_like(expected)
    assembled[rows, cols] = values
    np.testing.assert_array_equal(assembled, expected)
    # factorised (equilibrated) sparse: solves with A and A^T
    structure, source = bordered_structure(kernels, cons, dependent, "sparse")
    assert structure_kind(structure) == "sparse"
    ints, floats = new_newton_factor(structure)
    scales = np.zeros(2 * 4 + 1)
    ok, ints, floats = factor_bordered_jacobian(
        structure, source, jac_values, cons, ints, floats, np.zeros(structure_size(structure)),
        scales,
    )  # fmt: skip
    assert ok
    b = np.array([1.0, -2.0, 0.5, 3.0])
    x, x_t = b.copy(), b.copy()
    solve_bordered(structure, ints, floats, scales, x, np.zeros(4))
    solve_bordered_transpose(structure, ints, floats, scales, x_t, np.zeros(4))
    np.testing.assert_allclose(x, np.linalg.solve(expected, b), rtol=1e-13)
    np.testing.assert_allclose(x_t, np.linalg.solve(expected.T, b), rtol=1e-13)


@pytest.mark.parametrize("method", ["newton", "integration"])
def test_enzyme_cycle_sparse_equals_dense(method):
    dense, sparse = both_paths(enzyme_cycle(), ENZYME_Y0, ENZYME_P, method=method)
    assert_paths_agree(dense, sparse)
    assert np.abs(dense.S_y0).max() > 0.1  # the conserved totals matter
    totals = np.array([1.0, 5.0])  # E + C, S + C + P
    np.testing.assert_allclose([sparse.y[0] + sparse.y[2], sparse.y[1:].sum()], totals)


def test_linear_closed_form_on_the_sparse_path():
    p = np.array([2.0, 1.0, 2.0, 0.5])
    a = np.array([[-p[0], 1.0, 0.0], [0.5, -3.0, 1.0], [0.0, 1.0, -1.5]])
    dense, sparse = both_paths(linear_system(), np.zeros(3), p)
    np.testing.assert_allclose(sparse.y, -np.linalg.solve(a, p[1:]), rtol=1e-12)
    np.testing.assert_allclose(sparse.S[:, 1:], -np.linalg.inv(a), rtol=1e-12)
    assert_paths_agree(dense, sparse)


def test_auto_takes_the_sparse_path_on_a_large_network_and_agrees_with_dense():
    # 200 species, 53 conservation laws; Newton from x0 fails, integration (sparse Newton
    # matrices of bdf) brings it into Newton's basin
    system = mass_action_network(200, bounded=True)
    controls = resolve_steady_state_controls(system.n_states, linear_solver="auto")
    problem = SteadyStateProblem(system, controls)
    assert system.conservation_laws.n_laws > 0
    assert structure_kind(problem.structure) == "sparse"
    assert structure_kind(problem.newton) == "sparse"
    dense, sparse = both_paths(
        system, system.x0, system.p_nominal, relative_tolerance=1e-10, absolute_tolerance=1e-12
    )
    assert_paths_agree(dense, sparse, bound=1e-8)
    assert sparse.route == "integration+newton" and sparse.stats["n_integration_steps"] > 0
