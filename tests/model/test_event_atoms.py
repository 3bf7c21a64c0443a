"""The atoms of event triggers and conditions: shared between events, canonical signs, time
atoms scheduled instead of root-found, the directions runs stop at, and cause classes."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from pymc_odesens import OdeSystem
from pymc_odesens import math as om
from pymc_odesens.model import ExplicitEvent, ImplicitEvent, TriggerEvent


def _system(events):
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x, 0.0 * y.n],
        states=["x", "n"],
        params=["k", "c", "t_on"],
        events=events,
    )


def test_equal_comparisons_share_one_atom_with_a_canonical_sign():
    """``x < c``, ``c > x`` and ``c - x > 0`` are one root atom ``x - c``; ``1 - x`` flips."""
    system = _system(
        [
            TriggerEvent(lambda t, y, p: y.x < p.c),
            TriggerEvent(lambda t, y, p: p.c > y.x),
            TriggerEvent(lambda t, y, p: p.c - y.x > 0),
            ImplicitEvent(lambda t, y, p: p.c - y.x, direction="up"),
        ]
    )
    atoms = system.event_atoms
    x, _ = system.state_symbols
    _, c, _ = system.param_symbols
    (g,) = atoms.roots
    sign = 1 if g == x - c else -1
    assert g == sign * (x - c)
    assert atoms.formulas[0] == ("atom", "<" if sign > 0 else ">", 0)
    assert atoms.formulas[1] == atoms.formulas[0]
    assert atoms.formulas[2] == atoms.formulas[0]
    # the implicit event's condition c - x going up is x - c going down
    assert atoms.crossing_atom[3] == (0, -sign)
    assert atoms.root_directions == (0,)  # a trigger uses it: both directions stop runs


def test_time_comparisons_become_scheduled_time_atoms():
    system = _system(
        [
            TriggerEvent(lambda t, y, p: (t >= p.t_on) & (y.x < 0.5)),
            TriggerEvent(lambda t, y, p: 2 * t < 6),  # t < 3
            TriggerEvent(lambda t, y, p: om.greater(24, t + p.t_on)),  # t < 24 - t_on
        ]
    )
    atoms = system.event_atoms
    _, _, t_on = system.param_symbols
    assert atoms.time_atoms == (t_on, sp.Integer(3), 24 - t_on)
    n_roots = len(atoms.roots)
    kind, children = atoms.formulas[0]
    assert kind == "and" and ("atom", ">=", n_roots) in children and len(children) == 2
    assert atoms.formulas[1] == ("atom", "<", n_roots + 1)
    assert atoms.formulas[2] == ("atom", "<", n_roots + 2)
    assert [owner for owner, _, _ in atoms.slots] == [-1, -2, -3]
    # t0 and constant times are class 0; the two parameter-dependent times differ
    classes = atoms.cause_classes[1 + n_roots :]
    assert classes[1] == 0 and classes[0] != 0 and classes[2] not in (0, classes[0])


def test_implicit_events_alone_keep_their_direction():
    system = _system(
        [
            ImplicitEvent(lambda t, y, p: y.x - 0.5, direction="down"),
            ImplicitEvent(lambda t, y, p: y.x - 0.5, direction="down"),
            ImplicitEvent(lambda t, y, p: y.x - 0.2, direction="down"),
            ImplicitEvent(lambda t, y, p: y.x - 0.2, direction="up"),
        ]
    )
    atoms = system.event_atoms
    assert len(atoms.roots) == 2
    assert atoms.root_directions == (-1, 0)


def test_explicit_times_and_time_atoms_with_the_same_expression_share_a_class():
    system = _system(
        [
            ExplicitEvent(lambda p: [p.t_on, 1.0]),
            TriggerEvent(lambda t, y, p: t >= p.t_on),
        ]
    )
    atoms = system.event_atoms
    assert [(owner, position) for owner, position, _ in atoms.slots] == [(0, 0), (0, 1), (-1, 0)]
    classes = atoms.cause_classes
    np.testing.assert_array_equal(classes[1:], [classes[1], 0, classes[1]])
    assert classes[1] != 0
    assert list(atoms.cause_events[1:]) == [0, 0, 1]


def test_logical_helpers_build_the_same_formulas_as_the_operators():
    a = _system([TriggerEvent(lambda t, y, p: (y.x < p.c) & ~(t > 2) | (y.n > 1) ^ (y.x > 3))])
    b = _system(
        [
            TriggerEvent(
                lambda t, y, p: om.logical_or(
                    om.logical_and(y.x < p.c, om.logical_not(t > 2)),
                    om.logical_xor(y.n > 1, y.x > 3),
                )
            )
        ]
    )
    assert a.event_atoms.formulas == b.event_atoms.formulas
    assert a.fingerprint == b.fingerprint


def test_equal_builds_an_equality_atom():
    system = _system([TriggerEvent(lambda t, y, p: om.equal(y.n, 2) & om.not_equal(y.x, p.c))])
    n = system.state_symbols[1]
    kinds = system.event_atoms.formulas[0]
    assert kinds[0] == "and"
    assert {child[1] for child in kinds[1]} == {"==", "!="}
    assert n - 2 in system.event_atoms.roots


@pytest.mark.parametrize("constant", [True, False])
def test_constant_triggers(constant):
    system = _system([TriggerEvent(lambda t, y, p: sp.true if constant else sp.false)])
    assert system.event_atoms.formulas[0] == ("const", constant)
    assert system.event_atoms.roots == ()
