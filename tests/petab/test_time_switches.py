"""Conditions of time found as switches: switching time, value after, value at t = 0."""

import sympy as sp

from pymc_odesens.petab.time_switches import find_time_switches

t, a, k = sp.symbols("t a k", real=True)
y = sp.Symbol("y", real=True)


def _one(expr):
    switches = find_time_switches([expr], t, [y], [a, k])
    assert len(switches) == 1
    return switches[0]


def test_a_step_on():
    switch = _one(y * sp.Piecewise((0, a - t > 0), (1, True)))
    assert switch.time == a
    assert switch.after is False  # a - t > 0 holds before a, not after
    assert switch.initial.subs(a, 2.0) == 1 and switch.initial.subs(a, 0.0) == 0


def test_a_scaled_time_and_both_directions():
    switch = _one(sp.Piecewise((k, 2 * t >= a + 1), (0, True)))
    assert sp.simplify(switch.time - (a + 1) / 2) == 0
    assert switch.after is True
    assert _one(sp.Piecewise((k, t < 3.0), (0, True))).time == 3.0


def test_conditions_that_do_not_switch_once_are_left_alone():
    exprs = [
        sp.Piecewise((1, y > 2), (0, True)),  # a state
        sp.Piecewise((1, t**2 > a), (0, True)),  # not linear in t
        sp.Piecewise((1, k * t > a), (0, True)),  # slope of unknown sign
        sp.Piecewise((1, sp.Eq(t, a)), (0, True)),  # an equality
    ]
    assert find_time_switches(exprs, t, [y], [a, k]) == []


def test_one_switch_per_distinct_condition():
    c = a - t > 0
    switches = find_time_switches(
        [sp.Piecewise((1, c), (0, True)), y * sp.Piecewise((2, c), (k, True))], t, [y], [a, k]
    )
    assert len(switches) == 1


def test_a_switching_time_at_the_start_does_not_fire():
    # t <= a holds at t = 0 when a = 0, but not just after: the switch starts at its value
    # after the switch, and its event (time -1, before the start) does not fire
    switch = _one(sp.Piecewise((k, t <= a), (0, True)))
    assert switch.after is False
    assert switch.initial.subs(a, 0.0) == 0 and switch.initial.subs(a, 1.5) == 1
    assert switch.event_time.subs(a, 0.0) == -1 and switch.event_time.subs(a, 1.5) == 1.5
    assert not switch.settled


def test_a_numeric_switching_time_at_or_before_the_start_is_settled():
    assert _one(sp.Piecewise((k, t < 0), (0, True))).settled
    assert _one(sp.Piecewise((k, t > -2.0), (0, True))).settled
    assert not _one(sp.Piecewise((k, t < 0.5), (0, True))).settled


def test_unchanged_through_the_last_output_time():
    # t <= 3600 still holds at t = 3600: nothing switches while simulating to 3600
    assert _one(sp.Piecewise((k, t <= 3600.0), (0, True))).unchanged_through(t, 3600.0)
    # t < 3600 does not: its value at 3600 is the one after the switch
    assert not _one(sp.Piecewise((k, t < 3600.0), (0, True))).unchanged_through(t, 3600.0)
    later = _one(sp.Piecewise((k, t > 50.0), (0, True)))
    assert later.unchanged_through(t, 40.0)
    assert not later.unchanged_through(t, 60.0)
    assert not later.unchanged_through(t, float("inf"))  # steady states: after every switch
    assert not _one(sp.Piecewise((k, t > a), (0, True))).unchanged_through(t, 40.0)
