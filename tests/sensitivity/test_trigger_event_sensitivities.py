"""Sensitivities through trigger events: forward sensitivities against central differences of
the solution, and both adjoints against forward sensitivities.

Each kind of instant has its own case: a root atom's crossing inside an and-trigger, a
time atom's scheduled time, a cascade (the second event inherits the crossing's time
sensitivity), assignments from the trigger time with another event executing first, and
events at t0 (whose time does not move). Combinations without a derivative are refused
with EventSensitivityError.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens import (
    EventSensitivityError,
    OdeSystem,
    adjoint_gradient,
    solve,
    solve_sensitivity,
)
from pymc_odesens import math as om
from pymc_odesens.model import ExplicitEvent, TriggerEvent
from tests.sensitivity.test_event_sensitivities import ADJOINT_TIGHT, TIGHT
from tests.solvers.test_trigger_events import resting_system


def redose():
    """A dose whenever x has fallen below c after t_on: root or time cause."""
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x],
        states=["x"],
        params=["k", "c", "t_on", "d"],
        events=[
            TriggerEvent(
                lambda t, y, p: (y.x < p.c) & (t > p.t_on),
                lambda t, y, p: {"x": y.x + p.d * (1 + 0.1 * t)},
                name="redose",
            )
        ],
        name="redose",
    )


def cascade():
    """x := x + d when x < c; that sets off y := y + m x + t (x > c + d / 2)."""
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x, -0.3 * y.y],
        states=["x", "y"],
        params=["k", "c", "d", "m"],
        events=[
            TriggerEvent(lambda t, y, p: y.x < p.c, lambda t, y, p: {"x": y.x + p.d}, name="dose"),
            TriggerEvent(
                lambda t, y, p: y.x > p.c + 0.5 * p.d,
                lambda t, y, p: {"y": y.y + p.m * y.x + t},
                name="cascade",
            ),
        ],
        name="cascade",
    )


def trigger_time_values():
    """At x = c: x := 2 x first; y takes x from the trigger time, w from execution."""
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x, -0.5 * y.y, 0.0],
        states=["x", "y", "w"],
        params=["k", "c", "m"],
        events=[
            TriggerEvent(lambda t, y, p: y.x < p.c, lambda t, y, p: {"x": 2 * y.x}, priority=2.0),
            TriggerEvent(
                lambda t, y, p: y.x < p.c,
                lambda t, y, p: {"y": y.y + p.m * y.x},
                priority=1.0,
                use_values_from_trigger_time=True,
            ),
            TriggerEvent(
                lambda t, y, p: y.x < p.c,
                lambda t, y, p: {"w": y.w + p.m * y.x},
                priority=0.0,
                use_values_from_trigger_time=False,
            ),
        ],
        name="trigger_time_values",
    )


def at_t0():
    """x > c holds at t0 and fires there (initial_value False); the dose at t_on moves."""
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x],
        states=["x"],
        params=["k", "c", "m", "t_on"],
        events=[
            TriggerEvent(
                lambda t, y, p: y.x > p.c,
                lambda t, y, p: {"x": p.m * y.x},
                initial_value=False,
                name="at_t0",
            ),
            TriggerEvent(lambda t, y, p: t >= p.t_on, lambda t, y, p: {"x": y.x + p.m}),
        ],
        name="trigger_at_t0",
    )


CASES = {
    # system, y0, params, output times (away from the event times), events at least
    # root crossings: doses at 0.77, 1.69, 2.67, 3.69 (x = c while t > t_on)
    "root crossing": (redose, [1.0], [0.9, 0.5, 0.2, 0.6], np.linspace(0.1, 3.9, 9), 4),
    # the first dose at t_on = 1.3 (x < c already), then at crossings
    "time atom": (redose, [1.0], [0.9, 0.5, 1.3, 0.6], np.linspace(0.1, 3.9, 9), 3),
    # dose and cascade at each of 5 crossings
    "cascade": (cascade, [1.0, 0.5], [0.8, 0.5, 0.4, 0.7], np.linspace(0.2, 4.1, 7), 10),
    # three events at each of 3 crossings
    "trigger time values": (
        trigger_time_values,
        [1.0, 0.2, 0.0],
        [0.6, 0.5, 0.8],
        np.linspace(0.3, 4.0, 6),
        9,
    ),
    # x := m x at t0, x := x + m at t_on
    "at t0": (at_t0, [1.0], [0.7, 0.5, 1.5, 0.8], np.linspace(0.2, 3.0, 6), 2),
}


@pytest.fixture(scope="module")
def systems():
    """One compiled system per factory, shared by the cases."""
    return {factory: factory() for factory in {case[0] for case in CASES.values()}}


def _system(systems, name):
    return systems[CASES[name][0]]


def _central_differences(system, y0, params, times):
    params = np.asarray(params, dtype=float)
    out = np.zeros((times.size, system.n_states, params.size))
    for k in range(params.size):
        h = 1e-6 * max(abs(params[k]), 1.0)
        up, down = params.copy(), params.copy()
        up[k] += h
        down[k] -= h
        out[:, :, k] = (
            solve(system, y0, times, up, method="rk45", **TIGHT).y
            - solve(system, y0, times, down, method="rk45", **TIGHT).y
        ) / (2 * h)
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_forward_sensitivities_match_central_differences(systems, name):
    _, y0, params, times, n_events = CASES[name]
    system = _system(systems, name)
    fd = _central_differences(system, y0, params, times)
    for method in ("rk45", "bdf"):
        r = solve_sensitivity(system, y0, times, params, method=method, **TIGHT)
        assert r.events.times.size == n_events, (method, r.events.times)
        scale = np.abs(fd).max()
        np.testing.assert_allclose(r.S, fd, rtol=2e-5, atol=2e-6 * scale, err_msg=method)


@pytest.mark.parametrize("name", list(CASES))
def test_both_adjoints_match_forward_sensitivities(systems, name):
    _, y0, params, times, _ = CASES[name]
    system = _system(systems, name)
    forward = solve_sensitivity(system, y0, times, params, method="bdf", wrt="both", **TIGHT)
    cot = np.random.default_rng(7).standard_normal((times.size, system.n_states))
    want_p = np.einsum("ti,tik->k", cot, forward.S)
    want_y0 = np.einsum("ti,tij->j", cot, forward.S_y0)
    for adjoint_method in ("continuous", "discrete"):
        g = adjoint_gradient(
            system, y0, times, params, cot, adjoint_method=adjoint_method, **ADJOINT_TIGHT
        )
        scale = np.abs(want_p).max()
        np.testing.assert_allclose(
            g.params, want_p, rtol=1e-6, atol=1e-7 * scale, err_msg=adjoint_method
        )
        np.testing.assert_allclose(g.y0, want_y0, rtol=1e-6, atol=1e-7 * np.abs(want_y0).max())


def test_sensitivities_through_an_event_that_leaves_the_state_at_rest():
    """The reset at 0.943 leaves the state at rest on its surface at these parameters (near
    them it relaxes to an equilibrium on either side, with no further execution): forward
    sensitivities match central differences, the continuous adjoint matches them. (The
    discrete adjoint differentiates the steps, which grow unchecked over the resting state,
    and is off here by up to 15 %: docs/adjoint.md, "Where the state sits still".)"""
    system = resting_system()
    y0, params, times = [1.0, 2.0, 1.0, 0.0], [0.75, 0.25], np.linspace(0.2, 6.0, 8)
    fd = _central_differences(system, y0, params, times)
    for method in ("rk45", "bdf"):
        r = solve_sensitivity(system, y0, times, params, method=method, **TIGHT)
        assert r.events.names == ["reset"], method
        np.testing.assert_allclose(r.S, fd, rtol=2e-5, atol=2e-6 * np.abs(fd).max())
    forward = solve_sensitivity(system, y0, times, params, method="bdf", wrt="both", **TIGHT)
    cot = np.random.default_rng(7).standard_normal((times.size, system.n_states))
    g = adjoint_gradient(system, y0, times, params, cot, **ADJOINT_TIGHT)
    want = np.einsum("ti,tik->k", cot, forward.S)
    np.testing.assert_allclose(g.params, want, rtol=1e-6, atol=1e-7 * np.abs(want).max())
    np.testing.assert_allclose(
        g.y0, np.einsum("ti,tij->j", cot, forward.S_y0), rtol=1e-6, atol=1e-7
    )


def test_time_sensitivities_of_root_time_and_initial_causes(systems):
    """d tau/dp: -(g_p)/(g_y f) for the crossing x = c (x = e^{-k t}: d tau/dk = -tau/k,
    d tau/dc = -1/(k c)), d tau/d t_on = 1 for a time atom, 0 at t0."""
    system = systems[redose]
    r = solve_sensitivity(system, [1.0], [1.0], [0.9, 0.5, 0.2, 0.6], method="bdf", **TIGHT)
    tau = np.log(2) / 0.9
    np.testing.assert_allclose(r.events.times[0], tau, rtol=1e-9)
    np.testing.assert_allclose(
        r.event_time_sensitivity[0], [-tau / 0.9, -1 / (0.9 * 0.5), 0, 0], atol=1e-8
    )
    r = solve_sensitivity(system, [1.0], [2.0], [0.9, 0.5, 1.3, 0.6], method="bdf", **TIGHT)
    np.testing.assert_allclose(r.event_time_sensitivity[0], [0, 0, 1, 0], atol=1e-12)
    r = solve_sensitivity(systems[at_t0], [1.0], [1.0], [0.7, 0.5, 1.5, 0.8], **TIGHT)
    assert r.events.times[0] == 0.0
    np.testing.assert_array_equal(r.event_time_sensitivity[0], 0.0)


def test_events_that_coincide_only_at_these_parameters_are_refused():
    """An explicit dose at a and a trigger at t >= b with a = b: moving a or b separates
    them (the derivative is one-sided); solve works, sensitivities refuse."""
    system = OdeSystem(
        lambda t, y, p: [-y.x],
        states=["x"],
        params=["a", "b"],
        events=[
            ExplicitEvent(lambda p: [p.a], lambda t, y, p: {"x": y.x + 1}),
            TriggerEvent(lambda t, y, p: t >= p.b, lambda t, y, p: {"x": 2 * y.x}),
        ],
    )
    solve(system, [1.0], [2.0], [1.0, 1.0])
    with pytest.raises(EventSensitivityError, match="move differently with the parameters"):
        solve_sensitivity(system, [1.0], [2.0], [1.0, 1.0])
    for adjoint_method in ("continuous", "discrete"):
        with pytest.raises(EventSensitivityError, match="t = 1"):
            adjoint_gradient(
                system, [1.0], [2.0], [1.0, 1.0], [[1.0]], adjoint_method=adjoint_method
            )
    # apart, both are differentiable
    r = solve_sensitivity(system, [1.0], [2.0], [1.0, 1.5])
    assert np.all(np.isfinite(r.S))


def test_a_crossing_with_zero_speed_is_refused():
    """heaviside(t - a) - 1/2 jumps through 0 at t = a: its derivatives (the Dirac delta is
    dropped) give d tau/da = 0/0, so the sensitivity is refused, not guessed."""
    system = OdeSystem(
        lambda t, y, p: [-y.x, 0.0],
        states=["x", "y"],
        params=["a"],
        events=[
            TriggerEvent(lambda t, y, p: om.heaviside(t - p.a) > 0.5, lambda t, y, p: {"y": y.x})
        ],
    )
    r = solve(system, [1.0, 0.0], [2.0], [1.0], method="rk45", **TIGHT)
    np.testing.assert_allclose(r.events.times, [1.0], rtol=1e-12)
    with pytest.raises(EventSensitivityError, match="crossed zero with zero speed"):
        solve_sensitivity(system, [1.0, 0.0], [2.0], [1.0], method="rk45", **TIGHT)
    for adjoint_method in ("continuous", "discrete"):
        with pytest.raises(EventSensitivityError, match="zero speed"):
            adjoint_gradient(
                system, [1.0, 0.0], [2.0], [1.0], [[0.0, 1.0]], adjoint_method=adjoint_method
            )
