"""Adjoint gradients against forward sensitivities, ground truth, closed forms and finite
differences.

For a cotangent ``c`` (``c[i] = dL/dy(t_i)``, seeded standard normal) the reference gradient
is ``sum_{t,i} c[t, i] S[t, i, k]``, with ``S`` from ``solve_sensitivity`` at rtol 1e-10
(forward sensitivities, and the state-transition matrix for ``dL/dy0``) or from
``shared/models/<name>_truth.npz``. Two error measures:

- ``relative_error``: ``max_k |g_k - g_ref_k| / max_k |g_ref_k|``, the gradient as a whole;
- ``component_error``: ``max_k |g_k - g_ref_k| / sum_{t,i} |c[t, i] S[t, i, k]|``, each
  component against the size of the terms it sums. The gradient is a sum with much
  cancellation, and its components differ by orders of magnitude (robertson: dL/dk1 ~ 40,
  dL/dk2 ~ 2e-8; pka: dy/dp_k from 1e-13 to 5e2), so the first measure alone would only
  see the largest component.

The bounds are the errors measured on this code (listed in docs/adjoint.md) times a
margin of 3 to 10.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens import OdeSystem, adjoint_gradient, solve, solve_sensitivity
from tests.sensitivity.adjoint_reference import (
    BACKWARD_SOLVERS,
    BOUNDS_1E8,
    INTERPOLATIONS,
    MODELS,
    adjoint_on_case,
    component_error,
    reference_case,
    relative_error,
)

# solver_forward = 1 (adams): (dL/dp rel, dL/dp comp, dL/dy0 rel); measured in brackets
BOUNDS_ADAMS_FORWARD_1E8 = {
    "lotka_volterra": (2e-5, 2e-6, 2e-5),  # (2.5e-6, 2.3e-7, 2.2e-6)
    "pka": (1.5e-7, 6e-8, 5e-9),  # (2.0e-8, 7.8e-9, 6.5e-10)
    "robertson": (1.5e-6, 7e-7, 5e-7),  # (2.2e-7, 1.1e-7, 6.7e-8)
}


@pytest.mark.parametrize("solver_backward", BACKWARD_SOLVERS, ids=["adams", "bdf"])
@pytest.mark.parametrize("interpolation", INTERPOLATIONS, ids=["hermite", "polynomial"])
@pytest.mark.parametrize("name", MODELS)
def test_gradient_matches_forward_sensitivities(name, interpolation, solver_backward):
    """dL/dp and dL/dy0 at rtol 1e-8 agree with sum_t c^T S from forward sensitivities
    (rtol 1e-10) and with the ground truth, every component included."""
    ref = reference_case(name)
    g = adjoint_on_case(
        ref,
        1e-8,
        interpolation_polynomial=interpolation,
        solver_backward=solver_backward,
    )
    p_rel, p_comp, y0_rel, y0_comp = BOUNDS_1E8[name]
    assert relative_error(g.params, ref["g_forward"]) < p_rel
    assert relative_error(g.params, ref["g_truth"]) < p_rel
    assert component_error(g.params, ref["g_truth"], ref["scale_truth"]) < p_comp
    assert relative_error(g.y0, ref["g_y0_forward"]) < y0_rel
    assert component_error(g.y0, ref["g_y0_forward"], ref["scale_y0"]) < y0_comp
    # the forward solution comes back too
    np.testing.assert_allclose(g.y, ref["y"], rtol=1e-5, atol=1e-5 * np.abs(ref["y"]).max())
    assert g.stats["backward"]["n_steps"] > 0 and g.stats["n_checkpoints"] >= 1


@pytest.mark.parametrize("name", ("lotka_volterra", "pka", "robertson"))
def test_adams_forward_pass(name):
    """solver_forward = 1 (adams; also the re-integration) gives the same accuracy."""
    ref = reference_case(name)
    g = adjoint_on_case(ref, 1e-8, solver_forward=1)
    p_rel, p_comp, y0_rel = BOUNDS_ADAMS_FORWARD_1E8[name]
    assert g.stats["forward"]["n_steps"] > 0
    assert relative_error(g.params, ref["g_truth"]) < p_rel
    assert component_error(g.params, ref["g_truth"], ref["scale_truth"]) < p_comp
    assert relative_error(g.y0, ref["g_y0_forward"]) < y0_rel


# Tolerances 1e-4, 1e-6, 1e-8: each tightening by 100 must divide the error by at least 2
# and the three together by at least 100. Measured (relative error against the truth), the
# smallest single reduction is 4.2 (lotka_volterra, 1e-6 -> 1e-8; its 1e-6 error is
# fortunately small) and the smallest overall one 530 (lotka_volterra).
CONVERGENCE_TOLERANCES = (1e-4, 1e-6, 1e-8)


@pytest.mark.slow
@pytest.mark.parametrize("solver_backward", BACKWARD_SOLVERS, ids=["adams", "bdf"])
@pytest.mark.parametrize("interpolation", INTERPOLATIONS, ids=["hermite", "polynomial"])
@pytest.mark.parametrize("name", MODELS)
def test_error_falls_as_tolerances_tighten(name, interpolation, solver_backward):
    ref = reference_case(name)
    errors = []
    for tol in CONVERGENCE_TOLERANCES:
        g = adjoint_on_case(
            ref,
            tol,
            interpolation_polynomial=interpolation,
            solver_backward=solver_backward,
        )
        errors.append(relative_error(g.params, ref["g_truth"]))
    for looser, tighter in zip(errors, errors[1:]):
        assert tighter < looser / 2, errors
    assert errors[-1] < errors[0] / 100, errors


@pytest.mark.slow
@pytest.mark.parametrize("name", ("linear2", "lotka_volterra", "pka"))
def test_tight_tolerances(name):
    """At rtol 1e-10 (Hermite, bdf) the error is 10-100x below the rtol-1e-8 bounds.

    Measured (dL/dp against the truth, relative / per component): linear2 9.7e-11 /
    4.8e-11, lotka_volterra 3.3e-8 / 3.0e-9, pka 3.8e-10 / 7.4e-11 (pka's relative error
    stays at ~4e-10 from rtol 1e-10 to 1e-11: the truth's own error). robertson's is
    test_adjoint_controls.test_restart_at_late_output_time_tight_tolerance.
    """
    bounds = {"linear2": (1e-9, 5e-10), "lotka_volterra": (2e-7, 2e-8), "pka": (2e-9, 5e-10)}
    ref = reference_case(name)
    g = adjoint_on_case(ref, 1e-10)
    rel, comp = bounds[name]
    assert relative_error(g.params, ref["g_truth"]) < rel
    assert component_error(g.params, ref["g_truth"], ref["scale_truth"]) < comp


# ---------------------------------------------------------------------------------------
# Finite differences and closed forms


def _five_point(f, x: np.ndarray, k: int, h: float) -> float:
    """Fourth-order central difference of ``f`` along ``x[k]``."""
    values = []
    for m in (2, 1, -1, -2):
        xm = x.copy()
        xm[k] += m * h
        values.append(f(xm))
    return (-values[0] + 8 * values[1] - 8 * values[2] + values[3]) / (12 * h)


def _loss(system, y0, times, params, cot, t0=0.0):
    y = solve(
        system,
        y0,
        times,
        params,
        t0=t0,
        method="bdf",
        relative_tolerance=1e-12,
        absolute_tolerance=1e-14,
    ).y
    return float(np.sum(cot * y))


def test_matches_finite_differences_lotka_volterra():
    """dL/dp and dL/dy0 against five-point differences of L = sum c * y (solves at rtol
    1e-12, h = 1e-4 |p_k|; the differences agree with the truth to 9e-10). Measured at
    adjoint rtol 1e-10: dL/dp 3.2e-8, dL/dy0 2.5e-8."""
    ref = reference_case("lotka_volterra")
    system, t, cot = ref["system"], ref["t"], ref["cot"]
    p, y0 = system.p_nominal.copy(), ref["y0"].copy()
    fd_p = np.array(
        [
            _five_point(lambda q: _loss(system, y0, t, q, cot), p, k, 1e-4 * abs(p[k]))
            for k in range(p.size)
        ]
    )
    fd_y0 = np.array(
        [_five_point(lambda z: _loss(system, z, t, p, cot), y0, j, 1e-4) for j in range(2)]
    )
    assert relative_error(fd_p, ref["g_truth"]) < 1e-8  # the differences themselves
    g = adjoint_on_case(ref, 1e-10)
    assert relative_error(g.params, fd_p) < 2e-7
    assert relative_error(g.y0, fd_y0) < 2e-7


@pytest.mark.parametrize("interpolation", INTERPOLATIONS, ids=["hermite", "polynomial"])
def test_closed_form_decay_with_t0_not_an_output(interpolation):
    """y' = -k y from t0 = 0.5: y(t) = y0 exp(-k (t - t0)), so
    dL/dk = -sum c_i (t_i - t0) y(t_i) and dL/dy0 = sum c_i exp(-k (t_i - t0))."""
    system = OdeSystem(lambda t, y, p: [-p[0] * y[0]], states=["x"], params=["k"])
    t0, k, y0 = 0.5, 0.7, 2.0
    times = np.array([0.75, 1.0, 2.0, 4.0, 6.5])
    cot = np.array([[1.0], [-2.0], [0.5], [3.0], [-1.5]])
    decay = np.exp(-k * (times - t0))
    dk = -np.sum(cot[:, 0] * (times - t0) * y0 * decay)
    dy0 = np.sum(cot[:, 0] * decay)
    g = adjoint_gradient(
        system,
        [y0],
        times,
        [k],
        cot,
        t0=t0,
        relative_tolerance_forward=1e-10,
        absolute_tolerance_forward=1e-12,
        relative_tolerance_backward=1e-10,
        absolute_tolerance_backward=1e-12,
        relative_tolerance_quadrature=1e-10,
        absolute_tolerance_quadrature=1e-12,
        interpolation_polynomial=interpolation,
    )
    # measured relative errors: dL/dk 1.0e-9, dL/dy0 1.7e-9 (Hermite) / 6.6e-10
    # (polynomial), y 2.2e-9
    assert abs(g.params[0] - dk) < 1e-8 * abs(dk)
    assert abs(g.y0[0] - dy0) < 1e-8 * abs(dy0)
    np.testing.assert_allclose(g.y[:, 0], y0 * decay, rtol=1e-8)


# ---------------------------------------------------------------------------------------
# Initial state as a function of the parameters


def _lotka_volterra_rhs(t, y, p):
    prey, predator = y
    return [
        p.alpha * prey - p.beta * prey * predator,
        p.delta * prey * predator - p.gamma * predator,
    ]


@pytest.fixture(scope="module")
def lotka_volterra_y0p():
    """Lotka-Volterra with y0(p) = (prey0, gamma / delta): the predator starts at the
    prey's equilibrium level."""
    return OdeSystem(
        _lotka_volterra_rhs,
        states=["prey", "predator"],
        params=["alpha", "beta", "delta", "gamma", "prey0"],
        initial_state=lambda p: [p.prey0, p.gamma / p.delta],
        name="lotka_volterra_y0p",
    )


def test_initial_state_from_params(lotka_volterra_y0p):
    """y0 = None: dL/dp includes (dy0/dp)^T dL/dy0, against forward sensitivities (which
    start from S(t0) = dy0/dp), five-point differences and the same system with y0 given."""
    system = lotka_volterra_y0p
    p = np.array([1.5, 1.0, 1.0, 3.0, 1.2])
    times = np.linspace(0.0, 10.0, 41)
    cot = np.random.default_rng(3).standard_normal((times.size, 2))
    tight = dict(
        relative_tolerance_forward=1e-10,
        absolute_tolerance_forward=1e-12,
        relative_tolerance_backward=1e-10,
        absolute_tolerance_backward=1e-10,
        relative_tolerance_quadrature=1e-10,
        absolute_tolerance_quadrature=1e-12,
    )
    g = adjoint_gradient(system, None, times, p, cot, **tight)
    forward = solve_sensitivity(
        system, None, times, p, relative_tolerance=1e-11, absolute_tolerance=1e-13
    )
    g_forward = np.einsum("ti,tik->k", cot, forward.S)
    fd = np.array(
        [
            _five_point(lambda q: _loss(system, None, times, q, cot), p, k, 1e-4 * abs(p[k]))
            for k in range(p.size)
        ]
    )
    # measured: 1.5e-8 against forward sensitivities, 1.4e-8 against differences
    assert relative_error(g.params, g_forward) < 1e-7
    assert relative_error(g.params, fd) < 1e-7
    # the path through y0(p): dy0/dp is zero but for d prey0/d prey0 = 1,
    # d predator0/d delta = -gamma / delta^2, d predator0/d gamma = 1 / delta
    y0 = np.array([p[4], p[3] / p[2]])
    jac0 = np.zeros((p.size, 2))
    jac0[4, 0] = 1.0
    jac0[2, 1] = -p[3] / p[2] ** 2
    jac0[3, 1] = 1.0 / p[2]
    g_given = adjoint_gradient(system, y0, times, p, cot, **tight)
    np.testing.assert_allclose(g_given.y0, g.y0, rtol=1e-13)
    np.testing.assert_allclose(g.params, g_given.params + jac0 @ g_given.y0, rtol=1e-12)
    assert g_given.params[4] == 0.0  # prey0 enters only through y0(p)
