"""``marginal_normal``: the marginal log-density equals the numerical integral of the joint
density (same conjugate priors) over the marginalised scaling, offset and noise variance,
alone and together, on the lin, log and log10 scales; its gradient equals central
differences; NUMBA mode gives the default mode's numbers; bad input is refused by name."""

import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.special import digamma, polygamma

from pymc_odesens import InverseGammaPrior, NormalPrior, marginal_normal
from tests.marginal_quadrature import (
    inverse_gamma_logpdf,
    log_integral,
    normal_logpdf,
    reference_variance,
)

SCALE = {
    "lin": NormalPrior(1.2, 0.7),
    "log": NormalPrior(0.1, 0.5),  # of ln s
    "log10": NormalPrior(0.05, 0.3),  # of log10 s
}
OFFSET = NormalPrior(-0.3, 0.8)
NOISE = InverseGammaPrior(3.0, 0.2)
N = 7


def _data(seed: int, transformation: str):
    rng = np.random.default_rng(seed)
    mu = rng.uniform(0.5, 2.0, N)
    sigma = rng.uniform(0.15, 0.4, N)
    if transformation == "lin":
        observed = 1.4 * mu - 0.2 + 0.25 * rng.standard_normal(N)
    elif transformation == "log":
        observed = 1.3 * mu * np.exp(0.2 * rng.standard_normal(N))
    else:
        observed = 1.3 * mu * 10 ** (0.1 * rng.standard_normal(N))
    return mu, sigma, observed


def _transform(values, transformation):
    return {"lin": lambda v: v, "log": np.log, "log10": np.log10}[transformation](values)


def _jacobian(observed, transformation) -> float:
    if transformation == "lin":
        return 0.0
    if transformation == "log":
        return -float(np.sum(np.log(observed)))
    return -float(np.sum(np.log(observed * math.log(10.0))))


def _potential(transformation: str, marginal: str, observed):
    """The potential as a compiled function of ``mu`` and the given ``sigma``."""
    mu = pt.vector("mu", dtype="float64")
    sigma = pt.vector("sigma", dtype="float64")
    with pm.Model():
        potential = marginal_normal(
            "y",
            mu,
            observed,
            sigma=NOISE if "v" in marginal else sigma,
            scale=SCALE[transformation] if "s" in marginal else None,
            offset=OFFSET if "o" in marginal else None,
            transformation=transformation,
        )
    return mu, sigma, potential


def _columns(transformation, marginal, mu, sigma, observed):
    """Design, fixed part, weights and prior of the marginalised columns (in the test's own
    terms), for the integration boxes."""
    z = _transform(observed, transformation)
    design, means, sds = [], [], []
    if "s" in marginal:
        design.append(mu if transformation == "lin" else np.ones(N))
        means.append(SCALE[transformation].mu)
        sds.append(SCALE[transformation].sigma)
    if "o" in marginal:
        design.append(np.ones(N))
        means.append(OFFSET.mu)
        sds.append(OFFSET.sigma)
    if transformation != "lin":
        fixed = _transform(mu, transformation)
    else:
        fixed = np.zeros(N) if "s" in marginal else mu
    a = np.stack(design, axis=1) if design else np.zeros((N, 0))
    return z, fixed, a, np.array(means), np.array(sds)


def _log_joint(transformation, marginal, mu, sigma, observed):
    """The joint log-density of the measurements and the marginalised parameters, a
    function of (scale's variable, offset, ln v) in that order, those marginalised."""
    z = _transform(observed, transformation)
    jacobian = _jacobian(observed, transformation)
    reference = reference_variance(NOISE.alpha, NOISE.beta)

    def f(*t):
        t = list(t)
        s = t.pop(0) if "s" in marginal else None
        o = t.pop(0) if "o" in marginal else None
        u = t.pop(0) if "v" in marginal else None
        v = None if u is None else math.exp(u)
        noise = sigma if v is None else math.sqrt(v)
        widen = 1.0 if v is None else math.sqrt(v / reference)
        total = jacobian
        if transformation == "lin":
            mean = (1.0 if s is None else np.asarray(s)[..., None]) * mu
            if o is not None:
                mean = mean + np.asarray(o)[..., None]
        else:
            mean = _transform(mu, transformation) + (0.0 if s is None else np.asarray(s)[..., None])
        total = total + np.sum(normal_logpdf(z, mean, noise), axis=-1)
        if s is not None:
            prior = SCALE[transformation]
            total = total + normal_logpdf(s, prior.mu, prior.sigma * widen)
        if o is not None:
            total = total + normal_logpdf(o, OFFSET.mu, OFFSET.sigma * widen)
        if v is not None:
            total = total + inverse_gamma_logpdf(v, NOISE.alpha, NOISE.beta) + u  # dv = v du
        return total

    return f


def _integration(transformation, marginal, mu, sigma, observed):
    """``(log_joint, boxes)`` for :func:`log_integral`, with boxes from the posterior computed
    here with numpy (least squares); with two columns and the noise (3-D), in whitened
    coordinates of the columns (their correlation would otherwise need a fine grid)."""
    log_joint = _log_joint(transformation, marginal, mu, sigma, observed)
    z, fixed, a, means, sds = _columns(transformation, marginal, mu, sigma, observed)
    nig = "v" in marginal
    reference = reference_variance(NOISE.alpha, NOISE.beta)
    k = a.shape[1]
    boxes = []
    if k:
        weight = np.ones(N) if nig else 1.0 / sigma**2
        precision = np.diag((reference if nig else 1.0) / sds**2)
        p = precision + a.T @ (weight[:, None] * a)
        centre = np.linalg.solve(p, precision @ means + a.T @ (weight * (z - fixed)))
        covariance = np.linalg.inv(p)
        spread = np.sqrt(np.diag(covariance))
        residual = z - fixed - a @ centre
        quadratic = residual @ (weight * residual) + (centre - means) @ precision @ (centre - means)
        if nig and k == 2:
            root = np.linalg.cholesky(covariance)
            joint = log_joint

            def log_joint(w0, w1, u):
                scale = math.exp(0.5 * u)
                s = centre[0] + scale * root[0, 0] * w0
                o = centre[1] + scale * (root[1, 0] * w0 + root[1, 1] * w1)
                return joint(s, o, u) + u + math.log(np.linalg.det(root))

            boxes = [(-12.0, 12.0), (-12.0, 12.0)]
        else:
            for j in range(k):
                if nig:
                    boxes.append(
                        lambda u, j=j: (
                            centre[j] - 14 * spread[j] * math.exp(0.5 * u),
                            centre[j] + 14 * spread[j] * math.exp(0.5 * u),
                        )
                    )
                else:
                    boxes.append((centre[j] - 14 * spread[j], centre[j] + 14 * spread[j]))
    else:
        quadratic = float(np.sum((z - fixed) ** 2))
    if nig:
        alpha_n = NOISE.alpha + N / 2
        beta_n = NOISE.beta + quadratic / 2
        middle = math.log(beta_n) - float(digamma(alpha_n))
        width = 14 * math.sqrt(float(polygamma(1, alpha_n)))
        boxes.append((middle - width, middle + width))
    return log_joint, boxes


CASES = [
    ("lin", "s"),
    ("lin", "o"),
    ("lin", "v"),
    ("lin", "so"),
    ("lin", "sv"),
    ("lin", "ov"),
    ("lin", "sov"),
    ("log", "s"),
    ("log", "v"),
    ("log", "sv"),
    ("log10", "s"),
    ("log10", "v"),
    ("log10", "sv"),
]


@pytest.mark.parametrize("transformation, marginal", CASES)
@pytest.mark.parametrize("seed", [1, 2])
def test_marginal_density_equals_quadrature_of_the_joint(transformation, marginal, seed):
    mu, sigma, observed = _data(seed, transformation)
    mu_var, sigma_var, potential = _potential(transformation, marginal, observed)
    value = float(
        pytensor.function([mu_var, sigma_var], potential, on_unused_input="ignore")(mu, sigma)
    )
    assert np.isfinite(value)
    log_joint, boxes = _integration(transformation, marginal, mu, sigma, observed)
    expected = log_integral(log_joint, boxes, reference=value, nodes=80)
    assert value == pytest.approx(expected, abs=1e-7)


@pytest.mark.parametrize(
    "transformation, marginal", [("lin", "sov"), ("lin", "so"), ("log10", "sv"), ("log", "v")]
)
def test_gradient_against_central_differences(transformation, marginal):
    mu, sigma, observed = _data(3, transformation)
    mu_var, sigma_var, potential = _potential(transformation, marginal, observed)
    inputs = [mu_var, sigma_var]
    value = pytensor.function(inputs, potential, on_unused_input="ignore")
    gradient = pytensor.function(
        inputs,
        pytensor.grad(potential, inputs, disconnected_inputs="ignore"),
        on_unused_input="ignore",
    )
    analytic = gradient(mu, sigma)
    h = 1e-6
    for k in range(2):
        for i in range(N):
            up = [mu.copy(), sigma.copy()]
            down = [mu.copy(), sigma.copy()]
            up[k][i] += h
            down[k][i] -= h
            central = (value(*up) - value(*down)) / (2 * h)
            assert analytic[k][i] == pytest.approx(central, rel=1e-6, abs=1e-7), (k, i)


@pytest.mark.parametrize("transformation, marginal", [("lin", "sov"), ("log10", "s")])
def test_numba_mode_equals_default_mode(transformation, marginal):
    mu, sigma, observed = _data(4, transformation)
    mu_var, sigma_var, potential = _potential(transformation, marginal, observed)
    outputs = [
        potential,
        *pytensor.grad(potential, [mu_var, sigma_var], disconnected_inputs="ignore"),
    ]
    results = [
        pytensor.function([mu_var, sigma_var], outputs, mode=mode, on_unused_input="ignore")(
            mu, sigma
        )
        for mode in ("FAST_RUN", "NUMBA")
    ]
    for default, numba in zip(*results):
        np.testing.assert_allclose(numba, default, rtol=1e-13, atol=1e-14)


def test_groups_give_one_parameter_per_label():
    """Two scalings (one per label) sharing one noise variance: the sum of two independent
    blocks' marginals is not what it is, but one NIG block with two columns; the value
    equals the 3-D quadrature over both scalings and the variance."""
    mu, _, observed = _data(5, "lin")
    groups = np.array([0, 1, 0, 1, 0, 1, 1])
    mu_var = pt.vector("mu", dtype="float64")
    with pm.Model():
        potential = marginal_normal(
            "y", mu_var, observed, sigma=NOISE, scale=SCALE["lin"], scale_groups=groups
        )
    value = float(pytensor.function([mu_var], potential)(mu))
    reference = reference_variance(NOISE.alpha, NOISE.beta)
    prior = SCALE["lin"]

    def log_joint(s0, s1, u):
        v = math.exp(u)
        scale = np.where(groups == 0, np.asarray(s0)[..., None], np.asarray(s1)[..., None])
        total = np.sum(normal_logpdf(observed, scale * mu, math.sqrt(v)), axis=-1)
        widen = math.sqrt(v / reference)
        total = total + normal_logpdf(s0, prior.mu, prior.sigma * widen)
        total = total + normal_logpdf(s1, prior.mu, prior.sigma * widen)
        return total + inverse_gamma_logpdf(v, NOISE.alpha, NOISE.beta) + u

    fits = [
        np.sum(mu[groups == g] * observed[groups == g]) / np.sum(mu[groups == g] ** 2)
        for g in (0, 1)
    ]
    boxes = [lambda u, f=f: (f - 10 * math.exp(0.5 * u), f + 10 * math.exp(0.5 * u)) for f in fits]
    boxes.append((math.log(0.2 / 3) - 8, math.log(0.2 / 3) + 8))
    expected = log_integral(log_joint, boxes, reference=value, nodes=80)
    assert value == pytest.approx(expected, abs=1e-7)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"sigma": 0.1}, "nothing to marginalise"),
        ({"sigma": 0.1, "offset": NormalPrior(), "transformation": "log"}, "no closed form"),
        ({"sigma": 0.1, "scale": NormalPrior(), "transformation": "sqrt"}, "transformation"),
        ({"sigma": 0.1, "scale": 1.0}, "NormalPrior"),
        ({"sigma": 0.1, "scale": NormalPrior(), "scale_groups": [0, 1]}, "one label per"),
        (
            {"sigma": 0.1, "offset_groups": np.zeros(3, int), "scale": NormalPrior()},
            "offset_groups",
        ),
        (
            {
                "sigma": NOISE,
                "scale": NormalPrior(),
                "sigma_groups": np.array([0, 1, 1]),
            },
            "y_sigma",
        ),
    ],
)
def test_bad_input_is_refused(kwargs, match):
    with pm.Model(), pytest.raises((ValueError, TypeError), match=match):
        marginal_normal("y", pt.ones(3), np.array([1.0, 2.0, 3.0]), **kwargs)


def test_non_positive_measurements_under_a_log_transformation_are_refused():
    with pm.Model(), pytest.raises(ValueError, match=r"observed\[1\] = -2.0 is not positive"):
        marginal_normal(
            "y",
            pt.ones(3),
            np.array([1.0, -2.0, 3.0]),
            sigma=0.1,
            scale=NormalPrior(),
            transformation="log10",
        )


@pytest.mark.parametrize(
    "prior, match",
    [
        (lambda: NormalPrior(0.0, 0.0), "sigma must be positive"),
        (lambda: NormalPrior(math.inf, 1.0), "mu must be finite"),
        (lambda: InverseGammaPrior(-1.0, 1.0), "alpha must be positive"),
        (lambda: InverseGammaPrior(1.0, math.nan), "beta must be positive"),
    ],
)
def test_bad_priors_are_refused(prior, match):
    with pytest.raises(ValueError, match=match):
        prior()
