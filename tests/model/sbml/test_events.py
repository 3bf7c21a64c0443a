"""SBML events as trigger events: triggers, assignments, initialValue, persistence, priorities,
trigger-time values, cascades; ties of priority drawn at random."""

from __future__ import annotations

import numpy as np
import sympy as sp

from pymc_odesens import OdeSystem, solve
from pymc_odesens.solvers import seed_event_order
from tests.model.sbml.sbml_text import build_sbml

DECAY = dict(
    species=[{"id": "A", "concentration": 1.0}, {"id": "B", "concentration": 0.0}],
    parameters={"k": 0.5, "level": (0.0, False), "x": (0.0, False)},
    reactions={"R": dict(reactants=[("A", 1)], rate="k * A")},
)


def decay(*events, **changes):
    return OdeSystem.from_sbml(build_sbml(**{**DECAY, **changes}, events=list(events)))


def test_sbml_events_are_trigger_events_with_their_attributes():
    system = decay(
        dict(
            id="E",
            trigger="A < 0.5 && time > 1",
            assignments={"B": "B + 1"},
            initial_value=False,
            persistent=False,
            priority="k * 2",
            use_trigger_values=False,
        )
    )
    (event,) = system.events
    A, B = system.state_symbols[:2]
    k = system.param_symbols[0]
    assert event.kind == "trigger" and event.name == "E"
    assert event.trigger == (A < sp.Rational(1, 2)) & (system.t > 1)
    assert event.affect[1] == B + 1 and event.assigned == (False, True)
    assert (event.initial_value, event.persistent, event.use_values_from_trigger_time) == (
        False,
        False,
        False,
    )
    assert event.priority == 2 * k


def test_a_state_trigger_fires_at_every_crossing():
    """A = exp(-k t) is reset to 1 whenever it falls below 1/2: every ln(2)/k."""
    system = decay(
        dict(id="refill", trigger="A < 0.5", assignments={"A": "1", "level": "level + 1"})
    )
    assert system.states == ["A", "B", "level"]  # an event sets level: a state
    times = np.linspace(0, 6, 7)
    solution = solve(system, None, times, system.p_nominal, method="bdf")
    period = np.log(2) / 0.5
    np.testing.assert_allclose(solution.events.times, period * np.arange(1, 5), rtol=1e-8)
    np.testing.assert_allclose(solution["level"], np.floor(times / period))


def test_time_triggers_initial_value_and_a_parameter_time():
    system = decay(
        dict(id="dose", trigger="time >= 2", assignments={"B": "B + 5"}),
        dict(id="late", trigger="3.5 < time", assignments={"B": "2 * B"}),
        dict(id="start", trigger="A > 0.5", initial_value=False, assignments={"x": "x + 1"}),
        dict(id="at_k", trigger="time >= k", initial_value=False, assignments={"level": "1"}),
    )
    solution = solve(system, None, [0.0, 0.4, 0.6, 2.0, 3.0, 4.0], system.p_nominal, method="bdf")
    np.testing.assert_allclose(solution["B"], [0, 0, 0, 5, 5, 10])
    np.testing.assert_allclose(solution["x"], 1.0)  # fired at t0 only
    np.testing.assert_allclose(solution["level"], [0, 0, 1, 1, 1, 1])  # at t = k = 0.5


def test_priorities_cascades_and_trigger_time_values():
    """At t = 1: 'high' (priority 2) sets x = 1, then 'low' (priority 1) doubles x with the
    value at the trigger time (0) or at its execution (1); x = 1 sets off 'cascade'."""
    events = [
        dict(id="high", trigger="time >= 1", priority="2", assignments={"x": "1"}),
        dict(id="cascade", trigger="x > 0.5", assignments={"level": "level + 10"}),
    ]
    for use_trigger_values, expected in ((True, 0.0), (False, 2.0)):
        low = dict(
            id="low",
            trigger="time >= 1",
            priority="1",
            assignments={"x": "2 * x"},
            use_trigger_values=use_trigger_values,
        )
        system = decay(*events, low)
        solution = solve(system, None, [0.5, 1.5], system.p_nominal, method="bdf")
        # 'cascade' has no priority: it executes after 'low', and being persistent it does
        # so even when 'low' has set x back to 0
        assert solution.events.names == ["high", "low", "cascade"]
        np.testing.assert_allclose(solution["x"], [0.0, expected])
        np.testing.assert_allclose(solution["level"], [0.0, 10.0])


def test_a_non_persistent_event_is_cancelled_by_an_earlier_one():
    system = decay(
        dict(id="first", trigger="time >= 1", priority="2", assignments={"level": "1"}),
        dict(
            id="second",
            trigger="time >= 1 && level < 0.5",
            priority="1",
            persistent=False,
            assignments={"x": "1"},
        ),
    )
    solution = solve(system, None, [2.0], system.p_nominal, method="bdf")
    assert solution.events.names == ["first"]
    np.testing.assert_allclose(solution["x"], [0.0])


def test_a_concentration_assigned_with_its_compartment():
    """The assigned concentration holds in the compartment before the event; the new size
    keeps that amount (SBML Test Suite case 01779)."""
    system = OdeSystem.from_sbml(
        build_sbml(
            compartments={"cell": (0.5, False)},
            species=[{"id": "S", "concentration": 2.0, "boundary": True}],
            events=[dict(trigger="time >= 0.45", assignments={"S": "0.2", "cell": "0.2"})],
        )
    )
    solution = solve(system, None, [0.4, 0.5], system.p_nominal, method="bdf")
    np.testing.assert_allclose(solution.amount("S"), [1.0, 0.1])
    np.testing.assert_allclose(solution["S"], [2.0, 0.5])


def test_ties_of_equal_priority_are_drawn_at_random():
    """Every 0.1, Q and S (same trigger and priority, not persistent) compete: the first to
    execute sets x to the time, which cancels the other; SBML draws which one it is (the
    reaction is R: an event of that id would make the document invalid)."""
    competing = [
        dict(
            id=name,
            trigger="time - x >= 0.1",
            priority="1",
            persistent=False,
            assignments={"x": "time", counter: f"{counter} + 1"},
        )
        for name, counter in (("Q", "level"), ("S", "B"))
    ]
    system = decay(*competing)
    assert all(e.random_order for e in system.events)
    seed_event_order(7)
    solution = solve(system, None, [5.05], system.p_nominal, method="bdf")
    wins_q, wins_s = solution["level"][0], solution["B"][0]
    assert wins_q + wins_s == 50
    assert 10 <= wins_q <= 40  # a fair coin: P(outside) < 1e-4
