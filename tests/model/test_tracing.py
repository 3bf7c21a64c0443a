"""Functions applied to symbols while tracing: errors name the user's line and the fix."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pymc_odesens import OdeSystem, stan
from pymc_odesens.model import ExplicitEvent, ImplicitEvent

MATH = r"function of the `math` module .* use the function of the same name in pymc_odesens.math"
TRUTH = r"comparison of symbols was used as a Python truth value .* pymc_odesens.math.where"


@pytest.mark.parametrize(
    ("rhs", "match"),
    [
        (lambda t, y, p: [math.sin(y[0])], MATH),
        (lambda t, y, p: [math.exp(p[0]) * y[0]], MATH),
        (lambda t, y, p: [float(y[0])], MATH),
        (lambda t, y, p: [np.exp(y[0])], r"numpy.exp cannot .* use pymc_odesens.math.exp"),
        (lambda t, y, p: [np.sin(t) * y[0]], r"numpy.sin cannot .* use pymc_odesens.math.sin"),
        (lambda t, y, p: [1.0 if y[0] > 0 else -1.0], TRUTH),
        (lambda t, y, p: [max(y[0], 0.0)], TRUTH + r".*om.maximum"),
        (lambda t, y, p: [min(y[0], p[0])], TRUTH),
    ],
)
def test_numeric_functions_on_symbols_name_the_fix(rhs, match):
    with pytest.raises(TypeError, match=r"while tracing rhs at test_tracing.py:\d+: .*" + match):
        OdeSystem(rhs, states=["x"], params=["c"])


def test_other_type_errors_pass_unchanged():
    with pytest.raises(TypeError, match="takes 2 positional arguments"):
        OdeSystem(lambda t, y: [y[0]], states=["x"])


def test_initial_state_and_events_are_traced_the_same_way():
    with pytest.raises(TypeError, match=r"while tracing initial_state at .*" + MATH):
        OdeSystem(
            lambda t, y, p: [-y[0]],
            states=["x"],
            params=["a"],
            initial_state=lambda p: [math.exp(p[0])],
        )
    event = ImplicitEvent(lambda t, y, p: y.x - 1.0, affect=lambda t, y, p: [y.x if y.x > 0 else 0])
    with pytest.raises(TypeError, match=r"while tracing event 'event0' affect at .*" + TRUTH):
        OdeSystem(lambda t, y, p: [-y[0]], states=["x"], events=[event])
    timed = ExplicitEvent(lambda p: [math.log(p.a)])
    with pytest.raises(TypeError, match=MATH):
        OdeSystem(lambda t, y, p: [-y[0]], states=["x"], params=["a"], events=[timed])


def test_stan_functions_give_the_same_hint():
    with pytest.raises(TypeError, match=r"while tracing .*numpy.exp cannot .*om.exp"):
        stan.ode_rk45(lambda t, y, k: [np.exp(-k * y[0])], np.array([1.0]), 0.0, [1.0], 0.5)


def test_a_system_needs_a_state():
    """N = 0 is refused at construction (before: ZeroDivisionError in bdf/adams and an
    IndentationError in generated code under ode_solution)."""
    with pytest.raises(ValueError, match=r"system 'empty' has no states .*at least one state"):
        OdeSystem(lambda t, y, p: [], states=[], params=["k"], name="empty")
    with pytest.raises(ValueError, match="has no states"):
        OdeSystem(lambda t, y, p: [], name="empty")
