"""The event driver: explicit events at t0 and event times that are not finite."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pymc_odesens import EventTimeError, OdeSystem, solve
from pymc_odesens import math as om
from pymc_odesens.model import ExplicitEvent

METHODS = ("rk45", "ckrk", "bdf", "adams")


@pytest.fixture(scope="module")
def dose_at_t0():
    """x' = -k x with a unit dose x += 1 at t = 0 = t0."""
    dose = ExplicitEvent([0.0], affect=lambda t, y, p: [y.x + 1.0], name="dose")
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x], states=["x"], params=["k"], events=[dose], name="dose_t0"
    )


@pytest.mark.parametrize("method", METHODS)
def test_output_at_t0_is_the_state_after_an_event_at_t0(dose_at_t0, method):
    """An output time equal to t0 gets the right limit, as at any other event time: the
    state after the events at t0 (here 1 + 1), not y0."""
    result = solve(
        dose_at_t0,
        [1.0],
        [0.0, 0.0, 1.0],
        [1.0],
        method=method,
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    )
    np.testing.assert_array_equal(result.y[:2, 0], [2.0, 2.0])
    assert result.y[2, 0] == pytest.approx(2.0 * math.exp(-1.0), rel=1e-8)
    np.testing.assert_array_equal(result.events.times, [0.0])
    np.testing.assert_array_equal(result.events.before, [[1.0]])


def test_events_before_t0_are_ignored(dose_at_t0):
    result = solve(dose_at_t0, [1.0], [1.0, 2.0], [1.0], t0=0.5)
    assert result.events.times.size == 0
    assert result.y[0, 0] == pytest.approx(math.exp(-0.5), rel=1e-5)


@pytest.fixture(scope="module")
def timed_by_log():
    """An explicit event at log(tau): -inf at tau = 0, NaN for tau < 0."""
    event = ExplicitEvent(lambda p: [om.log(p.tau)], name="at_log_tau")
    return OdeSystem(
        lambda t, y, p: [-y.x], states=["x"], params=["tau"], events=[event], name="timed"
    )


@pytest.mark.parametrize(
    ("tau", "value"),
    [(0.0, "-inf"), (-1.0, "nan")],
)
def test_event_time_error_says_the_value(timed_by_log, tau, value):
    """EventTimeError said "(value nan)" whatever the time was."""
    with pytest.raises(EventTimeError, match=rf"'at_log_tau'.* it evaluates to {value}") as info:
        solve(timed_by_log, [1.0], [1.0, 2.0], [tau])
    assert str(info.value.t) == value


def test_event_time_error_says_inf():
    """+inf (a parameter itself may not be infinite: 1 / tau at tau = 0)."""
    event = ExplicitEvent(lambda p: [1.0 / p.tau], name="at_inverse_tau")
    system = OdeSystem(lambda t, y, p: [-y.x], states=["x"], params=["tau"], events=[event])
    with pytest.raises(EventTimeError, match=r"event 'at_inverse_tau'.*evaluates to inf") as info:
        solve(system, [1.0], [1.0], [0.0])
    assert info.value.t == math.inf
