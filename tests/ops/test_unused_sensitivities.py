"""A function that needs only the states of a forward-sensitivity solve solves without the
sensitivities where its mode asks for it (``states_only_mode``); by default, and whenever
a gradient is computed, the one solve with sensitivities stays."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_odesens import OdeSystem, ode_solution
from pymc_odesens.ops.ode_ops import OdeForwardOp, OdePbsOp, OdeStatesOp
from pymc_odesens.ops.unused_sensitivities import states_only_mode

TIMES = np.linspace(0.5, 12.0, 9)
Y0 = np.array([1.0, 0.5])
P = np.array([0.9, 0.6, 1.1, 0.4])
CONTROLS = {"relative_tolerance": 1e-8, "absolute_tolerance": 1e-10}


@pytest.fixture(scope="module")
def predator_prey():
    return OdeSystem(
        lambda t, y, p: [p[0] * y[0] - p[1] * y[0] * y[1], p[3] * y[0] * y[1] - p[2] * y[1]],
        2,
        4,
        name="lv_unused_sensitivities",
    )


def _ops(function) -> set[type]:
    return {type(node.op) for node in function.maker.fgraph.apply_nodes}


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
@pytest.mark.parametrize(
    ("sensitivity", "replaced"), [("forward", OdeForwardOp), ("pbs", OdePbsOp)]
)
def test_states_alone_are_solved_without_sensitivities(predator_prey, mode, sensitivity, replaced):
    p = pt.dvector("p")
    y = ode_solution(predator_prey, Y0, TIMES, p, sensitivity=sensitivity, **CONTROLS)
    states_only = pytensor.function([p], y, mode=states_only_mode(mode))
    assert OdeStatesOp in _ops(states_only) and replaced not in _ops(states_only)
    default = pytensor.function([p], y, mode=mode)
    assert replaced in _ops(default) and OdeStatesOp not in _ops(default)

    plain = ode_solution(predator_prey, Y0, TIMES, p, sensitivity="none", **CONTROLS)
    reference = pytensor.function([p], plain, mode=mode)(P)
    np.testing.assert_array_equal(states_only(P), reference)  # the states-only solve
    # the sensitivity solve's states agree within the tolerances
    np.testing.assert_allclose(default(P), reference, rtol=1e-6, atol=1e-9)

    # with the gradient, even in the states-only mode: one solve with sensitivities
    loss = pt.sum(y**2)
    both = pytensor.function([p], [loss, pt.grad(loss, p)], mode=states_only_mode(mode))
    assert replaced in _ops(both) and OdeStatesOp not in _ops(both)
    value, gradient = both(P)
    unchanged = pytensor.function([p], [loss, pt.grad(loss, p)], mode=mode)
    expected_value, expected_gradient = unchanged(P)
    assert value == expected_value  # the rewrite leaves a differentiated graph alone
    np.testing.assert_array_equal(gradient, expected_gradient)


def test_a_model_logp_alone_and_with_its_gradient_share_one_solve_by_default(predator_prey):
    observed = np.abs(np.sin(np.arange(18.0))).reshape(9, 2) + 0.2
    with pm.Model() as model:
        theta = pm.LogNormal("theta", 0.0, 0.5, shape=4)
        y = ode_solution(predator_prey, Y0, TIMES, theta, sensitivity="forward")
        pm.Normal("obs", y, 0.3, observed=observed)
    point = model.initial_point()
    logp = model.compile_logp()
    assert OdeForwardOp in _ops(logp.f) and OdeStatesOp not in _ops(logp.f)
    logp_dlogp = model.logp_dlogp_function(ravel_inputs=True)
    logp_dlogp.set_extra_values({})
    value, _ = logp_dlogp(point["theta_log__"])
    assert float(logp(point)) == float(value)  # the same trajectory, bit for bit
    states_only = model.compile_logp(mode=states_only_mode())
    assert OdeStatesOp in _ops(states_only.f) and OdeForwardOp not in _ops(states_only.f)
    assert float(states_only(point)) == pytest.approx(float(value), rel=1e-6)
