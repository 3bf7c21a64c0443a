"""Declaring events on an OdeSystem: tracing, exact derivatives, JSON, and errors naming the
culprit."""

from __future__ import annotations

import re

import pytest
import sympy as sp

from pymc_odesens import OdeSystem
from pymc_odesens.model import ExplicitEvent, ImplicitEvent, TriggerEvent
from tests.conftest import model_path


def _decay(events):
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x, p.k * y.x],
        states=["x", "z"],
        params=["k", "dose", "tlag"],
        events=events,
    )


def test_bouncing_ball_from_json_has_its_event():
    system = OdeSystem.from_json(model_path("bouncing_ball"))
    (event,) = system.events
    z, v = system.state_symbols
    g, gamma = system.param_symbols
    assert event.kind == "implicit" and event.direction == -1 and not event.terminal
    assert event.condition == z
    assert event.affect == (z, -gamma * v)
    assert event.affect_jacobian_y == sp.Matrix([[1, 0], [0, -gamma]])
    assert event.affect_jacobian_p == sp.Matrix([[0, 0], [0, -v]])
    assert event.condition_gradient == (0, (1, 0), (0, 0))


def test_explicit_times_of_the_parameters_and_their_gradients():
    system = _decay(
        [ExplicitEvent(lambda p: [p.tlag, p.tlag + 12], affect=lambda t, y, p: [y.x + p.dose, y.z])]
    )
    (event,) = system.explicit_events
    k, dose, tlag = system.param_symbols
    assert event.times == (tlag, tlag + 12)
    assert event.time_gradients == ((0, 0, 1), (0, 0, 1))


def test_events_change_the_fingerprint():
    plain = _decay(None)
    a = _decay([ImplicitEvent(lambda t, y, p: y.x - 0.5)])
    b = _decay([ImplicitEvent(lambda t, y, p: y.x - 0.25)])
    assert len({plain.fingerprint, a.fingerprint, b.fingerprint}) == 3


@pytest.mark.parametrize(
    ("events", "error", "message"),
    [
        (
            [ImplicitEvent(lambda t, y, p: y.x, affect=lambda t, y, p: [y.x])],
            ValueError,
            "affect returned 1 values but the system has 2 states",
        ),
        ([ImplicitEvent(lambda t, y, p: p.k)], ValueError, "depends on neither t nor the state"),
        (
            [ImplicitEvent(lambda t, y, p: y.x, direction="sideways")],
            ValueError,
            "direction must be one of",
        ),
        (
            [ImplicitEvent(lambda t, y, p: y.x + sp.Symbol("q"))],
            ValueError,
            "uses undeclared symbol(s) q",
        ),
        (
            [ExplicitEvent(lambda p: [p.tlag + sp.Symbol("x", real=True)])],
            ValueError,
            "expressions of the parameters only",
        ),
        ([ExplicitEvent([])], ValueError, "times must hold at least one time"),
        (
            [ImplicitEvent(lambda t, y, p: y.x, name="e"), ExplicitEvent([1.0], name="e")],
            ValueError,
            "duplicate event name 'e'",
        ),
        (
            ["not an event"],
            TypeError,
            "events[0] must be an ImplicitEvent, an ExplicitEvent or a TriggerEvent",
        ),
        ([ImplicitEvent(lambda t, y, p: y.nope)], AttributeError, "while tracing event"),
    ],
)
def test_bad_events_name_the_culprit(events, error, message):
    with pytest.raises(error, match=re.escape(message)):
        _decay(events)


def test_trigger_event_resolves_its_attributes_and_assignments():
    system = _decay(
        [
            TriggerEvent(
                lambda t, y, p: (y.x < 0.5) & (t > p.tlag),
                affect=lambda t, y, p: {"z": y.z + p.dose},
                initial_value=False,
                persistent=False,
                priority=lambda t, y, p: 2 * y.x,
                use_values_from_trigger_time=False,
                terminal=True,
                name="redose",
            )
        ]
    )
    (event,) = system.trigger_events
    x, z = system.state_symbols
    k, dose, tlag = system.param_symbols
    assert event.kind == "trigger" and event.name == "redose" and event.terminal
    assert event.trigger == (x < 0.5) & (system.t > tlag)
    assert event.affect == (x, z + dose) and event.assigned == (False, True)
    assert (event.initial_value, event.persistent, event.use_values_from_trigger_time) == (
        False,
        False,
        False,
    )
    assert event.priority == 2 * x


def test_affect_as_values_assigns_the_components_that_change():
    system = _decay([ImplicitEvent(lambda t, y, p: y.x - 0.5, affect=lambda t, y, p: [y.x, 0.0])])
    assert system.events[0].assigned == (False, True)


def test_trigger_attributes_change_the_fingerprint():
    def make(**kw):
        return _decay([TriggerEvent(lambda t, y, p: y.x < 0.5, **kw)]).fingerprint

    prints = {
        make(),
        make(initial_value=False),
        make(persistent=False),
        make(use_values_from_trigger_time=False),
        make(priority=1.0),
        make(random_order=True),
    }
    assert len(prints) == 6


@pytest.mark.parametrize(
    ("trigger", "error", "message"),
    [
        (lambda t, y, p: (y.x < 0.5) and (t > 1), TypeError, "uses Python's `and`"),
        (lambda t, y, p: y.x == 0.5, TypeError, "returned the Python bool False"),
        (lambda t, y, p: y.x - 0.5, TypeError, "must return a boolean expression"),
        (lambda t, y, p: sp.Implies(y.x < 0.5, t > 1), TypeError, "Implies"),
        (lambda t, y, p: y.x < sp.Symbol("q"), ValueError, "uses undeclared symbol(s) q"),
    ],
)
def test_bad_triggers_name_the_culprit(trigger, error, message):
    with pytest.raises(error, match=re.escape(message)):
        _decay([TriggerEvent(trigger, name="bad")])


@pytest.mark.parametrize(
    ("kw", "error", "message"),
    [
        (
            dict(affect=lambda t, y, p: {"w": 1.0}),
            ValueError,
            "affect assigns unknown state(s) 'w'",
        ),
        (dict(initial_value=1), TypeError, "initial_value must be True or False"),
        (dict(persistent="no"), TypeError, "persistent must be True or False"),
        (dict(random_order=None), TypeError, "random_order must be True or False"),
        (dict(priority=lambda t, y, p: y.x < 1), TypeError, "priority must be a scalar expression"),
    ],
)
def test_bad_trigger_attributes_name_the_culprit(kw, error, message):
    with pytest.raises(error, match=re.escape(message)):
        _decay([TriggerEvent(lambda t, y, p: y.x < 0.5, name="bad", **kw)])
