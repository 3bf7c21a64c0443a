"""Stan's ode_adjoint_tol_ctl controls: defaults, names and codes, validation with its
messages, that every control reaches the computation, and solver failures naming the
phase that failed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pymc_odesens import (
    MaxNumStepsError,
    OdeSolverError,
    OdeSystem,
    adjoint_forward,
    adjoint_gradient,
)
from pymc_odesens.sensitivity.adjoint_controls import ADJOINT_DEFAULTS
from tests.sensitivity.adjoint_reference import (
    adjoint_controls,
    component_error,
    reference_case,
    relative_error,
)

TIMES = np.array([0.5, 1.0, 2.0])


@pytest.fixture(scope="module")
def decay2():
    """Two decoupled decays: N = 2, P = 2."""
    return OdeSystem(
        lambda t, y, p: [-p[0] * y[0], -p[1] * y[1]], states=["x", "z"], params=["k", "m"]
    )


def _gradient(system, **controls):
    return adjoint_gradient(system, [1.0, 2.0], TIMES, [0.3, 0.6], np.ones((3, 2)), **controls)


ACCEPTED = ", ".join(ADJOINT_DEFAULTS)


@pytest.mark.parametrize(
    ("controls", "error", "match"),
    [
        # unknown names (e.g. solve()'s own) are refused, listing the accepted ones
        (
            {"relative_tolerance": 1e-8},
            TypeError,
            r"unknown adjoint control\(s\) \['relative_tolerance'\]; accepted: "
            + ACCEPTED.replace("(", r"\("),
        ),
        (
            {"rtol_backward": 1e-8, "method": "bdf"},
            TypeError,
            r"unknown adjoint control\(s\) \['method', 'rtol_backward'\]",
        ),
        # relative tolerances: positive, finite, < 1
        (
            {"relative_tolerance_forward": -1e-6},
            ValueError,
            r"relative_tolerance_forward must be positive, finite and < 1; got -1e-06",
        ),
        (
            {"relative_tolerance_backward": 0.0},
            ValueError,
            "relative_tolerance_backward must be positive, finite and < 1; got 0.0",
        ),
        (
            {"relative_tolerance_quadrature": float("nan")},
            ValueError,
            "relative_tolerance_quadrature must be positive, finite and < 1; got nan",
        ),
        (
            {"relative_tolerance_forward": 1.0},
            ValueError,
            "relative_tolerance_forward must be positive, finite and < 1; got 1.0",
        ),
        (
            {"relative_tolerance_backward": "tight"},
            TypeError,
            "relative_tolerance_backward must be a positive float, got 'tight'",
        ),
        # absolute tolerances: positive and finite, scalar or one per state (not the
        # quadrature's, which is one scalar)
        (
            {"absolute_tolerance_forward": 0.0},
            ValueError,
            "absolute_tolerance_forward must be positive and finite; got 0.0",
        ),
        (
            {"absolute_tolerance_backward": [1e-8, -1e-8]},
            ValueError,
            r"absolute_tolerance_backward must be positive and finite; got \[1e-08, -1e-08\]",
        ),
        (
            {"absolute_tolerance_forward": [1e-8, 1e-8, 1e-8]},
            ValueError,
            r"absolute_tolerance_forward must be a scalar or have shape \(2,\) \(one per "
            r"state\); got shape \(3,\)",
        ),
        (
            {"absolute_tolerance_backward": float("inf")},
            ValueError,
            "absolute_tolerance_backward must be positive and finite; got inf",
        ),
        (
            {"absolute_tolerance_quadrature": [1e-8, 1e-8]},
            ValueError,
            r"absolute_tolerance_quadrature must be a scalar; got shape \(2,\)",
        ),
        (
            {"absolute_tolerance_quadrature": "small"},
            TypeError,
            "absolute_tolerance_quadrature must be a positive float or array of floats, "
            "got 'small'",
        ),
        # step counts: positive ints
        ({"max_num_steps": 0}, ValueError, "max_num_steps must be positive, got 0"),
        ({"max_num_steps": 2.5}, TypeError, "max_num_steps must be a positive int, got 2.5"),
        ({"max_num_steps": True}, TypeError, "max_num_steps must be a positive int, got True"),
        (
            {"max_num_steps": 2**63},
            ValueError,
            r"max_num_steps must be at most 2\*\*63 - 1 = 9223372036854775807",
        ),
        (
            {"num_steps_between_checkpoints": 1e20},
            ValueError,
            r"num_steps_between_checkpoints must be at most 2\*\*63 - 1 .*got 1e\+20",
        ),
        (
            {"num_steps_between_checkpoints": -150},
            ValueError,
            "num_steps_between_checkpoints must be positive, got -150",
        ),
        (
            {"num_steps_between_checkpoints": "150"},
            TypeError,
            "num_steps_between_checkpoints must be a positive int, got '150'",
        ),
        # Stan's codes (or names): solvers 1 adams / 2 bdf, interpolation 1 / 2
        (
            {"solver_forward": 3},
            ValueError,
            r"solver_forward must be one of 1 \('adams'\), 2 \('bdf'\); got 3",
        ),
        (
            {"solver_backward": "rk45"},
            ValueError,
            r"solver_backward must be one of 1 \('adams'\), 2 \('bdf'\); got 'rk45'",
        ),
        (
            {"solver_backward": 0},
            ValueError,
            r"solver_backward must be one of 1 \('adams'\), 2 \('bdf'\); got 0",
        ),
        (
            {"solver_forward": True},
            ValueError,
            r"solver_forward must be one of 1 \('adams'\), 2 \('bdf'\); got True",
        ),
        (
            {"interpolation_polynomial": 3},
            ValueError,
            r"interpolation_polynomial must be one of 1 \('hermite'\), 2 \('polynomial'\); "
            "got 3",
        ),
        (
            {"interpolation_polynomial": "linear"},
            ValueError,
            r"interpolation_polynomial must be one of 1 \('hermite'\), 2 \('polynomial'\); "
            "got 'linear'",
        ),
        (
            {"interpolation_polynomial": 1.0},
            ValueError,
            r"interpolation_polynomial must be one of .*; got 1.0",
        ),
    ],
)
def test_bad_controls(decay2, controls, error, match):
    with pytest.raises(error, match=match):
        _gradient(decay2, **controls)
    # validated before anything is solved, in the forward phase too
    with pytest.raises(error, match=match):
        adjoint_forward(decay2, [1.0, 2.0], TIMES, [0.3, 0.6], **controls)


@pytest.mark.parametrize(
    ("cotangent", "error", "match"),
    [
        (np.ones((3, 3)), ValueError, r"cotangent must have shape \(3, 2\) .*got shape \(3, 3\)"),
        (np.ones((2, 2)), ValueError, r"cotangent must have shape \(3, 2\) .*got shape \(2, 2\)"),
        (np.ones(6), ValueError, r"cotangent must have shape \(3, 2\) .*got shape \(6,\)"),
        (np.ones((2, 3)), ValueError, r"got shape \(2, 3\)"),
        (1.0, ValueError, r"cotangent must have shape \(3, 2\) .*got shape \(\)"),
        ([[1.0, np.nan]] * 3, ValueError, "cotangent must be finite"),
        ([[1.0, np.inf]] * 3, ValueError, "cotangent must be finite"),
        ([["a", "b"]] * 3, TypeError, r"cotangent must be an array of shape \(3, 2\)"),
    ],
)
def test_bad_cotangent(decay2, cotangent, error, match):
    with pytest.raises(error, match=match):
        adjoint_gradient(decay2, [1.0, 2.0], TIMES, [0.3, 0.6], cotangent)
    checkpoints = adjoint_forward(decay2, [1.0, 2.0], TIMES, [0.3, 0.6])
    with pytest.raises(error, match=match):
        checkpoints.backward(cotangent)
    checkpoints.backward(np.ones((3, 2)))  # still usable


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ({"system": "decay"}, TypeError, "system must be an OdeSystem, got str"),
        ({"times": [2.0, 1.0]}, ValueError, "times"),
        ({"times": [0.5, 1.0], "t0": 0.75}, ValueError, r"times must be >= t0 = 0.75"),
        ({"y0": [1.0]}, ValueError, "y0"),
        ({"y0": None}, ValueError, "y0 is required"),
        ({"params": [0.3]}, ValueError, "params"),
    ],
)
def test_bad_problem(decay2, args, error, match):
    call = {"system": decay2, "y0": [1.0, 2.0], "times": TIMES, "params": [0.3, 0.6]}
    call.update(args)
    t0 = call.pop("t0", 0.0)
    n_times = len(call["times"])
    with pytest.raises(error, match=match):
        adjoint_gradient(
            call["system"], call["y0"], call["times"], call["params"], np.ones((n_times, 2)), t0=t0
        )


def test_defaults_are_stans_and_none_means_default(decay2):
    assert ADJOINT_DEFAULTS == {
        "relative_tolerance_forward": 1e-6,
        "absolute_tolerance_forward": 1e-6,
        "relative_tolerance_backward": 1e-6,
        "absolute_tolerance_backward": 1e-6,
        "relative_tolerance_quadrature": 1e-6,
        "absolute_tolerance_quadrature": 1e-6,
        "max_num_steps": 100_000_000,
        "num_steps_between_checkpoints": 150,
        "interpolation_polynomial": 1,
        "solver_forward": 2,
        "solver_backward": 2,
    }
    default = _gradient(decay2)
    for controls in (ADJOINT_DEFAULTS, {k: None for k in ADJOINT_DEFAULTS}):
        g = _gradient(decay2, **controls)
        np.testing.assert_array_equal(g.params, default.params)
        np.testing.assert_array_equal(g.y0, default.y0)


def test_names_equal_codes_and_per_state_tolerances(decay2):
    """Solver and interpolation names give what their codes give; numpy integers and
    integral floats are accepted; a per-state tolerance equal to the scalar changes
    nothing."""
    base = dict(
        relative_tolerance_forward=1e-8,
        absolute_tolerance_forward=1e-9,
        relative_tolerance_backward=1e-8,
        absolute_tolerance_backward=1e-9,
    )
    for by_code, by_name in [
        (
            dict(solver_forward=1, solver_backward=1, interpolation_polynomial=2),
            dict(
                solver_forward="adams",
                solver_backward="adams",
                interpolation_polynomial="polynomial",
            ),
        ),
        (
            dict(solver_forward=2, solver_backward=2, interpolation_polynomial=1),
            dict(solver_forward="bdf", solver_backward="bdf", interpolation_polynomial="hermite"),
        ),
        (
            dict(solver_backward=1, max_num_steps=1000, num_steps_between_checkpoints=7),
            dict(
                solver_backward=np.int64(1),
                max_num_steps=1000.0,
                num_steps_between_checkpoints=np.int32(7),
            ),
        ),
        (
            dict(absolute_tolerance_forward=1e-9, absolute_tolerance_backward=1e-9),
            dict(absolute_tolerance_forward=[1e-9, 1e-9], absolute_tolerance_backward=(1e-9, 1e-9)),
        ),
    ]:
        a = _gradient(decay2, **{**base, **by_code})
        b = _gradient(decay2, **{**base, **by_name})
        np.testing.assert_array_equal(a.params, b.params)
        np.testing.assert_array_equal(a.y0, b.y0)
        assert a.stats == b.stats


def test_every_control_reaches_the_computation():
    """Changing any one control changes the work done (a control that is validated but
    never passed on would not)."""
    ref = reference_case("lotka_volterra")
    system = ref["system"]
    base = adjoint_controls("lotka_volterra", 1e-6)

    def stats(**change):
        g = adjoint_gradient(
            system,
            ref["y0"],
            ref["t"],
            system.p_nominal,
            ref["cot"],
            **{**base, **change},
        )
        return g.stats, g.params

    reference_stats, reference_params = stats()
    changes = {
        "relative_tolerance_forward": ("forward", 1e-9),
        "absolute_tolerance_forward": ("forward", [1e-6, 1e-12]),
        "relative_tolerance_backward": ("backward", 1e-9),
        "absolute_tolerance_backward": ("backward", [1e-12, 1e-6]),
        "relative_tolerance_quadrature": ("backward", 1e-10),
        "absolute_tolerance_quadrature": ("backward", 1e-14),
        "solver_forward": ("forward", 1),
        "solver_backward": ("backward", 1),
        "num_steps_between_checkpoints": ("n_checkpoints", 10),
    }
    for control, (phase, value) in changes.items():
        changed, _ = stats(**{control: value})
        assert changed[phase] != reference_stats[phase], control
    # the interpolation changes the forward state the backward pass sees, not the steps
    # of the forward pass
    changed, params = stats(interpolation_polynomial=2)
    assert changed["forward"] == reference_stats["forward"]
    assert not np.array_equal(params, reference_params)
    # max_num_steps: see the failure tests below


# ---------------------------------------------------------------------------------------
# Solver failures: the specific OdeSolverError subclass, its message naming the phase


def test_forward_phase_failure():
    ref = reference_case("linear2")
    system = ref["system"]
    with pytest.raises(MaxNumStepsError) as info:
        adjoint_gradient(system, ref["y0"], ref["t"], system.p_nominal, ref["cot"], max_num_steps=5)
    err = info.value
    assert isinstance(err, OdeSolverError)
    assert str(err).startswith(
        "adjoint forward solve (bdf): more than max_num_steps = 5 steps before the next "
        "output time at t = "
    )
    assert err.method == "adjoint forward solve (bdf)"
    assert 0.0 < err.t < ref["t"][1]
    # adjoint_forward alone raises the same
    with pytest.raises(MaxNumStepsError, match=r"adjoint forward solve \(adams\)"):
        adjoint_forward(
            system, ref["y0"], ref["t"], system.p_nominal, max_num_steps=5, solver_forward=1
        )


def test_reintegration_phase_failure():
    """A forward pass that succeeded, backward with a step limit the re-integration of the
    last stretch (one output interval, [0, 10]) cannot meet."""
    ref = reference_case("lotka_volterra")
    system = ref["system"]
    checkpoints = adjoint_forward(system, ref["y0"], [0.0, 10.0], system.p_nominal)
    checkpoints.controls = dataclasses.replace(checkpoints.controls, max_num_steps=5)
    with pytest.raises(MaxNumStepsError) as info:
        checkpoints.backward(np.ones((2, 2)))
    err = info.value
    assert str(err).startswith(
        "adjoint re-integration (bdf): more than max_num_steps = 5 steps before the next "
        "output time at t = "
    )
    assert err.method == "adjoint re-integration (bdf)"
    assert checkpoints.checkpoint_times[-1] <= err.t <= 10.0


@pytest.mark.parametrize(("code", "name"), [(1, "adams"), (2, "bdf")])
def test_backward_phase_failure(code, name):
    """robertson with default tolerances takes at most 8 forward steps between output
    times (16 when re-integrated from checkpoints), but after the jump of lambda at
    t = 1e5 the backward solve needs more than 200 (bdf) before the next one."""
    ref = reference_case("robertson")
    system = ref["system"]
    with pytest.raises(MaxNumStepsError) as info:
        adjoint_gradient(
            system,
            ref["y0"],
            ref["t"],
            system.p_nominal,
            ref["cot"],
            max_num_steps=40,
            solver_backward=code,
        )
    err = info.value
    label = f"adjoint backward solve ({name})"
    assert str(err).startswith(
        f"{label}: more than max_num_steps = 40 steps before the next output time at t = "
    )
    assert err.method == label
    # reported in t (the backward solve runs in s = -t), inside the last output interval
    assert ref["t"][-2] <= err.t <= ref["t"][-1]


def test_restart_at_late_output_time_tight_tolerance():
    """robertson at rtol 1e-10: the backward solve restarts at t = 1e5 with |d lambda/dt|
    ~ 3e4, where Hairer-Norsett-Wanner's first-step estimate (1.3e-10) falls below the
    integrators' smallest step 10 ulp(t) = 1.5e-10; CVODE's lower bound 100 ulp(t) on the
    first step lets the solve start, and the gradient is as accurate as at other models'
    tight tolerances (measured: dL/dp 5.9e-9 relative, 2.4e-9 per component; dL/dy0
    1.8e-9 relative to forward sensitivities at rtol 1e-10)."""
    ref = reference_case("robertson")
    system = ref["system"]
    g = adjoint_gradient(
        system,
        ref["y0"],
        ref["t"],
        system.p_nominal,
        ref["cot"],
        t0=system.t0,
        **adjoint_controls("robertson", 1e-10),
    )
    assert relative_error(g.params, ref["g_truth"]) < 5e-8
    assert component_error(g.params, ref["g_truth"], ref["scale_truth"]) < 2e-8
    assert relative_error(g.y0, ref["g_y0_forward"]) < 2e-8
