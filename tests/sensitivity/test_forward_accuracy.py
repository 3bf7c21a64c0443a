"""Forward sensitivities against ground truth, closed forms and finite differences.

Ground truth: ``shared/models/<name>_truth.npz`` (Radau on the augmented system at
rtol 1e-10, or the exact closed form for linear2). Errors are measured per column of
``S`` (see ``tests/sensitivity/accuracy.py``). The bounds below are the measured errors
times a margin of about 10 (the numbers are listed in docs/sensitivities.md); every one
of them is below the 1e-4 that the issue asks for at rtol 1e-8.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import sympy as sp

from pymc_odesens import solve_sensitivity
from tests.conftest import load_truth
from tests.sensitivity.accuracy import (
    column_errors,
    entry_excess,
    fd_initial_state,
    fd_params,
    worst_column_error,
)
from tests.solvers.accuracy import scaled_error

ALL = ("rk45", "ckrk", "bdf", "adams")
STIFF = ("bdf", "adams")

# (model, methods, atol at rtol 1e-8, bound on the worst column error of S, bound on y)
CASES = [
    ("linear2", ALL, 1e-10, 2e-7, 1e-6),
    ("lotka_volterra", ALL, 1e-10, 5e-6, 1e-5),
    ("chua", ALL, 1e-10, 5e-6, 2e-5),
    ("pka", STIFF, 1e-12, 2e-5, 3e-5),
    ("robertson", STIFF, 1e-12, 3e-6, 1e-5),
]
CASE_PARAMS = [(n, m, a, b, yb) for n, ms, a, b, yb in CASES for m in ms]


def _solve_truth_case(system, truth, method, rtol, atol, **kwargs):
    return solve_sensitivity(
        system,
        truth["y"][0],
        truth["t"],
        system.p_nominal,
        t0=system.t0,
        method=method,
        relative_tolerance=rtol,
        absolute_tolerance=atol,
        **kwargs,
    )


@pytest.mark.parametrize(("name", "method", "atol", "bound", "y_bound"), CASE_PARAMS)
def test_S_matches_ground_truth(reference_system, name, method, atol, bound, y_bound):
    """rtol 1e-8: every column of S within ``bound`` (<= 1e-4) of the truth, relative to
    that column's largest magnitude."""
    system = reference_system(name)
    truth = load_truth(name)
    result = _solve_truth_case(system, truth, method, 1e-8, atol)
    assert result.S.shape == truth["S"].shape
    np.testing.assert_array_equal(result.t, truth["t"])
    assert scaled_error(result.y, truth["y"]) < y_bound
    errors = column_errors(result.S, truth["S"])
    assert errors.max() < bound <= 1e-4, (errors.argmax(), errors.max())


@pytest.mark.parametrize(("name", "method", "atol", "bound", "y_bound"), CASE_PARAMS)
def test_entries_near_atol_are_accurate_in_absolute_terms(
    reference_system, name, method, atol, bound, y_bound
):
    """Per entry (state, parameter): error <= 1e-4 * max|S_ik| + 20 atol.

    As in Stan and CVODES, the sensitivities share the states' absolute tolerance, so an
    entry whose magnitude is near or below atol is only determined to within a few atol
    (pka with adams at 1e-8 / 1e-12: dPKAc/dp0 peaks at 5e-11 and is off by 5e-13, 1%;
    its error and that of a few other small entries is up to 4.1 atol). robertson's
    dy2/dk2 (<= 6e-13, below atol) happens to be accurate to 1e-7 relative, but nothing
    in the error control promises that. The relative part is the 1e-4 of the issue; the
    absolute part is the measured 4.1 atol with a margin of 5.
    """
    system = reference_system(name)
    truth = load_truth(name)
    result = _solve_truth_case(system, truth, method, 1e-8, atol)
    excess = entry_excess(result.S, truth["S"], relative=1e-4)
    worst = np.unravel_index(excess.argmax(), excess.shape)
    assert excess.max() <= 20 * atol, (worst, excess.max() / atol)


def _linear2_closed_form(p0: float, p1: float, t: np.ndarray):
    """y(t) and S(t) of linear2 from its closed form (y(0) = (1, 1), p0 != p1)."""
    a, b, s = sp.symbols("a b s", positive=True)
    y = [
        sp.exp(-a * s) + b / (a - b) * (sp.exp(-b * s) - sp.exp(-a * s)),
        sp.exp(-b * s),
    ]
    jac = [[sp.diff(yi, q) for q in (a, b)] for yi in y]
    y_fn = sp.lambdify((s, a, b), y, "numpy")
    s_fn = sp.lambdify((s, a, b), jac, "numpy")
    y_val = np.stack([np.broadcast_to(v, t.shape) for v in y_fn(t, p0, p1)], axis=-1)
    s_val = np.stack(
        [np.stack([np.broadcast_to(v, t.shape) for v in row], axis=-1) for row in s_fn(t, p0, p1)],
        axis=1,
    )
    return y_val, s_val


@pytest.mark.parametrize("method", ALL)
def test_linear2_closed_form(reference_system, method):
    """S of linear2 against its closed form differentiated by sympy (not the truth file)."""
    system = reference_system("linear2")
    t = np.linspace(0.0, 5.0, 41)
    p0, p1 = system.p_nominal
    y_exact, s_exact = _linear2_closed_form(p0, p1, t)
    result = solve_sensitivity(
        system,
        [1.0, 1.0],
        t,
        [p0, p1],
        method=method,
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    )
    np.testing.assert_allclose(result.y, y_exact, rtol=0, atol=1e-8)
    # measured: largest error 1.5e-10 (bdf); |S| <= 0.74
    np.testing.assert_allclose(result.S, s_exact, rtol=0, atol=2e-9)
    np.testing.assert_array_equal(result.S[0], 0.0)  # y0 does not depend on p


@pytest.mark.parametrize("method", ALL)
def test_linear2_state_transition_matrix_is_expm(reference_system, method):
    """linear2 is y' = A y: the state-transition matrix is exactly expm(A t)."""
    system = reference_system("linear2")
    p0, p1 = system.p_nominal
    a_mat = np.array([[-p0, p1], [0.0, -p1]])
    t = np.linspace(0.0, 5.0, 21)
    y0 = np.array([0.3, -2.0])
    result = solve_sensitivity(
        system,
        y0,
        t,
        [p0, p1],
        method=method,
        wrt="y0",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    )
    exact = np.stack([scipy.linalg.expm(a_mat * tk) for tk in t])
    # measured: largest error 1.0e-10 in Phi, 2.2e-10 in y (bdf)
    assert result.S.shape == (t.size, 2, 2)
    np.testing.assert_allclose(result.S, exact, rtol=0, atol=2e-9)
    np.testing.assert_allclose(result.y, exact @ y0, rtol=0, atol=2e-9)


# central differences of `solve` (plain ODE at rtol 1e-12): (model, FD method, columns,
# sensitivity methods, bound). The differences are dominated by the FD truncation error
# (FD vs the truth file shows the same numbers): measured 1.5e-6 (lotka_volterra, alpha),
# 3.3e-7 (chua), 4.4e-8 (pka), 2.6e-8 (robertson).
FD_CASES = [
    ("lotka_volterra", "rk45", (0, 1, 2, 3), ("rk45", "ckrk"), 1e-5),
    ("chua", "rk45", (0, 1), ("rk45", "ckrk"), 3e-6),
    ("pka", "bdf", (5, 8, 10, 31), STIFF, 2e-7),
    ("robertson", "bdf", (0, 1, 2), STIFF, 3e-7),
]


@pytest.fixture(scope="module")
def finite_differences(reference_system):
    cache = {}

    def get(name, fd_method, columns):
        key = (name, fd_method, columns)
        if key not in cache:
            system = reference_system(name)
            truth = load_truth(name)
            cache[key] = fd_params(
                system,
                truth["y"][0],
                truth["t"],
                system.p_nominal,
                columns,
                t0=system.t0,
                method=fd_method,
            )
        return cache[key]

    return get


@pytest.mark.parametrize(
    ("name", "fd_method", "columns", "method", "bound"),
    [(n, f, c, m, b) for n, f, c, ms, b in FD_CASES for m in ms],
)
def test_S_matches_finite_differences_of_solve(
    reference_system, finite_differences, name, fd_method, columns, method, bound
):
    system = reference_system(name)
    truth = load_truth(name)
    atol = 1e-12 if name in ("lotka_volterra", "chua") else 1e-14
    result = solve_sensitivity(
        system,
        truth["y"][0],
        truth["t"],
        system.p_nominal,
        t0=system.t0,
        method=method,
        relative_tolerance=1e-10,
        absolute_tolerance=atol,
    )
    fd = finite_differences(name, fd_method, columns)
    assert worst_column_error(result.S[:, :, list(columns)], fd) < bound


# measured: lotka_volterra 5.8e-9, chua 6.3e-9, pka 7.4e-7 (FD truncation; bdf and adams
# agree with each other to 1e-8 there)
STM_CASES = [
    ("lotka_volterra", "rk45", ALL, 1e-7),
    ("chua", "rk45", ALL, 1e-7),
    ("pka", "bdf", STIFF, 5e-6),
]


@pytest.mark.parametrize(
    ("name", "fd_method", "method", "bound"),
    [(n, f, m, b) for n, f, ms, b in STM_CASES for m in ms],
)
def test_state_transition_matrix_matches_finite_differences(
    reference_system, name, fd_method, method, bound
):
    system = reference_system(name)
    truth = load_truth(name)
    y0 = truth["y"][0]
    atol = 1e-12 if name in ("lotka_volterra", "chua") else 1e-14
    result = solve_sensitivity(
        system,
        y0,
        truth["t"],
        system.p_nominal,
        t0=system.t0,
        method=method,
        wrt="y0",
        relative_tolerance=1e-10,
        absolute_tolerance=atol,
    )
    n = system.n_states
    assert result.S.shape == (truth["t"].size, n, n)
    assert result.S_y0 is None
    np.testing.assert_array_equal(result.S[0], np.eye(n))
    fd = fd_initial_state(system, y0, truth["t"], system.p_nominal, t0=system.t0, method=fd_method)
    assert worst_column_error(result.S, fd) < bound


CONVERGENCE = [
    ("linear2", "bdf"),
    ("lotka_volterra", "rk45"),
    ("lotka_volterra", "ckrk"),
    ("lotka_volterra", "bdf"),
    ("lotka_volterra", "adams"),
    ("chua", "rk45"),
    ("chua", "ckrk"),
    ("pka", "bdf"),
    ("robertson", "bdf"),
]
STIFF_MODELS = ("pka", "robertson")


def _convergence_errors(system, truth, method, tolerances, atol_ratio):
    errors = []
    for tol in tolerances:
        result = _solve_truth_case(system, truth, method, tol, tol * atol_ratio)
        errors.append(worst_column_error(result.S, truth["S"]))
    return errors


@pytest.mark.parametrize(("name", "method"), CONVERGENCE)
def test_S_error_falls_with_tolerance(reference_system, name, method):
    """Each 100x tighter tolerance buys at least a 10x smaller error in S (measured:
    20x to 300x)."""
    system = reference_system(name)
    truth = load_truth(name)
    ratio = 1e-4 if name in STIFF_MODELS else 1e-2
    errors = _convergence_errors(system, truth, method, (1e-5, 1e-7, 1e-9), ratio)
    assert errors[1] < errors[0] / 10, errors
    assert errors[2] < errors[1] / 10, errors


def test_S_error_falls_with_tolerance_adams_on_stiff_pka(reference_system):
    """adams on pka (eigenvalues down to -44) works at its stability boundary, where the
    error from one tolerance to the next is erratic (measured worst column errors at rtol
    1e-5, 1e-7, 1e-9, 1e-11: 2.5e-4, 2.8e-7, 7.5e-8, 5.3e-10), so 10x per 100x does not
    hold at every step of the sweep; the error stays below 100 x rtol at each tolerance
    and falls by more than 1e5 over the sweep."""
    system = reference_system("pka")
    truth = load_truth("pka")
    tolerances = (1e-5, 1e-7, 1e-9, 1e-11)
    errors = _convergence_errors(system, truth, "adams", tolerances, 1e-4)
    for tol, error in zip(tolerances, errors):
        assert error < 100 * tol, errors
    assert errors[-1] < errors[0] / 1e5, errors


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "method"),
    [(n, m) for n in ("linear2", "lotka_volterra", "chua") for m in ALL]
    + [("pka", "bdf"), ("pka", "adams"), ("robertson", "bdf")],
)
def test_S_convergence_sweep(reference_system, name, method):
    """Five tolerance levels (1e-4 ... 1e-12): the error in S decreases monotonically
    down to the accuracy of the truth itself and falls by at least 1e4 overall."""
    system = reference_system(name)
    truth = load_truth(name)
    stiff = name in STIFF_MODELS
    errors = _convergence_errors(
        system, truth, method, (1e-4, 1e-6, 1e-8, 1e-10, 1e-12), 1e-4 if stiff else 1e-2
    )
    # the truth's own accuracy: exact (linear2), DOP853 cross-checks 3e-12 and 1e-11
    # (lotka_volterra, chua), Radau/BDF cross-checks 4e-11 and 2e-10 (pka, robertson)
    truth_floor = 1e-9 if stiff else 1e-11
    for coarse, fine in zip(errors, errors[1:]):
        assert fine < coarse or fine < truth_floor, errors
    assert errors[-1] < 1e-4 * errors[0] or errors[-1] < truth_floor, errors
