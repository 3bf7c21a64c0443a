"""Forward sensitivities through events: jumps with the event-time term, against the bouncing
ball's closed-form derivatives, a dosing schedule's closed form and finite differences."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pymc_odesens import OdeSystem, adjoint_gradient, solve, solve_sensitivity
from tests.conftest import model_path
from tests.solvers.test_events import pk_closed_form, pk_system, terminal_decay_system

METHODS = ("rk45", "ckrk", "bdf", "adams")
TIGHT = dict(relative_tolerance=1e-10, absolute_tolerance=1e-12)


@pytest.fixture(scope="module")
def ball():
    return OdeSystem.from_json(model_path("bouncing_ball"))


@pytest.fixture(scope="module")
def exact():
    return json.loads(model_path("bouncing_ball").read_text())["exact"]


@pytest.mark.parametrize("method", METHODS)
def test_bouncing_ball_derivatives_match_the_closed_form(ball, exact, method):
    """d z(t_end), d v(t_end) and d tau with respect to z0, v0, g and gamma, to 1e-6
    relative (measured: 1e-11 with bdf and adams at rtol 1e-10)."""
    r = solve_sensitivity(ball, ball.x0, [1.9], ball.p_nominal, method=method, wrt="both", **TIGHT)
    got = {
        "z_end": dict(zip(("g", "gamma"), r.S[-1, 0])) | dict(zip(("z0", "v0"), r.S_y0[-1, 0])),
        "v_end": dict(zip(("g", "gamma"), r.S[-1, 1])) | dict(zip(("z0", "v0"), r.S_y0[-1, 1])),
        "tau": dict(zip(("g", "gamma"), r.event_time_sensitivity[0]))
        | dict(zip(("z0", "v0"), r.event_time_sensitivity_y0[0])),
    }
    for quantity, derivatives in got.items():
        for wrt, value in derivatives.items():
            want = exact[f"d{quantity}/d{wrt}"]
            assert value == pytest.approx(want, rel=1e-6, abs=1e-9), (quantity, wrt, value, want)
    np.testing.assert_allclose(r.events.times, [exact["tau"]], rtol=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_many_bounces_against_finite_differences(ball, method):
    """Thirteen impacts: S at several output times against central differences of solve."""
    p = np.array([10.0, 0.9])
    y0 = np.array([5.0, -0.1])
    times = np.linspace(0.5, 14.0, 10)
    r = solve_sensitivity(ball, y0, times, p, method=method, **TIGHT)
    assert r.events.times.size == 13
    for k in range(2):
        h = 1e-6 * max(abs(p[k]), 1.0)
        up, down = p.copy(), p.copy()
        up[k] += h
        down[k] -= h
        fd = (
            solve(ball, y0, times, up, method=method, **TIGHT).y
            - solve(ball, y0, times, down, method=method, **TIGHT).y
        ) / (2 * h)
        np.testing.assert_allclose(r.S[:, :, k], fd, rtol=2e-5, atol=2e-5 * np.abs(fd).max())


def _pk_closed_form_derivatives(t, p, lag):
    """Central differences of the closed form (its own error ~1e-9 relative)."""
    out = np.zeros((t.size, 2, 4))
    for k in range(4):
        h = 1e-5 * max(abs(p[k]), 1.0)
        up, down = p.copy(), p.copy()
        up[k] += h
        down[k] -= h

        def form(q):
            tau = [q[3] + 12.0 * j for j in range(4)] if lag else [0.0, 12.0, 24.0, 36.0]
            return pk_closed_form(t, *q[:3], tau)

        out[:, :, k] = (form(up) - form(down)) / (2 * h)
    return out


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("lag", [False, True])
def test_dosing_sensitivities_against_the_closed_form(method, lag):
    """dy/d(ka, ke, dose, tlag) with doses at tlag + 12 k: the jump moves with tlag (outputs
    avoid the dose times, where y itself jumps)."""
    system = pk_system(lag)
    p = np.array([1.2, 0.15, 100.0, 1.5])
    t = np.linspace(0.25, 47.75, 96)
    r = solve_sensitivity(system, [0.0, 0.0], t, p, method=method, **TIGHT)
    want = _pk_closed_form_derivatives(t, p, lag)
    scale = np.abs(want).max(axis=(0, 1))
    err = np.abs(r.S - want).max(axis=(0, 1)) / np.maximum(scale, 1e-300)
    assert err.max() < 1e-6, err
    if lag:
        np.testing.assert_allclose(r.event_time_sensitivity[:, 3], 1.0)
    else:
        np.testing.assert_array_equal(r.event_time_sensitivity, 0.0)


# -- adjoint gradients through events -----------------------------------------------------

ADJOINT_TIGHT = dict(
    relative_tolerance_forward=1e-10,
    absolute_tolerance_forward=1e-12,
    relative_tolerance_backward=1e-10,
    absolute_tolerance_backward=1e-12,
    relative_tolerance_quadrature=1e-10,
    absolute_tolerance_quadrature=1e-12,
)


@pytest.mark.parametrize("interpolation", [1, 2])
@pytest.mark.parametrize("solver", [1, 2])
def test_adjoint_bouncing_ball_matches_the_closed_form(ball, exact, solver, interpolation):
    """dL/dp and dL/dy0 for L = z(t_end) and L = v(t_end): the red, blue and green terms
    of the event's adjoint jump, to 1e-6 relative."""
    for i, quantity in enumerate(("z_end", "v_end")):
        cot = np.zeros((1, 2))
        cot[0, i] = 1.0
        g = adjoint_gradient(
            ball,
            ball.x0,
            [1.9],
            ball.p_nominal,
            cot,
            solver_forward=solver,
            solver_backward=solver,
            interpolation_polynomial=interpolation,
            **ADJOINT_TIGHT,
        )
        want_p = [exact[f"d{quantity}/dg"], exact[f"d{quantity}/dgamma"]]
        want_y0 = [exact[f"d{quantity}/dz0"], exact[f"d{quantity}/dv0"]]
        np.testing.assert_allclose(g.params, want_p, rtol=1e-6)
        np.testing.assert_allclose(g.y0, want_y0, rtol=1e-6)


def test_adjoint_many_bounces_matches_forward_sensitivities(ball):
    p = np.array([10.0, 0.9])
    y0 = np.array([5.0, -0.1])
    times = np.linspace(0.5, 14.0, 28)
    cot = np.random.default_rng(1).standard_normal((times.size, 2))
    forward = solve_sensitivity(ball, y0, times, p, method="bdf", wrt="both", **TIGHT)
    g = adjoint_gradient(ball, y0, times, p, cot, **ADJOINT_TIGHT)
    assert g.stats["forward"]["n_steps"] > 0
    want_p = np.einsum("ti,tik->k", cot, forward.S)
    want_y0 = np.einsum("ti,tij->j", cot, forward.S_y0)
    np.testing.assert_allclose(g.params, want_p, rtol=1e-6)
    np.testing.assert_allclose(g.y0, want_y0, rtol=1e-6)


@pytest.mark.parametrize("lag", [False, True])
def test_adjoint_dosing_matches_forward_sensitivities(lag):
    """Doses at the output times (right limits) and at t0 (applied before the first output)."""
    system = pk_system(lag)
    p = np.array([1.2, 0.15, 100.0, 1.5])
    t = np.unique(np.concatenate([np.linspace(0.25, 47.75, 96), [12.0, 24.0, 36.0]]))
    cot = np.random.default_rng(2).standard_normal((t.size, 2))
    kw = dict(relative_tolerance=1e-10, absolute_tolerance=1e-10)
    forward = solve_sensitivity(system, [0.0, 0.0], t, p, method="bdf", wrt="both", **kw)
    g = adjoint_gradient(
        system, [0.0, 0.0], t, p, cot, **(ADJOINT_TIGHT | {"absolute_tolerance_forward": 1e-10})
    )
    want_p = np.einsum("ti,tik->k", cot, forward.S)
    want_y0 = np.einsum("ti,tij->j", cot, forward.S_y0)
    np.testing.assert_allclose(g.params, want_p, rtol=1e-7, atol=1e-9 * np.abs(want_p).max())
    np.testing.assert_allclose(g.y0, want_y0, rtol=1e-7, atol=1e-9 * np.abs(want_y0).max())


@pytest.mark.parametrize("method", METHODS)
def test_terminal_event_sensitivities_against_the_closed_form(method):
    """x' = -k x stopped at x = c: tau = log(1/c) / k, and x stays at c, so dx/dk = 0
    after tau while d tau/dk = -tau / k; before tau dx/dk = -t exp(-k t)."""
    system = terminal_decay_system()
    p = np.array([0.7, 0.5])
    tau = np.log(1 / p[1]) / p[0]
    times = np.array([0.5, tau + 0.5, 3.0])
    r = solve_sensitivity(system, [1.0], times, p, method=method, **TIGHT)
    np.testing.assert_allclose(r.events.times, [tau], rtol=1e-9)
    np.testing.assert_allclose(r.event_time_sensitivity[0], [-tau / p[0], -1 / (p[0] * p[1])])
    want = np.array([[-0.5 * np.exp(-0.35), 0.0], [0.0, 1.0], [0.0, 1.0]])
    np.testing.assert_allclose(r.S[:, 0, :], want, atol=1e-8)
    cot = np.array([[1.0], [2.0], [3.0]])
    g = adjoint_gradient(system, [1.0], times, p, cot, **ADJOINT_TIGHT)
    np.testing.assert_allclose(g.params, cot[:, 0] @ want, atol=1e-8)
