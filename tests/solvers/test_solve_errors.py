"""Every failure path: bad arguments (ValueError/TypeError naming them) and solver errors."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens import (
    MaxNumStepsError,
    NewtonConvergenceError,
    NonFiniteRhsError,
    OdeSolverError,
    OdeSystem,
    StepSizeTooSmallError,
    solve,
)
from pymc_odesens import math as om


@pytest.fixture(scope="module")
def decay():
    return OdeSystem(lambda t, y, p: [-p[0] * y[0]], states=["x"], params=["k"])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"method": "rk4"}, ValueError, r"method must be one of 'rk45', 'ckrk', 'bdf', 'adams'"),
        ({"relative_tolerance": -1e-6}, ValueError, "relative_tolerance must be positive"),
        ({"relative_tolerance": float("nan")}, ValueError, "relative_tolerance must be positive"),
        ({"relative_tolerance": "tight"}, TypeError, "relative_tolerance must be a positive float"),
        ({"absolute_tolerance": 0.0}, ValueError, "absolute_tolerance must be positive"),
        ({"absolute_tolerance": [1e-6, 1e-6]}, ValueError, r"absolute_tolerance .*shape \(1,\)"),
        ({"max_num_steps": 0}, ValueError, "max_num_steps must be positive"),
        ({"max_num_steps": 2.5}, TypeError, "max_num_steps must be a positive int"),
        # counts beyond int64 (an OverflowError inside the solver before)
        (
            {"max_num_steps": 1e20},
            ValueError,
            r"max_num_steps must be at most 2\*\*63 - 1 .*1e\+20",
        ),
        ({"max_num_steps": 2**63}, ValueError, r"max_num_steps must be at most 2\*\*63 - 1"),
        ({"t0": 2.0}, ValueError, r"times must be >= t0 = 2.0"),
        ({"t0": float("inf")}, ValueError, "t0 must be finite"),
    ],
)
def test_bad_controls(decay, kwargs, error, match):
    with pytest.raises(error, match=match):
        solve(decay, [1.0], [0.5, 1.0], [0.3], **kwargs)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (([1.0, 2.0], [1.0], [0.3]), ValueError, r"y0 must have shape \(1,\)"),
        (([1.0], [1.0], [0.3, 0.1]), ValueError, r"params must have shape \(1,\)"),
        (([np.nan], [1.0], [0.3]), ValueError, "y0 must be finite"),
        (([1.0], [1.0, 0.5], [0.3]), ValueError, r"times must be non-decreasing; times\[1\]"),
        (([1.0], [], [0.3]), ValueError, "at least one output time"),
        (([1.0], [[1.0]], [0.3]), ValueError, "times must be 1-dimensional"),
        (([1.0], [np.inf], [0.3]), ValueError, "times must be finite"),
        ((["a"], [1.0], [0.3]), TypeError, "y0 must be an array"),
    ],
)
def test_bad_arrays(decay, args, error, match):
    with pytest.raises(error, match=match):
        solve(decay, *args)


def test_largest_step_count_is_accepted(decay):
    result = solve(decay, [1.0], [1.0], [0.3], max_num_steps=2**63 - 1)
    assert result.controls.max_num_steps == 2**63 - 1
    assert result.y[0, 0] == pytest.approx(np.exp(-0.3), rel=1e-5)


def test_complex_inputs_are_refused(decay):
    with pytest.raises(TypeError, match=r"y0 must be real \(one value per state\)"):
        solve(decay, np.array([1 + 1j]), [1.0], [0.3])
    with pytest.raises(TypeError, match="params must be real"):
        solve(decay, [1.0], [1.0], np.array([0.3 + 0j]))
    with pytest.raises(TypeError, match="times must be real"):
        solve(decay, [1.0], np.array([1.0 + 0j]), [0.3])


def test_system_type_is_checked():
    with pytest.raises(TypeError, match="system must be an OdeSystem"):
        solve(lambda t, y, p: y, [1.0], [1.0], [])


@pytest.mark.parametrize("method", ["rk45", "ckrk", "bdf", "adams"])
def test_max_num_steps_between_outputs(decay, method):
    with pytest.raises(MaxNumStepsError, match=r"max_num_steps = 5 .* t = .*step size h") as info:
        solve(
            decay,
            [1.0],
            [100.0],
            [1.0],
            method=method,
            max_num_steps=5,
            relative_tolerance=1e-10,
            absolute_tolerance=1e-10,
        )
    assert isinstance(info.value, OdeSolverError)
    assert 0.0 < info.value.t < 100.0 and info.value.step_size > 0


def test_max_num_steps_counts_per_output_interval(decay):
    """The limit applies between output times, as in Stan: more outputs, same limit, success."""
    dense_times = np.linspace(0.1, 100.0, 1000)
    result = solve(decay, [1.0], dense_times, [1.0], method="rk45", max_num_steps=20)
    assert result.stats["n_steps"] > 20


@pytest.mark.parametrize("method", ["rk45", "ckrk", "bdf", "adams"])
def test_step_size_underflow_at_blow_up(method):
    # y' = y^2, y(0) = 1 blows up at t = 1
    blow_up = OdeSystem(lambda t, y, p: [y[0] ** 2], states=["u"])
    with pytest.raises((StepSizeTooSmallError, NonFiniteRhsError)) as info:
        solve(blow_up, [1.0], [2.0], [], method=method)
    assert info.value.t == pytest.approx(1.0, abs=1e-3)
    assert "t = 0.99" in str(info.value) or "t = 1" in str(info.value)


@pytest.mark.parametrize("method", ["rk45", "ckrk", "bdf", "adams"])
def test_non_finite_rhs_names_the_state(method):
    # dz/dt is NaN for t > 1 whatever the step: sqrt of a negative number
    system = OdeSystem(lambda t, y, p: [-y[0], om.sqrt(1.0 - t)], states=["x", "z"])
    with pytest.raises(NonFiniteRhsError, match=r"state 1 \(z\)") as info:
        solve(system, [1.0, 0.0], [2.0], [], method=method)
    assert info.value.component == 1
    assert info.value.t == pytest.approx(1.0, abs=1e-6)


def test_non_finite_rhs_at_the_initial_point():
    system = OdeSystem(lambda t, y, p: [om.log(y[0])], states=["c"])
    with pytest.raises(NonFiniteRhsError, match=r"state 0 \(c\) at t = 0"):
        solve(system, [0.0], [1.0], [], method="rk45")


@pytest.mark.parametrize("method", ["bdf", "adams"])
def test_newton_failure(method):
    # f is finite at y = 0 but its Jacobian is not: every Newton iteration diverges
    system = OdeSystem(lambda t, y, p: [-om.sqrt(om.abs(y[0]))], states=["u"])
    with pytest.raises(NewtonConvergenceError, match=r"Newton iteration failed 10 times"):
        solve(system, [0.0], [1.0], [], method=method)
