"""An explicit event exactly at the last output time: the adjoints agree with the forward
sensitivities and with the closed form (the forward pass's last run, from the event to
the same time, once added a checkpoint of zeros and counted its step log twice)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pymc_odesens import OdeSystem, adjoint_gradient, solve_sensitivity
from pymc_odesens.model import ExplicitEvent
from tests.sensitivity.tight_tolerances import TIGHT, TIGHT_ADJOINT_PHASES

TIMES = [0.5, 1.0, 2.0]
K, A = 0.7, 1.3


def closed_form_gradient():
    """x' = -k x, x(0) = 1; at t = 2 the event sets x to a x; L = x(0.5) + x(1) + x(2+)."""
    dk = -0.5 * math.exp(-0.5 * K) - math.exp(-K) - 2.0 * A * math.exp(-2.0 * K)
    da = math.exp(-2.0 * K)
    return np.array([dk, da])


@pytest.fixture(scope="module")
def switch_at_end():
    scale = ExplicitEvent([2.0], affect=lambda t, y, p: {"x": p.a * y.x}, name="scale")
    return OdeSystem(
        lambda t, y, p: [-p.k * y.x],
        states=["x"],
        params=["k", "a"],
        events=[scale],
        name="scale_at_last_output",
    )


def test_forward_sensitivities(switch_at_end):
    r = solve_sensitivity(switch_at_end, [1.0], TIMES, [K, A], method="bdf", **TIGHT)
    assert r.y[-1, 0] == pytest.approx(A * math.exp(-2.0 * K), rel=1e-8)
    np.testing.assert_allclose(r.S[:, 0, :].sum(axis=0), closed_form_gradient(), rtol=1e-7)


@pytest.mark.parametrize(
    ("adjoint_method", "solver"),
    [("continuous", "bdf"), ("continuous", "adams"), ("discrete", "bdf")],
)
def test_adjoints(switch_at_end, adjoint_method, solver):
    g = adjoint_gradient(
        switch_at_end,
        [1.0],
        TIMES,
        [K, A],
        np.ones((3, 1)),
        adjoint_method=adjoint_method,
        solver_forward=solver,
        solver_backward=solver,
        **TIGHT_ADJOINT_PHASES,
    )
    assert g.y[-1, 0] == pytest.approx(A * math.exp(-2.0 * K), rel=1e-8)
    np.testing.assert_allclose(g.params, closed_form_gradient(), rtol=1e-7)
    # L is linear in x(0)
    dy0 = math.exp(-0.5 * K) + math.exp(-K) + A * math.exp(-2.0 * K)
    assert g.y0[0] == pytest.approx(dy0, rel=1e-7)
