"""Failure paths of solve_sensitivity: bad arguments (named in the message) and solver errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pymc_odesens import (
    MaxNumStepsError,
    OdeSolverError,
    OdeSystem,
    StepSizeTooSmallError,
    solve_sensitivity,
)
from pymc_odesens.sensitivity import SENSITIVITY_METHODS


@pytest.fixture(scope="module")
def decay():
    return OdeSystem(lambda t, y, p: [-p[0] * y[0]], states=["x"], params=["k"])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"sensitivity": None}, ValueError, r"sensitivity must be one of .* got None"),
        (
            {"wrt": "state"},
            ValueError,
            r"wrt must be one of \('params', 'y0', 'both'\), got 'state'",
        ),
        ({"wrt": ["params"]}, ValueError, r"wrt must be one of .* got \['params'\]"),
        (
            {"sensitivity_error_control": "yes"},
            TypeError,
            "sensitivity_error_control must be True or False, got 'yes'",
        ),
        (
            {"sensitivity_error_control": 1},
            TypeError,
            "sensitivity_error_control must be True or False, got 1",
        ),
        (
            {"sensitivity_error_control": None},
            TypeError,
            "sensitivity_error_control must be True or False, got None",
        ),
        ({"method": "rk4"}, ValueError, r"method must be one of 'rk45', 'ckrk', 'bdf', 'adams'"),
        ({"relative_tolerance": -1.0}, ValueError, "relative_tolerance must be positive"),
        ({"absolute_tolerance": [1e-8, 1e-8]}, ValueError, r"absolute_tolerance .*shape \(1,\)"),
        ({"t0": 2.0}, ValueError, r"times must be >= t0 = 2.0"),
    ],
)
def test_bad_options(decay, kwargs, error, match):
    with pytest.raises(error, match=match):
        solve_sensitivity(decay, [1.0], [0.5, 1.0], [0.3], **kwargs)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (([1.0, 2.0], [1.0], [0.3]), ValueError, r"y0 must have shape \(1,\)"),
        (([1.0], [1.0], [0.3, 0.1]), ValueError, r"params must have shape \(1,\)"),
        (([1.0], [1.0, 0.5], [0.3]), ValueError, r"times must be non-decreasing"),
    ],
)
def test_bad_arrays(decay, args, error, match):
    with pytest.raises(error, match=match):
        solve_sensitivity(decay, *args)


def test_y0_none_needs_a_declared_initial_state(decay):
    with pytest.raises(ValueError, match=r"y0 is required: the system declares no initial_state"):
        solve_sensitivity(decay, None, [1.0], [0.3])


def test_system_type_is_checked():
    with pytest.raises(TypeError, match="system must be an OdeSystem"):
        solve_sensitivity(lambda t, y, p: y, [1.0], [1.0], [])


def test_numpy_booleans_are_accepted_for_error_control(decay):
    on = solve_sensitivity(decay, [1.0], [1.0], [0.3], sensitivity_error_control=np.True_)
    off = solve_sensitivity(decay, [1.0], [1.0], [0.3], sensitivity_error_control=np.False_)
    np.testing.assert_allclose(on.S[-1, 0, 0], -np.exp(-0.3), rtol=1e-8)
    np.testing.assert_allclose(off.S[-1, 0, 0], -np.exp(-0.3), rtol=1e-6)


def test_unknown_sensitivity_method_lists_the_known_ones(decay):
    assert "forward" in SENSITIVITY_METHODS
    expected = re.escape(f"sensitivity must be one of {SENSITIVITY_METHODS}, got 'complex_step'")
    with pytest.raises(ValueError, match=expected):
        solve_sensitivity(decay, [1.0], [1.0], [0.3], sensitivity="complex_step")


@pytest.mark.parametrize("method", ["rk45", "ckrk", "bdf", "adams"])
def test_max_num_steps(decay, method):
    with pytest.raises(MaxNumStepsError, match=r"max_num_steps = 5"):
        solve_sensitivity(
            decay,
            [1.0],
            [100.0],
            [1.0],
            method=method,
            max_num_steps=5,
            relative_tolerance=1e-10,
            absolute_tolerance=1e-10,
        )


@pytest.mark.parametrize("method", ["rk45", "ckrk", "bdf", "adams"])
def test_blow_up_names_a_component_of_the_augmented_vector(method):
    """x' = k x^2 blows up at t = 1. The failure is a solver error whose component
    indexes z = [y, S_0, ...] and whose message names it (a state or dstate/dparam)."""
    system = OdeSystem(lambda t, y, p: [p.k * y.x**2, -y.z], states=["x", "z"], params=["k"])
    with pytest.raises(OdeSolverError, match=r"\((x|z|dx/dk|dz/dk)\)") as info:
        solve_sensitivity(system, [1.0, 1.0], [0.5, 2.0], [1.0], method=method)
    assert isinstance(info.value, StepSizeTooSmallError)
    assert 0 <= info.value.component < 4
    assert info.value.t == pytest.approx(1.0, abs=1e-6)
