"""`pymc_odesens.stan`: Stan's ODE functions against `solve`, controls, argument kinds,
the trace cache, gradients, argument checks and Stan's harmonic-oscillator model."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.linalg
from pytensor.gradient import verify_grad

import pymc_odesens
from pymc_odesens import solve, solve_sensitivity, stan

try:  # pytensor >= 2.31
    from pytensor.graph.traversal import ancestors
except ImportError:  # pragma: no cover - older pytensor
    from pytensor.graph.basic import ancestors

T0 = 0.5
TS = np.arange(1.0, 11.0)
Y0 = np.array([1.0, 0.0])
THETA = 0.15


def sho(t, y, theta):
    """Stan's damped harmonic oscillator, as in the Stan User's Guide."""
    dydt = [0, 0]
    dydt[0] = y[1]
    dydt[1] = -y[0] - theta * y[1]
    return dydt


def sho_exact(t, theta=THETA, t0=0.0):
    """y(t) of ``sho`` from y(t0) = (1, 0) (under-damped, theta < 2)."""
    a = theta / 2
    w = np.sqrt(1 - a**2)
    s = np.asarray(t) - t0
    decay = np.exp(-a * s)
    return np.stack(
        [decay * (np.cos(w * s) + a / w * np.sin(w * s)), -decay * np.sin(w * s) / w], axis=-1
    )


def adjoint_controls(rtol=1e-8, atol=1e-10, max_num_steps=100_000, forward=2, backward=2):
    """Stan's control arguments of ``ode_adjoint_tol_ctl``, in order, for two states."""
    return (rtol, np.full(2, atol), rtol, np.full(2, atol), rtol, atol, max_num_steps, 150, 1,
            forward, backward)  # fmt: skip


def _systems_in(y) -> set:
    return {
        v.owner.op.spec.system
        for v in ancestors([y])
        if v.owner is not None and hasattr(v.owner.op, "spec")
    }


# values ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "function, method, close",
    [
        (stan.ode_rk45, "rk45", 1e-5),
        (stan.ode_ckrk, "ckrk", 1e-5),
        (stan.ode_bdf, "bdf", 1e-8),
        (stan.ode_adams, "adams", 1e-8),
    ],
)
def test_forward_functions_match_solve(function, method, close):
    theta = pt.dscalar("theta")
    y = function(sho, Y0, T0, TS, theta)
    assert y.type.shape == (TS.size, 2)
    got = pytensor.function([theta], y)(THETA)
    system = stan.ode_system(sho, Y0, THETA)
    # Stan's defaults, through the forward-sensitivity solve: exactly its states
    exact = solve_sensitivity(system, Y0, TS, [THETA], t0=T0, method=method).y
    np.testing.assert_allclose(got, exact, rtol=1e-13, atol=1e-15)
    # and the plain solve to within the tolerances (sensitivities take part in error control)
    plain = solve(system, Y0, TS, [THETA], t0=T0, method=method).y
    np.testing.assert_allclose(got, plain, rtol=0, atol=close)
    np.testing.assert_allclose(got, sho_exact(TS, t0=T0), rtol=0, atol=50 * close)


@pytest.mark.parametrize("solver_forward, method", [(2, "bdf"), (1, "adams")])
def test_adjoint_matches_solve(solver_forward, method):
    theta = pt.dscalar("theta")
    controls = adjoint_controls(forward=solver_forward, backward=3 - solver_forward)
    y = stan.ode_adjoint_tol_ctl(sho, Y0, T0, TS, *controls, theta)
    got = pytensor.function([theta], y)(THETA)
    want = solve(
        stan.ode_system(sho, Y0, THETA),
        Y0,
        TS,
        [THETA],
        t0=T0,
        method=method,
        relative_tolerance=1e-8,
        absolute_tolerance=1e-10,
    ).y
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got, sho_exact(TS, t0=T0), atol=1e-6)


# controls ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "function",
    [stan.ode_rk45_tol, stan.ode_ckrk_tol, stan.ode_bdf_tol, stan.ode_adams_tol],
)
def test_tol_variants_honour_their_controls(function):
    exact = sho_exact(TS)
    loose = function(sho, Y0, 0.0, TS, 1e-3, 1e-3, 100_000, THETA).eval()
    tight = function(sho, Y0, 0.0, TS, 1e-10, np.full(2, 1e-12), 100_000, THETA).eval()
    err_loose, err_tight = np.abs(loose - exact).max(), np.abs(tight - exact).max()
    assert err_tight < 1e-7
    assert err_loose > 20 * err_tight
    assert err_loose < 0.05
    with pytest.raises(pymc_odesens.MaxNumStepsError, match="max_num_steps = 2"):
        function(sho, Y0, 0.0, TS, 1e-10, 1e-10, 2, THETA).eval()


def test_adjoint_controls_are_honoured():
    theta = pt.dscalar("theta")
    exact = sho_exact(TS)
    errors = {}
    for rtol in (1e-4, 1e-9):
        for interpolation in (1, 2):
            controls = list(adjoint_controls(rtol=rtol, atol=rtol * 1e-2))
            controls[8] = interpolation
            y = stan.ode_adjoint_tol_ctl(sho, Y0, 0.0, TS, *controls, theta)
            value, grad = pytensor.function([theta], [y, pytensor.grad(y.sum(), theta)])(THETA)
            errors[rtol, interpolation] = np.abs(value - exact).max()
            assert np.isfinite(grad)
    assert errors[1e-9, 1] < 1e-7 < errors[1e-4, 1]
    controls = list(adjoint_controls())
    controls[6] = 3  # max_num_steps
    with pytest.raises(pymc_odesens.MaxNumStepsError):
        stan.ode_adjoint_tol_ctl(sho, Y0, 0.0, TS, *controls, THETA).eval()


# argument kinds ----------------------------------------------------------------------------


def two_compartments(t, y, k, rates, scale, order, n_doses):
    """Scalar and vector parameters, a real constant, an int array (indexing) and an int."""
    return [
        k * n_doses - rates[0] * y[order[0]],
        rates[0] * y[0] - scale * rates[1] * y[order[1]],
    ]


def test_mixed_scalar_and_vector_arguments():
    k, rates = pt.dscalar("k"), pt.dvector("rates", shape=(2,))
    order = np.array([0, 1])
    y = stan.ode_bdf_tol(
        two_compartments, [1.0, 0.0], 0.0, TS, 1e-10, 1e-12, 10**6, k, rates, 0.5, order, 2
    )
    got = pytensor.function([k, rates], y)(0.3, np.array([0.8, 0.4]))
    system = stan.ode_system(two_compartments, [1.0, 0.0], k, rates, 0.5, order, 2)
    assert system.params == ["k", "rates_0", "rates_1", "scale"]
    reference = pymc_odesens.OdeSystem(
        lambda t, y, p: [2 * p[0] - p[1] * y[0], p[1] * y[0] - p[3] * p[2] * y[1]], n_params=4
    )
    want = solve(
        reference,
        [1.0, 0.0],
        TS,
        [0.3, 0.8, 0.4, 0.5],
        method="bdf",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    ).y
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


def linear(t, y, a):
    """Stan's ``matrix`` argument: y' = A y."""
    return a @ y


def test_matrix_argument_and_lists_of_scalars():
    a = np.array([[0.0, 1.0], [-1.0, -THETA]])
    a_var = pt.dmatrix("a", shape=(2, 2))
    y0_a, y0_b = pt.dscalars("y0_a", "y0_b")
    y = stan.ode_rk45_tol(linear, [y0_a, y0_b], 0.0, TS, 1e-9, 1e-9, 10**6, a_var)
    got = pytensor.function([a_var, y0_a, y0_b], y)(a, 1.0, 0.0)
    want = np.array([scipy.linalg.expm(a * t) @ Y0 for t in TS])  # Stan's matrix_exp example
    np.testing.assert_allclose(got, want, atol=1e-7)
    assert stan.ode_system(linear, Y0, a).n_params == 4
    # an argument given as a list mixing a variable and a number
    theta = pt.dscalar("theta")
    y = stan.ode_rk45(lambda t, y, p: [y[1], -p[0] * y[0] - p[1] * y[1]], Y0, 0.0, TS, [1.0, theta])
    np.testing.assert_allclose(pytensor.function([theta], y)(THETA), sho_exact(TS), atol=1e-4)


def test_no_extra_arguments():
    def decay(t, y):
        return [-y[0]]

    y = stan.ode_bdf(decay, [2.0], 0.0, TS).eval()
    np.testing.assert_allclose(y[:, 0], 2.0 * np.exp(-TS), rtol=1e-8, atol=1e-9)


def indexed_decay(t, y, rates, n, idx):
    """Integer data used for a loop bound and for indexing."""
    out = [0.0] * len(y)
    for i in range(n):
        out[i] = -rates[i] * y[idx[i]]
    return out


def test_data_arguments_in_a_model():
    with pm.Model() as model:
        d = pm.Data("d", np.array([0.5, 0.2]))  # shape (None,): its current length is used
        k = pm.LogNormal("k", 0.0, 0.5)
        ts = pt.constant(TS[:3])
        mu = stan.ode_bdf(
            indexed_decay, [1.0, 1.0], 0.0, ts, d * k, pt.constant(2), pt.constant([0, 1])
        )
        pm.Normal("obs", mu, 1.0, observed=np.zeros((3, 2)))
    system = stan.ode_system(indexed_decay, Y0, np.ones(2), 2, np.array([0, 1]))
    assert system.params == ["rates_0", "rates_1"]
    assert _systems_in(mu) == {system}
    point = model.initial_point()
    k_value = np.exp(point["k_log__"])
    mu_value = pytensor.function([k], mu)(k_value)
    rates = np.array([0.5, 0.2]) * k_value
    np.testing.assert_allclose(mu_value[:, 0], np.exp(-rates[0] * TS[:3]), rtol=1e-7)
    np.testing.assert_allclose(mu_value[:, 1], np.exp(-rates[1] * TS[:3]), rtol=1e-7)
    assert np.all(np.isfinite(model.compile_dlogp()(point)))


# the trace cache ---------------------------------------------------------------------------


def test_trace_is_cached_per_function_and_layout():
    theta = pt.dscalar("theta")
    first = stan.ode_rk45(sho, Y0, 0.0, TS, theta)
    second = stan.ode_bdf(sho, pt.dvector("y0", shape=(2,)), 0.0, TS[:3], 0.4)
    (system,) = _systems_in(first)
    assert _systems_in(second) == {system}
    assert stan.ode_system(sho, Y0, 0.9) is system
    # a new layout is a new trace: another length of a vector, another integer constant
    k, rates = 0.3, np.array([0.8, 0.4])
    one = stan.ode_system(two_compartments, Y0, k, rates, 0.5, np.array([0, 1]), 2)
    assert stan.ode_system(two_compartments, Y0, k, rates * 2, 0.1, np.array([0, 1]), 2) is one
    assert stan.ode_system(two_compartments, Y0, k, rates, 0.5, np.array([1, 1]), 2) is not one
    assert stan.ode_system(two_compartments, Y0, k, rates, 0.5, np.array([0, 1]), 3) is not one
    other = stan.ode_system(two_compartments, Y0, k, np.ones(3), 0.5, np.array([0, 1]), 2)
    assert other is not one and other.n_params == 5


# gradients ---------------------------------------------------------------------------------


def _weighted_loss(function, *controls):
    weights = np.random.default_rng(4).normal(size=(TS.size, 2))

    def loss(y0, k, rates):
        y = function(two_compartments, y0, 0.0, TS, *controls, k, rates, 0.5, np.array([0, 1]), 2)
        return (y * weights).sum() + 0.5 * (y**2).sum()

    return loss


@pytest.mark.parametrize(
    "function, controls",
    [
        (stan.ode_bdf, ()),
        (stan.ode_adjoint_tol_ctl, adjoint_controls(rtol=1e-10, atol=1e-12)),
    ],
)
def test_gradients_with_respect_to_y0_and_arguments(function, controls):
    verify_grad(
        _weighted_loss(function, *controls),
        [np.array([1.0, 0.2]), np.array(0.3), np.array([0.8, 0.4])],
        rng=np.random.default_rng(0),
        eps=1e-6,
        abs_tol=1e-6,
        rel_tol=1e-6,
    )


# argument checks ---------------------------------------------------------------------------


def test_bad_arguments_raise_naming_the_argument():
    theta = pt.dscalar("theta")
    with pytest.raises(ValueError, match=r"ode_rk45: ts must be sorted in increasing order"):
        stan.ode_rk45(sho, Y0, 0.0, TS[::-1], theta)
    with pytest.raises(ValueError, match=r"greater than t0 = 1.0.*ts\[0\] = 1.0"):
        stan.ode_bdf(sho, Y0, 1.0, TS, theta)
    with pytest.raises(ValueError, match=r"ts must be finite"):
        stan.ode_bdf(sho, Y0, 0.0, [1.0, np.nan], theta)
    with pytest.raises(TypeError, match=r"ts must be data"):
        stan.ode_bdf(sho, Y0, 0.0, pt.dvector("ts"), theta)
    with pytest.raises(ValueError, match=r"y0 must be a vector of N initial states"):
        stan.ode_bdf(sho, np.ones((2, 2)), 0.0, TS, theta)
    with pytest.raises(ValueError, match=r"y0 must be finite"):
        stan.ode_bdf(sho, [1.0, np.inf], 0.0, TS, theta)
    with pytest.raises(ValueError, match=r"sho returned 2 derivatives but y0 has 3 states"):
        stan.ode_bdf(sho, [1.0, 0.0, 0.0], 0.0, TS, theta)
    with pytest.raises(TypeError, match=r"cannot be called as f\(t, y, \*args\) with the 2 extra"):
        stan.ode_bdf(sho, Y0, 0.0, TS, theta, theta)
    with pytest.raises(TypeError, match=r"argument 'theta' .* must be a number"):
        stan.ode_bdf(sho, Y0, 0.0, TS, "0.15")
    with pytest.raises(ValueError, match=r"argument 'theta' .* shape unknown"):
        stan.ode_bdf(sho, Y0, 0.0, TS, pt.dvector("theta"))
    with pytest.raises(TypeError, match=r"while tracing branching.*pymc_odesens.math"):

        def branching(t, y, theta):
            return [y[1], -y[0] - theta * y[1] if theta > 0 else 0.0]

        stan.ode_bdf(branching, Y0, 0.0, TS, theta)
    with pytest.raises(ValueError, match=r"ode_bdf_tol: relative_tolerance must be positive"):
        stan.ode_bdf_tol(sho, Y0, 0.0, TS, -1e-6, 1e-6, 1000, theta)
    with pytest.raises(ValueError, match=r"absolute_tolerance must be a scalar or have shape \(2"):
        stan.ode_rk45_tol(sho, Y0, 0.0, TS, 1e-6, [1e-6] * 3, 1000, theta)
    with pytest.raises(TypeError, match=r"max_num_steps must be a positive int"):
        stan.ode_adams_tol(sho, Y0, 0.0, TS, 1e-6, 1e-6, 10.5, theta)
    with pytest.raises(ValueError, match=r"ode_rk45_tol: max_num_steps must be at most 2\*\*63"):
        stan.ode_rk45_tol(sho, Y0, 0.0, TS, 1e-6, 1e-6, 1e20, theta)
    with pytest.raises(TypeError, match=r"relative_tolerance must be data"):
        stan.ode_ckrk_tol(sho, Y0, 0.0, TS, pt.dscalar("rtol"), 1e-6, 1000, theta)
    with pytest.raises(TypeError, match=r"all required .* None for max_num_steps"):
        stan.ode_ckrk_tol(sho, Y0, 0.0, TS, 1e-6, 1e-6, None, theta)
    controls = list(adjoint_controls())
    bad_atol = [*controls[:1], np.ones(3) * 1e-8, *controls[2:]]
    with pytest.raises(ValueError, match=r"absolute_tolerance_forward must be .* shape \(2,\)"):
        stan.ode_adjoint_tol_ctl(sho, Y0, 0.0, TS, *bad_atol, theta)
    for position, name in [(8, "interpolation_polynomial"), (9, "solver_forward"),
                           (10, "solver_backward")]:  # fmt: skip
        bad = list(controls)
        bad[position] = 3
        with pytest.raises(ValueError, match=rf"ode_adjoint_tol_ctl: {name} must be one of"):
            stan.ode_adjoint_tol_ctl(sho, Y0, 0.0, TS, *bad, theta)
    bad = list(controls)
    bad[7] = 0
    with pytest.raises(ValueError, match=r"num_steps_between_checkpoints must be positive"):
        stan.ode_adjoint_tol_ctl(sho, Y0, 0.0, TS, *bad, theta)


# Stan's harmonic oscillator, almost verbatim ------------------------------------------------


def test_stan_harmonic_oscillator_model():
    # data { int T; array[T] vector[2] y; real t0; array[T] real ts; }  -- simulated first:
    # generated quantities { y_sim = ode_rk45(sho, y0, t0, ts, theta); y_sim += normal(0, 0.1) }
    t0, ts = 0.0, np.arange(1.0, 11.0)
    y_sim = stan.ode_rk45(sho, np.array([1.0, 0.0]), t0, ts, 0.15).eval()
    np.testing.assert_allclose(y_sim, sho_exact(ts), atol=1e-4)
    y = y_sim + np.random.default_rng(12).normal(0.0, 0.1, size=y_sim.shape)

    with pm.Model() as model:
        # parameters { vector[2] y0; vector<lower=0>[2] sigma; real theta; }
        y0 = pm.Normal("y0", 0.0, 1.0, shape=2)  # y0 ~ std_normal();
        sigma = pm.HalfNormal("sigma", 2.5, shape=2)  # sigma ~ normal(0, 2.5);
        theta = pm.Normal("theta", 0.0, 1.0)  # theta ~ std_normal();
        # model { array[T] vector[2] mu = ode_rk45(sho, y0, t0, ts, theta);
        mu = stan.ode_rk45(sho, y0, t0, ts, theta)
        #         for (t in 1:T) y[t] ~ normal(mu[t], sigma); }
        pm.Normal("y", mu, sigma, observed=y)

    point = model.initial_point()
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    assert np.isfinite(logp(point))
    grad = dlogp(point)
    assert grad.shape == (5,) and np.all(np.isfinite(grad))
    # the gradient agrees with central differences of the log-density
    names = [v.name for v in model.value_vars]
    flat = np.concatenate([np.atleast_1d(point[n]) for n in names])
    sizes = [np.size(point[n]) for n in names]

    def at(x):
        parts = np.split(x, np.cumsum(sizes)[:-1])
        return {n: p.reshape(np.shape(point[n])) for n, p in zip(names, parts)}

    h = 1e-6
    numeric = [
        (logp(at(flat + h * e)) - logp(at(flat - h * e))) / (2 * h) for e in np.eye(flat.size)
    ]
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-4)


# real data holding whole numbers (763.0 where 763 may have been meant) ------------------


def _sir(t, y, beta, gamma, population):
    infection = beta * y[0] * y[1] / population
    return [-infection, infection - gamma * y[1], gamma * y[1]]


def test_whole_real_data_is_a_parameter_with_a_one_time_note():
    import warnings

    from pymc_odesens.stan import RealDataArgumentNote

    def sir(t, y, beta, gamma, population):  # a fresh function: its own notes
        return _sir(t, y, beta, gamma, population)

    y0, ts = np.array([762.0, 1.0, 0.0]), np.arange(1.0, 4.0)
    with pytest.warns(RealDataArgumentNote, match=r"population = 763\.0 holds whole numbers"):
        stan.ode_rk45(sir, y0, 0.0, ts, 1.7, 0.5, 763.0)
    assert stan.ode_system(sir, y0, 1.7, 0.5, 763.0).params == ["beta", "gamma", "population"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stan.ode_rk45(sir, y0, 0.0, ts, 1.7, 0.5, 763.0)  # shown once
        stan.ode_rk45(sir, y0, 0.0, ts, 1.7, 0.5, 763)  # an int: baked in, no note
        stan.ode_rk45(sir, y0, 0.0, ts, 1.7, 0.5, 762.5)  # not a whole number: no note
    # the int is baked into the equations: two parameters, the same solution
    assert stan.ode_system(sir, y0, 1.7, 0.5, 763).params == ["beta", "gamma"]
    as_real = stan.ode_rk45(sir, y0, 0.0, ts, 1.7, 0.5, 763.0).eval()
    as_int = stan.ode_rk45(sir, y0, 0.0, ts, 1.7, 0.5, 763).eval()
    np.testing.assert_allclose(as_real, as_int, rtol=1e-12)


def test_whole_real_data_is_named_when_tracing_fails():
    def decay(t, y, n):
        return [-y[i] for i in range(n)]

    with pytest.raises(TypeError, match=r"n = 2\.0 holds whole numbers.*pass integers \(n = 2\)"):
        stan.ode_rk45(decay, np.array([1.0, 2.0]), 0.0, [1.0], 2.0)
    assert stan.ode_rk45(decay, np.array([1.0, 2.0]), 0.0, [1.0], 2).eval().shape == (1, 2)
