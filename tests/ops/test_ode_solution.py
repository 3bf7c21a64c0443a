"""`ode_solution`: gradients of every route, batches, failures and argument checks."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad

import pymc_odesens
from pymc_odesens import (
    OdeSystem,
    choose_sensitivity_route,
    ode_solution,
    solve,
    solve_sensitivity,
)
from pymc_odesens.ops.ode_ops import OdeDiscreteAdjointOp

TIMES = np.linspace(0.5, 10.0, 12)


def _loss(system, route, method, **controls):
    weights = np.random.default_rng(3).normal(size=(TIMES.size, 2))

    def loss(y0, params):
        y = ode_solution(
            system,
            y0,
            TIMES,
            params,
            sensitivity=route,
            method=method,
            on_failure="raise",
            **controls,
        )
        return (y * weights).sum() + 0.5 * (y**2).sum()

    return loss


@pytest.mark.parametrize(
    "route, method",
    [
        ("forward", "bdf"),
        ("forward", "adams"),
        ("forward", "rk45"),
        ("forward", "ckrk"),
        ("adjoint", "bdf"),
        ("adjoint", "adams"),
    ],
)
def test_gradient_matches_finite_differences(oscillator, route, method):
    tight = {"relative_tolerance": 1e-10, "absolute_tolerance": 1e-12}
    loss = _loss(oscillator, route, method, **tight)
    # verify_grad's one-sided differences: truncation ~ eps, solver noise ~ 1e-10 / eps
    verify_grad(
        loss,
        [np.array([1.0, -0.2]), np.array([0.3])],
        rng=np.random.default_rng(0),
        eps=1e-5,
        abs_tol=5e-5,
        rel_tol=5e-5,
    )


def test_forward_and_both_adjoints_agree_on_pka(reference_system):
    """The gradient through the forward route, the continuous adjoint and the discrete
    adjoint (whose graph holds OdeDiscreteAdjointOp) agree to 1e-5 on pka."""
    system = reference_system("pka")
    times = np.linspace(0.0, 600.0, 31)
    params = pt.dvector("params")
    weights = np.random.default_rng(1).normal(size=(times.size, system.n_states))
    grads = {}
    routes = (
        ("forward", "forward", {}),
        ("adjoint", "adjoint", {}),
        ("discrete adjoint", "adjoint", {"adjoint_method": "discrete"}),
    )
    for label, route, extra in routes:
        y = ode_solution(
            system,
            system.x0,
            times,
            params,
            sensitivity=route,
            on_failure="raise",
            relative_tolerance=1e-9,
            absolute_tolerance=1e-11,
            **extra,
        )
        if extra:
            assert isinstance(y.owner.inputs[0].owner.op, OdeDiscreteAdjointOp)
        grads[label] = pytensor.function([params], pytensor.grad((y * weights).sum(), params))(
            system.p_nominal
        )
    scale = np.abs(grads["forward"]).max()
    for label in ("adjoint", "discrete adjoint"):
        assert np.abs(grads[label] - grads["forward"]).max() < 1e-5 * scale, label


def test_values_match_solve(oscillator):
    theta = pt.dscalar("theta")
    for route in ("forward", "adjoint", "none"):
        y = ode_solution(
            oscillator,
            [1.0, 0.0],
            TIMES,
            [theta],
            sensitivity=route,
            on_failure="raise",
            relative_tolerance=1e-8,
            absolute_tolerance=1e-10,
        )
        got = pytensor.function([theta], y)(0.15)
        want = solve(
            oscillator,
            [1.0, 0.0],
            TIMES,
            [0.15],
            method="bdf",
            relative_tolerance=1e-8,
            absolute_tolerance=1e-10,
        ).y
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("route", ["forward", "adjoint"])
def test_batch_equals_single_experiments(oscillator, route):
    y0s = np.array([[1.0, 0.0], [0.5, 0.5], [-1.0, 0.2]])
    theta = pt.dscalar("theta")
    controls = {"relative_tolerance": 1e-9, "absolute_tolerance": 1e-11}
    batch = ode_solution(
        oscillator, y0s, TIMES, [theta], sensitivity=route, on_failure="raise", **controls
    )
    assert batch.type.shape == (3, TIMES.size, 2)
    weights = np.random.default_rng(2).normal(size=(3, TIMES.size, 2))
    f_batch = pytensor.function([theta], [batch, pytensor.grad((batch * weights).sum(), theta)])
    y_b, g_b = f_batch(0.2)
    g_single = 0.0
    for e in range(3):
        single = ode_solution(
            oscillator, y0s[e], TIMES, [theta], sensitivity=route, on_failure="raise", **controls
        )
        y_s, g_s = pytensor.function(
            [theta], [single, pytensor.grad((single * weights[e]).sum(), theta)]
        )(0.2)
        np.testing.assert_allclose(y_b[e], y_s, rtol=1e-12, atol=1e-14)
        g_single += g_s
    np.testing.assert_allclose(g_b, g_single, rtol=1e-10)


def test_per_experiment_times_and_batched_params(oscillator):
    times = np.stack([TIMES, TIMES * 0.5])
    thetas = pt.dvector("thetas")
    y = ode_solution(
        oscillator,
        [1.0, 0.0],
        times,
        thetas[:, None],
        on_failure="raise",
        relative_tolerance=1e-9,
        absolute_tolerance=1e-11,
    )
    got = pytensor.function([thetas], y)(np.array([0.1, 0.4]))
    for e, theta in enumerate((0.1, 0.4)):
        # the route the Op takes (forward sensitivities: their steps also control S, so
        # y differs from a plain solve's within the tolerance, not bit for bit)
        want = solve_sensitivity(
            oscillator,
            [1.0, 0.0],
            times[e],
            [theta],
            method="bdf",
            relative_tolerance=1e-9,
            absolute_tolerance=1e-11,
        ).y
        np.testing.assert_allclose(got[e], want, rtol=1e-12, atol=1e-14)


def test_initial_state_from_parameters():
    system = OdeSystem(
        lambda t, y, p: [-p[0] * y[0]],
        states=["x"],
        params=["k", "x0"],
        initial_state=lambda p: [p[1] ** 2],
    )
    params = pt.dvector("params")
    times = np.array([0.5, 1.0, 2.0])
    y = ode_solution(
        system,
        None,
        times,
        params,
        on_failure="raise",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    )
    f = pytensor.function([params], [y, pytensor.grad(y.sum(), params)])
    values, grad = f(np.array([0.7, 1.5]))
    k, a = 0.7, 1.5
    np.testing.assert_allclose(values[:, 0], a**2 * np.exp(-k * times), rtol=1e-8)
    exact = [(-times * a**2 * np.exp(-k * times)).sum(), (2 * a * np.exp(-k * times)).sum()]
    np.testing.assert_allclose(grad, exact, rtol=1e-7)


@pytest.mark.parametrize("route", ["forward", "pbs"])
def test_jacobian_vector_products_of_the_op(oscillator, route):
    """``R_op``: ``S . dparams + S_y0 . dy0`` per experiment; for the forward route equal to
    central differences of the solution, for a Peano-Baker route the same contraction of
    its approximate ``S`` as the gradient."""
    controls = {"relative_tolerance": 1e-10, "absolute_tolerance": 1e-12}
    y0 = pt.tensor("y0", shape=(2, 2))
    params = pt.tensor("params", shape=(2, 1))
    y = ode_solution(
        oscillator, y0, TIMES, params, sensitivity=route, on_failure="raise", **controls
    )
    d_y0, d_params = pt.dmatrix("d_y0"), pt.dmatrix("d_params")
    jvp = pytensor.gradient.Rop(y, [y0, params], [d_y0, d_params], use_op_rop_implementation=True)
    inputs = [y0, params, d_y0, d_params]
    at = [np.array([[1.0, -0.2], [0.4, 0.3]]), np.array([[0.3], [0.15]])]
    rng = np.random.default_rng(5)
    direction = [rng.normal(size=(2, 2)), rng.normal(size=(2, 1))]
    got = pytensor.function(inputs, jvp)(*at, *direction)
    assert got.shape == (2, TIMES.size, 2)
    if route == "forward":
        solution = pytensor.function([y0, params], y)
        h = 1e-5
        ahead = solution(*(a + h * d for a, d in zip(at, direction)))
        behind = solution(*(a - h * d for a, d in zip(at, direction)))
        np.testing.assert_allclose(got, (ahead - behind) / (2 * h), rtol=1e-6, atol=1e-8)
    # the gradient's contraction: <w, J d> = <J^T w, d>, for either route
    weights = rng.normal(size=(2, TIMES.size, 2))
    grads = pytensor.grad((y * weights).sum(), [y0, params])
    g_y0, g_params = pytensor.function([y0, params], grads)(*at)
    np.testing.assert_allclose(
        (weights * got).sum(),
        (g_y0 * direction[0]).sum() + (g_params * direction[1]).sum(),
        rtol=1e-10,
    )


def test_jacobian_vector_product_of_a_failed_solve_is_zero():
    """Rejected inside a model: its products are zero, as its gradient is."""
    pymc_odesens.reset_failure_counts()
    k = pt.tensor("k", shape=(1,))
    with pm.Model():
        y = ode_solution(_stiff_decay(), [1.0], [1.0, 2.0], k, method="rk45", max_num_steps=20)
    d_k = pt.tensor("d_k", shape=(1,))
    jvp = pytensor.gradient.Rop(y, k, d_k, use_op_rop_implementation=True)
    f = pytensor.function([k, d_k], jvp)
    assert np.all(f(np.array([0.5]), np.array([1.0])) != 0.0)
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="MaxNumStepsError"):
        np.testing.assert_array_equal(f(np.array([2000.0]), np.array([1.0])), 0.0)


def _stiff_decay():
    return OdeSystem(lambda t, y, p: [-p[0] * y[0]], states=["x"], params=["k"], name="decay")


def test_failure_inside_model_gives_minus_inf_and_finite_gradient():
    pymc_odesens.reset_failure_counts()
    system = _stiff_decay()
    with pm.Model() as model:
        k = pm.LogNormal("k", 0.0, 1.0)
        y = ode_solution(system, [1.0], [1.0, 2.0], [k], method="rk45", max_num_steps=20)
        pm.Normal("obs", y[:, 0], 0.1, observed=[0.4, 0.1])
    logp = model.compile_logp()
    dlogp = model.compile_dlogp()
    assert np.isfinite(logp({"k_log__": 0.0}))
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning, match="MaxNumStepsError"):
        assert logp({"k_log__": np.log(2000.0)}) == -np.inf
    grad = dlogp({"k_log__": np.log(2000.0)})
    assert np.all(np.isfinite(grad))
    assert pymc_odesens.failure_counts()["MaxNumStepsError"] >= 1
    assert "MaxNumStepsError" in pymc_odesens.failure_summary()
    assert "decay_solver_failed" in model.named_vars


def test_failure_outside_model_raises():
    system = _stiff_decay()
    k = pt.dscalar("k")
    y = ode_solution(system, [1.0], [1.0], [k], method="rk45", max_num_steps=20)
    with pytest.raises(pymc_odesens.MaxNumStepsError, match="max_num_steps = 20"):
        pytensor.function([k], y)(2000.0)


def test_bad_arguments_fail_when_the_graph_is_built(oscillator):
    theta = pt.dscalar("theta")
    with pytest.raises(ValueError, match=r"y0 must have 2 entries"):
        ode_solution(oscillator, [1.0, 0.0, 3.0], TIMES, [theta], on_failure="raise")
    with pytest.raises(ValueError, match=r"params must have 1 entries"):
        ode_solution(oscillator, [1.0, 0.0], TIMES, [theta, theta], on_failure="raise")
    with pytest.raises(ValueError, match="times must be non-decreasing"):
        ode_solution(oscillator, [1.0, 0.0], TIMES[::-1], [theta], on_failure="raise")
    with pytest.raises(ValueError, match="sensitivity must be one of"):
        ode_solution(
            oscillator, [1.0, 0.0], TIMES, [theta], sensitivity="backward", on_failure="raise"
        )
    with pytest.raises(ValueError, match="'bdf' or 'adams' with sensitivity='adjoint'"):
        ode_solution(
            oscillator,
            [1.0, 0.0],
            TIMES,
            [theta],
            sensitivity="adjoint",
            method="rk45",
            on_failure="raise",
        )
    with pytest.raises(TypeError, match="unknown control"):
        ode_solution(oscillator, [1.0, 0.0], TIMES, [theta], rtol=1e-6, on_failure="raise")
    with pytest.raises(TypeError, match="apply to sensitivity='adjoint' only"):
        ode_solution(
            oscillator,
            [1.0, 0.0],
            TIMES,
            [theta],
            sensitivity="forward",
            num_steps_between_checkpoints=10,
            on_failure="raise",
        )
    with pytest.raises(ValueError, match="relative_tolerance must be positive"):
        ode_solution(
            oscillator, [1.0, 0.0], TIMES, [theta], relative_tolerance=-1.0, on_failure="raise"
        )
    with pytest.raises(ValueError, match="experiment axes disagree"):
        ode_solution(
            oscillator, np.zeros((3, 2)), np.stack([TIMES, TIMES]), [theta], on_failure="raise"
        )
    with pytest.raises(ValueError, match="needs a PyMC model context"):
        ode_solution(oscillator, [1.0, 0.0], TIMES, [theta], on_failure="reject")


def test_auto_route_rule():
    assert choose_sensitivity_route(11, 35, 61) == "forward"  # pka: forward measured faster
    assert choose_sensitivity_route(2, 1, 10) == "forward"
    assert choose_sensitivity_route(100, 100, 5) == "adjoint"


@pytest.mark.slow
def test_nuts_recovers_oscillator_damping(oscillator):
    rng = np.random.default_rng(7)
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
    data = truth + 0.1 * rng.normal(size=truth.shape)
    with pm.Model():
        theta = pm.HalfNormal("theta", 1.0)
        y0 = pm.Normal("y0", 0.0, 1.0, shape=2)
        sigma = pm.HalfNormal("sigma", 1.0)
        mu = ode_solution(
            oscillator,
            y0,
            times,
            [theta],
            method="rk45",
            relative_tolerance=1e-8,
            absolute_tolerance=1e-8,
        )
        pm.Normal("obs", mu, sigma, observed=data)
        idata = pm.sample(500, tune=500, chains=2, cores=1, progressbar=False, random_seed=3)
    theta_draws = idata.posterior["theta"].values.ravel()
    lo, hi = np.quantile(theta_draws, [0.005, 0.995])
    assert lo < 0.15 < hi
    assert hi - lo < 0.2  # the data determine theta
    assert int(idata.sample_stats["diverging"].sum()) == 0


@pytest.mark.slow
def test_sampling_survives_solver_failures_in_part_of_the_prior():
    pymc_odesens.reset_failure_counts()
    system = _stiff_decay()
    with pm.Model():
        # a wide prior reaches rates for which rk45 needs more than 30 steps: failures there
        k = pm.LogNormal("k", 1.0, 2.0)
        y = ode_solution(system, [1.0], [1.0, 2.0], [k], method="rk45", max_num_steps=30)
        pm.Normal("obs", y[:, 0], 0.05, observed=[0.37, 0.14])
        with pytest.warns(pymc_odesens.OdeSolverFailureWarning):
            idata = pm.sample(
                200,
                tune=200,
                chains=1,
                cores=1,
                progressbar=False,
                random_seed=5,
                initvals={"k": 1.0},
            )
    draws = idata.posterior["k"].values.ravel()
    assert np.all(np.isfinite(draws))
    assert abs(np.median(draws) - 1.0) < 0.1
    assert sum(pymc_odesens.failure_counts().values()) > 0


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
@pytest.mark.parametrize("route", ["forward", "adjoint"])
def test_non_finite_parameters_are_a_rejected_proposal(route, mode):
    """A NaN or infinite parameter (a proposal whose transform overflowed, say) gives
    -inf with a finite gradient in both modes, and is counted; it never stops sampling."""
    pymc_odesens.reset_failure_counts()
    system = _stiff_decay()
    with pm.Model() as model:
        k = pm.Normal("k", 0.0, 1.0)
        # rate log(k) + 1: NaN for k < 0, -inf at k = 0 (the prior of k stays finite)
        rate = pt.log(k) + 1.0
        y = ode_solution(system, [1.0], [1.0, 2.0], [rate], method="bdf", sensitivity=route)
        pm.Normal("obs", y[:, 0], 0.1, observed=[0.4, 0.1])
    logp = model.compile_logp(mode=mode)
    dlogp = model.compile_dlogp(mode=mode)
    assert np.isfinite(logp({"k": 0.5}))
    for bad_k in (-1.0, 0.0):
        assert logp({"k": bad_k}) == -np.inf
    assert np.all(np.isfinite(dlogp({"k": -1.0})))
    counts = pymc_odesens.failure_counts()
    assert sum(counts.values()) >= 2
    if mode == "FAST_RUN":  # the compiled solver reports the non-finite rhs it meets instead
        assert counts["NonFiniteInputError"] >= 2


def test_system_without_states_is_refused_when_the_graph_is_built(tmp_path):
    # an SBML model with no species (its rules only): the Op ended in ZeroDivisionError
    from tests.model.sbml.sbml_text import build_sbml

    path = tmp_path / "rules.xml"
    path.write_text(
        build_sbml(
            parameters={"k": 1.0, "q": (None, False)},
            assignment_rules={"q": "2 * k"},
            model_id="rules",
        )
    )
    system = OdeSystem.from_sbml(path)
    assert system.n_states == 0
    k = pt.dvector("k", shape=(system.n_params,))
    with pytest.raises(ValueError, match="ode_solution: system 'rules' has no states .* empty"):
        ode_solution(system, np.zeros(0), [0.0, 1.0], k)
    with pytest.raises(ValueError, match="steady_state_solution: system 'rules' has no states"):
        pymc_odesens.steady_state_solution(system, np.zeros(0), k)
