"""Systems with events inside PyMC graphs: every gradient route, the Python and the NUMBA
implementations, against the bouncing ball's closed form and a dosing schedule."""

from __future__ import annotations

import json

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_odesens import OdeSystem, TriggerEvent, ode_solution, solve_sensitivity
from tests.conftest import model_path
from tests.solvers.test_events import pk_system

ROUTES = [("forward", "rk45"), ("forward", "bdf"), ("adjoint", "bdf"), ("adjoint", "adams")]
TOL = dict(relative_tolerance=1e-10, absolute_tolerance=1e-12)


@pytest.fixture(scope="module")
def ball():
    return OdeSystem.from_json(model_path("bouncing_ball"))


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
@pytest.mark.parametrize(("route", "method"), ROUTES)
def test_bouncing_ball_gradients_in_a_graph(ball, route, method, mode):
    """d z(t_end) / d(z0, v0, g, gamma) through the Op's gradient equals the closed form."""
    exact = json.loads(model_path("bouncing_ball").read_text())["exact"]
    y0 = pt.dvector("y0")
    p = pt.dvector("p")
    y = ode_solution(
        ball, y0, [1.9], p, sensitivity=route, method=method, on_failure="raise", **TOL
    )
    z_end = y[-1, 0]
    f = pytensor.function([y0, p], [z_end, *pytensor.grad(z_end, [y0, p])], mode=mode)
    value, g_y0, g_p = f(ball.x0, ball.p_nominal)
    assert value == pytest.approx(exact["z_end"], rel=1e-8)
    np.testing.assert_allclose(g_y0, [exact["dz_end/dz0"], exact["dz_end/dv0"]], rtol=1e-6)
    np.testing.assert_allclose(g_p, [exact["dz_end/dg"], exact["dz_end/dgamma"]], rtol=1e-6)


@pytest.mark.parametrize(("route", "method"), ROUTES)
def test_dosing_schedule_gradients_match_forward_sensitivities(route, method):
    """Doses at tlag + 12 k (a parameter-dependent schedule), 3 experiments with different
    lags solved in one Op; both implementations give the same gradient."""
    system = pk_system(lag=True)
    times = np.linspace(0.25, 47.75, 40)
    weights = np.random.default_rng(4).normal(size=(3, times.size, 2))
    params = pt.dmatrix("params")
    y = ode_solution(
        system,
        np.zeros((3, 2)),
        times,
        pt.specify_shape(params, (3, 4)),
        sensitivity=route,
        method=method,
        on_failure="raise",
        **TOL,
    )
    loss = (y * weights).sum()
    values = np.array([[1.2, 0.15, 100.0, lag] for lag in (0.5, 1.5, 2.5)])
    results = [
        pytensor.function([params], [y, pytensor.grad(loss, params)], mode=mode)(values)
        for mode in ("FAST_RUN", "NUMBA")
    ]
    for e, row in enumerate(values):
        ref = solve_sensitivity(system, [0.0, 0.0], times, row, method="bdf", **TOL)
        np.testing.assert_allclose(results[0][0][e], ref.y, rtol=1e-7, atol=1e-7)
        want = np.einsum("ti,tik->k", weights[e], ref.S)
        np.testing.assert_allclose(results[0][1][e], want, rtol=1e-6, atol=1e-8)
    for python_value, numba_value in zip(*results):
        np.testing.assert_allclose(python_value, numba_value, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
def test_nan_event_time_is_a_rejected_proposal(mode):
    """An explicit event time that is not finite at the proposed parameters (here the log
    of a negative number) is a solver failure (-inf log density), not a crash."""
    import pymc as pm

    from pymc_odesens import math as om
    from pymc_odesens.model import ExplicitEvent

    system = OdeSystem(
        lambda t, y, p: [-p.k * y.x],
        states=["x"],
        params=["k", "a"],
        events=[ExplicitEvent(lambda p: [om.log(p.a)], affect=lambda t, y, p: [y.x + 1.0])],
    )
    with pm.Model() as model:
        a = pm.Normal("a", 2.0, 1.0)
        y = ode_solution(system, [1.0], [1.0, 3.0], [0.5, a], method="bdf")
        pm.Normal("obs", y[:, 0], 1.0, observed=np.array([0.6, 1.2]))
    logp = model.compile_logp(mode=mode)
    assert np.isfinite(logp({"a": 2.0}))
    assert logp({"a": -1.0}) == -np.inf


@pytest.mark.parametrize(
    ("route", "extra"),
    [("forward", {}), ("adjoint", {}), ("adjoint", {"adjoint_method": "discrete"})],
)
def test_trigger_event_gradients_match_forward_sensitivities(route, extra):
    """A dose whenever x falls below c after t_on (a trigger of a root atom and a time atom,
    firing repeatedly), a cascade that counts the doses, and a trigger true at t0 with
    initial_value False: two experiments in one Op, both implementations."""
    system = OdeSystem(
        lambda t, y, p: [-p.k * y.x, 0.0],
        states=["x", "n"],
        params=["k", "c", "t_on", "d"],
        events=[
            TriggerEvent(
                lambda t, y, p: (y.x < p.c) & (t > p.t_on),
                lambda t, y, p: {"x": y.x + p.d},
                name="redose",
            ),
            TriggerEvent(lambda t, y, p: y.x > p.c + 0.5 * p.d, lambda t, y, p: {"n": y.n + y.x}),
            TriggerEvent(
                lambda t, y, p: y.x > 0.0,
                lambda t, y, p: {"x": y.x * p.d},
                initial_value=False,
            ),
        ],
        name="redose_graph",
    )
    times = np.linspace(0.1, 4.9, 13)
    weights = np.random.default_rng(5).normal(size=(2, times.size, 2))
    params = pt.dmatrix("params")
    y = ode_solution(
        system,
        np.array([[1.0, 0.0], [1.5, 0.0]]),
        times,
        pt.specify_shape(params, (2, 4)),
        sensitivity=route,
        method="bdf",
        on_failure="raise",
        **TOL,
        **extra,
    )
    loss = (y * weights).sum()
    values = np.array([[0.9, 0.5, 0.2, 0.8], [0.7, 0.4, 1.3, 0.9]])
    results = [
        pytensor.function([params], [y, pytensor.grad(loss, params)], mode=mode)(values)
        for mode in ("FAST_RUN", "NUMBA")
    ]
    for e, (y0, row) in enumerate(zip(([1.0, 0.0], [1.5, 0.0]), values)):
        ref = solve_sensitivity(system, y0, times, row, method="bdf", **TOL)
        assert ref.events.names.count("redose") >= 2
        np.testing.assert_allclose(results[0][0][e], ref.y, rtol=1e-7, atol=1e-9)
        want = np.einsum("ti,tik->k", weights[e], ref.S)
        np.testing.assert_allclose(results[0][1][e], want, rtol=1e-6, atol=1e-8)
    for python_value, numba_value in zip(*results):
        np.testing.assert_allclose(python_value, numba_value, rtol=1e-10, atol=1e-12)
