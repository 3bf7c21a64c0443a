"""PerThreadFunction: a compiled PyMC log-density and its gradient shared by threads."""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_odesens import PerThreadFunction, ode_solution, solve
from tests.threads import CALLS, THREADS, assert_same_bits, in_threads

TIMES = np.linspace(0.5, 10.0, 20)
EXPERIMENTS = 3


def _model(system, route: str) -> pm.Model:
    """The oscillator observed in three experiments (one solve of each per evaluation, in
    the package's pool of threads)."""
    truth = solve(system, [1.0, 0.0], TIMES, [0.15]).y
    rng = np.random.default_rng(0)
    data = truth + 0.1 * rng.normal(size=(EXPERIMENTS, *truth.shape))
    with pm.Model() as model:
        theta = pm.HalfNormal("theta", 1.0, shape=EXPERIMENTS)
        y0 = pm.Normal("y0", 0.0, 1.0, shape=(EXPERIMENTS, 2))
        sigma = pm.HalfNormal("sigma", 1.0)
        mu = ode_solution(
            system,
            y0,
            TIMES,
            theta[:, None],
            sensitivity=route,
            relative_tolerance=1e-10,
            absolute_tolerance=1e-10,
        )
        pm.Normal("obs", mu, sigma, observed=data)
    return model


def _points(model: pm.Model, count: int) -> list[dict]:
    rng = np.random.default_rng(1)
    start = model.initial_point()
    return [
        {name: value + 0.05 * rng.standard_normal(np.shape(value)) for name, value in start.items()}
        for _ in range(count)
    ]


@pytest.mark.parametrize(
    "route, mode, calls",
    [("forward", "FAST_RUN", CALLS), ("adjoint", "FAST_RUN", 20), ("forward", "NUMBA", 10)],
)
def test_shared_log_density_and_gradient(oscillator, route, mode, calls):
    model = _model(oscillator, route)
    logp, dlogp = model.compile_logp(mode=mode), model.compile_dlogp(mode=mode)
    points = _points(model, THREADS * calls)
    alone = [(logp(p), dlogp(p)) for p in points]
    assert len({a[1].tobytes() for a in alone}) == len(points)  # the points differ
    shared_logp, shared_dlogp = PerThreadFunction(logp), PerThreadFunction(dlogp)
    assert_same_bits(alone, in_threads(lambda p: (shared_logp(p), shared_dlogp(p)), points))
    # the function given is left to its owner: it still computes the same
    assert_same_bits(alone[:3], [(logp(p), dlogp(p)) for p in points[:3]])


def test_a_pytensor_function_with_positional_arguments():
    x = pt.dvector("x")
    function = pytensor.function([x], [pt.exp(x).sum(), pt.grad(pt.exp(x).sum(), x)])
    points = [np.linspace(0.0, 1.0, 5) + k for k in range(THREADS * CALLS)]
    shared = PerThreadFunction(function)
    assert_same_bits([function(x) for x in points], in_threads(shared, points))


def test_each_thread_has_its_own_copy():
    x = pt.dscalar("x")
    function = pytensor.function([x], 2 * x)
    shared = PerThreadFunction(function)
    copies = in_threads(lambda _: shared.function, range(THREADS))
    assert len({id(c) for c in copies}) == THREADS
    assert all(c is not function for c in copies)
    assert shared.function is shared.function  # one copy per thread, made once


def test_a_function_that_updates_shared_variables_is_refused():
    counter = pytensor.shared(0.0, name="counter")
    function = pytensor.function([], counter, updates={counter: counter + 1.0})
    with pytest.raises(ValueError, match="updates the shared variables.*counter"):
        PerThreadFunction(function)


def test_anything_else_is_refused():
    with pytest.raises(TypeError, match="compiled PyTensor function.*got function"):
        PerThreadFunction(lambda x: x)
