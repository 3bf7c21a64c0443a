"""Trigger events in `solve`: SBML's event semantics against closed forms.

Boolean triggers (and, or, not, xor), the trigger's value before t0, priorities,
assignments from the trigger time or the execution time, cascades, persistence, time
triggers hit exactly, several events on one condition, and the accumulation of events
(Zeno behaviour) ending in a named error.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from pymc_odesens import EventAccumulationError, OdeSystem, solve
from pymc_odesens.model import ExplicitEvent, ImplicitEvent, TriggerEvent
from pymc_odesens.solvers import seed_event_order
from tests.conftest import model_path

METHODS = ("rk45", "ckrk", "bdf", "adams")
TIGHT = dict(relative_tolerance=1e-10, absolute_tolerance=1e-12)


def _counter(name):
    return lambda t, y, p: {name: y[name] + 1.0}


@pytest.fixture(scope="module")
def logic():
    """x' = -x from 1 with one counter per trigger."""
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x, 0.0, 0.0, 0.0, 0.0],
        states=["x", "a", "b", "c", "d"],
        params=["k"],
        events=[
            TriggerEvent(lambda t, y, p: (y.x < 0.5) & (t > 1.0), _counter("a"), name="and"),
            TriggerEvent(lambda t, y, p: (y.x < 0.2) | (t > 3.0), _counter("b"), name="or"),
            TriggerEvent(lambda t, y, p: ~(y.x > 0.3), _counter("c"), name="not"),
            TriggerEvent(lambda t, y, p: (y.x < 0.5) ^ (t > 2.0), _counter("d"), name="xor"),
        ],
        name="trigger_logic",
    )


@pytest.mark.parametrize("method", METHODS)
def test_and_or_not_xor_triggers(logic, method):
    """and: at t = 1 (x < 0.5 since ln 2); or: x = 0.2 at ln 5 (t > 3 later keeps it true);
    not: x = 0.3 at ln(10/3); xor: true on [ln 2, 2) only, so it fires once at ln 2."""
    times = np.array([0.5, 1.0, 1.5, 2.5, 4.0])
    r = solve(logic, [1.0, 0, 0, 0, 0], times, [1.0], method=method, **TIGHT)
    assert r.events.names == ["xor", "and", "not", "or"]
    np.testing.assert_allclose(r.events.times, [np.log(2), 1.0, np.log(10 / 3), np.log(5)])
    assert r.events.times[1] == 1.0  # a time atom: hit exactly
    counters = np.array(
        [[0, 0, 0, 0], [1, 0, 0, 1], [1, 0, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]], dtype=float
    )
    np.testing.assert_array_equal(r.y[:, 1:], counters)
    np.testing.assert_allclose(r.y[:, 0], np.exp(-times), rtol=1e-8)


@pytest.fixture(scope="module")
def at_t0():
    return OdeSystem(
        lambda t, y, p: [-y.x, 0.0, 0.0, 0.0],
        states=["x", "a", "b", "c"],
        params=["unused"],
        events=[
            TriggerEvent(lambda t, y, p: y.x > 0.5, _counter("a"), initial_value=False, name="a"),
            TriggerEvent(lambda t, y, p: y.x > 0.5, _counter("b"), initial_value=True, name="b"),
            TriggerEvent(lambda t, y, p: t >= 0.0, _counter("c"), initial_value=False, name="c"),
        ],
    )


@pytest.mark.parametrize("method", ["rk45", "bdf"])
def test_a_trigger_true_at_t0_fires_there_only_with_initial_value_false(at_t0, method):
    r = solve(at_t0, [1.0, 0, 0, 0], [0.0, 1.0, 3.0], [0.0], method=method, **TIGHT)
    assert r.events.names == ["a", "c"]
    np.testing.assert_array_equal(r.events.times, [0.0, 0.0])
    # outputs at t0 are right limits: the counters already moved
    np.testing.assert_array_equal(r.y[:, 1:], [[1, 0, 1]] * 3)


@pytest.fixture(scope="module")
def priorities():
    """Two events at t = 1 assign s; a third, without priority, copies s when it executes."""
    return OdeSystem(
        lambda t, y, p: [0.0, 0.0],
        states=["s", "x"],
        params=["pa", "pb"],
        events=[
            TriggerEvent(
                lambda t, y, p: t >= 1, lambda t, y, p: {"s": 1.0}, priority=lambda t, y, p: p.pa
            ),
            TriggerEvent(
                lambda t, y, p: t >= 1, lambda t, y, p: {"s": 2.0}, priority=lambda t, y, p: p.pb
            ),
            TriggerEvent(
                lambda t, y, p: t >= 1,
                lambda t, y, p: {"x": y.s + 10.0},
                use_values_from_trigger_time=False,
                name="copy",
            ),
        ],
    )


@pytest.mark.parametrize(
    ("pa", "pb", "order", "s_end"),
    [
        (2.0, 1.0, ["event0", "event1"], 2.0),
        (1.0, 2.0, ["event1", "event0"], 1.0),
        (1.0, 1.0, ["event0", "event1"], 2.0),
    ],
)
def test_priorities_decide_the_final_value(priorities, pa, pb, order, s_end):
    """The higher priority executes first, so the lower one's assignment stays; equal
    priorities in declaration order; an event without priority after all of them."""
    r = solve(priorities, [0.0, 0.0], [2.0], [pa, pb], method="rk45", **TIGHT)
    assert r.events.names == [*order, "copy"]
    np.testing.assert_array_equal(r.y[-1], [s_end, s_end + 10.0])


def test_values_from_the_trigger_time_or_the_execution_time():
    """At t = 1, x := 10 first (priority 3); y := x from the trigger time keeps x's old
    value, w := x at execution gets 10."""
    system = OdeSystem(
        lambda t, y, p: [0.0, 0.0, 0.0],
        states=["x", "y", "w"],
        params=["unused"],
        events=[
            TriggerEvent(lambda t, y, p: t >= 1, lambda t, y, p: {"x": 10.0}, priority=3.0),
            TriggerEvent(
                lambda t, y, p: t >= 1,
                lambda t, y, p: {"y": y.x},
                priority=2.0,
                use_values_from_trigger_time=True,
            ),
            TriggerEvent(
                lambda t, y, p: t >= 1,
                lambda t, y, p: {"w": y.x},
                priority=1.0,
                use_values_from_trigger_time=False,
            ),
        ],
    )
    r = solve(system, [1.0, 0.0, 0.0], [0.5, 1.0, 2.0], [0.0], method="bdf", **TIGHT)
    np.testing.assert_array_equal(r.y, [[1, 0, 0], [10, 1, 10], [10, 1, 10]])


@pytest.mark.parametrize("method", ["ckrk", "adams"])
def test_an_assignment_that_switches_a_trigger_fires_it_at_the_same_time(method):
    """x := 5 at t = 1 makes x > 4 true: that event fires at t = 1 too (a cascade); x then
    decays through 4 (its trigger turns false, no event)."""
    system = OdeSystem(
        lambda t, y, p: [-y.x, 0.0],
        states=["x", "n"],
        params=["unused"],
        events=[
            TriggerEvent(lambda t, y, p: t >= 1, lambda t, y, p: {"x": 5.0}, name="set"),
            TriggerEvent(lambda t, y, p: y.x > 4, _counter("n"), name="cascade"),
        ],
    )
    r = solve(system, [1.0, 0.0], [1.0, 2.0, 3.0], [0.0], method=method, **TIGHT)
    assert r.events.names == ["set", "cascade"]
    np.testing.assert_array_equal(r.events.times, [1.0, 1.0])
    np.testing.assert_allclose(r.y[:, 0], 5 * np.exp(-np.array([0.0, 1.0, 2.0])), rtol=1e-8)
    np.testing.assert_array_equal(r.y[:, 1], [1.0, 1.0, 1.0])


def test_a_non_persistent_event_is_cancelled_when_its_trigger_turns_false():
    """At t = 1 three events fire; x := 0 (priority 2) makes the others' x > 0.5 false:
    the non-persistent one is cancelled, the persistent one still executes."""
    system = OdeSystem(
        lambda t, y, p: [0.0, 0.0, 0.0],
        states=["x", "y", "w"],
        params=["unused"],
        events=[
            TriggerEvent(lambda t, y, p: t >= 1, lambda t, y, p: {"x": 0.0}, priority=2.0),
            TriggerEvent(
                lambda t, y, p: (t >= 1) & (y.x > 0.5),
                lambda t, y, p: {"y": 1.0},
                priority=1.0,
                persistent=False,
                name="cancelled",
            ),
            TriggerEvent(
                lambda t, y, p: (t >= 1) & (y.x > 0.5),
                lambda t, y, p: {"w": 1.0},
                priority=1.0,
                persistent=True,
                name="persists",
            ),
        ],
    )
    r = solve(system, [1.0, 0.0, 0.0], [2.0], [0.0], method="rk45", **TIGHT)
    assert r.events.names == ["event0", "persists"]
    np.testing.assert_array_equal(r.y[-1], [0.0, 0.0, 1.0])


@pytest.fixture(scope="module")
def timed():
    """Doses when t >= t_on and when t > 2 t_on: scheduled, not root-found."""
    dose = lambda t, y, p: {"x": y.x + p.d}  # noqa: E731
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x],
        states=["x"],
        params=["k", "t_on", "d"],
        events=[
            TriggerEvent(lambda t, y, p: t >= p.t_on, dose, name="first"),
            TriggerEvent(lambda t, y, p: t > 2 * p.t_on, dose, name="second"),
        ],
    )


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("t_on", [0.7, 1.3])
def test_time_triggers_are_hit_exactly(timed, method, t_on):
    k, d = 0.8, 2.0
    times = np.array([0.5, t_on, 2 * t_on, 4.0])
    r = solve(timed, [1.0], times, [k, t_on, d], method=method, **TIGHT)
    assert r.events.names == ["first", "second"]
    assert r.events.times[0] == t_on and r.events.times[1] == 2 * t_on

    def closed(t):
        x = np.exp(-k * t)
        x += np.where(t >= t_on, d * np.exp(-k * (t - t_on)), 0.0)
        return x + np.where(t >= 2 * t_on, d * np.exp(-k * (t - 2 * t_on)), 0.0)

    np.testing.assert_allclose(r.y[:, 0], closed(times), rtol=1e-8)


@pytest.mark.parametrize("method", ["rk45", "bdf"])
def test_events_on_the_same_condition_all_fire(method):
    """Two implicit events on x = 0.5 (written both ways) and two triggers on x < 0.2."""
    system = OdeSystem(
        lambda t, y, p: [-y.x, 0.0, 0.0, 0.0, 0.0],
        states=["x", "a", "b", "c", "d"],
        params=["unused"],
        events=[
            ImplicitEvent(lambda t, y, p: y.x - 0.5, _counter("a"), direction="down"),
            ImplicitEvent(lambda t, y, p: 0.5 - y.x, _counter("b"), direction="up"),
            TriggerEvent(lambda t, y, p: y.x < 0.2, _counter("c")),
            TriggerEvent(lambda t, y, p: 0.2 > y.x, _counter("d")),
        ],
    )
    r = solve(system, [1.0, 0, 0, 0, 0], [3.0], [0.0], method=method, **TIGHT)
    assert r.events.names == ["event0", "event1", "event2", "event3"]
    np.testing.assert_allclose(r.events.times, np.log([2, 2, 5, 5]), rtol=1e-9)
    np.testing.assert_array_equal(r.y[-1, 1:], [1, 1, 1, 1])


def test_explicit_and_trigger_events_at_one_time_execute_in_declaration_order():
    system = OdeSystem(
        lambda t, y, p: [0.0],
        states=["x"],
        params=["unused"],
        events=[
            TriggerEvent(lambda t, y, p: t >= 1, lambda t, y, p: {"x": 2 * y.x}, name="double"),
            ExplicitEvent([1.0], lambda t, y, p: {"x": y.x + 1}, name="add"),
        ],
    )
    r = solve(system, [1.0], [2.0], [0.0], **TIGHT)
    assert r.events.names == ["double", "add"]
    assert r.y[-1, 0] == 3.0


def _competing(random_order):
    """Every 0.1 two events of equal priority compete: the first to execute sets 'last' to
    t, which cancels the other (not persistent); each counts its wins."""
    return OdeSystem(
        lambda t, y, p: [0.0, 0.0, 0.0],
        states=["last", "q", "r"],
        params=["unused"],
        events=[
            TriggerEvent(
                lambda t, y, p: t - y.last >= 0.1,
                lambda t, y, p, c=c: {"last": t, c: y[c] + 1},
                priority=1.0,
                persistent=False,
                random_order=random_order,
                name=c,
            )
            for c in ("q", "r")
        ],
    )


def test_ties_execute_in_declaration_order_or_at_random_with_random_order():
    times = [10.05]
    fixed = solve(_competing(False), [0.0, 0.0, 0.0], times, [0.0], **TIGHT)
    np.testing.assert_array_equal(fixed.y[-1, 1:], [100, 0])  # 'q' always wins
    system = _competing(True)
    seed_event_order(2026)
    drawn = solve(system, [0.0, 0.0, 0.0], times, [0.0], **TIGHT)
    q, r = drawn.y[-1, 1:]
    assert q + r == 100 and len(drawn.events.names) == 100
    assert 25 <= q <= 75  # a fair coin: P(outside) < 1e-6
    assert drawn.events.names.count("q") == q
    seed_event_order(2026)
    again = solve(system, [0.0, 0.0, 0.0], times, [0.0], **TIGHT)
    assert again.events.names == drawn.events.names  # the seed fixes the draws


@pytest.mark.parametrize("method", METHODS)
def test_two_atoms_reaching_zero_together_both_fire(method):
    """Two clocks reset by their own events every 0.1: their atoms reach zero at the same
    instants (exactly, when the root is hit exactly), and both events fire each time."""
    system = OdeSystem(
        lambda t, y, p: [0.0, 0.0, 0.0, 0.0],
        states=["a", "b", "na", "nb"],
        params=["unused"],
        events=[
            TriggerEvent(
                lambda t, y, p, c=c: t - y[c] >= 0.1,
                lambda t, y, p, c=c: {c: t, "n" + c: y["n" + c] + 1},
                name=c,
            )
            for c in ("a", "b")
        ],
    )
    r = solve(system, [0.0] * 4, [1.05], [0.0], method=method, **TIGHT)
    np.testing.assert_array_equal(r.y[-1, 2:], [10, 10])
    np.testing.assert_allclose(r.events.times, np.repeat(0.1 * np.arange(1, 11), 2), rtol=1e-9)


def test_seed_event_order_names_a_bad_seed():
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*32\), got -1"):
        seed_event_order(-1)


# -- a state left at rest on a switching surface --------------------------------------------


def _flux(y, p):
    return p.k1 * y.S1 * y.S2 - p.k2 * y.S3


RESET = TriggerEvent(
    lambda t, y, p: y.S1 < 0.5,
    lambda t, y, p: {"S2": 1.0, "resets": y.resets + 1.0},
    name="reset",
)


def resting_system() -> OdeSystem:
    """SBML case 00354 with a counter: S1 + S2 <-> S3 (k1 = 0.75, k2 = 0.25) from (1, 2, 1);
    when S1 < 0.5, S2 := 1. That puts the state exactly at an equilibrium, (0.5, 1, 1.5),
    with S1 on the threshold: the trigger's condition rests at zero."""
    return OdeSystem(
        lambda t, y, p: [-_flux(y, p), -_flux(y, p), _flux(y, p), 0.0],
        states=["S1", "S2", "S3", "resets"],
        params=["k1", "k2"],
        events=[RESET],
        name="resting",
    )


@pytest.fixture(scope="module")
def resting():
    return resting_system()


@pytest.mark.parametrize("method", METHODS)
def test_an_event_that_leaves_the_state_resting_on_its_surface_fires_once(resting, method):
    """Before the event S2 = S1 + 1 and S3 = 2 - S1, so S1' = -0.75 S1^2 - S1 + 0.5 (roots
    x1 = (sqrt(2.5) - 1) / 1.5 and x2 = -(sqrt(2.5) + 1) / 1.5) reaches 0.5 at
    ln[((1 - x1) / (1 - x2)) / ((0.5 - x1) / (0.5 - x2))] / (0.75 (x1 - x2)) = 0.94299; then
    nothing moves. Rounding keeps carrying S1 across 0.5 by a few ulps: before the rest rule
    every method ended in EventAccumulationError, and with a rule for exact zeros only rk45
    counted 11 resets (S1 hopping between 0.5 and 0.5 + 1 ulp)."""
    x1, x2 = (np.sqrt(2.5) - 1) / 1.5, -(np.sqrt(2.5) + 1) / 1.5
    tau = np.log(((1 - x1) / (1 - x2)) / ((0.5 - x1) / (0.5 - x2))) / (0.75 * (x1 - x2))
    times = np.linspace(0.0, 20.0, 41)
    r = solve(resting, [1.0, 2.0, 1.0, 0.0], times, [0.75, 0.25], method=method, **TIGHT)
    assert r.events.names == ["reset"]
    np.testing.assert_allclose(r.events.times, [tau], rtol=1e-8)
    after = times > tau
    np.testing.assert_allclose(r.y[after, :3], [[0.5, 1.0, 1.5]] * after.sum(), atol=1e-9)
    np.testing.assert_array_equal(r.y[:, 3], after.astype(float))


def test_a_resting_condition_that_moves_away_still_crosses():
    """The rest rule gives rounding a band, not the condition: the same model with a drive
    d cos(t - 5) on S1 that an event switches on at t = 5 (d := 0.2) pushes S1 off the
    threshold, up and back down, and the event fires again where a solve started at t = 5
    from the equilibrium (so never at rest) says it does."""
    driven = OdeSystem(
        lambda t, y, p: [
            -_flux(y, p) + y.d * sp.cos(t - 5.0),
            -_flux(y, p),
            _flux(y, p),
            0.0,
            0.0,
        ],
        states=["S1", "S2", "S3", "resets", "d"],
        params=["k1", "k2"],
        events=[
            RESET,
            TriggerEvent(lambda t, y, p: t >= 5.0, lambda t, y, p: {"d": 0.2}, name="drive"),
        ],
    )
    times = np.linspace(5.0, 12.0, 15)
    for method in METHODS:
        whole = solve(
            driven, [1.0, 2.0, 1.0, 0.0, 0.0], times, [0.75, 0.25], method=method, **TIGHT
        )
        fresh = solve(
            driven, [0.5, 1.0, 1.5, 1.0, 0.2], times, [0.75, 0.25], t0=5.0, method=method, **TIGHT
        )
        assert whole.events.names[:2] == ["reset", "drive"], method
        assert len(fresh.events.names) >= 1 and set(fresh.events.names) == {"reset"}, method
        assert whole.events.names[2:] == fresh.events.names, method
        np.testing.assert_allclose(whole.events.times[2:], fresh.events.times, rtol=1e-8)
        np.testing.assert_allclose(whole.y, fresh.y, rtol=1e-7, atol=1e-9)


# -- accumulating events: a named error, never a wrong number --------------------------------


@pytest.fixture(scope="module")
def ball():
    return OdeSystem.from_json(model_path("bouncing_ball"))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    ("y0", "params", "accumulation"),
    [
        # issue 15's ball: dropped from z = 1 with g = 9.81, impacts at sqrt(2 / g) (1 + 1 +
        # 1/2 + ...): they accumulate at 3 sqrt(2 / g) = 1.3546
        ([1.0, 0.0], [9.81, 0.5], 3 * np.sqrt(2 / 9.81)),
        # thrown down from z = 5: the first impact at 0.99005, the next ones after 2 v1 / g
        # (1 + 1/2 + ...) with v1 = |v(tau-)| / 2: they accumulate at 2.990150
        (
            [5.0, -0.1],
            [10.0, 0.5],
            (-0.1 + np.sqrt(0.01 + 100.0)) / 10.0 + 0.2 * np.sqrt(0.01 + 100.0),
        ),
    ],
)
def test_zeno_bouncing_ball_raises_at_the_accumulation_point(
    ball, method, y0, params, accumulation
):
    """Restitution 0.5: the bounces accumulate at a finite time, and passing it would need
    infinitely many of them. The solve ends there with a named error (before this check it
    returned z(5) = -66.9 for issue 15's ball: the ball fell through the floor)."""
    with pytest.raises(EventAccumulationError, match=r"events accumulate at t = ") as info:
        solve(ball, y0, [5.0], params, method=method, **TIGHT)
    assert "event 'event0'" in str(info.value)
    assert info.value.t == pytest.approx(accumulation, abs=1e-5)
    assert info.value.t < accumulation + 1e-9


def test_zeno_ball_with_a_trigger_raises_too():
    ball = OdeSystem(
        lambda t, y, p: [y.v, -p.g],
        states=["z", "v"],
        params=["g", "gamma"],
        events=[
            TriggerEvent(
                lambda t, y, p: y.z < 0, lambda t, y, p: {"v": -p.gamma * y.v}, name="bounce"
            )
        ],
    )
    with pytest.raises(EventAccumulationError, match="'bounce'"):
        solve(ball, [5.0, -0.1], [5.0], [10.0, 0.5], method="rk45", **TIGHT)
    # below the accumulation point the trigger reproduces the implicit event's bounces
    r = solve(ball, [5.0, -0.1], [2.5], [10.0, 0.5], method="rk45", **TIGHT)
    tau0 = (-0.1 + np.sqrt(0.01 + 100.0)) / 10.0
    v1 = 0.5 * np.sqrt(0.01 + 100.0)  # the speed after the first bounce
    np.testing.assert_allclose(r.events.times[:3], tau0 + np.array([0.0, 0.2, 0.3]) * v1, rtol=1e-9)


def test_events_that_keep_triggering_one_another_raise():
    """x := -1 whenever x > 0 and x := 1 whenever x < 0: set off at t = 1, never ending."""
    system = OdeSystem(
        lambda t, y, p: [0.0],
        states=["x"],
        params=["unused"],
        events=[
            TriggerEvent(lambda t, y, p: t >= 1, lambda t, y, p: {"x": 1.0}, name="start"),
            TriggerEvent(lambda t, y, p: y.x > 0, lambda t, y, p: {"x": -1.0}, name="down"),
            TriggerEvent(lambda t, y, p: y.x < 0, lambda t, y, p: {"x": 1.0}, name="up"),
        ],
    )
    with pytest.raises(EventAccumulationError, match="keep triggering one another"):
        solve(system, [-0.5], [2.0], [0.0])
