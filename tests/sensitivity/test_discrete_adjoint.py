"""The discrete adjoint (``adjoint_method="discrete"``): the exact gradient of the logged
``bdf`` steps, against finite differences of a replay of those steps, against the
ground truth, and its memory, two phases and errors.

Reference gradients and error measures as in test_adjoint_accuracy. The bounds are the
errors measured on this code (docs/adjoint.md) times a margin of 3 to 10.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pymc_odesens import (
    OdeSystem,
    adjoint_forward,
    adjoint_gradient,
    solve_sensitivity,
)
from tests.conftest import model_path
from tests.sensitivity.adjoint_reference import (
    adjoint_controls,
    adjoint_on_case,
    component_error,
    reference_case,
    relative_error,
)
from tests.sensitivity.discrete_replay import replay_outputs
from tests.solvers.test_events import pk_system, terminal_decay_system

DISCRETE = {"adjoint_method": "discrete"}

# at rtol 1e-8: (dL/dp rel, dL/dp comp, dL/dy0 rel) against the truth (dL/dy0: the
# forward state-transition matrix at rtol 1e-10); measured in brackets
BOUNDS_1E8 = {
    "linear2": (5e-6, 1.5e-6, 4e-6),  # (9.9e-7, 3.1e-7, 7.1e-7)
    "lotka_volterra": (1e-6, 4e-7, 2e-6),  # (2.2e-7, 8.6e-8, 4.3e-7)
    "pka": (2e-5, 5e-7, 5e-7),  # (4.0e-6, 9.3e-8, 9.7e-8)
    "robertson": (2e-7, 4e-8, 1.5e-5),  # (3.7e-8, 8.0e-9, 3.4e-6)
}


def _forward(ref: dict, tol: float, **extra):
    system = ref["system"]
    controls = adjoint_controls(ref["name"], tol, **extra)
    return adjoint_forward(
        system, ref["y0"], ref["t"], system.p_nominal, t0=system.t0, **DISCRETE, **controls
    )


def _central_difference(function, x: np.ndarray, k: int, step: float) -> np.ndarray:
    plus, minus = x.copy(), x.copy()
    plus[k] += step
    minus[k] -= step
    return (function(plus) - function(minus)) / (2.0 * step)


@pytest.mark.parametrize("name", ("linear2", "pka"))
def test_exact_derivative_of_the_logged_steps(name):
    """dL/dp and dL/dy0 equal central differences of the same steps replayed (full Newton,
    fixed step sizes and orders) to 1e-6, on the largest components: the adjoint is exact
    for the discrete scheme (measured 3e-9 on linear2 and 1e-9 on pka)."""
    ref = reference_case(name)
    system = ref["system"]
    p, y0, cot = system.p_nominal, ref["y0"], ref["cot"]
    checkpoints = _forward(ref, 1e-6)
    g = checkpoints.backward(cot)

    def loss_p(params):
        return np.sum(cot * replay_outputs(checkpoints, y0, params))

    def loss_y0(state):
        return np.sum(cot * replay_outputs(checkpoints, state, p))

    for k in np.argsort(-np.abs(g.params))[:4]:
        fd = _central_difference(loss_p, p, k, 1e-5 * max(abs(p[k]), 1e-3))
        assert abs(g.params[k] - fd) <= 1e-6 * np.abs(g.params).max(), k
    for k in np.argsort(-np.abs(g.y0))[:3]:
        fd = _central_difference(loss_y0, y0, k, 1e-5 * max(abs(y0[k]), 1e-2))
        assert abs(g.y0[k] - fd) <= 1e-6 * np.abs(g.y0).max(), k


@pytest.mark.parametrize("name", sorted(BOUNDS_1E8))
def test_matches_the_truth(name):
    """At rtol 1e-8 the gradient of the computed solution is within the bounds of the truth."""
    ref = reference_case(name)
    g = adjoint_on_case(ref, 1e-8, **DISCRETE)
    p_rel, p_comp, y0_rel = BOUNDS_1E8[name]
    assert relative_error(g.params, ref["g_truth"]) < p_rel
    assert component_error(g.params, ref["g_truth"], ref["scale_truth"]) < p_comp
    assert relative_error(g.y0, ref["g_y0_forward"]) < y0_rel
    np.testing.assert_allclose(g.y, ref["y"], rtol=1e-5, atol=1e-5 * np.abs(ref["y"]).max())
    # one replayed step per forward step, no backward ODE
    assert g.stats["replay"]["n_steps"] == g.stats["forward"]["n_steps"] > 0
    assert "backward" not in g.stats


@pytest.mark.parametrize("name", ("lotka_volterra", "pka"))
def test_error_falls_with_tolerance(name):
    """The per-component error against the truth falls as the forward tolerance does."""
    ref = reference_case(name)
    errors = [
        component_error(
            adjoint_on_case(ref, tol, **DISCRETE).params, ref["g_truth"], ref["scale_truth"]
        )
        for tol in (1e-5, 1e-7, 1e-9)
    ]
    assert errors[0] > 10 * errors[1] > 100 * errors[2], errors


def test_checkpoints_bound_memory_and_do_not_change_the_gradient():
    """Fewer steps between checkpoints: more snapshots, each replayed stretch shorter, the
    same gradient (to rounding of the replayed Newton iterations)."""
    ref = reference_case("pka")
    runs = {k: _forward(ref, 1e-6, num_steps_between_checkpoints=k) for k in (7, 150, 10**6)}
    steps = runs[150].stats["n_steps"]
    for k, checkpoints in runs.items():
        assert checkpoints.snapshots.shape[0] == 1 + steps // k
        assert checkpoints.checkpoint_times.size == checkpoints.snapshots.shape[0]
        # four numbers per logged operation: one per step and per step-size change
        assert checkpoints.step_log.shape == (checkpoints.step_log.shape[0], 4)
        assert steps < checkpoints.step_log.shape[0] < 3 * steps
    g = {k: c.backward(ref["cot"]).params for k, c in runs.items()}
    scale = np.abs(g[150]).max()
    np.testing.assert_allclose(g[7], g[150], rtol=0, atol=1e-7 * scale)
    np.testing.assert_allclose(g[10**6], g[150], rtol=0, atol=1e-7 * scale)


def test_two_phases_and_output_times_at_t0():
    """One forward pass serves several cotangents; a cotangent at t0 adds to dL/dy0 as is."""
    ref = reference_case("lotka_volterra")
    system = ref["system"]
    times = np.concatenate(([system.t0], ref["t"]))
    cot = np.vstack((np.array([[2.0, -3.0]]), ref["cot"]))
    checkpoints = adjoint_forward(
        system, ref["y0"], times, system.p_nominal, t0=system.t0, **DISCRETE
    )
    with_t0 = checkpoints.backward(cot)
    without = checkpoints.backward(np.vstack((np.zeros((1, 2)), ref["cot"])))
    np.testing.assert_allclose(with_t0.y0 - without.y0, [2.0, -3.0], rtol=1e-12)
    np.testing.assert_array_equal(with_t0.params, without.params)
    single = adjoint_gradient(
        system, ref["y0"], times, system.p_nominal, cot, t0=system.t0, **DISCRETE
    )
    np.testing.assert_array_equal(single.params, with_t0.params)


def test_errors_name_the_control():
    ref = reference_case("linear2")
    system = ref["system"]
    args = (system, ref["y0"], ref["t"], system.p_nominal)
    with pytest.raises(ValueError, match="adjoint_method must be one of"):
        adjoint_forward(*args, adjoint_method="backsolve")
    with pytest.raises(ValueError, match=r"needs solver_forward=2 \('bdf'\); got 'adams'"):
        adjoint_forward(*args, adjoint_method="discrete", solver_forward=1)
    checkpoints = adjoint_forward(*args, adjoint_method="discrete")
    with pytest.raises(ValueError, match="cotangent must have shape"):
        checkpoints.backward(np.zeros((1, 1)))


# -- events ----------------------------------------------------------------------------------

EVENT_TIGHT = {
    "adjoint_method": "discrete",
    "relative_tolerance_forward": 1e-10,
    "absolute_tolerance_forward": 1e-12,
}


def _forward_reference(system, y0, times, p, cot, **kw):
    forward = solve_sensitivity(system, y0, times, p, method="bdf", wrt="both", **kw)
    return np.einsum("ti,tik->k", cot, forward.S), np.einsum("ti,tij->j", cot, forward.S_y0)


def test_bouncing_ball_matches_the_closed_form():
    """dL/dp and dL/dy0 of z(t_end) and v(t_end) across the bounce (an implicit event
    with its event-time terms), to 1e-8 relative (measured 1.0e-10)."""
    ball = OdeSystem.from_json(model_path("bouncing_ball"))
    exact = json.loads(model_path("bouncing_ball").read_text())["exact"]
    for i, quantity in enumerate(("z_end", "v_end")):
        cot = np.zeros((1, 2))
        cot[0, i] = 1.0
        g = adjoint_gradient(ball, ball.x0, [1.9], ball.p_nominal, cot, **EVENT_TIGHT)
        want_p = [exact[f"d{quantity}/dg"], exact[f"d{quantity}/dgamma"]]
        want_y0 = [exact[f"d{quantity}/dz0"], exact[f"d{quantity}/dv0"]]
        np.testing.assert_allclose(g.params, want_p, rtol=1e-8)
        np.testing.assert_allclose(g.y0, want_y0, rtol=1e-8)


def test_many_bounces_match_forward_sensitivities():
    """13 bounces and 28 output times (measured 3.9e-11 relative)."""
    ball = OdeSystem.from_json(model_path("bouncing_ball"))
    p, y0 = np.array([10.0, 0.9]), np.array([5.0, -0.1])
    times = np.linspace(0.5, 14.0, 28)
    cot = np.random.default_rng(1).standard_normal((times.size, 2))
    want_p, want_y0 = _forward_reference(
        ball, y0, times, p, cot, relative_tolerance=1e-10, absolute_tolerance=1e-12
    )
    g = adjoint_gradient(ball, y0, times, p, cot, **EVENT_TIGHT)
    assert g.stats["n_logged_operations"] > g.stats["forward"]["n_steps"]
    np.testing.assert_allclose(g.params, want_p, rtol=0, atol=1e-8 * np.abs(want_p).max())
    np.testing.assert_allclose(g.y0, want_y0, rtol=0, atol=1e-8 * np.abs(want_y0).max())


@pytest.mark.parametrize("lag", [False, True])
def test_dosing_matches_forward_sensitivities(lag):
    """Explicit doses at output times and at t0, or after a parameter-dependent lag.

    dL/dp to 1e-8 relative (measured 1.2e-11 and 8.1e-10). dL/dy0 only without the lag:
    with it, the state is exactly zero until the first dose, the solver's steps grow to
    h = 1 at order 1 there (no error to control), and the derivative of those steps with
    respect to y0 is off by 27 % (docs/adjoint.md).
    """
    system = pk_system(lag)
    p = np.array([1.2, 0.15, 100.0, 1.5])
    t = np.unique(np.concatenate([np.linspace(0.25, 47.75, 96), [12.0, 24.0, 36.0]]))
    cot = np.random.default_rng(2).standard_normal((t.size, 2))
    want_p, want_y0 = _forward_reference(
        system, [0.0, 0.0], t, p, cot, relative_tolerance=1e-10, absolute_tolerance=1e-10
    )
    g = adjoint_gradient(
        system, [0.0, 0.0], t, p, cot, **(EVENT_TIGHT | {"absolute_tolerance_forward": 1e-10})
    )
    np.testing.assert_allclose(g.params, want_p, rtol=0, atol=1e-8 * np.abs(want_p).max())
    if not lag:
        np.testing.assert_allclose(g.y0, want_y0, rtol=0, atol=1e-8 * np.abs(want_y0).max())


def test_terminal_event_against_the_closed_form():
    """x' = -k x stopped at x = c: outputs after tau are frozen at c, so their cotangent
    reaches c only (dx/dc = 1) and k only through tau."""
    system = terminal_decay_system()
    p = np.array([0.7, 0.5])
    tau = np.log(1 / p[1]) / p[0]
    times = np.array([0.5, tau + 0.5, 3.0])
    want = np.array([[-0.5 * np.exp(-0.35), 0.0], [0.0, 1.0], [0.0, 1.0]])
    cot = np.array([[1.0], [2.0], [3.0]])
    g = adjoint_gradient(system, [1.0], times, p, cot, **EVENT_TIGHT)
    np.testing.assert_allclose(g.params, cot[:, 0] @ want, atol=1e-8)
