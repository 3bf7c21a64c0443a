"""Steady states: closed forms, sensitivities (implicit, integrated, adjoint), failures."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from pymc_odesens import (
    ExplicitEvent,
    OdeSystem,
    SteadyStateNotReachedError,
    SteadyStateSingularError,
    solve_sensitivity,
    steady_state,
)
from pymc_odesens import math as om

# ---------------------------------------------------------------- systems with closed forms

A_BASE = np.array([[-2.0, 1.0, 0.0], [0.5, -3.0, 1.0], [0.0, 1.0, -1.5]])


def linear_system() -> OdeSystem:
    """``y' = A(p) y + b(p)``: ``A = A_BASE`` with ``A[0, 0] = -p0``, ``b = p[1:4]``."""

    def rhs(t, y, p):
        a = [[-p[0], 1.0, 0.0], [0.5, -3.0, 1.0], [0.0, 1.0, -1.5]]
        return [sum(a[i][j] * y[j] for j in range(3)) + p[1 + i] for i in range(3)]

    return OdeSystem(rhs, 3, 4, name="linear")


LINEAR_P = np.array([2.0, 1.0, 2.0, 0.5])


def linear_closed_form(p):
    a = A_BASE.copy()
    a[0, 0] = -p[0]
    b = p[1:]
    y = -np.linalg.solve(a, b)
    s = np.zeros((3, 4))
    d_a = np.zeros((3, 3))
    d_a[0, 0] = -1.0
    s[:, 0] = -np.linalg.solve(a, d_a @ y)
    s[:, 1:] = -np.linalg.inv(a)
    return y, s


def binding_system() -> OdeSystem:
    """E + S <-> C (mass action); A -> B, B -> A catalysed by C. Laws: E + C, S + C, A + B."""

    def rhs(t, y, p):
        e, s, c, a, b = y
        v1 = p.kf * e * s - p.kr * c
        v2 = p.k1 * a - p.k2 * c * b
        return [-v1, -v1, v1, -v2, v2]

    return OdeSystem(
        rhs, states=["E", "S", "C", "A", "B"], params=["kf", "kr", "k1", "k2"], name="binding"
    )


BINDING_P = np.array([2.0, 1.0, 0.5, 3.0])
BINDING_Y0 = np.array([1.0, 2.0, 0.25, 1.5, 0.0])


def binding_closed_form(p, y0):
    """y*, dy*/dp and dy*/dy0 from the quadratic of the binding equilibrium (sympy)."""
    ys = sp.symbols("E0 S0 C0 A0 B0")
    ps = sp.symbols("kf kr k1 k2")
    total_e, total_s, total_ab = ys[0] + ys[2], ys[1] + ys[2], ys[3] + ys[4]
    big = total_e + total_s + ps[1] / ps[0]
    c = (big - sp.sqrt(big**2 - 4 * total_e * total_s)) / 2
    b = ps[2] * total_ab / (ps[2] + ps[3] * c)
    y_star = sp.Matrix([total_e - c, total_s - c, c, total_ab - b, b])
    values = dict(zip(ys, y0)) | dict(zip(ps, p))

    def numeric(m):
        return np.array(m.subs(values).evalf(30).tolist(), dtype=float)

    return (
        numeric(y_star).ravel(),
        numeric(y_star.jacobian(ps)),
        numeric(y_star.jacobian(ys)),
    )


@pytest.fixture(scope="module")
def binding():
    return binding_system()


# ---------------------------------------------------------------- closed forms


@pytest.mark.parametrize("method", ["auto", "newton", "integration"])
def test_linear_closed_form(method):
    y_true, s_true = linear_closed_form(LINEAR_P)
    result = steady_state(linear_system(), np.zeros(3), LINEAR_P, method=method)
    np.testing.assert_allclose(result.y, y_true, rtol=1e-9)
    np.testing.assert_allclose(result.S, s_true, rtol=1e-9)
    np.testing.assert_array_equal(result.S_y0, np.zeros((3, 3)))  # no laws: y0 does not matter
    assert result.residual_norm < 1.0
    expected_route = {"auto": "newton", "newton": "newton"}.get(method)
    if expected_route:
        assert result.route == expected_route
        assert result.stats["n_newton_iterations"] == 1  # a linear system: one Newton step
        assert result.stats["n_integration_steps"] == 0
    else:
        assert result.route == "integration"
        assert result.stats["n_newton_iterations"] == 0
        assert result.stats["n_integration_steps"] > 0 and result.t > 0.0


def test_residual_test_is_the_weighted_rms_norm():
    # a start within the tolerances of the steady state passes the test as it is
    y_true, _ = linear_closed_form(LINEAR_P)
    y0 = y_true + np.array([1e-9, -2e-9, 1e-9])
    result = steady_state(
        linear_system(), y0, LINEAR_P, relative_tolerance=1e-6, absolute_tolerance=1e-8
    )
    assert result.stats["n_newton_iterations"] == 0 and result.route == "newton"
    np.testing.assert_array_equal(result.y, y0)
    a = A_BASE.copy()
    a[0, 0] = -LINEAR_P[0]
    f = a @ y0 + LINEAR_P[1:]
    weights = 1.0 / (1e-8 + 1e-6 * np.abs(y0))
    expected = np.sqrt(np.mean((f * weights) ** 2))
    assert 1e-4 < expected < 1.0
    np.testing.assert_allclose(result.residual_norm, expected, rtol=1e-5)


def test_integration_error_shrinks_with_tolerance():
    y_true, _ = linear_closed_form(LINEAR_P)
    errors = [
        np.abs(
            steady_state(
                linear_system(),
                np.zeros(3),
                LINEAR_P,
                method="integration",
                relative_tolerance=tol,
                absolute_tolerance=tol,
            ).y
            - y_true
        ).max()
        for tol in (1e-5, 1e-8)
    ]
    # |y - y*| <= |A^-1| |f| and the test bounds |f| by about atol + rtol |y|
    assert errors[0] < 10 * 1e-5 * (1 + np.abs(y_true).max())
    assert errors[1] < 10 * 1e-8 * (1 + np.abs(y_true).max())
    assert errors[1] < errors[0]


def test_binding_network_closed_form(binding):
    y_true, s_true, s_y0_true = binding_closed_form(BINDING_P, BINDING_Y0)
    result = steady_state(binding, BINDING_Y0, BINDING_P)
    assert result.route == "newton"
    assert result.conservation_laws.n_laws == 3
    np.testing.assert_allclose(result.y, y_true, rtol=1e-10)
    np.testing.assert_allclose(result.S, s_true, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(result.S_y0, s_y0_true, rtol=1e-8, atol=1e-12)
    # the steady state keeps the totals of the initial state
    laws = result.conservation_laws
    np.testing.assert_allclose(laws.totals(result.y), laws.totals(BINDING_Y0), rtol=1e-14)


def test_binding_sensitivities_against_central_differences(binding):
    result = steady_state(binding, BINDING_Y0, BINDING_P)
    h = 1e-6

    def central(shift_p, shift_y0):
        plus = steady_state(binding, BINDING_Y0 + shift_y0, BINDING_P + shift_p, sensitivity="none")
        minus = steady_state(
            binding, BINDING_Y0 - shift_y0, BINDING_P - shift_p, sensitivity="none"
        )
        return (plus.y - minus.y) / (2 * h)

    fd_p = np.column_stack([central(h * e, 0.0) for e in np.eye(4)])
    fd_y0 = np.column_stack([central(0.0, h * e) for e in np.eye(5)])
    np.testing.assert_allclose(result.S, fd_p, atol=1e-8)
    np.testing.assert_allclose(result.S_y0, fd_y0, atol=1e-8)


def test_binding_sensitivities_against_long_forward_integration(binding):
    result = steady_state(binding, BINDING_Y0, BINDING_P)
    long = solve_sensitivity(
        binding,
        BINDING_Y0,
        [200.0],
        BINDING_P,
        wrt="both",
        relative_tolerance=1e-12,
        absolute_tolerance=1e-12,
    )
    np.testing.assert_allclose(long.y[0], result.y, rtol=1e-9)
    np.testing.assert_allclose(long.S[0], result.S, atol=1e-8)
    np.testing.assert_allclose(long.S_y0[0], result.S_y0, atol=1e-8)


def test_integrated_sensitivities_agree_with_implicit(binding):
    implicit = steady_state(binding, BINDING_Y0, BINDING_P)
    integrated = steady_state(binding, BINDING_Y0, BINDING_P, sensitivity="integration")
    assert integrated.route == "integration"
    assert integrated.sensitivity == "integration"
    np.testing.assert_allclose(integrated.y, implicit.y, rtol=1e-9)
    np.testing.assert_allclose(integrated.S, implicit.S, atol=1e-8)
    np.testing.assert_allclose(integrated.S_y0, implicit.S_y0, atol=1e-8)


def test_adjoint_equals_forward(binding):
    result = steady_state(binding, BINDING_Y0, BINDING_P)
    rng = np.random.default_rng(3)
    for _ in range(3):
        w = rng.normal(size=5)
        gradient = result.vjp(w)
        np.testing.assert_allclose(gradient.params, result.S.T @ w, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gradient.y0, result.S_y0.T @ w, rtol=1e-12, atol=1e-14)
    integrated = steady_state(binding, BINDING_Y0, BINDING_P, sensitivity="integration")
    np.testing.assert_allclose(integrated.vjp(w).params, gradient.params, atol=1e-8)


def test_initial_state_from_parameters_adds_its_path():
    # y0(p): the enzyme total is a parameter; dy*/dp includes d(total)/dp
    def rhs(t, y, p):
        v = p.kf * y.E * y.S - p.kr * y.C
        return [-v, -v, v]

    system = OdeSystem(
        rhs,
        states=["E", "S", "C"],
        params=["kf", "kr", "E_total"],
        initial_state=lambda p: [p.E_total, 2.0, 0.0],
    )
    p = np.array([2.0, 1.0, 1.5])
    result = steady_state(system, None, p)
    h = 1e-6
    fd = np.column_stack(
        [
            (steady_state(system, None, p + h * e).y - steady_state(system, None, p - h * e).y)
            / (2 * h)
            for e in np.eye(3)
        ]
    )
    np.testing.assert_allclose(result.S, fd, atol=1e-8)
    assert abs(result.S[2, 2]) > 0.1  # the path through y0(p) matters
    w = np.array([0.3, -1.0, 2.0])
    np.testing.assert_allclose(result.vjp(w).params, result.S.T @ w, rtol=1e-12)


# ---------------------------------------------------------------- routes and failures


def cubic_system() -> OdeSystem:
    """y' = k (1 - y^3): J_y = 0 at y = 0, the steady state y* = 1."""
    return OdeSystem(lambda t, y, p: [p[0] * (1 - y[0] ** 3)], 1, 1, name="cubic")


def test_newton_fails_and_integration_succeeds():
    result = steady_state(cubic_system(), [0.0], [1.0])
    np.testing.assert_allclose(result.y, [1.0], rtol=1e-9)  # |f| = 3 |y - 1| < 2e-10
    y = result.y[0]  # implicit function theorem at the computed y*: -(df/dk) / (df/dy)
    np.testing.assert_allclose(result.S, [[(1 - y**3) / (3 * y**2)]], rtol=1e-6, atol=1e-16)
    assert result.route == "integration+newton"
    assert result.stats["n_newton_attempts"] == 2  # from y0 (singular), then after a horizon
    assert result.stats["n_horizons"] >= 1
    assert result.stats["n_integration_steps"] > 0
    assert result.t > 0.0
    with pytest.raises(SteadyStateNotReachedError, match="Newton: singular Jacobian") as info:
        steady_state(cubic_system(), [0.0], [1.0], method="newton")
    assert info.value.residual_norm > 1.0 and info.value.t == 0.0
    assert info.value.stats["n_newton_iterations"] == 1


def test_damping_and_nonnegative_states():
    # roots -2, 1, 5; the full Newton step from 3 lands exactly on -2
    system = OdeSystem(lambda t, y, p: [-(y[0] + 2) * (y[0] - 1) * (y[0] - p[0])], 1, 1)
    free = steady_state(system, [3.0], [5.0], method="newton")
    np.testing.assert_allclose(free.y, [-2.0], atol=1e-12)
    assert free.stats["n_damping_steps"] == 0
    kept = steady_state(system, [3.0], [5.0], method="newton", nonnegative=True)
    assert kept.y[0] > 0.0 and min(abs(kept.y[0] - 1.0), abs(kept.y[0] - 5.0)) < 1e-10
    assert kept.stats["n_damping_steps"] >= 1


def test_oscillator_gives_the_named_error_quickly():
    lotka_volterra = OdeSystem(
        lambda t, y, p: [p[0] * y[0] - p[1] * y[0] * y[1], p[2] * y[0] * y[1] - p[3] * y[1]],
        2,
        4,
        name="lotka_volterra",
    )
    with pytest.raises(SteadyStateNotReachedError, match="budget of max_num_steps = 2000") as info:
        steady_state(
            lotka_volterra,
            [1.0, 1.0],
            [1.5, 1.0, 1.0, 3.0],
            method="integration",
            max_num_steps=2000,
        )
    error = info.value
    assert error.residual_norm > 1.0
    assert np.isfinite(error.t) and error.t > 0.0
    assert error.stats["n_integration_steps"] == 2000
    with pytest.raises(SteadyStateNotReachedError, match="reached max_time = 30"):
        steady_state(
            lotka_volterra, [1.0, 1.0], [1.5, 1.0, 1.0, 3.0], method="integration", max_time=30.0
        )
    # Newton (method="auto") finds the centre, a steady state that integration never reaches
    centre = steady_state(lotka_volterra, [1.0, 1.2], [1.5, 1.0, 1.0, 3.0])
    np.testing.assert_allclose(centre.y, [3.0, 1.5], rtol=1e-12)


def drift_system() -> OdeSystem:
    """``x' = k`` (no steady state) beside ``y' = 1 - y`` (settles at 1)."""
    return OdeSystem(
        lambda t, y, p: [p.k, 1.0 - y.y], states=["x", "y"], params=["k"], name="drift"
    )


@pytest.mark.parametrize(
    "method, sensitivity",
    [("auto", "implicit"), ("integration", "none"), ("auto", "integration")],
)
def test_drift_is_not_a_steady_state(method, sensitivity):
    # x = k t passes the residual test |f| < atol + rtol |x| once t > 1 / rtol: it was
    # reported as a steady state at t = 1.1e10 (singular, or with sensitivity "none" taken)
    with pytest.raises(SteadyStateNotReachedError) as info:
        steady_state(drift_system(), [1.0, 0.0], [2.0], method=method, sensitivity=sensitivity)
    error = info.value
    message = str(error)
    assert "no steady state of 'drift' reached" in message
    assert "state 'x' changed from" in message and "it drifts or grows without bound" in message
    assert "reached max_time = 1e+12" in message
    assert error.residual_norm < 1.0  # the residual test alone would have passed
    assert error.t == 1e12


def test_drift_from_a_start_that_passes_the_residual_test():
    # |f| = 1 < 1e-10 * 1e12: Newton may not take the start as converged (J_y = 0 there)
    system = OdeSystem(lambda t, y, p: [p.k], states=["x"], params=["k"], name="drift1")
    with pytest.raises(SteadyStateNotReachedError, match="Newton: singular Jacobian") as info:
        steady_state(system, [1e12], [1.0], method="newton", sensitivity="none")
    assert info.value.residual_norm < 1.0


@pytest.mark.parametrize("method", ["auto", "integration"])
@pytest.mark.parametrize(
    "rhs",
    [lambda t, y, p: [p.k / y[0]], lambda t, y, p: [p.k * om.exp(-y[0])]],
    ids=["sqrt", "log"],
)
def test_growth_without_bound_is_not_a_steady_state(rhs, method):
    # y' = 1/y (y = sqrt(2t)) and y' = exp(-y) (y = log(1 + t)): Newton's iterates run off to
    # infinity with a residual that falls below 1 (y = 131072 and 20 were reported), and
    # integration passes the residual test once rtol |y| is large
    system = OdeSystem(rhs, states=["y"], params=["k"], name="growth")
    with pytest.raises(SteadyStateNotReachedError, match="state 'y' changed from"):
        steady_state(system, [1.0], [1.0], method=method, sensitivity="none")


def test_slow_steady_states_are_reached_to_their_tolerance():
    # the residual test took y' = -1e-6 (y - 5) at y = 4.99994 and y' = -y^2 at y = 9e-6
    # (the distance to the steady state is |f| / rate, not |f|); the state must settle
    slow = OdeSystem(lambda t, y, p: [-p.k * (y[0] - 5.0)], states=["y"], params=["k"])
    result = steady_state(slow, [1.0], [1e-6], method="integration")
    assert abs(result.y[0] - 5.0) < 1e-8
    assert result.route == "integration"
    np.testing.assert_allclose(result.S, [[0.0]], atol=1e-6)  # y* = 5 whatever k
    power = OdeSystem(lambda t, y, p: [-p.k * y[0] ** 2], states=["y"], params=["k"])
    for method in ("auto", "integration"):
        result = steady_state(power, [1.0], [1.0], method=method, sensitivity="none")
        assert 0.0 <= result.y[0] < 1e-9, method


def volume_system() -> OdeSystem:
    """y0 -> y1 between compartments of volumes V1, V2: V1 y0 + V2 y1 is conserved."""
    return OdeSystem(
        lambda t, y, p: [-p.k * y[0] / p.V1, p.k * y[0] / p.V2],
        2,
        params=["k", "V1", "V2"],
        name="volumes",
    )


def test_singular_steady_state_and_integrated_sensitivities():
    system = volume_system()
    p = np.array([1.0, 2.0, 0.5])
    y0 = np.array([1.0, 0.2])
    with pytest.raises(SteadyStateSingularError, match="1 left null vector") as info:
        steady_state(system, y0, p)
    assert info.value.residual_norm < 1.0
    result = steady_state(system, y0, p, sensitivity="integration")
    k, v1, v2 = p
    total = v1 * y0[0] + v2 * y0[1]
    np.testing.assert_allclose(result.y, [0.0, total / v2], atol=1e-9)
    expected_s = np.array([[0.0, 0.0, 0.0], [0.0, y0[0] / v2, -v1 * y0[0] / v2**2]])
    np.testing.assert_allclose(result.S, expected_s, atol=1e-8)
    np.testing.assert_allclose(result.S_y0, [[0.0, 0.0], [v1 / v2, 1.0]], atol=1e-8)


def test_auto_sensitivity_integrates_where_the_jacobian_is_singular():
    """AMICI's integrateIfNewtonFails: the implicit function theorem where it applies, the
    integrated sensitivities where the Jacobian is singular (the same numbers as asking for
    them)."""
    system = volume_system()
    p = np.array([1.0, 2.0, 0.5])
    y0 = np.array([1.0, 0.2])
    result = steady_state(system, y0, p, sensitivity="auto")
    assert result.sensitivity == "integration"
    integrated = steady_state(system, y0, p, sensitivity="integration")
    np.testing.assert_allclose(result.S, integrated.S, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(result.S_y0, integrated.S_y0, rtol=1e-12, atol=1e-14)
    w = np.array([0.3, -1.2])
    np.testing.assert_allclose(result.vjp(w).params, result.S.T @ w, rtol=1e-12)
    regular = steady_state(linear_system(), np.zeros(3), LINEAR_P, sensitivity="auto")
    assert regular.sensitivity == "implicit"
    implicit = steady_state(linear_system(), np.zeros(3), LINEAR_P)
    np.testing.assert_array_equal(regular.S, implicit.S)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(method="bisection"), ValueError, "method must be one of 'auto', 'newton'"),
        (dict(sensitivity="adjoint"), ValueError, "sensitivity must be one of 'implicit'"),
        (dict(relative_tolerance=-1.0), ValueError, "relative_tolerance must be positive"),
        (dict(max_newton_iterations=0), ValueError, "max_newton_iterations must be >= 1"),
        (dict(max_time=0.0), ValueError, "max_time must be positive"),
        (dict(nonnegative="yes"), TypeError, "nonnegative must be True or False"),
        (dict(method="newton", sensitivity="integration"), ValueError, "integrates"),
        (dict(y0=[1.0, 2.0]), ValueError, r"y0 must have shape \(3,\)"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, message):
    arguments = dict(y0=np.zeros(3), params=LINEAR_P) | kwargs
    with pytest.raises(error, match=message):
        steady_state(linear_system(), **arguments)


@pytest.mark.parametrize(
    "method, sensitivity", [("auto", "implicit"), ("integration", "none"), ("auto", "integration")]
)
def test_system_without_states_has_an_empty_steady_state(method, sensitivity):
    system = OdeSystem.from_expressions(
        [],
        sp.Symbol("t"),
        [],
        [sp.Symbol("k"), sp.Symbol("q")],
        name="rules_only",
        allow_no_states=True,
    )
    result = steady_state(system, [], [1.0, 2.0], method=method, sensitivity=sensitivity)
    assert result.y.shape == (0,)
    if sensitivity != "none":
        assert result.S.shape == (0, 2) and result.S_y0.shape == (0, 0)


def test_systems_with_events_are_refused():
    system = OdeSystem(
        lambda t, y, p: [-p[0] * y[0]],
        1,
        1,
        name="dosed",
        events=[ExplicitEvent(times=[1.0], affect=lambda t, y, p: [y[0] + 1.0], name="dose")],
    )
    with pytest.raises(ValueError, match="systems with events are not supported.*dose"):
        steady_state(system, [1.0], [1.0])
