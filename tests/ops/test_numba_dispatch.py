"""The numba implementations of the Ops: same numbers as the Python ones, failures, nutpie,
threads."""

from __future__ import annotations

import importlib.util

import numba
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.link.numba.dispatch import numba_funcify

import pymc_odesens
from pymc_odesens import OdeSystem, ode_solution, solve
from pymc_odesens.ops.graph_traversal import ancestors
from pymc_odesens.ops.ode_ops import OdeAdjointOp, OdeAdjointVJPOp, OdeForwardOp
from tests.threads import CALLS, THREADS, assert_same_bits, in_threads

TIMES = np.linspace(0.5, 10.0, 12)


@pytest.mark.parametrize(
    "route, method",
    [
        ("none", "bdf"),
        ("forward", "rk45"),
        ("forward", "adams"),
        ("adjoint", "bdf"),
        ("adjoint", "adams"),
    ],
)
def test_numba_mode_matches_python_mode(oscillator, route, method):
    y0 = pt.dvector("y0")
    theta = pt.dscalar("theta")
    weights = np.random.default_rng(0).normal(size=(TIMES.size, 2))
    y = ode_solution(
        oscillator,
        y0,
        TIMES,
        [theta],
        sensitivity=route,
        method=method,
        on_failure="raise",
        relative_tolerance=1e-9,
        absolute_tolerance=1e-11,
    )
    outputs = [y] if route == "none" else [y, *pytensor.grad((y * weights).sum(), [y0, theta])]
    results = [
        pytensor.function([y0, theta], outputs, mode=mode)(np.array([1.0, -0.3]), 0.2)
        for mode in ("FAST_RUN", "NUMBA")
    ]
    for python_value, numba_value in zip(*results):
        np.testing.assert_array_equal(python_value, numba_value)


def test_numba_mode_batches_and_initial_state_from_parameters():
    system = OdeSystem(
        lambda t, y, p: [-p[0] * y[0]],
        states=["x"],
        params=["k", "a"],
        initial_state=lambda p: [p[1] ** 2],
    )
    params = pt.dmatrix("params")
    for route, extra in (
        ("forward", {}),
        ("adjoint", {}),
        ("adjoint", {"adjoint_method": "discrete"}),
    ):
        y = ode_solution(
            system,
            None,
            [0.5, 1.0, 2.0],
            pt.specify_shape(params, (2, 2)),
            sensitivity=route,
            on_failure="raise",
            relative_tolerance=1e-10,
            absolute_tolerance=1e-12,
            **extra,
        )
        grad = pytensor.grad(y.sum(), params)
        value = np.array([[0.7, 1.5], [0.2, 0.5]])
        got = [pytensor.function([params], [y, grad], mode=m)(value) for m in ("FAST_RUN", "NUMBA")]
        np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-12)
        np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-12)
        times = np.array([0.5, 1.0, 2.0])
        k, a = value[1]
        np.testing.assert_allclose(got[1][0][1, :, 0], a**2 * np.exp(-k * times), rtol=1e-8)


def test_numba_mode_failure_is_rejected_and_counted():
    pymc_odesens.reset_failure_counts()
    system = OdeSystem(lambda t, y, p: [-p[0] * y[0]], states=["x"], params=["k"], name="decay")
    with pm.Model() as model:
        k = pm.LogNormal("k", 0.0, 1.0)
        y = ode_solution(system, [1.0], [1.0, 2.0], [k], method="rk45", max_num_steps=20)
        pm.Normal("obs", y[:, 0], 0.1, observed=[0.4, 0.1])
    logp = model.compile_logp(mode="NUMBA")
    dlogp = model.compile_dlogp(mode="NUMBA")
    assert np.isfinite(logp({"k_log__": 0.0}))
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="MaxNumStepsError"):
        assert logp({"k_log__": np.log(2000.0)}) == -np.inf
    assert np.all(np.isfinite(dlogp({"k_log__": np.log(2000.0)})))
    assert pymc_odesens.failure_counts()["MaxNumStepsError"] >= 1


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("nutpie") is None,
    reason="nutpie is not installed (pip install nutpie; it is in the test extra)",
)
@pytest.mark.parametrize("route", ["forward", "adjoint", "discrete adjoint"])
def test_nutpie_samples_the_oscillator(oscillator, route):
    times = np.arange(1.0, 11.0)
    truth = solve(
        oscillator,
        [1.0, 0.0],
        times,
        [0.15],
        method="rk45",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-10,
    ).y
    data = truth + 0.1 * np.random.default_rng(1).normal(size=truth.shape)
    with pm.Model():
        theta = pm.HalfNormal("theta", 1.0)
        y0 = pm.Normal("y0", 0.0, 1.0, shape=2)
        sigma = pm.HalfNormal("sigma", 1.0)
        mu = ode_solution(
            oscillator,
            y0,
            times,
            [theta],
            sensitivity=route.split()[-1],
            relative_tolerance=1e-8,
            absolute_tolerance=1e-8,
            **({"adjoint_method": "discrete"} if route == "discrete adjoint" else {}),
        )
        pm.Normal("obs", mu, sigma, observed=data)
        idata = pm.sample(
            300, tune=300, chains=2, nuts_sampler="nutpie", progressbar=False, random_seed=2
        )
    draws = idata.posterior["theta"].values.ravel()
    lo, hi = np.quantile(draws, [0.005, 0.995])
    assert lo < 0.15 < hi
    assert int(idata.sample_stats["diverging"].sum()) == 0


def _numba_implementations_without_the_gil(output):
    """The numba implementation of every ODE Op that ``output`` depends on, compiled again
    with ``nogil=True`` (nutpie calls the compiled graph from threads without the GIL), by
    node, in the order the nodes run."""
    ode_ops = (OdeForwardOp, OdeAdjointOp, OdeAdjointVJPOp)
    owners = [v.owner for v in ancestors([output]) if v.owner is not None]
    nodes = list({id(n): n for n in owners if isinstance(n.op, ode_ops)}.values())
    order = {OdeForwardOp: 0, OdeAdjointOp: 0, OdeAdjointVJPOp: 1}
    nodes.sort(key=lambda n: order[type(n.op)])
    return [(n, numba.njit(nogil=True)(numba_funcify(n.op, n).py_func)) for n in nodes]


@pytest.mark.parametrize("route", ["forward", pytest.param("adjoint", marks=pytest.mark.slow)])
def test_numba_implementations_called_from_threads_without_the_gil(oscillator, route):
    """The same compiled Op, entered by 4 threads at once without the GIL (as nutpie's
    threads do), 50 calls each: the bits of one thread."""
    n_e = 3
    y0, theta = pt.dmatrix("y0"), pt.dmatrix("theta")
    y = ode_solution(
        oscillator,
        pt.specify_shape(y0, (n_e, 2)),
        TIMES,
        pt.specify_shape(theta, (n_e, 1)),
        sensitivity=route,
        on_failure="raise",
    )
    cotangent = np.random.default_rng(0).normal(size=(n_e, TIMES.size, 2))
    gradient = pytensor.grad((y * cotangent).sum(), theta)
    implementations = _numba_implementations_without_the_gil(gradient)
    assert len(implementations) == (1 if route == "forward" else 2)

    def evaluate(point):
        y0_value, theta_value = point
        (_, forward), *backward = implementations
        outputs = forward(y0_value, theta_value)
        if not backward:
            return outputs
        ((_, vjp),) = backward
        return outputs, vjp(y0_value, theta_value, *outputs[1:], cotangent)

    rng = np.random.default_rng(1)
    points = [
        (
            np.array([[1.0, 0.0]] * n_e) + 0.1 * rng.standard_normal((n_e, 2)),
            0.15 + 0.02 * rng.standard_normal((n_e, 1)),
        )
        for _ in range(THREADS * CALLS)
    ]
    alone = [evaluate(p) for p in points]
    assert_same_bits(alone, in_threads(evaluate, points))
