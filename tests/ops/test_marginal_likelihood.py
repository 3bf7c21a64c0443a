"""The marginal likelihood Op: its value and gradient Ops agree, it rejects what is not
finite with a zero gradient, checks shapes by name, keeps the digits of a prior mean far
from the data, and its NUMBA-mode graph is cacheable."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.link.numba.dispatch import numba_funcify
from scipy import integrate, stats
from scipy.special import digamma

from pymc_odesens.ops import (
    MarginalColumn,
    MarginalNoise,
    MarginalNormalLogLikelihoodGradient,
    MarginalNormalStructure,
    marginal_log_likelihood,
)
from pymc_odesens.ops.marginal_numerics import (
    conditional_draw,
    conditional_posterior,
    marginal_log_density,
)
from pymc_odesens.ops.numba_cache import op_cache_key

N = 6


@pytest.fixture(scope="module")
def structure():
    """Rows 0-2: scaling and offset with given noise; rows 3-5: a scaling with a
    marginalised noise variance."""
    return MarginalNormalStructure.build(
        N,
        [0, 1, 2, 0, 1, 2, 3, 4, 5],
        [0, 0, 0, 1, 1, 1, 2, 2, 2],
        [
            MarginalColumn("s", 1.0, 2.0),
            MarginalColumn("o", 0.0, 1.0),
            MarginalColumn("t", 0.5, 1.0),
        ],
        [-1, -1, -1, 0, 0, 0],
        [MarginalNoise("v", 2.0, 0.5)],
    )


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=N)
    c = 0.1 * rng.normal(size=N)
    a = np.concatenate([rng.uniform(0.5, 2, 3), np.ones(3), rng.uniform(0.5, 2, 3)])
    sigma = rng.uniform(0.2, 0.5, N)
    return z, c, a, sigma


def _graph(structure):
    variables = [pt.vector(name, dtype="float64") for name in ("z", "c", "a", "sigma")]
    return variables, marginal_log_likelihood(structure, *variables)


def test_value_and_gradient_ops_agree(structure):
    variables, value = _graph(structure)
    inputs = _inputs()
    gradient = pytensor.grad(value, variables)
    f = pytensor.function(variables, [value, *gradient])
    both = pytensor.function(variables, MarginalNormalLogLikelihoodGradient(structure)(*variables))
    for x, y in zip(f(*inputs), both(*inputs)):
        np.testing.assert_array_equal(x, y)
    # the given noise of the NIG rows does not enter
    assert np.all(f(*inputs)[4][3:] == 0.0)
    # dL/dz = -dL/dc
    np.testing.assert_array_equal(f(*inputs)[1], -f(*inputs)[2])


@pytest.mark.parametrize(
    "change",
    [
        lambda z, c, a, s: c.__setitem__(1, np.nan),
        lambda z, c, a, s: a.__setitem__(4, np.inf),
        lambda z, c, a, s: z.__setitem__(0, -np.inf),
        lambda z, c, a, s: s.__setitem__(2, 0.0),
        lambda z, c, a, s: s.__setitem__(0, -0.1),
    ],
)
def test_non_finite_input_gives_minus_infinity_and_a_zero_gradient(structure, change):
    variables, value = _graph(structure)
    inputs = [x.copy() for x in _inputs()]
    change(*inputs)
    f = pytensor.function(variables, [value, *pytensor.grad(value, variables)])
    result = f(*inputs)
    assert result[0] == -np.inf
    for gradient in result[1:]:
        assert np.all(gradient == 0.0)


def test_a_nan_given_noise_of_noise_rows_is_ignored(structure):
    z, c, a, sigma = _inputs()
    sigma[4] = np.nan  # a row whose noise is marginalised
    value = marginal_log_density(z, c, a, sigma, False, *structure.numeric_arrays())[0]
    assert np.isfinite(value)


def test_shapes_are_checked_by_name(structure):
    with pytest.raises(ValueError, match="a must have 9 values"):
        marginal_log_likelihood(structure, np.zeros(N), np.zeros(N), np.zeros(8), np.ones(N))
    with pytest.raises(ValueError, match="z must be a vector"):
        marginal_log_likelihood(structure, np.zeros((N, 1)), np.zeros(N), np.zeros(9), np.ones(N))
    variables, value = _graph(structure)
    f = pytensor.function(variables, value)
    with pytest.raises(ValueError, match=r"c must have shape \(6,\)"):
        f(np.zeros(N), np.zeros(5), np.zeros(9), np.ones(N))
    with pytest.raises(TypeError, match="MarginalNormalStructure"):
        marginal_log_likelihood(object(), *_inputs())


def test_a_prior_mean_far_from_the_data_keeps_its_digits():
    """A weakly informative prior (mean 2.7e6, sd 1.1e7) of a scaling whose value is about
    2e-9: the marginal equals the quadrature of the joint to 1e-9 (the textbook form
    r'D^-1 r - b'P^-1 b lost every digit: an error of about 7e13)."""
    rng = np.random.default_rng(7)
    g = rng.uniform(0.5, 2, N) * 1e8
    sigma = rng.uniform(0.2, 0.5, N)
    z = 2e-9 * g + sigma * rng.normal(size=N)
    c = np.zeros(N)
    structure = MarginalNormalStructure.build(
        N, np.arange(N), np.zeros(N, int), [MarginalColumn("s", 2.7e6, 1.13e7)], np.full(N, -1)
    )
    value = marginal_log_density(z, c, g, sigma, False, *structure.numeric_arrays())[0]
    ok, mean, factor, _, _ = conditional_posterior(z, c, g, sigma, *structure.numeric_arrays())
    fit = np.sum(g * z / sigma**2) / np.sum(g**2 / sigma**2)
    sd = 1.0 / np.sqrt(np.sum(g**2 / sigma**2))
    assert ok and mean[0] == pytest.approx(fit, rel=1e-6)

    def joint(s):
        log = stats.norm.logpdf(z, s * g, sigma).sum() + stats.norm.logpdf(s, 2.7e6, 1.13e7)
        return np.exp(log - value)

    integral = integrate.quad(joint, fit - 20 * sd, fit + 20 * sd, epsabs=0, epsrel=1e-12)[0]
    assert value + np.log(integral) == pytest.approx(value, abs=1e-9)


def test_conditional_draws_have_the_posterior_moments(structure):
    """Draws of the conditional posterior (known noise: normal; NIG: normal-inverse-gamma)
    against the moments of the posterior by quadrature (one scaling and the variance)."""
    z, c, a, sigma = _inputs(3)
    arrays = structure.numeric_arrays()
    ok, mean, factor, alpha_n, beta_n = conditional_posterior(z, c, a, sigma, *arrays)
    assert ok
    rng = np.random.default_rng(11)
    n_draws = 20000
    theta = np.empty((n_draws, 3))
    variance = np.empty(n_draws)
    for k in range(n_draws):
        v = np.full(structure.n_blocks, np.nan)
        v[1] = beta_n[1] / rng.standard_gamma(alpha_n[1])
        theta[k] = conditional_draw(
            mean,
            factor,
            v,
            rng.standard_normal(3),
            structure.block_kind,
            structure.block_columns_start,
            structure.block_columns,
        )
        variance[k] = v[1]
    # the NIG block (rows 3-5, column t, variance v): moments of the joint by quadrature
    # (u = ln v outside, a Gauss-Legendre rule in t inside)
    rows = slice(3, 6)
    g, r = a[6:], (z - c)[rows]
    reference = 0.5 * np.exp(-digamma(2.0))
    lam = reference / 1.0**2
    centre = (lam * 0.5 + g @ r) / (lam + g @ g)
    nodes, weights = np.polynomial.legendre.leggauss(80)

    def moment(f):
        def section(u):
            v = np.exp(u)
            half = 12 * np.sqrt(v / (lam + g @ g))
            t = centre + half * nodes
            log = stats.norm.logpdf(r[None, :], t[:, None] * g, np.sqrt(v)).sum(axis=1)
            log += stats.norm.logpdf(t, 0.5, np.sqrt(v / reference))
            log += stats.invgamma.logpdf(v, 2.0, scale=0.5) + u
            return half * np.sum(weights * f(t, v) * np.exp(log))

        return integrate.quad(section, -15.0, 8.0, epsabs=0, epsrel=1e-10, limit=200)[0]

    mass = moment(lambda t, v: 1.0)
    t_mean = moment(lambda t, v: t) / mass
    t_var = moment(lambda t, v: (t - t_mean) ** 2) / mass
    v_mean = moment(lambda t, v: v + 0 * t) / mass
    v_var = moment(lambda t, v: (v - v_mean) ** 2 + 0 * t) / mass
    assert abs(theta[:, 2].mean() - t_mean) < 4 * np.sqrt(t_var / n_draws)
    assert abs(variance.mean() - v_mean) < 4 * np.sqrt(v_var / n_draws)
    assert theta[:, 2].var() == pytest.approx(t_var, rel=0.05)
    # the known-noise block: a normal with the least-squares posterior
    design = np.stack([a[:3], a[3:6]], axis=1)
    precision = np.diag([1 / 4.0, 1.0])
    p = precision + design.T @ (design / sigma[:3, None] ** 2)
    expected = np.linalg.solve(
        p, precision @ [1.0, 0.0] + design.T @ ((z - c)[:3] / sigma[:3] ** 2)
    )
    covariance = np.linalg.inv(p)
    np.testing.assert_allclose(mean[:2], expected, rtol=1e-12)
    np.testing.assert_allclose(np.cov(theta[:, :2].T), covariance, rtol=0.05, atol=1e-4)
    assert np.all(
        np.abs(theta[:, :2].mean(0) - expected) < 4 * np.sqrt(np.diag(covariance) / n_draws)
    )


def test_numba_graph_is_cacheable(structure):
    variables, value = _graph(structure)
    (node,) = [
        n
        for n in pytensor.function(variables, value, mode="NUMBA").maker.fgraph.apply_nodes
        if hasattr(n.op, "structure")
    ]
    assert op_cache_key(node.op, numba_funcify(node.op, node)) is not None
