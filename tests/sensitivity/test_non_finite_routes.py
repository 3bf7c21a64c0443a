"""NaN injection: a right-hand side, a derivative or an event jump that turns NaN or infinite
ends every route with a named solver error, never with NaN numbers.

Three faults, each on every method and route that can meet it:

- ``blow_up``: ``x' = a x`` with ``a = 20`` overflows near t = 35.5 (its sensitivity
  ``t e^(20 t)`` a little earlier);
- ``root``: ``x' = a sqrt(c - t) - k x`` is NaN past ``t = c = 2``;
- ``root_of_parameter``: ``x' = -x + sqrt(q)`` at ``q = 0``: the state is fine, but
  ``df/dq = 1 / (2 sqrt(q))`` is infinite, so no gradient route can succeed.

rk45 and ckrk forward sensitivities returned NaN ``y`` and ``S`` without an error for the
first two (the blockwise error norm dropped the NaN sensitivity block, see
``tests/solvers/test_error_norm.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens import (
    NonFiniteRhsError,
    OdeSystem,
    StepSizeTooSmallError,
    adjoint_gradient,
    solve,
    solve_sensitivity,
)
from pymc_odesens import math as om
from pymc_odesens.model import ExplicitEvent

METHODS = ("rk45", "ckrk", "bdf", "adams")
SOLVE_ROUTES = ("solve", "forward", "forward_unchecked", "pbs", "pbsr", "exp")
ADJOINT_ROUTES = (("continuous", "bdf"), ("continuous", "adams"), ("discrete", "bdf"))


@pytest.fixture(scope="module")
def faults():
    """name -> (system, y0, times, params, window of the failure time)."""
    blow_up = OdeSystem(lambda t, y, p: [p.a * y.x], states=["x"], params=["a"], name="blow_up")
    root = OdeSystem(
        lambda t, y, p: [p.a * om.sqrt(p.c - t) - p.k * y.x],
        states=["x"],
        params=["a", "c", "k"],
        name="root",
    )
    root_of_parameter = OdeSystem(
        lambda t, y, p: [-y.x + om.sqrt(p.q)], states=["x"], params=["q"], name="root_of_q"
    )
    return {
        "blow_up": (blow_up, [1.0], [10.0, 40.0], [20.0], (34.5, 35.6)),
        "root": (root, [1.0], [1.0, 3.0], [1.0, 2.0, 0.5], (2.0 - 1e-9, 2.0 + 1e-9)),
        "root_of_parameter": (root_of_parameter, [1.0], [1.0, 2.0], [0.0], (0.0, 2.0)),
    }


def _run(route, system, y0, times, params, method):
    if route == "solve":
        return solve(system, y0, times, params, method=method)
    if route == "forward_unchecked":
        return solve_sensitivity(
            system, y0, times, params, method=method, sensitivity_error_control=False
        )
    return solve_sensitivity(system, y0, times, params, method=method, sensitivity=route)


def _adjoint(system, y0, times, params, adjoint_method, method):
    cotangent = np.ones((len(times), system.n_states))
    controls = dict(solver_forward=method, solver_backward=method, adjoint_method=adjoint_method)
    return adjoint_gradient(system, y0, times, params, cotangent, **controls)


@pytest.mark.parametrize("route", SOLVE_ROUTES)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("fault", ["blow_up", "root"])
def test_state_faults_raise_on_every_solve_route(faults, fault, method, route):
    system, y0, times, params, (t_low, t_high) = faults[fault]
    # dx/dc of the root grows like 1/sqrt(c - t): the multistep methods' steps end within an
    # ulp of c, where the error test underflows or the right-hand side is infinite (which
    # of the two depends on the last ulp); every other run ends on the NaN right-hand side
    # past c
    error = (
        (StepSizeTooSmallError, NonFiniteRhsError)
        if fault == "root" and method in ("bdf", "adams")
        else NonFiniteRhsError
    )
    with pytest.raises(error, match=rf"^{method}: .* at t = ") as info:
        _run(route, system, y0, times, params, method)
    assert t_low <= info.value.t <= t_high
    assert info.value.component is not None


@pytest.mark.parametrize(("adjoint_method", "method"), ADJOINT_ROUTES)
@pytest.mark.parametrize("fault", ["blow_up", "root"])
def test_state_faults_raise_in_the_adjoint_forward_phase(faults, fault, adjoint_method, method):
    system, y0, times, params, (t_low, t_high) = faults[fault]
    with pytest.raises(NonFiniteRhsError, match=rf"adjoint forward solve \({method}\)") as info:
        _adjoint(system, y0, times, params, adjoint_method, method)
    assert t_low <= info.value.t <= t_high


@pytest.mark.parametrize("route", SOLVE_ROUTES[1:])
@pytest.mark.parametrize("method", METHODS)
def test_infinite_parameter_derivative_raises_on_every_sensitivity_route(faults, method, route):
    system, y0, times, params, _ = faults["root_of_parameter"]
    np.testing.assert_allclose(
        solve(system, y0, times, params, method=method).y[:, 0],
        np.exp(-np.array(times)),
        rtol=1e-5,
    )
    with pytest.raises(NonFiniteRhsError, match=r"(right-hand side|derivative).* at t = 0\b"):
        _run(route, system, y0, times, params, method)


@pytest.mark.parametrize(
    ("adjoint_method", "method", "match"),
    [
        ("continuous", "bdf", r"adjoint backward solve \(bdf\).*\(mu_q\)"),
        ("continuous", "adams", r"adjoint backward solve \(adams\).*\(mu_q\)"),
        ("discrete", "bdf", r"discrete adjoint replay \(bdf\): a derivative .* not finite"),
    ],
)
def test_infinite_parameter_derivative_raises_in_the_backward_phase(
    faults, adjoint_method, method, match
):
    system, y0, times, params, _ = faults["root_of_parameter"]
    with pytest.raises(NonFiniteRhsError, match=match):
        _adjoint(system, y0, times, params, adjoint_method, method)


@pytest.fixture(scope="module")
def log_jump():
    """An explicit event at t = 0.5 whose affect ``log(x - c)`` is NaN for ``c = 5``."""
    event = ExplicitEvent([0.5], affect=lambda t, y, p: [om.log(y.x - p.c)], name="log_jump")
    return OdeSystem(
        lambda t, y, p: [-y.x], states=["x"], params=["c"], events=[event], name="log_jump"
    )


@pytest.mark.parametrize("route", ["solve", "forward"])
@pytest.mark.parametrize("method", METHODS)
def test_non_finite_event_jump_names_the_event(log_jump, method, route):
    with pytest.raises(
        NonFiniteRhsError, match=r"state after event 'log_jump' at t = 0.5 is not finite"
    ) as info:
        _run(route, log_jump, [1.0], [1.0], [5.0], method)
    assert info.value.t == 0.5 and info.value.component == 0
    # a finite jump passes: x(1) = log(e^-0.5 - c) e^-0.5 for c = 0.1
    y = _run(route, log_jump, [1.0], [1.0], [0.1], method).y
    assert y[0, 0] == pytest.approx(np.log(np.exp(-0.5) - 0.1) * np.exp(-0.5), rel=1e-5)


@pytest.mark.parametrize("adjoint_method", ["continuous", "discrete"])
def test_non_finite_event_jump_in_the_adjoint_forward_phase(log_jump, adjoint_method):
    with pytest.raises(NonFiniteRhsError, match=r"state after event 'log_jump' at t = 0.5"):
        adjoint_gradient(
            log_jump, [1.0], [1.0], [5.0], np.ones((1, 1)), adjoint_method=adjoint_method
        )
