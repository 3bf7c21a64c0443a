"""Dense and sparse Newton matrices give the same results on every route.

Both paths factorise the same matrices; the factors differ at rounding level (other pivots,
other order of operations), and so do the Newton iterates, which stop at a fraction of the
tolerance. Where the step sequence is the same, results must then agree far below the
tolerance (:data:`SAME_STEPS_BOUND`); where such a difference tips one step's accept/reject
decision the two runs are different but equally valid solutions, and must agree within the
tolerance (:data:`OTHER_STEPS_BOUND`). Chua's circuit is chaotic: there rounding-level
differences grow along the trajectory whatever the steps, and the looser bound applies.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import pymc_odesens as pos
from pymc_odesens import OdeSystem
from pymc_odesens.model.internal_symbols import time_symbol
from pymc_odesens.model.symbol_vector import make_symbols
from tests.sensitivity.networks import mass_action_network

REFERENCE_MODELS = [
    "linear2",
    "pka",
    "akar4",
    "robertson",
    "lotka_volterra",
    "chua",
    "bouncing_ball",
]
RTOL = 1e-8
ATOL = 1e-10
ADJOINT_TOLERANCES = {
    f"{kind}_tolerance_{phase}": value
    for phase in ("forward", "backward", "quadrature")
    for kind, value in (("relative", RTOL), ("absolute", ATOL))
}


def relative_difference(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


SAME_STEPS_BOUND = RTOL / 10
OTHER_STEPS_BOUND = 100 * RTOL


def assert_same_result(sparse, dense, same_steps: bool, what: str) -> None:
    bound = SAME_STEPS_BOUND if same_steps else OTHER_STEPS_BOUND
    assert relative_difference(sparse, dense) < bound, what


STEP_COUNTS = ("n_steps", "n_rejected_steps")


def same_steps(a: dict, b: dict) -> bool:
    return all(a[k] == b[k] for k in STEP_COUNTS)


def run_routes(system, y0, times, params, t0, linear_solver, *, adjoint=True):
    results = {}
    for method in ("bdf", "adams"):
        sol = pos.solve(
            system, y0, times, params, t0=t0, method=method, relative_tolerance=RTOL,
            absolute_tolerance=ATOL, linear_solver=linear_solver,
        )  # fmt: skip
        results[method] = (sol.y, sol.stats)
    sens = pos.solve_sensitivity(
        system, y0, times, params, t0=t0, method="bdf", wrt="both", relative_tolerance=RTOL,
        absolute_tolerance=ATOL, linear_solver=linear_solver,
    )  # fmt: skip
    results["forward"] = (np.concatenate([sens.S.ravel(), sens.S_y0.ravel()]), sens.stats)
    if adjoint:
        rng = np.random.default_rng(0)
        cotangent = rng.normal(size=(len(times), system.n_states))
        for method in ("continuous", "discrete"):
            g = pos.adjoint_gradient(
                system, y0, times, params, cotangent, t0=t0, adjoint_method=method,
                linear_solver=linear_solver, **ADJOINT_TOLERANCES,
            )  # fmt: skip
            backward = g.stats.get("backward", g.stats.get("replay"))
            steps = {k: (g.stats["forward"][k], backward[k]) for k in STEP_COUNTS}
            results[method] = (np.concatenate([g.params, g.y0]), steps)
    return results


CHAOTIC = {"chua"}


def compare(system, y0, times, params, t0=0.0, adjoint=True) -> dict:
    dense = run_routes(system, y0, times, params, t0, "dense", adjoint=adjoint)
    sparse = run_routes(system, y0, times, params, t0, "sparse", adjoint=adjoint)
    for route, (value, stats) in dense.items():
        sparse_value, sparse_stats = sparse[route]
        same = same_steps(sparse_stats, stats) and system.name not in CHAOTIC
        assert_same_result(sparse_value, value, same, route)
    return dense


@pytest.mark.parametrize("name", REFERENCE_MODELS)
def test_reference_models_agree(name, reference_system):
    system = reference_system(name)
    times = np.linspace(system.t0, system.t_end, 6)[1:]
    compare(system, system.x0, times, system.p_nominal, system.t0)


def random_sparse_system(n: int, fill: float, seed: int, rotation: float):
    """``y' = A y + p_k y_i y_j`` with a random sparse ``A`` (a few per cent of entries),
    stable (diagonally dominant rows), and every tenth pair of states a fast rotation with no
    diagonal entry: ``y_k' = w y_{k+1}``, ``y_{k+1}' = -w y_k`` (a structurally zero diagonal;
    ``I - c J`` then needs row exchanges once ``c w`` is large)."""
    rng = np.random.default_rng(seed)
    y = make_symbols([f"x{i}" for i in range(n)])
    p = make_symbols([f"k{j}" for j in range(8)])
    a = (rng.random((n, n)) < fill) * rng.normal(size=(n, n))
    np.fill_diagonal(a, 0.0)
    rotating = set()
    for k in range(0, n - 1, 20):
        a[k, :] = 0.0
        a[k + 1, :] = 0.0
        a[k, k + 1] = rotation
        a[k + 1, k] = -rotation
        rotating |= {k, k + 1}
    for i in range(n):
        if i not in rotating:
            a[i, i] = -(1.0 + np.abs(a[i]).sum())
    rhs = []
    for i in range(n):
        terms = [float(a[i, j]) * y[j] for j in np.nonzero(a[i])[0]]
        if i not in rotating:
            j = (i * 7 + 3) % n
            terms.append(-p[i % 8] * y[i] * y[j] / 10)
        rhs.append(sp.Add(*terms))
    system = OdeSystem.from_expressions(rhs, time_symbol(), y, p, name=f"random_sparse_{seed}")
    return system, rng.uniform(0.5, 1.5, n), rng.uniform(0.5, 2.0, 8)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])  # -m slow: 1
def test_random_sparse_systems_of_size_200_agree(seed):
    system, y0, params = random_sparse_system(200, 0.03, seed, rotation=2.0)
    assert pos.solve(system, y0, [1.0], params, method="bdf").stats  # auto: sparse here
    times = np.array([0.1, 0.5, 1.0])
    compare(system, y0, times, params, adjoint=seed == 0)


def test_rotation_blocks_force_row_exchanges_in_the_sparse_factors():
    """The structurally zero diagonal of the rotating pairs: with c w >> 1 the sparse LU must
    pivot off the diagonal, and its solution still agrees with the dense path."""
    from pymc_odesens.codegen import compile_kernels
    from pymc_odesens.solvers import newton_matrix as nm
    from pymc_odesens.solvers.sparse_lu import sparse_factor_pivots
    from pymc_odesens.solvers.status import new_stats

    system, y0, params = random_sparse_system(100, 0.03, 2, rotation=1e4)
    kernels = compile_kernels(system)
    structure = nm.newton_structure(kernels, "sparse")
    values = kernels.evaluate("jac_y_values", 0.0, y0, params)
    ints, floats = nm.new_newton_factor(structure)
    ok, ints, floats = nm.factor_newton_matrix(structure, ints, floats, values, 1.0, new_stats())
    assert ok
    pivots = sparse_factor_pivots(ints)
    assert np.any(pivots != np.arange(100))  # some rows pivoted away from their column
    controls = dict(method="bdf", relative_tolerance=RTOL, absolute_tolerance=ATOL)
    sparse = pos.solve(system, y0, [0.002], params, linear_solver="sparse", **controls)
    dense = pos.solve(system, y0, [0.002], params, linear_solver="dense", **controls)
    assert_same_result(sparse.y, dense.y, same_steps(sparse.stats, dense.stats), "solve")


def test_mass_action_network_of_100_species_agrees_and_auto_is_sparse():
    system = mass_action_network(100)
    times = np.array([10.0, 50.0, 100.0])
    from pymc_odesens.codegen import compile_kernels
    from pymc_odesens.solvers.newton_matrix import newton_structure, structure_kind

    assert structure_kind(newton_structure(compile_kernels(system), "auto")) == "sparse"
    dense = run_routes(system, system.x0, times, system.p_nominal, 0.0, "dense", adjoint=False)
    sparse = run_routes(system, system.x0, times, system.p_nominal, 0.0, "auto", adjoint=False)
    for route, (value, stats) in dense.items():
        value_sparse, stats_sparse = sparse[route]
        assert_same_result(value_sparse, value, same_steps(stats_sparse, stats), route)
