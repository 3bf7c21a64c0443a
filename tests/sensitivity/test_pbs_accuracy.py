"""Accuracy of the Peano–Baker-series sensitivities (pbs, pbsr, exp) against exact values.

- Exp is exact (to rounding) for a linear system with constant Jacobians, whatever the
  solver's steps, including a singular J_y (a conservation law);
- PBS converges as O(dt_max^2) (fitted order) on linear2 and chua;
- PBSR on pka at the paper's tolerances (rtol 1e-5, atol 1e-6) is within a few percent of
  the ground truth and at least 10x more accurate than Exp;
- every solver can record the state trajectory; wrt="y0"/"both" and y0(p) systems.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.linalg import expm

from pymc_odesens import OdeSystem, solve_sensitivity
from tests.conftest import load_truth, model_path

METHODS = ("bdf", "adams", "rk45", "ckrk")


def relative_error(value, truth) -> float:
    return float(np.abs(value - truth).max() / np.abs(truth).max())


def frobenius_errors(value, truth) -> np.ndarray:
    """Per output time ``||S - S_truth||_F / ||S_truth||_F`` (the paper's measure), t > t0."""
    diff = np.linalg.norm((value - truth).reshape(len(truth), -1), axis=1)
    size = np.linalg.norm(truth.reshape(len(truth), -1), axis=1)
    return diff[1:] / size[1:]


def reference(name: str):
    spec = json.loads(model_path(name).read_text())
    return np.array(spec["x0"], float), np.array(spec["p_nominal"], float), load_truth(name)


# ---------------------------------------------------------------- linear, constant Jacobians
# y' = A y + C p with constant A (N x N) and C (N x P): S(t) = t phi_1(tA) C exactly,
# dy(t)/dy0 = exp(tA). A2 has columns summing to zero (conserved total): singular.
A1 = np.array([[-2.0, 0.5, 0.0], [0.3, -1.0, 0.2], [0.0, 0.4, -0.7]])
A2 = np.array([[-1.0, 0.5, 0.0], [1.0, -1.5, 2.0], [0.0, 1.0, -2.0]])
C = np.array([[1.0, 0.0, -0.5, 0.0], [0.0, 2.0, 0.0, 0.0], [0.3, 0.0, 0.0, -1.0]])


def linear_system(a: np.ndarray, name: str) -> OdeSystem:
    def rhs(t, y, p):
        return [
            sum(float(a[i, j]) * y[j] for j in range(3))
            + sum(float(C[i, k]) * p[k] for k in range(4))
            for i in range(3)
        ]

    return OdeSystem(rhs, states=["u", "v", "w"], params=["a", "b", "c", "d"], name=name)


def exact_linear(a: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s_p, s_y0 = [], []
    for t in times:
        aug = np.zeros((7, 7))
        aug[:3, :3] = t * a
        aug[:3, 3:] = t * C
        big = expm(aug)
        s_p.append(big[:3, 3:])
        s_y0.append(big[:3, :3])
    return np.array(s_p), np.array(s_y0)


@pytest.mark.parametrize(("a", "name"), [(A1, "pbs_linear_regular"), (A2, "pbs_linear_singular")])
@pytest.mark.parametrize("method", METHODS)
def test_exp_is_exact_for_constant_jacobians(a, name, method):
    if name.endswith("singular"):
        assert abs(np.linalg.det(a)) < 1e-12
    system = linear_system(a, name)
    times = np.linspace(0.0, 8.0, 9)
    result = solve_sensitivity(
        system,
        [1.0, -0.5, 2.0],
        times,
        [0.4, -1.0, 0.7, 0.2],
        method=method,
        sensitivity="exp",
        wrt="both",
        relative_tolerance=1e-3,  # loose on purpose: the Exp step does not depend on it
        absolute_tolerance=1e-3,
    )
    s_p, s_y0 = exact_linear(a, times)
    assert relative_error(result.S, s_p) < 1e-11
    assert relative_error(result.S_y0, s_y0) < 1e-11
    assert result.pbs_steps.counts()["exp"] == len(result.pbs_steps) > 1


def test_pbs_is_not_exact_for_constant_jacobians():
    """The PBS step (a truncated series) is an approximation even when Exp is exact."""
    system = linear_system(A1, "pbs_linear_regular")
    times = np.linspace(0.0, 8.0, 9)
    result = solve_sensitivity(
        system, [1.0, -0.5, 2.0], times, [0.4, -1.0, 0.7, 0.2], sensitivity="pbs"
    )
    s_p, _ = exact_linear(A1, times)
    assert 1e-9 < relative_error(result.S, s_p) < 1e-2


# ---------------------------------------------------------------- PBS: O(dt_max^2)
@pytest.mark.parametrize(
    ("name", "steps"),
    [("linear2", [0.02, 0.01, 0.005, 0.0025]), ("chua", [0.004, 0.002, 0.001, 0.0005])],
)
def test_pbs_error_is_second_order_in_the_largest_step(reference_system, name, steps):
    # the state is solved tightly (its error ~1e-9 is far below PBS's); max_step splits every
    # solver step into equal PBS steps of at most that length, states from rk45's dense output
    system = reference_system(name)
    y0, p, truth = reference(name)
    errors, dt_max = [], []
    for h in steps:
        result = solve_sensitivity(
            system,
            y0,
            truth["t"],
            p,
            method="rk45",
            sensitivity="pbs",
            relative_tolerance=1e-10,
            absolute_tolerance=1e-12,
            pbs_options={"max_step": h},
        )
        report = result.pbs_steps
        dt_max.append(float((np.diff(report.t) / report.substeps).max()))
        errors.append(relative_error(result.S, truth["S"]))
    order = np.polyfit(np.log(dt_max), np.log(errors), 1)[0]
    assert 1.8 < order < 2.2, (order, errors, dt_max)
    assert errors[-1] < 1e-5


# ---------------------------------------------------------------- pka, the paper's evidence
@pytest.fixture(scope="module")
def pka_runs(reference_system):
    system = reference_system("pka")
    y0, p, truth = reference("pka")
    runs = {}
    for label, sensitivity, options in [
        ("pbsr", "pbsr", None),
        ("pbsr_published", "pbsr", {"exp_step": "start"}),
        ("exp", "exp", None),
    ]:
        runs[label] = solve_sensitivity(
            system,
            y0,
            truth["t"],
            p,
            method="bdf",
            sensitivity=sensitivity,
            relative_tolerance=1e-5,
            absolute_tolerance=1e-6,
            pbs_options=options,
        )
    return runs, truth


def test_pka_pbsr_within_a_few_percent_and_10x_better_than_exp(pka_runs):
    runs, truth = pka_runs
    err_pbsr = frobenius_errors(runs["pbsr"].S, truth["S"]).max()
    err_exp = frobenius_errors(runs["exp"].S, truth["S"]).max()
    assert err_pbsr < 0.02
    assert err_exp > 10.0 * err_pbsr, (err_pbsr, err_exp)
    assert relative_error(runs["pbsr"].y, truth["y"]) < 1e-3


def test_pka_published_pbsr_switch_is_only_as_accurate_as_exp(pka_runs):
    """With the paper's Exp step (Jacobians at t_k), PBSR on these solver steps is no better
    than Exp: most steps take the Exp branch (n_int > 10). The trapezoidal default is."""
    runs, truth = pka_runs
    err_published = frobenius_errors(runs["pbsr_published"].S, truth["S"]).max()
    err_exp = frobenius_errors(runs["exp"].S, truth["S"]).max()
    err_default = frobenius_errors(runs["pbsr"].S, truth["S"]).max()
    assert err_published > 0.5 * err_exp
    assert err_published > 10.0 * err_default
    counts = runs["pbsr_published"].pbs_steps.counts()
    assert counts["exp_substep_limit"] > counts["pbs_refined"] > 0


# ---------------------------------------------------------------- every solver, wrt, y0(p)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("interpolation", ["dense", "hermite", "linear"])
def test_pbsr_with_every_solver_and_interpolation(reference_system, method, interpolation):
    system = reference_system("chua")
    y0, p, truth = reference("chua")
    result = solve_sensitivity(
        system,
        y0,
        truth["t"],
        p,
        method=method,
        sensitivity="pbsr",
        relative_tolerance=1e-8,
        absolute_tolerance=1e-10,
        pbs_options={"interpolation": interpolation},
    )
    assert relative_error(result.S, truth["S"]) < 3e-3
    assert relative_error(result.y, truth["y"]) < 1e-5
    assert result.stats["n_pbs_substeps"] > result.stats["n_steps"]


@pytest.mark.parametrize("sensitivity", ["pbs", "pbsr", "exp"])
def test_state_transition_matrix_and_both(reference_system, sensitivity):
    system = reference_system("lotka_volterra")
    y0, p, truth = reference("lotka_volterra")
    times = truth["t"][:21]
    options = {"max_step": 0.01}
    forward = solve_sensitivity(
        system, y0, times, p, wrt="both", relative_tolerance=1e-10, absolute_tolerance=1e-12
    )
    both = solve_sensitivity(
        system,
        y0,
        times,
        p,
        method="rk45",
        sensitivity=sensitivity,
        wrt="both",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
        pbs_options=options,
    )
    only_y0 = solve_sensitivity(
        system,
        y0,
        times,
        p,
        method="rk45",
        sensitivity=sensitivity,
        wrt="y0",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
        pbs_options=options,
    )
    assert both.S.shape == forward.S.shape and both.S_y0.shape == forward.S_y0.shape
    tol = 3e-2 if sensitivity == "exp" else 2e-4  # Exp (Jacobians at t_k) is first order
    assert relative_error(both.S, forward.S) < tol
    assert relative_error(both.S_y0, forward.S_y0) < tol
    np.testing.assert_allclose(only_y0.S, both.S_y0, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(both.S_y0[0], np.eye(system.n_states))


def test_initial_state_from_parameters():
    def rhs(t, y, p):
        return [-p[0] * y[0] + p[1] * y[1], p[0] * y[0] - (p[1] + p[2]) * y[1]]

    system = OdeSystem(
        rhs,
        states=["a", "b"],
        params=["k1", "k2", "k3"],
        name="pbs_y0_of_p",
        initial_state=lambda p: [p[0], 2.0 * p[2]],
    )
    times = np.linspace(0.0, 4.0, 9)
    p = [1.0, 0.5, 0.2]
    forward = solve_sensitivity(
        system, None, times, p, relative_tolerance=1e-10, absolute_tolerance=1e-12
    )
    result = solve_sensitivity(
        system,
        None,
        times,
        p,
        sensitivity="pbsr",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    )
    np.testing.assert_allclose(result.S[0], [[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    assert relative_error(result.S, forward.S) < 1e-3
