"""SMMALA: its metric against closed forms, one ODE solve per evaluation, sampling checks.

The metric tests compare ``SMMALA.metric`` (before SoftAbs) with closed forms:
a linear Gaussian model (``X^T X / sigma^2`` plus the prior precision), an ODE
model whose metric is ``fisher_information`` pulled back through ``p = exp(x)``,
and a sampled noise scale (``2 n`` per log-sigma). The sampling tests check the
moments of a correlated normal target, the step-size adaptation, failures in
the sample stats, and (slow) the oscillator posterior against NUTS with
``cores=2`` (the step method is pickled into the worker processes).
"""

from __future__ import annotations

import arviz as az
import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.exceptions import SamplingError
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_odesens import SMMALA, OdeSystem, fisher_information, ode_solution
from pymc_odesens.inference.smmala import softabs
from pymc_odesens.inference.smmala_sensitivities import OdeRouteSensitivityOp
from pymc_odesens.ops.failure_potential import failure_potential
from tests.conftest import model_path

TIMES = np.linspace(0.5, 5.0, 10)
TIGHT = {"relative_tolerance": 1e-10, "absolute_tolerance": 1e-12}


@pytest.fixture(scope="module")
def linear2(reference_system):
    return reference_system("linear2")


def _raveled(step, point) -> np.ndarray:
    return np.concatenate([np.ravel(point[v.name]) for v in step.vars])


def _ode_model(system, likelihood: str, data_seed: int = 0) -> pm.Model:
    y_true = np.asarray(fisher_information(system, system.x0, TIMES, system.p_nominal, 0.1).h)
    rng = np.random.default_rng(data_seed)
    with pm.Model() as model:
        log_p = pm.Normal("log_p", np.log(system.p_nominal), 0.5, shape=2)
        y = ode_solution(system, system.x0, TIMES, pm.math.exp(log_p), **TIGHT)
        if likelihood == "Normal":
            data = y_true + 0.1 * rng.standard_normal(y_true.shape)
            pm.Normal("obs", mu=y, sigma=0.1, observed=data)
        else:
            data = y_true * np.exp(0.1 * rng.standard_normal(y_true.shape))
            pm.LogNormal("obs", mu=pm.math.log(y), sigma=0.1, observed=data)
    return model


def test_softabs():
    values = np.array([-3.0, -1e-9, 0.0, 1e-9, 2.0, 1e3])
    lifted = softabs(values, 1e6)
    np.testing.assert_allclose(lifted[[0, 4, 5]], [3.0, 2.0, 1e3], rtol=1e-12)
    assert np.all(lifted[1:4] >= 1e-6) and np.all(lifted[1:4] < 1.01e-6)
    assert softabs(np.array([0.5]), 1.0)[0] == pytest.approx(0.5 / np.tanh(0.5))


def test_metric_of_a_linear_gaussian_model():
    """``beta ~ N(0, 2^2)``, ``obs ~ N(X beta, 0.5^2)``: G = X^T X / 0.25 + I / 4 everywhere."""
    rng = np.random.default_rng(1)
    x_design = rng.normal(size=(20, 3))
    with pm.Model():
        beta = pm.Normal("beta", 0.0, 2.0, shape=3)
        pm.Normal("obs", mu=x_design @ beta, sigma=0.5, observed=rng.normal(size=20))
        step = SMMALA()
    expected = x_design.T @ x_design / 0.25 + np.eye(3) / 4.0
    for x in (np.zeros(3), rng.normal(size=3)):
        np.testing.assert_allclose(step.metric(x, regularised=False), expected, rtol=1e-12)
    assert step.likelihoods == [("obs", "Normal")]


@pytest.mark.parametrize(
    ("likelihood", "noise"), [("Normal", "additive"), ("LogNormal", "multiplicative")]
)
def test_metric_through_an_ode_solution(linear2, likelihood, noise):
    """``p = exp(x)``: G = diag(p) F(p) diag(p) + I / 0.5^2, F from fisher_information."""
    model = _ode_model(linear2, likelihood)
    with model:
        step = SMMALA()
    x = np.log([0.8, 0.35])
    p = np.exp(x)
    fisher = fisher_information(linear2, linear2.x0, TIMES, p, 0.1, noise=noise, **TIGHT).matrix
    expected = p[:, None] * fisher * p[None, :] + np.eye(2) / 0.25
    np.testing.assert_allclose(step.metric(x, regularised=False), expected, rtol=1e-6)
    assert step.likelihoods == [("obs", likelihood)]


def test_metric_of_the_oscillator_example(monkeypatch):
    """examples/oscillator.py's model, whose sampler's vector PyTensor's R_op route refuses
    (a length-1 slice with a more precise static shape than the input it stands for): the
    metric comes from the double L_op, the same as when that route is forced."""
    import examples.oscillator as osc
    from pymc_odesens.inference import smmala_metric

    model = osc.build_model(osc.simulate_data(1))
    with model:
        step = SMMALA()
    x = _raveled(step, model.initial_point())
    x = x + 0.1 * np.random.default_rng(2).standard_normal(x.size)
    rop = smmala_metric.Rop
    monkeypatch.setattr(smmala_metric, "Rop", lambda f, wrt, d, **_: rop(f, wrt, d))
    with model:
        reference = SMMALA()
    np.testing.assert_allclose(
        step.metric(x, regularised=False), reference.metric(x, regularised=False), rtol=1e-12
    )


class _CopyWithoutRop(Op):
    """``x`` itself, with a gradient and no ``R_op`` (as a user's Op may be)."""

    __props__ = ()

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = np.array(inputs[0])

    def L_op(self, inputs, outputs, output_grads):
        return [output_grads[0]]


@pytest.mark.parametrize("location", ["broadcast", "an Op without R_op"])
def test_metric_of_a_broadcast_location_and_through_an_op_without_rop(linear2, location):
    """Three replicates of the data of ``test_metric_through_an_ode_solution``: the metric
    is three times its likelihood part. The location is the solution broadcast to the data's
    shape (differentiated at its core, the columns broadcast), or passes an Op without
    ``R_op`` (the Jacobian-vector products then come from PyTensor's double ``L_op``)."""
    y_true = np.asarray(fisher_information(linear2, linear2.x0, TIMES, linear2.p_nominal, 0.1).h)
    data = y_true + 0.1 * np.random.default_rng(0).standard_normal((3, *y_true.shape))
    with pm.Model():
        log_p = pm.Normal("log_p", np.log(linear2.p_nominal), 0.5, shape=2)
        y = ode_solution(linear2, linear2.x0, TIMES, pm.math.exp(log_p), **TIGHT)
        if location == "broadcast":
            mu = pt.broadcast_to(y, data.shape)
        else:
            mu = pt.stack([_CopyWithoutRop()(y)] * 3)
        pm.Normal("obs", mu=mu, sigma=0.1, observed=data)
        step = SMMALA()
    x = np.log([0.8, 0.35])
    p = np.exp(x)
    fisher = fisher_information(linear2, linear2.x0, TIMES, p, 0.1, **TIGHT).matrix
    expected = 3 * p[:, None] * fisher * p[None, :] + np.eye(2) / 0.25
    np.testing.assert_allclose(step.metric(x, regularised=False), expected, rtol=1e-6)


def test_a_rejection_potential_of_the_solution_leaves_the_metric(linear2):
    """A potential of this package's rejection (``FailurePenalty``) reading flags computed
    from the solution (PEtab's log-scale observables add one, -inf where a simulation is not
    positive) has no curvature: SMMALA takes the model, and the metric is unchanged."""
    metrics = []
    for guarded in (False, True):
        y_true = np.asarray(
            fisher_information(linear2, linear2.x0, TIMES, linear2.p_nominal, 0.1).h
        )
        with pm.Model() as model:
            log_p = pm.Normal("log_p", np.log(linear2.p_nominal), 0.5, shape=2)
            y = ode_solution(linear2, linear2.x0, TIMES, pm.math.exp(log_p), **TIGHT)
            pm.LogNormal("obs", mu=pm.math.log(y), sigma=0.1, observed=y_true)
            if guarded:
                flag = pt.cast(pt.any(y <= 0.0), "int8")[None]
                failure_potential(model, "y_not_positive", [flag])
            step = SMMALA()
        metrics.append(step.metric(np.log([0.8, 0.35]), regularised=False))
    np.testing.assert_allclose(metrics[1], metrics[0], rtol=1e-12)


def test_metric_through_an_ode_solution_whose_initial_state_the_system_gives():
    """The same metric with ``y0 = None`` (the ODE node then has the parameters as its only
    input, and the metric's Jacobian-vector products re-make it from them)."""
    system = OdeSystem.from_json(model_path("linear2"))
    system.set_initial_state(list(system.x0))
    y_true = np.asarray(fisher_information(system, None, TIMES, system.p_nominal, 0.1).h)
    with pm.Model():
        log_p = pm.Normal("log_p", np.log(system.p_nominal), 0.5, shape=2)
        y = ode_solution(system, None, TIMES, pm.math.exp(log_p), **TIGHT)
        pm.Normal("obs", mu=y, sigma=0.1, observed=y_true)
        step = SMMALA()
    x = np.log([0.8, 0.35])
    p = np.exp(x)
    fisher = fisher_information(system, None, TIMES, p, 0.1, **TIGHT).matrix
    expected = p[:, None] * fisher * p[None, :] + np.eye(2) / 0.25
    np.testing.assert_allclose(step.metric(x, regularised=False), expected, rtol=1e-6)


def test_sampled_noise_scale_has_its_fisher_block():
    """``sigma ~ HalfNormal(1)`` sampled as ``x = log sigma``: the likelihood adds
    ``2 n`` (n observations), the prior ``2 sigma^2`` (minus its Hessian)."""
    n = 15
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("obs", mu=mu, sigma=sigma, observed=np.linspace(-1, 1, n))
        step = SMMALA()
    names = [v.name for v in step.vars]
    mu_at, log_sigma = 0.3, np.log(0.7)
    x = np.array([mu_at, log_sigma] if names[0] == "mu" else [log_sigma, mu_at])
    metric = step.metric(x, regularised=False)
    i_mu, i_s = names.index("mu"), names.index("sigma_log__")
    assert metric[i_s, i_s] == pytest.approx(2 * n + 2 * 0.7**2, rel=1e-12)
    assert metric[i_mu, i_mu] == pytest.approx(n / 0.7**2 + 1.0, rel=1e-12)
    assert metric[i_mu, i_s] == pytest.approx(0.0, abs=1e-12)


def test_one_solve_per_evaluation_and_the_models_gradient(linear2):
    model = _ode_model(linear2, "Normal")
    with model:
        step = SMMALA()
    assert step.n_ode_solutions == 1
    point = {"log_p": np.log([0.9, 0.45])}
    x = _raveled(step, point)
    logp, grad, _, failed = step.evaluate(x)
    assert not failed
    assert logp == pytest.approx(float(model.compile_logp()(point)), rel=1e-12)
    np.testing.assert_allclose(grad, model.compile_dlogp()(point), rtol=1e-8)


@pytest.mark.parametrize(("route", "bound"), [("pbsr", 0.01), ("exp", 0.05)])
def test_approximate_route_serves_gradient_and_metric(reference_system, route, bound):
    """The PBS routes replace the model's solution by one route Op; gradient and metric
    come from its approximate S (close to the forward ones on linear2; Exp, first order
    in the step, less so than PBSR)."""
    linear2 = reference_system("linear2")
    model = _ode_model(linear2, "Normal")
    with model:
        forward = SMMALA()
        approximate = SMMALA(sensitivity=route)
    ops = [
        n.op
        for n in approximate._function.maker.fgraph.apply_nodes
        if isinstance(n.op, OdeRouteSensitivityOp)
    ]
    assert [op.route for op in ops] == [route]
    x = np.log([0.9, 0.45])
    lp_f, g_f, m_f, _ = forward.evaluate(x)
    lp_a, g_a, m_a, _ = approximate.evaluate(x)
    assert lp_a == pytest.approx(lp_f, rel=1e-6)
    assert np.abs(g_a - g_f).max() < bound * np.abs(g_f).max()
    assert np.abs(m_a - m_f).max() < bound * np.abs(m_f).max()
    assert np.abs(g_a - g_f).max() > 0.0  # really another S


def test_model_built_with_a_pbs_route(linear2):
    """A solution built with ode_solution(sensitivity="pbsr") is found and replaced like the
    others: one solve per evaluation, the model's own log-density and (same S) gradient."""
    with pm.Model() as model:
        log_p = pm.Normal("log_p", np.log(linear2.p_nominal), 0.5, shape=2)
        y = ode_solution(
            linear2, linear2.x0, TIMES, pm.math.exp(log_p), sensitivity="pbsr", **TIGHT
        )
        pm.Normal("obs", mu=y, sigma=0.1, observed=np.ones((TIMES.size, linear2.n_states)))
        step = SMMALA(sensitivity="pbsr")
    assert step.n_ode_solutions == 1
    point = {"log_p": np.log([0.9, 0.45])}
    logp, grad, _, failed = step.evaluate(_raveled(step, point))
    assert not failed
    assert logp == pytest.approx(float(model.compile_logp()(point)), rel=1e-12)
    np.testing.assert_allclose(grad, model.compile_dlogp()(point), rtol=1e-12)


def test_pickled_step_evaluates_the_same(linear2):
    model = _ode_model(linear2, "Normal")
    with model:
        step = SMMALA()
    x = np.log([0.9, 0.45])
    copy = cloudpickle.loads(cloudpickle.dumps(step))
    for a, b in zip(step.evaluate(x), copy.evaluate(x)):
        np.testing.assert_array_equal(a, b)


def test_correlated_normal_moments_and_step_size_adaptation():
    """A 3-d correlated normal (no likelihood: the metric is the prior's precision).
    Means and covariances within Monte Carlo error; acceptance near the target."""
    cov = np.array([[1.0, 0.8, -0.3], [0.8, 2.0, 0.1], [-0.3, 0.1, 0.5]])
    mean = np.array([1.0, -2.0, 0.5])
    with pm.Model():
        pm.MvNormal("x", mu=mean, cov=cov)
        step = SMMALA(target_accept=0.7)
        np.testing.assert_allclose(
            step.metric(np.zeros(3), regularised=False), np.linalg.inv(cov), rtol=1e-10
        )
        idata = pm.sample(
            draws=3000,
            tune=500,
            chains=2,
            cores=1,
            step=step,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
        )
    draws = idata.posterior["x"].values.reshape(-1, 3)
    ess = az.ess(idata)["x"].values
    mcse = np.sqrt(np.diag(cov) / ess)
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * mcse)
    sample_cov = np.cov(draws, rowvar=False)
    # the error of a (co)variance estimate is about sqrt(2 / ESS) relative to sqrt(s_ii s_jj)
    scale = np.sqrt(np.outer(np.diag(cov), np.diag(cov)))
    assert np.all(np.abs(sample_cov - cov) < 4 * np.sqrt(2.0 / ess.min()) * scale)
    accept = idata.sample_stats["accept"].values.mean()
    assert abs(accept - 0.7) < 0.08
    stats = idata.sample_stats
    for name in ("accepted", "step_size", "step_size_bar", "metric_failure", "solver_failure"):
        assert name in stats
    assert not stats["metric_failure"].values.any()
    assert np.unique(stats["step_size"].values[0]).size == 1  # fixed after tuning


def _decay_model(max_num_steps: int) -> pm.Model:
    system = OdeSystem(lambda t, y, p: [-((p.rate) ** 2) * y[0]], states=["y"], params=["rate"])
    times = np.linspace(0.1, 2.0, 8)
    with pm.Model() as model:
        rate = pm.Normal("rate", 1.0, 3.0)
        y = ode_solution(system, [1.0], times, [rate], method="rk45", max_num_steps=max_num_steps)
        pm.Normal("obs", mu=y[:, 0], sigma=0.5, observed=np.exp(-times))
    return model


def test_solver_failures_reject_and_are_counted():
    """rk45 with few steps fails where the decay rate is large: proposals there are
    rejected and show up as ``solver_failure``; the chain never leaves the solvable region."""
    with _decay_model(max_num_steps=5):  # fails for rates above about 3
        step = SMMALA(step_size=4.0, adapt_step_size=False)
        idata = pm.sample(
            draws=200,
            tune=0,
            chains=1,
            step=step,
            random_seed=2,
            progressbar=False,
            compute_convergence_checks=False,
        )
    stats = idata.sample_stats
    n_failed = int(stats["solver_failure"].values.sum())
    assert n_failed > 0
    assert int(stats["failures"].values[0, -1]) == n_failed
    assert not stats["accepted"].values[stats["solver_failure"].values].any()
    assert np.all(np.isfinite(idata.posterior["rate"].values))


def test_failure_at_the_start_raises():
    with _decay_model(max_num_steps=1) as model:
        step = SMMALA()
        with pytest.raises(SamplingError, match="SMMALA: an ODE solve failed at the chain's"):
            step.step(model.initial_point())


def test_argument_and_model_errors(linear2):
    with pm.Model():
        mu = pm.Normal("mu")
        pm.StudentT("obs", nu=3, mu=mu, sigma=1.0, observed=[0.1, 0.2])
        with pytest.raises(ValueError, match="'obs' has distribution 'StudentT'; the metric"):
            SMMALA()
    with pm.Model():
        log_p = pm.Normal("log_p", 0.0, 1.0, shape=2)
        y = ode_solution(linear2, linear2.x0, TIMES, pm.math.exp(log_p))
        pm.Potential("fit", -((y - 0.5) ** 2).sum())
        with pytest.raises(ValueError, match="'fit' depends on an ODE solution"):
            SMMALA()
    with pm.Model():
        pm.Normal("mu")
        with pytest.raises(ValueError, match="sensitivity must be one of"):
            SMMALA(sensitivity="adjoint")
        with pytest.raises(ValueError, match=r"target_accept must be in \(0, 1\)"):
            SMMALA(target_accept=1.0)
        with pytest.raises(ValueError, match="pbs_options applies to sensitivity="):
            SMMALA(pbs_options={"c": 5.0})
        with pytest.raises(ValueError, match="step_size must be finite and > 0"):
            SMMALA(step_size=-1.0)
    with pm.Model():
        pm.Normal("mu")
        pm.Poisson("k", 3.0)
        with pytest.raises(ValueError, match=r"continuous variables only; got discrete \['k'\]"):
            SMMALA(vars=[pm.modelcontext(None)["k"]])


@pytest.mark.slow
def test_oscillator_posterior_agrees_with_nuts():
    """Stan's oscillator (theta, y0, two noise scales): SMMALA (2 chains in 2 processes)
    and NUTS give the same posterior means to within their Monte Carlo errors."""
    import examples.oscillator as osc

    model = osc.build_model(osc.simulate_data(1))
    kwargs = {"draws": 1000, "tune": 1000, "chains": 2, "cores": 2, "progressbar": False}
    with model:
        smmala = pm.sample(step=SMMALA(), random_seed=3, **kwargs)
        nuts = pm.sample(random_seed=3, **kwargs)
    names = ["theta", "y0", "sigma"]
    s = az.summary(smmala, var_names=names)
    n = az.summary(nuts, var_names=names)
    z = (s["mean"] - n["mean"]).abs() / np.sqrt(s["mcse_mean"] ** 2 + n["mcse_mean"] ** 2)
    assert (z < 4).all(), z
    assert (s["r_hat"] < 1.02).all()
    assert (s["ess_bulk"] > 150).all()
    assert not smmala.sample_stats["metric_failure"].values.any()
