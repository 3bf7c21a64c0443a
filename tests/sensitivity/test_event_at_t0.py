"""An explicit event at t0 with an output at t0: every gradient route treats that output
as the state after the event (the right limit), as the solve does."""

from __future__ import annotations

import math

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_odesens import OdeSystem, adjoint_gradient, ode_solution, solve_sensitivity
from pymc_odesens.model import ExplicitEvent
from tests.sensitivity.tight_tolerances import TIGHT, TIGHT_ADJOINT_PHASES

TIMES = [0.0, 1.0]
# x' = -k x, x(0+) = x0 + 1: y = [x0 + 1, (x0 + 1) e^-k]; L = sum y at x0 = k = 1
EXPECTED_Y = [2.0, 2.0 * math.exp(-1.0)]
EXPECTED_GRADIENT = {"y0": 1.0 + math.exp(-1.0), "k": -2.0 * math.exp(-1.0)}


@pytest.fixture(scope="module")
def dose_at_t0():
    dose = ExplicitEvent([0.0], affect=lambda t, y, p: [y.x + 1.0], name="dose")
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x], states=["x"], params=["k"], events=[dose], name="dose_t0"
    )


@pytest.mark.parametrize("method", ["rk45", "ckrk", "bdf", "adams"])
def test_forward_sensitivities(dose_at_t0, method):
    r = solve_sensitivity(dose_at_t0, [1.0], TIMES, [1.0], method=method, wrt="both", **TIGHT)
    np.testing.assert_allclose(r.y[:, 0], EXPECTED_Y, rtol=1e-8)
    # S(t0+) = dy/dk = 0 and dy/dy0 = 1 (the dose does not depend on them)
    np.testing.assert_allclose(r.S[:, 0, 0], [0.0, EXPECTED_GRADIENT["k"]], rtol=1e-7)
    np.testing.assert_allclose(r.S_y0[:, 0, 0], [1.0, math.exp(-1.0)], rtol=1e-7)


@pytest.mark.parametrize(
    ("adjoint_method", "solver"),
    [("continuous", "bdf"), ("continuous", "adams"), ("discrete", "bdf")],
)
def test_adjoints(dose_at_t0, adjoint_method, solver):
    g = adjoint_gradient(
        dose_at_t0,
        [1.0],
        TIMES,
        [1.0],
        np.ones((2, 1)),
        adjoint_method=adjoint_method,
        solver_forward=solver,
        solver_backward=solver,
        **TIGHT_ADJOINT_PHASES,
    )
    np.testing.assert_allclose(g.y[:, 0], EXPECTED_Y, rtol=1e-8)
    assert g.y0[0] == pytest.approx(EXPECTED_GRADIENT["y0"], rel=1e-7)
    assert g.params[0] == pytest.approx(EXPECTED_GRADIENT["k"], rel=1e-7)


@pytest.mark.parametrize(
    ("route", "extra"),
    [("forward", {}), ("adjoint", {}), ("adjoint", {"adjoint_method": "discrete"})],
)
def test_ode_solution(dose_at_t0, route, extra):
    y0, k = pt.dvector("y0"), pt.dscalar("k")
    y = ode_solution(
        dose_at_t0, y0, TIMES, [k], sensitivity=route, on_failure="raise", **TIGHT, **extra
    )
    values, grad_y0, grad_k = pytensor.function([y0, k], [y, *pytensor.grad(y.sum(), [y0, k])])(
        np.array([1.0]), 1.0
    )
    np.testing.assert_allclose(values[:, 0], EXPECTED_Y, rtol=1e-8)
    assert grad_y0[0] == pytest.approx(EXPECTED_GRADIENT["y0"], rel=1e-7)
    assert grad_k == pytest.approx(EXPECTED_GRADIENT["k"], rel=1e-7)
