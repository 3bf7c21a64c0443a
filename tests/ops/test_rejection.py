"""Rejected proposals inside a model: logp -inf, a finite gradient, and a count that says
what failed, on every method and gradient route, in PyTensor's default and NUMBA modes.

Every method and route is checked in the default (Python) mode. NUMBA mode compiles each
Op's core per graph (about 10 s each), so it is checked on the continuous adjoint (its
forward and backward cores) and, through nutpie, on the forward-sensitivity core (shared by
the four methods, which differ only in a method code). The NaN checks themselves are in the
compiled integrators, which both modes call.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_odesens
from pymc_odesens import NonFiniteRhsError, OdeSystem, ode_solution, stan
from pymc_odesens import math as om

# every method on the forward route, every adjoint, and the Peano-Baker routes
ROUTES = (
    ("rk45", "forward", {}),
    ("ckrk", "forward", {}),
    ("bdf", "forward", {}),
    ("adams", "forward", {}),
    ("bdf", "adjoint", {}),
    ("adams", "adjoint", {}),
    ("bdf", "adjoint", {"adjoint_method": "discrete"}),
    ("rk45", "pbsr", {}),
    ("bdf", "exp", {}),
    ("adams", "pbs", {}),
)


def _logp_and_gradient(model, point, mode="FAST_RUN"):
    function = model.logp_dlogp_function(mode=mode, ravel_inputs=True)
    function.set_extra_values({})
    logp, grad = function(np.atleast_1d(np.asarray(point, dtype=float)))
    return float(logp), grad


@pytest.fixture(scope="module")
def blow_up():
    """x' = a x overflows near t = 35 for a = 20 (rk45/ckrk sensitivities used to be NaN)."""
    return OdeSystem(lambda t, y, p: [p.a * y.x], states=["x"], params=["a"], name="blow_up")


@pytest.fixture(scope="module")
def root_of_parameter():
    """x' = -x + sqrt(q): at q = 0 the solve is fine but df/dq is infinite, so every
    adjoint's backward pass fails after a successful forward solve."""
    return OdeSystem(
        lambda t, y, p: [-y.x + om.sqrt(p.q)], states=["x"], params=["q"], name="root_of_q"
    )


def test_nan_injection_is_rejected_on_every_method_and_route(blow_up):
    """One model holds the solution by every method and route (one compile). At a = 20
    each solve meets an infinite right-hand side: logp -inf, gradient 0, one count per
    solution; before, rk45 and ckrk gave logp NaN, dlogp NaN and no count."""
    with pm.Model() as model:
        a = pm.Normal("a", 1.0, 10.0)
        for method, route, extra in ROUTES:
            y = ode_solution(
                blow_up, [1.0], [10.0, 40.0], [a], method=method, sensitivity=route, **extra
            )
            pm.Normal(f"obs_{method}_{route}_{len(extra)}", y[:, 0], 1.0, observed=[1.0, 1.0])
    pymc_odesens.reset_failure_counts()
    logp, grad = _logp_and_gradient(model, -0.1)
    assert np.isfinite(logp) and np.all(np.isfinite(grad))
    assert pymc_odesens.failure_counts() == {}
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="NonFiniteRhsError"):
        logp, grad = _logp_and_gradient(model, 20.0)
    assert logp == -np.inf
    np.testing.assert_array_equal(grad, [0.0])
    assert pymc_odesens.failure_counts() == {"NonFiniteRhsError": len(ROUTES)}


@pytest.mark.parametrize("function", [stan.ode_rk45, stan.ode_ckrk])
def test_stan_functions_raise_the_solver_error_outside_a_model(function):
    y = function(lambda t, y, a: [a * y[0]], np.array([1.0]), 0.0, [10.0, 40.0], 20.0)
    with pytest.raises(NonFiniteRhsError, match=r"right-hand side is not finite .* t = 35\."):
        y.eval()


@pytest.fixture(scope="module")
def linear():
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x + y.z, -y.z], states=["x", "z"], params=["k"], name="lin"
    )


BACKWARD = (
    ("bdf", {}, "NonFiniteRhsError in the adjoint backward solve"),
    ("adams", {}, "NonFiniteRhsError in the adjoint backward solve"),
    ("bdf", {"adjoint_method": "discrete"}, "NonFiniteRhsError in the discrete adjoint replay"),
)


def test_backward_failure_rejects_with_a_finite_gradient(root_of_parameter):
    """A backward pass that fails after the solve used to leave logp finite and the
    gradient silently zero while counting a "rejected proposal"; now logp is -inf (whenever
    the gradient is computed with it), the gradient 0, and the count names the phase."""
    with pm.Model() as model:
        q = pm.Normal("q", 1.0, 1.0)
        for i, (method, extra, _) in enumerate(BACKWARD):
            y = ode_solution(
                root_of_parameter,
                [1.0],
                [1.0, 2.0],
                [q],
                method=method,
                sensitivity="adjoint",
                **extra,
            )
            pm.Normal(f"obs_{i}", y[:, 0], 1.0, observed=[0.5, 0.2])
    pymc_odesens.reset_failure_counts()
    logp, grad = _logp_and_gradient(model, 0.5)
    assert np.isfinite(logp) and np.all(np.isfinite(grad)) and grad[0] != 0.0
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="in the .*adjoint"):
        logp, grad = _logp_and_gradient(model, 0.0)
    assert logp == -np.inf
    np.testing.assert_array_equal(grad, [0.0])
    assert pymc_odesens.failure_counts() == {
        "NonFiniteRhsError in the adjoint backward solve": 2,
        "NonFiniteRhsError in the discrete adjoint replay": 1,
    }
    # the log-density alone runs no backward pass: the state is fine there
    assert np.isfinite(model.compile_logp()({"q": 0.0}))


def _linear_model(linear, **controls):
    """``k ~ N(1, 0.1)``, the adjoint solution of ``linear`` observed with unit noise."""
    with pm.Model() as model:
        k = pm.Normal("k", 1.0, 0.1)
        y = ode_solution(linear, [1.0, 1.0], [1.0, 2.0], [k], sensitivity="adjoint", **controls)
        pm.Normal("obs", y[:, 0], 1.0, observed=[0.5, 0.2])
    return model


def test_backward_max_num_steps_names_the_phase(linear):
    """The forward solve fits in max_num_steps = 40, the backward one at tolerance 1e-12
    does not."""
    model = _linear_model(
        linear,
        max_num_steps=40,
        relative_tolerance_backward=1e-12,
        absolute_tolerance_backward=1e-14,
        relative_tolerance_quadrature=1e-12,
        absolute_tolerance_quadrature=1e-14,
    )
    pymc_odesens.reset_failure_counts()
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="max_num_steps = 40"):
        logp, grad = _logp_and_gradient(model, 1.0)
    assert logp == -np.inf
    np.testing.assert_array_equal(grad, [0.0])
    assert pymc_odesens.failure_counts() == {"MaxNumStepsError in the adjoint backward solve": 1}


@pytest.mark.parametrize(("method", "route"), [("rk45", "forward"), ("bdf", "adjoint")])
def test_overflowing_transform_gives_a_finite_gradient(method, route):
    """k = exp(z) overflows to inf at z = 800: the solve is rejected, and the gradient, which
    the chain rule made 0 * exp(800) = NaN, is 0."""
    decay = OdeSystem(lambda t, y, p: [-p.k * y.x], states=["x"], params=["k"], name="decay")
    with pm.Model() as model:
        z = pm.Normal("z", 0.0, 1.0)
        y = ode_solution(decay, [1.0], [1.0, 2.0], [pt.exp(z)], method=method, sensitivity=route)
        pm.Normal("obs", y[:, 0], 0.1, observed=[0.4, 0.1])
    pymc_odesens.reset_failure_counts()
    logp, grad = _logp_and_gradient(model, 0.0)
    assert np.isfinite(logp) and np.isfinite(grad).all() and grad[0] != 0.0
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="NonFiniteInputError"):
        logp, grad = _logp_and_gradient(model, 800.0)
    assert logp == -np.inf
    np.testing.assert_array_equal(grad, [0.0])
    assert pymc_odesens.failure_counts() == {"NonFiniteInputError": 1}


def test_checkpoint_control_does_not_size_buffers(linear):
    """num_steps_between_checkpoints = 10**9 ("no checkpoints") raised MemoryError on the
    gradient: the backward pass sized its buffer for 2e9 steps. It is sized from the forward
    steps now, and the gradient equals the one with the default control."""
    tight = dict(relative_tolerance=1e-10, absolute_tolerance=1e-10)
    grads = [
        _logp_and_gradient(
            _linear_model(linear, num_steps_between_checkpoints=between, **tight), 1.2
        )[1]
        for between in (150, 10**9)
    ]
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-8)


def test_numba_mode_rejects_backward_failures(root_of_parameter):
    """NUMBA mode (nutpie's) in one compile: a continuous adjoint with 10**9 steps between
    checkpoints (which used to raise MemoryError) whose backward pass fails, the exp(z)
    overflow, and a healthy point whose logp and gradient equal the default mode's. (The
    forward-sensitivity core meets NaN in the nutpie test below; the discrete adjoint's
    backward core flags its failures as the continuous one does, and is left to the default
    mode here: each NUMBA core costs a compile.)"""
    with pm.Model() as model:
        z = pm.Normal("z", 0.0, 1.0)
        y = ode_solution(
            root_of_parameter,
            [1.0],
            [1.0, 2.0],
            [pt.exp(z)],
            sensitivity="adjoint",
            num_steps_between_checkpoints=10**9,
        )
        pm.Normal("obs", y[:, 0], 1.0, observed=[0.5, 0.2])
    numba_logp, numba_grad = _logp_and_gradient(model, -0.7, "NUMBA")
    python_logp, python_grad = _logp_and_gradient(model, -0.7)
    assert numba_logp == pytest.approx(python_logp, rel=1e-12)
    np.testing.assert_allclose(numba_grad, python_grad, rtol=1e-10)
    for z_value, counts in (
        (-800.0, {"NonFiniteRhsError in the adjoint backward solve": 1}),  # q = 0: df/dq = inf
        (800.0, {"NonFiniteRhsError": 1}),  # q = inf: the solve fails
    ):
        pymc_odesens.reset_failure_counts()
        with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="NonFiniteRhsError"):
            logp, grad = _logp_and_gradient(model, z_value, "NUMBA")
        assert logp == -np.inf
        np.testing.assert_array_equal(grad, [0.0])
        assert pymc_odesens.failure_counts() == counts


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("nutpie") is None,
    reason="nutpie is not installed (pip install nutpie; it is in the test extra)",
)
def test_nutpie_samples_through_rejected_proposals(blow_up):
    """x' = a x observed on the log scale up to t = 35.3, where the solve overflows for
    a > 20.1 (its sensitivity for a > 20.0): the posterior of a sits at that edge, so a
    large part of the proposals fail. nutpie (NUMBA mode) samples without NaN; the failures
    are counted."""
    times = np.array([1.0, 35.3])
    with pm.Model():
        a = pm.Normal("a", 19.9, 0.5)
        x = ode_solution(blow_up, [1.0], times, [a], method="rk45", sensitivity="forward")
        pm.Normal("obs", pt.log(x[:, 0]), 0.5, observed=19.95 * times)
        pymc_odesens.reset_failure_counts()
        idata = pm.sample(
            200, tune=200, chains=1, nuts_sampler="nutpie", progressbar=False, random_seed=3
        )
    draws = idata.posterior["a"].values.ravel()
    assert np.all(np.isfinite(draws)) and np.all(draws < 20.1)
    assert pymc_odesens.failure_counts().get("NonFiniteRhsError", 0) > 0
    assert "(dx/da)" in pymc_odesens.failure_summary()  # the sensitivity that overflowed
