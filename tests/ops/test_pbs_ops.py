"""`ode_solution(sensitivity="pbs" | "pbsr" | "exp")`: the Op's gradient is the contraction of
`solve_sensitivity`'s approximate S, in both PyTensor modes, with batches, initial-state
gradients, failures and (slow) NUTS on the oscillator against the forward route."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_odesens
from pymc_odesens import (
    ExplicitEvent,
    ImplicitEvent,
    NonFiniteSensitivityError,
    OdeSystem,
    TriggerEvent,
    ode_solution,
    solve_sensitivity,
)
from pymc_odesens.sensitivity import PbsOptions
from tests.conftest import oscillator_model

TIMES = np.linspace(0.5, 10.0, 12)
CONTROLS = {"relative_tolerance": 1e-6, "absolute_tolerance": 1e-8}
PBS_ROUTES = ("pbs", "pbsr", "exp")


def _weights(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


def _contraction(result, weights):
    """``(dL/dy0, dL/dp)`` of ``L = sum(weights * y)`` from a SensitivityResult (wrt="both")."""
    grad_p = (weights[..., None] * result.S).sum(axis=(0, 1))
    grad_y0 = (weights[..., None] * result.S_y0).sum(axis=(0, 1))
    return grad_y0, grad_p


@pytest.mark.parametrize("route", PBS_ROUTES)
@pytest.mark.parametrize("method", ["rk45", "bdf"])
def test_gradient_is_the_contraction_of_solve_sensitivity(oscillator, route, method):
    y0 = pt.dvector("y0")
    theta = pt.dscalar("theta")
    weights = _weights((TIMES.size, 2))
    options = {"c": 5.0, "interpolation": "hermite"} if route == "pbsr" else None
    y = ode_solution(
        oscillator,
        y0,
        TIMES,
        [theta],
        sensitivity=route,
        method=method,
        on_failure="raise",
        pbs_options=options,
        **CONTROLS,
    )
    f = pytensor.function([y0, theta], [y, *pytensor.grad((y * weights).sum(), [y0, theta])])
    values, grad_y0, grad_theta = f(np.array([1.0, -0.3]), 0.2)
    result = solve_sensitivity(
        oscillator,
        [1.0, -0.3],
        TIMES,
        [0.2],
        method=method,
        sensitivity=route,
        wrt="both",
        pbs_options=options,
        **CONTROLS,
    )
    want_y0, want_p = _contraction(result, weights)
    np.testing.assert_allclose(values, result.y, rtol=1e-14)
    np.testing.assert_allclose(grad_y0, want_y0, rtol=1e-12)
    np.testing.assert_allclose(grad_theta, want_p[0], rtol=1e-12)
    # an approximation of the exact gradient (forward sensitivities at tight tolerances):
    # within 10 % in norm at these tolerances
    exact = solve_sensitivity(
        oscillator,
        [1.0, -0.3],
        TIMES,
        [0.2],
        method=method,
        wrt="both",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    )
    exact_y0, exact_p = _contraction(exact, weights)
    got = np.append(grad_y0, grad_theta)
    want = np.append(exact_y0, exact_p)
    assert np.linalg.norm(got - want) < 0.1 * np.linalg.norm(want)


@pytest.mark.parametrize(
    "route, mode",
    [("pbs", "FAST_RUN"), ("pbsr", "FAST_RUN"), ("exp", "FAST_RUN"), ("pbsr", "NUMBA")],
)
def test_batches_with_initial_state_gradients(oscillator, route, mode):
    """E = 3 experiments (own initial states and times, shared parameter) in one Op:
    each experiment's gradient is the contraction of its own `solve_sensitivity`."""
    y0_value = pt.dmatrix("y0")
    y0 = pt.specify_shape(y0_value, (3, 2))
    theta = pt.dscalar("theta")
    times = np.stack([TIMES, TIMES * 0.8, TIMES * 1.1])
    weights = _weights((3, TIMES.size, 2), seed=1)
    y = ode_solution(
        oscillator,
        y0,
        times,
        [theta],
        sensitivity=route,
        method="rk45",
        on_failure="raise",
        **CONTROLS,
    )
    f = pytensor.function(
        [y0_value, theta],
        [y, *pytensor.grad((y * weights).sum(), [y0, theta])],
        mode=mode,
    )
    starts = np.array([[1.0, -0.3], [0.5, 0.2], [-1.0, 0.0]])
    values, grad_y0, grad_theta = f(starts, 0.25)
    want_theta = 0.0
    for e in range(3):
        result = solve_sensitivity(
            oscillator,
            starts[e],
            times[e],
            [0.25],
            method="rk45",
            sensitivity=route,
            wrt="both",
            **CONTROLS,
        )
        want_y0, want_p = _contraction(result, weights[e])
        np.testing.assert_allclose(values[e], result.y, rtol=1e-14)
        np.testing.assert_allclose(grad_y0[e], want_y0, rtol=1e-12, atol=1e-15)
        want_theta += want_p[0]
    np.testing.assert_allclose(grad_theta, want_theta, rtol=1e-12)


def _initial_state_system():
    return OdeSystem(
        lambda t, y, p: [-p[0] * y[0] + p[2], p[0] * y[0] - 0.3 * y[1]],
        states=["a", "b"],
        params=["k", "a0", "u"],
        initial_state=lambda p: [p[1] ** 2, 0.0],
        name="initial_state_from_parameters",
    )


@pytest.mark.parametrize("route", PBS_ROUTES)
def test_initial_state_from_parameters(route):
    """y0(p): the gradient includes dy0/dp (S(t0) = dy0/dp in the march), batched params."""
    system = _initial_state_system()
    params_value = pt.dmatrix("params")
    params = pt.specify_shape(params_value, (2, 3))
    times = np.array([0.5, 1.0, 2.0, 4.0])
    weights = _weights((2, times.size, 2), seed=2)
    y = ode_solution(system, None, times, params, sensitivity=route, on_failure="raise", **CONTROLS)
    value = np.array([[0.7, 1.5, 0.1], [0.2, 0.5, 0.3]])
    grad = pytensor.grad((y * weights).sum(), params)
    modes = ("FAST_RUN", "NUMBA") if route == "pbsr" else ("FAST_RUN",)
    got = [pytensor.function([params_value], [y, grad], mode=mode)(value) for mode in modes]
    for e in range(2):
        result = solve_sensitivity(system, None, times, value[e], sensitivity=route, **CONTROLS)
        want = (weights[e][..., None] * result.S).sum(axis=(0, 1))
        np.testing.assert_allclose(got[0][1][e], want, rtol=1e-12)
    for python_value, numba_value in zip(got[0], got[-1]):
        np.testing.assert_array_equal(python_value, numba_value)


@pytest.mark.parametrize(
    "route, method", [("pbsr", "rk45"), ("pbs", "ckrk"), ("exp", "bdf"), ("pbsr", "adams")]
)
def test_numba_mode_equals_default_mode(oscillator, route, method):
    y0 = pt.dvector("y0")
    theta = pt.dscalar("theta")
    weights = _weights((TIMES.size, 2), seed=3)
    y = ode_solution(
        oscillator,
        y0,
        TIMES,
        [theta],
        sensitivity=route,
        method=method,
        on_failure="raise",
        **CONTROLS,
    )
    outputs = [
        y,
        *pytensor.grad((y * weights).sum(), [y0, theta]),
        pymc_odesens.pbs_branch_counts(y),
    ]
    results = [
        pytensor.function([y0, theta], outputs, mode=mode)(np.array([1.0, -0.3]), 0.2)
        for mode in ("FAST_RUN", "NUMBA")
    ]
    for python_value, numba_value in zip(*results):
        np.testing.assert_array_equal(python_value, numba_value)


def test_recording_grows_beyond_its_first_capacity(oscillator):
    """More solver steps than the first recording capacity (512): the arrays grow (in the
    NUMBA mode from 512 at every call), and the result is unchanged."""
    times = np.linspace(1.0, 400.0, 5)
    theta = pt.dscalar("theta")
    y = ode_solution(
        oscillator,
        [1.0, 0.0],
        times,
        [theta],
        sensitivity="exp",
        method="rk45",
        on_failure="raise",
        **CONTROLS,
    )
    grad = pytensor.grad(y.sum(), theta)
    counts = pymc_odesens.pbs_branch_counts(y)
    got = [
        pytensor.function([theta], [y, grad, counts], mode=mode)(0.01)
        for mode in ("FAST_RUN", "NUMBA")
    ]
    assert got[0][2].sum() > 512
    for python_value, numba_value in zip(*got):
        np.testing.assert_array_equal(python_value, numba_value)


def _decay():
    return OdeSystem(
        lambda t, y, p: [-p[0] * (y[0] - p[1])], states=["x"], params=["k", "c"], name="relax"
    )


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
def test_solver_failure_is_a_rejected_proposal(mode):
    pymc_odesens.reset_failure_counts()
    with pm.Model() as model:
        log_k = pm.Normal("log_k", 0.0, 1.0)
        y = ode_solution(
            _decay(),
            [1.0],
            [1.0, 2.0],
            [pt.exp(log_k), 0.2],
            method="rk45",
            sensitivity="pbsr",
            max_num_steps=20,
        )
        pm.Normal("obs", y[:, 0], 0.1, observed=[0.4, 0.25])
    logp = model.compile_logp(mode=mode)
    dlogp = model.compile_dlogp(mode=mode)
    assert np.isfinite(logp({"log_k": 0.0}))
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="MaxNumStepsError"):
        assert logp({"log_k": np.log(2000.0)}) == -np.inf
    assert np.all(np.isfinite(dlogp({"log_k": np.log(2000.0)})))
    assert pymc_odesens.failure_counts()["MaxNumStepsError"] >= 1


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
def test_non_finite_sensitivities_are_a_rejected_proposal(mode):
    """PBS's explicit step overflows on the long BDF steps of a very stiff relaxation: S is
    not finite there, so the proposal is rejected and counted (never a NaN gradient)."""
    pymc_odesens.reset_failure_counts()
    with pm.Model() as model:
        log_k = pm.Normal("log_k", 0.0, 30.0)
        y = ode_solution(
            _decay(),
            [0.0],
            np.linspace(1.0, 1e4, 5),
            [pt.exp(log_k), 1.0],
            method="bdf",
            sensitivity="pbs",
            **CONTROLS,
        )
        pm.Normal("obs", y[:, 0], 0.1, observed=np.ones(5))
    logp = model.compile_logp(mode=mode)
    dlogp = model.compile_dlogp(mode=mode)
    assert np.isfinite(logp({"log_k": 0.0}))
    stiff = {"log_k": np.log(1e12)}
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="NonFiniteSensitivityError"):
        assert logp(stiff) == -np.inf
    assert np.all(np.isfinite(dlogp(stiff)))
    assert pymc_odesens.failure_counts()["NonFiniteSensitivityError"] >= 1


def test_non_finite_sensitivities_outside_a_model_raise():
    k = pt.dscalar("k")
    y = ode_solution(
        _decay(),
        [0.0],
        np.linspace(1.0, 1e4, 5),
        [k, 1.0],
        method="bdf",
        sensitivity="pbs",
        on_failure="raise",
        **CONTROLS,
    )
    f = pytensor.function([k], pytensor.grad(y.sum(), k))
    with pytest.raises(NonFiniteSensitivityError, match=r"sensitivity='pbs': S is not finite"):
        f(1e12)
    assert np.isfinite(f(1.0))


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
def test_overflowing_transform_is_rejected_with_a_zero_gradient(mode):
    """k = exp(z) overflows to inf at z = 800: the failure potential makes logp -inf,
    GradientGuard makes the gradient (0 * exp(800) = NaN by the chain rule) exactly 0, and
    the failure is counted once, as on the forward and adjoint routes (the Python mode
    checks the inputs; the NUMBA core meets the infinite rate in the right-hand side, as the
    other routes' cores do)."""
    error = "NonFiniteInputError" if mode == "FAST_RUN" else "NonFiniteRhsError"
    with pm.Model() as model:
        z = pm.Normal("z", 0.0, 1.0)
        y = ode_solution(
            _decay(), [1.0], [1.0, 2.0], [pt.exp(z), 0.2], method="rk45", sensitivity="exp"
        )
        pm.Normal("obs", y[:, 0], 0.1, observed=[0.4, 0.25])
    function = model.logp_dlogp_function(mode=mode, ravel_inputs=True)
    function.set_extra_values({})
    pymc_odesens.reset_failure_counts()
    logp, grad = function(np.array([0.0]))
    assert np.isfinite(logp) and np.isfinite(grad).all() and grad[0] != 0.0
    assert pymc_odesens.failure_counts() == {}
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match=error):
        logp, grad = function(np.array([800.0]))
    assert logp == -np.inf
    np.testing.assert_array_equal(grad, [0.0])
    assert pymc_odesens.failure_counts() == {error: 1}


@pytest.mark.parametrize("route", PBS_ROUTES)
@pytest.mark.parametrize(
    ("argument", "value", "match"),
    [
        ("y0", ["1", "0"], r"y0\[0\] must be numbers or PyTensor tensors, got the text '1'"),
        ("y0", pt.zvector("z"), r"y0 must be a real tensor, got z of type .*complex128"),
        ("params", [1 + 1j], r"params\[0\] must be real, got complex values"),
        (
            "times",
            pt.dvector("ts"),
            r"times must be known when the graph is built .* got the symbolic variable ts",
        ),
    ],
)
def test_text_complex_and_symbolic_inputs_are_refused(oscillator, route, argument, value, match):
    arguments = {"y0": [1.0, 0.0], "times": TIMES, "params": [pt.dscalar("theta")]}
    arguments[argument] = value
    with pytest.raises(TypeError, match=match):
        ode_solution(oscillator, **arguments, sensitivity=route, on_failure="raise")


def test_events_and_bad_options_are_refused_when_the_graph_is_built(oscillator):
    theta = pt.dscalar("theta")
    bouncing = OdeSystem(
        lambda t, y, p: [y[1], -p[0]],
        states=["z", "v"],
        params=["g"],
        events=[ImplicitEvent(lambda t, y, p: y[0], lambda t, y, p: [y[0], -y[1]], name="bounce")],
        name="ball",
    )
    for route in PBS_ROUTES:
        with pytest.raises(
            ValueError,
            match=rf"sensitivity='{route}' does not support .*events .*implicit event 'bounce'",
        ):
            ode_solution(bouncing, [1.0, 0.0], TIMES, [theta], sensitivity=route)
    dosed = OdeSystem(
        lambda t, y, p: [-p[0] * y[0]],
        states=["x"],
        params=["k"],
        events=[
            TriggerEvent(lambda t, y, p: y.x < 0.2, lambda t, y, p: {"x": y.x + 1.0}, name="dose"),
            ExplicitEvent([5.0], lambda t, y, p: [2.0 * y[0]], name="double"),
        ],
        name="dosed",
    )
    for route in PBS_ROUTES:
        with pytest.raises(
            ValueError, match=r"declares trigger event 'dose', explicit event 'double'"
        ):
            ode_solution(dosed, [1.0], TIMES, [theta], sensitivity=route, on_failure="raise")
    with pytest.raises(ValueError, match="pbs_options applies to sensitivity='pbs'"):
        ode_solution(
            oscillator, [1.0, 0.0], TIMES, [theta], pbs_options={"c": 5.0}, on_failure="raise"
        )
    with pytest.raises(ValueError, match=r"pbs_options: unknown option\(s\) \['cc'\]"):
        ode_solution(
            oscillator,
            [1.0, 0.0],
            TIMES,
            [theta],
            sensitivity="pbsr",
            pbs_options={"cc": 5.0},
            on_failure="raise",
        )
    with pytest.raises(TypeError, match="apply to sensitivity='adjoint' only"):
        ode_solution(
            oscillator,
            [1.0, 0.0],
            TIMES,
            [theta],
            sensitivity="exp",
            num_steps_between_checkpoints=10,
            on_failure="raise",
        )
    # PbsOptions objects are accepted as they are
    y = ode_solution(
        oscillator,
        [1.0, 0.0],
        TIMES,
        [theta],
        sensitivity="pbsr",
        pbs_options=PbsOptions(n_max=None),
        on_failure="raise",
    )
    assert y.owner.inputs[0].owner.op.spec.pbs_options == PbsOptions(n_max=None)


def _oscillator_posterior(oscillator, route: str, seed: int):
    model = oscillator_model(
        oscillator,
        route,
        seed=11,
        method="rk45",
        relative_tolerance=1e-6,
        absolute_tolerance=1e-8,
    )
    with model:
        return pm.sample(1000, tune=500, chains=2, cores=1, progressbar=False, random_seed=seed)


@pytest.mark.slow
def test_nuts_with_exp_gradients_recovers_the_forward_posterior(oscillator):
    """NUTS with the approximate Exp gradient is still exact MCMC: its posterior means
    agree with the forward route's within their Monte Carlo standard errors."""
    import arviz as az

    forward = _oscillator_posterior(oscillator, "forward", seed=4)
    approximate = _oscillator_posterior(oscillator, "exp", seed=5)
    for name in ("theta", "y0", "sigma"):
        mean_a = forward.posterior[name].mean(("chain", "draw")).values
        mean_b = approximate.posterior[name].mean(("chain", "draw")).values
        mcse_a = az.mcse(forward, var_names=[name])[name].values
        mcse_b = az.mcse(approximate, var_names=[name])[name].values
        assert np.all(np.abs(mean_a - mean_b) < 4 * np.sqrt(mcse_a**2 + mcse_b**2)), name
    assert int(approximate.sample_stats["diverging"].sum()) == 0
