"""SBML events on the event engine: triggers, assignments, time triggers, firing at t0, and the
combinations refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens import OdeSystem, solve
from pymc_odesens.model.sbml import SbmlUnsupportedError
from tests.model.sbml.sbml_text import build_sbml

DECAY = dict(
    species=[{"id": "A", "concentration": 1.0}, {"id": "B", "concentration": 0.0}],
    parameters={"k": 0.5, "level": (0.0, False)},
    reactions={"R": dict(reactants=[("A", 1)], rate="k * A")},
)


def decay(*events, **changes):
    return OdeSystem.from_sbml(build_sbml(**{**DECAY, **changes}, events=list(events)))


def test_a_state_trigger_fires_at_every_crossing():
    """A = exp(-k t) is reset to 1 whenever it falls below 1/2: every ln(2)/k."""
    system = decay(
        dict(id="refill", trigger="A < 0.5", assignments={"A": "1", "level": "level + 1"})
    )
    assert [e.kind for e in system.events] == ["implicit"]
    assert system.states == ["A", "B", "level"]  # an event sets level: a state
    solution = solve(system, None, np.linspace(0, 6, 7), system.p_nominal, method="bdf")
    period = np.log(2) / 0.5
    np.testing.assert_allclose(solution.events.times, period * np.arange(1, 5), rtol=1e-8)
    np.testing.assert_allclose(solution["level"], np.floor(np.linspace(0, 6, 7) / period))


def test_time_triggers_are_explicit_events_at_exact_times():
    system = decay(
        dict(id="dose", trigger="time >= 2", assignments={"B": "B + 5"}),
        dict(id="late", trigger="3.5 < time", assignments={"B": "2 * B"}),
    )
    assert [(e.kind, [float(t) for t in e.times]) for e in system.events] == [
        ("explicit", [2.0]),
        ("explicit", [3.5]),
    ]
    solution = solve(system, None, [1.0, 2.0, 3.0, 4.0], system.p_nominal, method="bdf")
    np.testing.assert_allclose(solution["B"], [0.0, 5.0, 5.0, 10.0])


def test_initial_value_false_fires_at_t0_and_then_at_crossings():
    system = decay(
        dict(id="start", trigger="A > 0.5", initial_value=False, assignments={"B": "B + 1"})
    )
    assert [(e.kind, e.name) for e in system.events] == [
        ("explicit", "start@t0"),
        ("implicit", "start"),
    ]
    solution = solve(system, None, [0.0, 1.0], system.p_nominal, method="bdf")
    np.testing.assert_allclose(solution["B"], [1.0, 1.0])
    assert solution.events.names == ["start@t0"]


def test_a_time_trigger_at_a_parameter_time():
    system = decay(
        dict(id="dose", trigger="time >= k", initial_value=False, assignments={"B": "1"})
    )
    (event,) = system.events
    k = system.param_symbols[system.params.index("k")]
    assert event.kind == "explicit"
    assert str(event.times[0]) == str(__import__("sympy").Max(0, k))
    solution = solve(system, None, [0.4, 0.6], system.p_nominal, method="bdf")
    np.testing.assert_allclose(solution["B"], [0.0, 1.0])


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


@pytest.mark.parametrize(
    ("events", "feature"),
    [
        (
            [dict(id="E", trigger="A < 0.5", priority="1", assignments={"A": "1"})],
            "event priority",
        ),
        (
            [dict(id="E", trigger="A < 0.5 && time > 1", assignments={"A": "1"})],
            "single comparison",
        ),
        (
            [
                dict(id="E1", trigger="A < 0.5", assignments={"B": "1"}),
                dict(id="E2", trigger="B > 0.5", assignments={"A": "1"}),
            ],
            "events that set off one another",
        ),
        (
            [
                dict(id="E1", trigger="time > 1", assignments={"B": "1"}),
                dict(id="E2", trigger="time > 1", assignments={"A": "1"}),
            ],
            "simultaneous events",
        ),
    ],
)
def test_event_semantics_waiting_for_the_event_engine_are_refused(events, feature):
    with pytest.raises(SbmlUnsupportedError, match=feature):
        decay(*events)
