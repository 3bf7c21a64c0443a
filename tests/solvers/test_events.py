"""Events in `solve`: implicit events located by root finding, explicit events hit exactly,
outputs at an event time hold the right limit, terminal events, against closed forms."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pymc_odesens import OdeSystem, solve
from pymc_odesens.model import ExplicitEvent, ImplicitEvent
from tests.conftest import model_path

METHODS = ("rk45", "ckrk", "bdf", "adams")


@pytest.fixture(scope="module")
def ball():
    return OdeSystem.from_json(model_path("bouncing_ball"))


@pytest.fixture(scope="module")
def ball_exact():
    return json.loads(model_path("bouncing_ball").read_text())["exact"]


def bounces(z0, v0, g, gamma, t_end):
    """Closed form of the bouncing ball: impact times and (z, v) at t_end (before the
    impacts accumulate: with restitution gamma they do so at a finite time)."""
    t, z, v, impacts = 0.0, z0, v0, []
    while len(impacts) < 100:
        # z + v s - g s^2 / 2 = 0, the positive root
        s = (v + np.sqrt(v * v + 2 * g * z)) / g
        if t + s > t_end:
            s = t_end - t
            return impacts, z + v * s - 0.5 * g * s * s, v - g * s
        t += s
        impacts.append(t)
        z, v = 0.0, -gamma * (v - g * s)


@pytest.mark.parametrize("method", METHODS)
def test_bouncing_ball_values_and_event_time(ball, ball_exact, method):
    """One impact before t_end = 1.9: tau, z(t_end), v(t_end) against the closed form."""
    r = solve(
        ball,
        ball.x0,
        [0.5, 1.9],
        ball.p_nominal,
        method=method,
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    )
    np.testing.assert_allclose(r.events.times, [ball_exact["tau"]], rtol=1e-9)
    assert r.events.names == ["event0"]
    np.testing.assert_allclose(r.y[-1], [ball_exact["z_end"], ball_exact["v_end"]], rtol=1e-8)
    # the state logged just before the impact: z = 0, v(tau-) = -sqrt(v0^2 + 2 g z0)
    np.testing.assert_allclose(r.events.before[0], [0.0, ball_exact["v_tau_minus"]], atol=1e-8)


@pytest.mark.parametrize("method", METHODS)
def test_many_bounces(ball, method):
    """Thirteen impacts before t = 14 (gamma = 0.9; they accumulate at t = 19): every
    impact time and the final state."""
    p = np.array([10.0, 0.9])
    impacts, z_end, v_end = bounces(5.0, -0.1, p[0], p[1], 14.0)
    assert len(impacts) == 13
    r = solve(
        ball,
        [5.0, -0.1],
        np.linspace(0.0, 14.0, 29),
        p,
        method=method,
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    )
    np.testing.assert_allclose(r.events.times, impacts, rtol=1e-8)
    np.testing.assert_allclose(r.y[-1], [z_end, v_end], atol=1e-7)


@pytest.mark.parametrize("method", METHODS)
def test_output_at_event_time_is_the_right_limit(ball, ball_exact, method):
    tau = ball_exact["tau"]
    kw = dict(method=method, relative_tolerance=1e-10, absolute_tolerance=1e-12)
    r = solve(ball, ball.x0, [0.2], ball.p_nominal, **kw)
    tau_num = solve(ball, ball.x0, [1.9], ball.p_nominal, **kw).events.times[0]
    r = solve(ball, ball.x0, [tau_num, 1.9], ball.p_nominal, **kw)
    # at tau the ball has bounced: v = +gamma |v(tau-)|
    assert r.y[0, 1] == pytest.approx(-0.8 * ball_exact["v_tau_minus"], rel=1e-8)
    assert abs(tau_num - tau) < 1e-9


def terminal_decay_system():
    """x' = -k x, stopped when x falls to c (terminal event; tau = log(x0 / c) / k)."""
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x],
        states=["x"],
        params=["k", "c"],
        events=[ImplicitEvent(lambda t, y, p: y.x - p.c, terminal=True, direction="down")],
    )


def pk_system(lag: bool = False):
    """One-compartment oral dosing: gut' = -ka gut, central' = ka gut - ke central."""

    def rhs(t, y, p):
        return [-p.ka * y.gut, p.ka * y.gut - p.ke * y.central]

    times = (lambda p: [p.tlag + 12.0 * k for k in range(4)]) if lag else [0.0, 12.0, 24.0, 36.0]
    dose = ExplicitEvent(times, affect=lambda t, y, p: [y.gut + p.dose, y.central], name="dose")
    return OdeSystem(
        rhs, states=["gut", "central"], params=["ka", "ke", "dose", "tlag"], events=[dose]
    )


def pk_closed_form(t, ka, ke, dose, dose_times):
    """Superposition of one-dose solutions (outputs at a dose time include that dose)."""
    gut = np.zeros_like(t)
    central = np.zeros_like(t)
    for tau in dose_times:
        s = t - tau
        on = s >= 0
        gut += np.where(on, dose * np.exp(-ka * np.where(on, s, 0)), 0.0)
        central += np.where(
            on,
            dose
            * ka
            / (ka - ke)
            * (np.exp(-ke * np.where(on, s, 0)) - np.exp(-ka * np.where(on, s, 0))),
            0.0,
        )
    return np.stack([gut, central], axis=1)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("lag", [False, True])
def test_repeated_dosing_against_closed_form(method, lag):
    """Doses at 0, 12, 24, 36 h (or tlag + 12 k): outputs at dose times hold the dosed
    state, the last dose counts at t = 36 exactly."""
    system = pk_system(lag)
    p = np.array([1.2, 0.15, 100.0, 1.5])
    dose_times = [1.5 + 12.0 * k for k in range(4)] if lag else [0.0, 12.0, 24.0, 36.0]
    t = np.unique(np.concatenate([np.linspace(0.0, 48.0, 49), dose_times]))
    r = solve(
        system, [0.0, 0.0], t, p, method=method, relative_tolerance=1e-10, absolute_tolerance=1e-10
    )
    np.testing.assert_allclose(r.events.times, dose_times)
    assert r.events.names == ["dose"] * 4
    np.testing.assert_allclose(r.y, pk_closed_form(t, *p[:3], dose_times), rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("method", METHODS)
def test_terminal_event_freezes_the_state(method):
    """Decay to a threshold: the state stays at its value after the terminal event."""
    system = OdeSystem(
        lambda t, y, p: [-p[0] * y[0]],
        states=["x"],
        params=["k"],
        events=[ImplicitEvent(lambda t, y, p: y.x - 0.5, terminal=True, direction="down")],
    )
    r = solve(
        system,
        [1.0],
        [0.5, 1.0, 2.0],
        [1.0],
        method=method,
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    )
    tau = np.log(2.0)
    np.testing.assert_allclose(r.events.times, [tau], rtol=1e-9)
    np.testing.assert_allclose(r.y[:, 0], [np.exp(-0.5), 0.5, 0.5], rtol=1e-8)


def test_direction_selects_crossings():
    """sin(t) crosses 0 upwards at 2 pi, downwards at pi and 3 pi."""

    def make(direction):
        return OdeSystem(
            lambda t, y, p: [p[0] * 0.0 + 1.0],
            states=["clock"],
            params=["unused"],
            events=[ImplicitEvent(lambda t, y, p: om_sin(y.clock), direction=direction)],
        )

    from pymc_odesens.math import sin as om_sin  # noqa: F401 (used in the lambda)

    kw = dict(method="bdf", relative_tolerance=1e-10, absolute_tolerance=1e-12)
    up = solve(make("up"), [0.5], [10.0], [0.0], **kw).events.times
    down = solve(make("down"), [0.5], [10.0], [0.0], **kw).events.times
    both = solve(make("both"), [0.5], [10.0], [0.0], **kw).events.times
    np.testing.assert_allclose(up, [2 * np.pi - 0.5], rtol=1e-9)
    np.testing.assert_allclose(down, [np.pi - 0.5, 3 * np.pi - 0.5], rtol=1e-9)
    np.testing.assert_allclose(both, np.sort(np.concatenate([up, down])), rtol=1e-9)
