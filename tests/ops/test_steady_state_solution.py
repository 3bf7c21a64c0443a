"""Steady states in PyMC graphs: pre-equilibration, inf output times, steady_state_solution."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_odesens
from pymc_odesens import (
    ExplicitEvent,
    OdeSystem,
    Preequilibration,
    SteadyStateNotReachedError,
    ode_solution,
    solve,
    solve_sensitivity,
    steady_state,
    steady_state_solution,
)

P0 = np.array([0.1, 2.0, 1.0, 1.0, 3.0, 0.5])  # kb, ks, u, koff, kx, kxoff
Y0 = np.array([1.0, 0.0, 2.0, 0.0])
TIMES = np.array([0.0, 1.0, 5.0, np.inf])
TIGHT = dict(relative_tolerance=1e-10, absolute_tolerance=1e-12)
TIGHT_STEADY = dict(relative_tolerance=1e-13, absolute_tolerance=1e-14)
ROUTES = [("forward", {}), ("adjoint", {}), ("adjoint", {"adjoint_method": "discrete"})]


def pathway_rhs(t, y, p):
    """A receptor activated by a basal rate and a stimulus u, and a substrate it
    phosphorylates: R + Rp and X + Xp are conserved."""
    act = (p.kb + p.ks * p.u) * y.R - p.koff * y.Rp
    xact = p.kx * y.Rp * y.X - p.kxoff * y.Xp
    return [-act, act, -xact, xact]


PATHWAY_NAMES = dict(states=["R", "Rp", "X", "Xp"], params=["kb", "ks", "u", "koff", "kx", "kxoff"])


@pytest.fixture(scope="module")
def pathway():
    return OdeSystem(pathway_rhs, name="pathway", **PATHWAY_NAMES)


def unstimulated(theta):
    """The pre-equilibration setting: the same parameters without the stimulus."""
    return pt.set_subtensor(theta[2], 0.0)


def _solution_weights():
    return np.random.default_rng(0).normal(size=(TIMES.size, 4))


def preequilibrated_objective(system, route, extra, mode="FAST_RUN", linear_solver="auto"):
    """``theta -> (L, dL/dtheta)`` with ``L`` a weighted sum of the solution after
    pre-equilibration without the stimulus (times include inf)."""
    theta = pt.dvector("theta")
    y = ode_solution(
        system,
        Y0,
        TIMES,
        theta,
        sensitivity=route,
        on_failure="raise",
        preequilibration=Preequilibration(unstimulated(theta)),
        steady_state_controls=TIGHT_STEADY | {"linear_solver": linear_solver},
        linear_solver=linear_solver,
        **TIGHT,
        **extra,
    )
    loss = (y * _solution_weights()).sum()
    return pytensor.function([theta], [loss, pytensor.grad(loss, theta)], mode=mode)


@pytest.mark.parametrize("route, extra", ROUTES)
def test_preequilibration_gradient_matches_central_differences(pathway, route, extra):
    objective = preequilibrated_objective(pathway, route, extra)
    _, gradient = objective(P0)
    h = 1e-6
    central = np.array(
        [(objective(P0 + h * e)[0] - objective(P0 - h * e)[0]) / (2 * h) for e in np.eye(6)]
    )
    np.testing.assert_allclose(gradient, central, rtol=1e-5, atol=1e-7)
    assert np.abs(gradient).min() > 1e-3  # every parameter matters, also u through the state


@pytest.mark.parametrize(
    "route, extra",
    # the steady state is the same for every route: its gradient feeds the main Op's y0
    # input, whose numba implementations test_numba_dispatch compares on every route
    [ROUTES[0], pytest.param(*ROUTES[2], marks=pytest.mark.slow)],
)
def test_numba_mode_matches_python_mode(pathway, route, extra):
    results = [
        preequilibrated_objective(pathway, route, extra, mode)(P0) for mode in ("FAST_RUN", "NUMBA")
    ]
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-13)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("route", ["pbs", "pbsr", "exp"])
def test_preequilibration_with_peano_baker_gradients(pathway, route):
    """The PBS routes take the pre-equilibrated state's gradient through their S_y0: the
    gradient differs from the forward route's by exactly the contraction of the difference
    of the two routes' S and S_y0 (solve_sensitivity at the steady state), the latter
    chained with the steady state's sensitivity to the pre-equilibration parameters."""
    _, forward_gradient = preequilibrated_objective(pathway, "forward", {})(P0)
    _, pbs_gradient = preequilibrated_objective(pathway, route, {})(P0)
    p_pre = P0.copy()
    p_pre[2] = 0.0
    start = steady_state(pathway, Y0, p_pre, **TIGHT_STEADY)
    dstart = start.S.copy()
    dstart[:, 2] = 0.0  # the pre-equilibration parameters hold u at 0
    finite = np.isfinite(TIMES)
    weights = _solution_weights()[finite]
    gradients = {}
    for name in ("forward", route):
        result = solve_sensitivity(
            pathway, start.y, TIMES[finite], P0, sensitivity=name, wrt="both", **TIGHT
        )
        through_y0 = (weights[..., None] * result.S_y0).sum(axis=(0, 1))
        gradients[name] = (weights[..., None] * result.S).sum(axis=(0, 1)) + through_y0 @ dstart
    expected = forward_gradient + gradients[route] - gradients["forward"]
    np.testing.assert_allclose(pbs_gradient, expected, rtol=1e-7, atol=1e-10)
    assert np.abs(gradients[route] - gradients["forward"]).max() > 1e-6  # approximate S


def test_preequilibration_and_inf_values(pathway):
    theta = pt.dvector("theta")
    reinitialize = np.array([False, False, True, False])
    y0_main = np.array([1.0, 0.0, 5.0, 0.0])  # X is re-initialised to 5 after pre-equilibration
    y = ode_solution(
        pathway,
        y0_main,
        TIMES,
        theta,
        sensitivity="none",
        on_failure="raise",
        preequilibration=Preequilibration(unstimulated(theta), y0=Y0, reinitialize=reinitialize),
        **TIGHT,
    )
    values = pytensor.function([theta], y)(P0)
    p_pre = P0.copy()
    p_pre[2] = 0.0
    start = steady_state(pathway, Y0, p_pre).y
    start[2] = 5.0
    np.testing.assert_allclose(values[0], start, rtol=1e-12)
    np.testing.assert_allclose(
        values[1:3], solve(pathway, start, TIMES[1:3], P0, method="bdf", **TIGHT).y, rtol=1e-12
    )
    # inf: the steady state from the simulation's initial state with the main parameters
    np.testing.assert_allclose(values[3], steady_state(pathway, start, P0).y, rtol=1e-12)
    assert not np.allclose(values[3], steady_state(pathway, Y0, P0).y)  # the totals moved


def test_inf_rows_per_experiment(pathway):
    params = pt.dmatrix("params")
    times = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, np.inf]])
    y = ode_solution(
        pathway,
        Y0,
        times,
        pt.specify_shape(params, (2, 6)),
        on_failure="raise",
        sensitivity="forward",
        **TIGHT,
    )
    p_rows = np.array([P0, P0 * 1.5])
    values = pytensor.function([params], y)(p_rows)
    # (forward sensitivities take part in the error test: other steps than a plain solve)
    np.testing.assert_allclose(
        values[0], solve(pathway, Y0, times[0], P0, method="bdf", **TIGHT).y, rtol=1e-8
    )
    np.testing.assert_allclose(values[1, 2], steady_state(pathway, Y0, P0 * 1.5).y, rtol=1e-12)


def test_preequilibration_from_initial_state_of_parameters_and_batches():
    system = OdeSystem(
        pathway_rhs, name="pathway_y0p", initial_state=lambda p: [p.koff, 0, 2, 0], **PATHWAY_NAMES
    )
    p_pre = pt.dmatrix("p_pre")
    theta = pt.dvector("theta")
    y = ode_solution(
        system,
        None,
        [0.0, 2.0],
        theta,
        on_failure="raise",
        sensitivity="forward",
        preequilibration=Preequilibration(pt.specify_shape(p_pre, (2, 6))),
        **TIGHT,
    )
    loss = y[:, -1, 1].sum()
    f = pytensor.function([theta, p_pre], [y, *pytensor.grad(loss, [theta, p_pre])])
    pre_values = np.array([P0 * [1, 1, 0, 1, 1, 1], P0 * [1, 1, 0, 2, 1, 1]])
    values, grad_theta, grad_pre = f(P0, pre_values)
    assert values.shape == (2, 2, 4)
    for e in range(2):  # pre-equilibration starts from y0(p_pre): R = koff of that row
        start = steady_state(system, None, pre_values[e]).y
        np.testing.assert_allclose(values[e, 0], start, rtol=1e-12)
        np.testing.assert_allclose(start[0] + start[1], pre_values[e, 3], rtol=1e-12)
    h = 1e-6
    bump = np.zeros_like(pre_values)
    bump[1, 3] = h
    central = (
        f(P0, pre_values + bump)[0][:, -1, 1].sum() - f(P0, pre_values - bump)[0][:, -1, 1].sum()
    ) / (2 * h)
    np.testing.assert_allclose(grad_pre[1, 3], central, rtol=1e-6)
    assert grad_theta.shape == (6,) and np.abs(grad_pre[1, 3]) > 1e-3
    # the steady state alone from y0(p), in both modes
    y_star = steady_state_solution(system, None, theta, on_failure="raise")
    outputs = [y_star, pytensor.grad(y_star[1], theta)]
    results = [pytensor.function([theta], outputs, mode=m)(P0) for m in ("FAST_RUN", "NUMBA")]
    reference = steady_state(system, None, P0)
    for value, gradient in results:
        np.testing.assert_allclose(value, reference.y, rtol=1e-13)
        np.testing.assert_allclose(gradient, reference.S[1], rtol=1e-10, atol=1e-14)
    assert abs(results[0][1][3]) > 1e-3  # koff sets the total R + Rp through y0(p)


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
def test_preequilibration_gradient_on_the_sparse_path_equals_dense(pathway, mode):
    # the bordered Jacobian and bdf's Newton matrices factorised sparse, in both modes
    dense, sparse = (
        preequilibrated_objective(pathway, "forward", {}, mode, kind)(P0)
        for kind in ("dense", "sparse")
    )
    np.testing.assert_allclose(sparse[0], dense[0], rtol=1e-10)
    np.testing.assert_allclose(sparse[1], dense[1], rtol=1e-8, atol=1e-12)


def test_steady_state_solution_gradient_is_the_implicit_adjoint(pathway):
    theta = pt.dvector("theta")
    start = pt.dvector("start")
    y_star = steady_state_solution(pathway, start, theta, on_failure="raise")
    w = np.array([0.5, -1.0, 2.0, 0.25])
    outputs = [y_star, *pytensor.grad((y_star * w).sum(), [theta, start])]
    results = [
        pytensor.function([theta, start], outputs, mode=m)(P0, Y0) for m in ("FAST_RUN", "NUMBA")
    ]
    reference = steady_state(pathway, Y0, P0)
    gradient = reference.vjp(w)
    for values in results:
        np.testing.assert_allclose(values[0], reference.y, rtol=1e-13)
        np.testing.assert_allclose(values[1], gradient.params, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(values[2], gradient.y0, rtol=1e-10, atol=1e-14)
    assert np.abs(results[0][2]).max() > 0.1  # through the conserved totals


def test_model_gradient_through_preequilibration(pathway):
    # inside a model the failure flags feed a potential: the gradient must still build
    with pm.Model() as model:
        k = pm.LogNormal("k", 0.0, 1.0, shape=5)
        stimulated = pt.stack([k[0], k[1], 1.0, k[2], k[3], k[4]])
        y = ode_solution(
            pathway,
            Y0,
            TIMES,
            stimulated,
            **TIGHT,
            preequilibration=Preequilibration(pt.set_subtensor(stimulated[2], 0.0)),
            steady_state_controls=TIGHT_STEADY,
        )
        pm.Normal("obs", y[:, 3], 0.05, observed=[0.3, 1.2, 1.5, 1.55])
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    x = np.log(np.array([0.1, 2.0, 1.0, 3.0, 0.5]))
    h = 1e-6
    central = [
        (logp({"k_log__": x + h * e}) - logp({"k_log__": x - h * e})) / (2 * h) for e in np.eye(5)
    ]
    np.testing.assert_allclose(dlogp({"k_log__": x}), central, rtol=1e-5)


def lotka_volterra():
    return OdeSystem(
        lambda t, y, p: [p[0] * y[0] - p[1] * y[0] * y[1], p[2] * y[0] * y[1] - p[3] * y[1]],
        2,
        4,
        name="lotka_volterra",
    )


NO_STEADY = dict(method="integration", max_num_steps=300)


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
def test_failed_preequilibration_rejects_the_proposal(mode):
    pymc_odesens.reset_failure_counts()
    with pm.Model() as model:
        a = pm.LogNormal("a", 0.0, 0.1)
        y = ode_solution(
            lotka_volterra(),
            [1.0, 1.0],
            [1.0],
            [a, 1.0, 1.0, 3.0],
            preequilibration=Preequilibration([a, 1.0, 1.0, 3.0]),
            steady_state_controls=NO_STEADY,
        )
        pm.Normal("obs", y[0, 0], 0.1, observed=1.0)
    assert "lotka_volterra_solver_failed" in model.named_vars
    logp = pytensor.function(model.value_vars, model.logp(), mode=mode)
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="SteadyStateNotReachedError"):
        assert logp(0.0) == -np.inf
    assert pymc_odesens.failure_counts()["SteadyStateNotReachedError"] == 1
    if mode == "FAST_RUN":  # (the numba VJP skips failed experiments the same way)
        dlogp = pytensor.function(
            model.value_vars, pytensor.grad(model.logp(), model.value_vars), mode=mode
        )
        assert np.all(np.isfinite(dlogp(0.0)))  # a rejected proposal: zero, finite gradients


def test_ops_pickle_without_their_compiled_kernels(pathway):
    import pickle

    theta = pt.dvector("theta")
    y_star = steady_state_solution(pathway, Y0, theta, on_failure="raise")
    op = y_star.owner.inputs[0].owner.op
    assert "problem" in op.spec.__dict__  # prepared when the graph was built
    clone = pickle.loads(pickle.dumps(op))
    assert "problem" not in clone.spec.__dict__
    np.testing.assert_array_equal(clone.spec.problem.cons, op.spec.problem.cons)


def test_failure_outside_a_model_raises():
    a = pt.dscalar("a")
    y = ode_solution(
        lotka_volterra(),
        [1.0, 1.0],
        [1.0, np.inf],
        [a, 1.0, 1.0, 3.0],
        steady_state_controls=NO_STEADY,
    )
    with pytest.raises(SteadyStateNotReachedError, match="max_num_steps = 300"):
        pytensor.function([a], y)(1.5)


def test_inf_output_of_a_drifting_system_is_no_steady_state():
    # x' = k has none: it was reported as a singular steady state reached at t = 1.1e10
    drift = OdeSystem(lambda t, y, p: [p.k], states=["x"], params=["k"], name="drift")
    k = pt.dscalar("k")
    y = ode_solution(drift, [1.0], [1.0, np.inf], [k])
    with pytest.raises(SteadyStateNotReachedError, match="'x' changed from .* it drifts"):
        pytensor.function([k], y)(2.0)
    pymc_odesens.reset_failure_counts()
    with pm.Model() as model:
        rate = pm.LogNormal("rate", 0.0, 0.1)
        y = ode_solution(drift, [1.0], [1.0, np.inf], [rate])
        pm.Normal("obs", y[-1, 0], 0.1, observed=1.0)
    logp = pytensor.function(model.value_vars, model.logp())
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="SteadyStateNotReachedError"):
        assert logp(0.0) == -np.inf
    dlogp = pytensor.function(model.value_vars, pytensor.grad(model.logp(), model.value_vars))
    assert np.all(np.isfinite(dlogp(0.0)))  # a rejected proposal: a finite gradient


def volume_system() -> OdeSystem:
    """y0 -> y1 between compartments of volumes V1, V2: V1 y0 + V2 y1 is conserved, with
    coefficients that depend on parameters, so no conservation law is found and the
    Jacobian at the steady state (0, total / V2) is singular."""
    return OdeSystem(
        lambda t, y, p: [-p.k * y[0] / p.V1, p.k * y[0] / p.V2],
        2,
        params=["k", "V1", "V2"],
        name="volumes",
    )


VOLUMES_P = np.array([1.0, 2.0, 0.5])
VOLUMES_Y0 = np.array([1.0, 0.2])


def volumes_objective(controls: dict, mode: str = "FAST_RUN"):
    """``(theta, y0) -> (L, dL/dtheta, dL/dy0)`` of ``L = w . y*`` with the given
    steady-state controls."""
    theta, y0 = pt.dvector("theta"), pt.dvector("y0")
    y_star = steady_state_solution(
        volume_system(), y0, theta, on_failure="raise", **TIGHT_STEADY, **controls
    )
    loss = y_star @ np.array([0.7, -1.3])
    return pytensor.function([theta, y0], [loss, *pytensor.grad(loss, [theta, y0])], mode=mode)


@pytest.mark.parametrize(
    "controls, mode",
    [
        ({}, "FAST_RUN"),
        ({"sensitivity": "auto"}, "NUMBA"),
        ({"sensitivity": "integration"}, "FAST_RUN"),
        ({"sensitivity": "integration"}, "NUMBA"),
    ],
)
def test_singular_steady_state_gradient_integrates_the_sensitivities(controls, mode):
    """AMICI's integrateIfNewtonFails (the default) and integrationOnly: the value needs no
    inverse of the Jacobian, the gradient comes from the sensitivities integrated with the
    state. y* = (0, (V1 y0_0 + V2 y0_1) / V2) gives it in closed form."""
    value, grad_p, grad_y0 = volumes_objective(controls, mode)(VOLUMES_P, VOLUMES_Y0)
    k, v1, v2 = VOLUMES_P
    total = v1 * VOLUMES_Y0[0] + v2 * VOLUMES_Y0[1]
    np.testing.assert_allclose(value, -1.3 * total / v2, rtol=1e-10)
    expected_p = -1.3 * np.array([0.0, VOLUMES_Y0[0] / v2, -v1 * VOLUMES_Y0[0] / v2**2])
    np.testing.assert_allclose(grad_p, expected_p, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(grad_y0, -1.3 * np.array([v1 / v2, 1.0]), rtol=1e-7)


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
def test_implicit_steady_state_sensitivity_refuses_a_singular_jacobian(mode):
    """AMICI's newtonOnly: the singular steady state itself is refused, naming the way out."""
    objective = volumes_objective({"sensitivity": "implicit"}, mode)
    before = pymc_odesens.failure_counts().get("SteadyStateSingularError", 0)
    if mode == "FAST_RUN":
        with pytest.raises(pymc_odesens.SteadyStateSingularError, match="singular") as info:
            objective(VOLUMES_P, VOLUMES_Y0)
        assert "sensitivity='integration'" in str(info.value)
    else:
        # compiled code cannot raise the error itself: it stops with a RuntimeError that
        # points to the warning, and the failure is recorded under its own class
        with pytest.raises(RuntimeError, match="steady state failed"):
            objective(VOLUMES_P, VOLUMES_Y0)
    after = pymc_odesens.failure_counts().get("SteadyStateSingularError", 0)
    assert after == before + (mode != "FAST_RUN")


def test_singular_steady_state_gradient_in_a_model_with_y0_of_parameters():
    """In a PyMC model the steady state's start is the system's y0(p): the gradient of the
    log-density (integrated sensitivities through y0(p) as well) against central
    differences."""
    system = OdeSystem(
        lambda t, y, p: [-p.k * y[0] / p.V1, p.k * y[0] / p.V2],
        2,
        params=["k", "V1", "V2"],
        initial_state=lambda p: [p.V2, 0.2 * p.V1],
        name="volumes_y0",
    )
    with pm.Model() as model:
        v1 = pm.LogNormal("v1", np.log(2.0), 0.1)
        y_star = steady_state_solution(system, None, [1.0, v1, 0.5], **TIGHT_STEADY)
        pm.Normal("obs", y_star[1], 0.1, observed=3.0)
    logp = pytensor.function(model.value_vars, model.logp())
    dlogp = pytensor.function(model.value_vars, pytensor.grad(model.logp(), model.value_vars))
    x, h = 0.3, 1e-6
    central = (logp(x + h) - logp(x - h)) / (2 * h)
    np.testing.assert_allclose(dlogp(x), central, rtol=1e-6)


def test_bad_arguments_fail_when_the_graph_is_built(pathway):
    theta = pt.dvector("theta")

    def build(times=TIMES, y0=Y0, **kwargs):
        return ode_solution(pathway, y0, times, theta, on_failure="raise", **kwargs)

    with pytest.raises(TypeError, match="must be a pymc_odesens.Preequilibration"):
        build(preequilibration={"params": theta})
    with pytest.raises(ValueError, match=r"reinitialize must be a boolean array of shape \(4,\)"):
        build(preequilibration=Preequilibration(theta, reinitialize=[1, 0, 0, 0]))
    with pytest.raises(ValueError, match="reinitialize takes the re-initialised states from y0"):
        build(
            y0=None,
            preequilibration=Preequilibration(
                theta, y0=Y0, reinitialize=np.array([True, False, False, False])
            ),
        )
    with pytest.raises(ValueError, match="inf .the steady state. may only be followed by inf"):
        build(times=[0.0, np.inf, 1.0])
    with pytest.raises(TypeError, match=r"unknown steady-state control\(s\) \['tolerance'\]"):
        build(steady_state_controls={"tolerance": 1e-6})
    with pytest.raises(ValueError, match="sensitivity must be one of 'auto', 'implicit'"):
        build(steady_state_controls={"sensitivity": "adjoint"})
    with pytest.raises(TypeError, match="steady_state_controls apply to pre-equilibration"):
        build(times=[0.0, 1.0], steady_state_controls={"method": "newton"})
    with pytest.raises(ValueError, match="the experiment axes disagree"):
        build(times=[[0.0, 1.0]] * 3, preequilibration=Preequilibration(np.tile(P0, (2, 1))))
    dosed = OdeSystem(
        lambda t, y, p: [-p[0] * y[0]],
        1,
        1,
        name="dosed",
        events=[ExplicitEvent(times=[1.0], affect=lambda t, y, p: [y[0] + 1.0])],
    )
    with pytest.raises(ValueError, match="systems with events are not supported"):
        ode_solution(dosed, [1.0], [0.0, np.inf], [pt.dscalar("k")], on_failure="raise")
