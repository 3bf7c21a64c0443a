"""`ode_solution(..., sensitivity="adjoint", adjoint_method="discrete")`: gradients against
finite differences and the other routes, batches, both PyTensor backends, and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad

from pymc_odesens import ImplicitEvent, OdeSystem, ode_solution

TIMES = np.linspace(0.5, 10.0, 12)


def _solution(system, y0, params, times=TIMES, **controls):
    return ode_solution(
        system,
        y0,
        times,
        params,
        sensitivity="adjoint",
        adjoint_method="discrete",
        on_failure="raise",
        **controls,
    )


def test_gradient_matches_finite_differences(oscillator):
    weights = np.random.default_rng(3).normal(size=(TIMES.size, 2))

    def loss(y0, params):
        y = _solution(oscillator, y0, params, relative_tolerance=1e-10, absolute_tolerance=1e-12)
        return (y * weights).sum() + 0.5 * (y**2).sum()

    verify_grad(
        loss,
        [np.array([1.0, -0.2]), np.array([0.3])],
        rng=np.random.default_rng(0),
        eps=1e-5,
        abs_tol=5e-5,
        rel_tol=5e-5,
    )


def test_batch_equals_single_experiments_and_numba_mode_equals_python(oscillator):
    """Two experiments in one Op equal two single ones; NUMBA mode (the Ops' numba
    implementations) gives identical numbers."""
    y0 = pt.dmatrix("y0")
    theta = pt.dmatrix("theta")
    y0_val = np.array([[1.0, -0.3], [0.5, 0.4]])
    theta_val = np.array([[0.2], [0.45]])
    y = _solution(oscillator, pt.specify_shape(y0, (2, 2)), pt.specify_shape(theta, (2, 1)))
    loss = (y**2).sum()
    outputs = [y, *pytensor.grad(loss, [y0, theta])]
    with warnings.catch_warnings():
        # the numba implementations are registered: no fallback to object mode
        warnings.filterwarnings("error", message=".*object mode.*")
        batch = {
            mode: pytensor.function([y0, theta], outputs, mode=mode)(y0_val, theta_val)
            for mode in ("FAST_RUN", "NUMBA")
        }
    for python_value, numba_value in zip(batch["FAST_RUN"], batch["NUMBA"]):
        np.testing.assert_array_equal(python_value, numba_value)
    a, b = pt.dvector("a"), pt.dvector("b")
    ys = _solution(oscillator, a, b)
    single = pytensor.function([a, b], [ys, *pytensor.grad((ys**2).sum(), [a, b])])
    for e in range(2):
        y_e, g_y0, g_theta = single(y0_val[e], theta_val[e])
        np.testing.assert_allclose(batch["FAST_RUN"][0][e], y_e, rtol=1e-12)
        np.testing.assert_allclose(batch["FAST_RUN"][1][e], g_y0, rtol=1e-10)
        np.testing.assert_allclose(batch["FAST_RUN"][2][e], g_theta, rtol=1e-10)


def test_sampling_with_the_discrete_adjoint(oscillator):
    """A short NUTS run on data from theta = 0.3 recovers it (the gradient drives it)."""
    rng = np.random.default_rng(5)
    truth = _solution(oscillator, [1.0, 0.0], [0.3]).eval()
    data = truth + 0.02 * rng.normal(size=truth.shape)
    with pm.Model():
        theta = pm.HalfNormal("theta", 1.0)
        y = _solution(oscillator, [1.0, 0.0], pt.stack([theta]))
        pm.Normal("obs", y, 0.02, observed=data)
        idata = pm.sample(
            200,
            tune=200,
            chains=1,
            random_seed=1,
            progressbar=False,
            compute_convergence_checks=False,
        )
    draws = idata.posterior["theta"].values.ravel()
    assert int(idata.sample_stats["diverging"].sum()) == 0
    assert abs(draws.mean() - 0.3) < 4 * draws.std() + 0.01


def test_errors_are_raised_when_the_graph_is_built(oscillator):
    with pytest.raises(ValueError, match=r"needs solver_forward=2 \('bdf'\); got 'adams'"):
        ode_solution(
            oscillator,
            [1.0, 0.0],
            TIMES,
            [0.3],
            sensitivity="adjoint",
            method="adams",
            adjoint_method="discrete",
        )
    with pytest.raises(ValueError, match="adjoint_method must be one of"):
        ode_solution(
            oscillator, [1.0, 0.0], TIMES, [0.3], sensitivity="adjoint", adjoint_method="fast"
        )
    with pytest.raises(TypeError, match="apply to sensitivity='adjoint' only"):
        ode_solution(
            oscillator, [1.0, 0.0], TIMES, [0.3], sensitivity="forward", adjoint_method="discrete"
        )


def test_events_in_both_modes_match_the_continuous_adjoint():
    """A decay stopped at x = c (terminal implicit event) in one batch of two experiments:
    the discrete gradients equal the continuous adjoint's, in FAST_RUN and NUMBA mode."""
    decay = OdeSystem(
        lambda t, y, p: [-p.k * y.x],
        states=["x"],
        params=["k", "c"],
        events=[ImplicitEvent(lambda t, y, p: y.x - p.c, terminal=True, direction="down")],
        name="stopped_decay",
    )
    params = pt.dmatrix("params")
    value = np.array([[0.7, 0.5], [0.4, 0.3]])
    times = np.linspace(0.25, 5.0, 20)
    tight = {"relative_tolerance": 1e-10, "absolute_tolerance": 1e-12}
    grads = {}
    for method in ("continuous", "discrete"):
        y = ode_solution(
            decay,
            [1.0],
            times,
            pt.specify_shape(params, (2, 2)),
            sensitivity="adjoint",
            adjoint_method=method,
            on_failure="raise",
            **tight,
        )
        grad = pytensor.grad((y**2).sum(), params)
        for mode in ("FAST_RUN", "NUMBA"):
            grads[method, mode] = pytensor.function([params], grad, mode=mode)(value)
    np.testing.assert_array_equal(grads["discrete", "NUMBA"], grads["discrete", "FAST_RUN"])
    np.testing.assert_allclose(
        grads["discrete", "FAST_RUN"], grads["continuous", "FAST_RUN"], rtol=1e-7
    )
