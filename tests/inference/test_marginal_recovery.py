"""``recover_marginalized``: per posterior draw, a draw of the marginalised parameters from
their conditional posterior; against the moments of that posterior (quadrature, fast) and
against sampling the model with the parameters explicit (the same conjugate priors, slow)."""

import math

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import integrate

from pymc_odesens import InverseGammaPrior, NormalPrior, marginal_normal, recover_marginalized
from pymc_odesens.inference.marginal_recovery import MarginalRecovery
from tests.marginal_quadrature import inverse_gamma_logpdf, normal_logpdf, reference_variance

TIMES = np.linspace(0.2, 3.0, 12)
SCALE = NormalPrior(1.2, 0.7)
OFFSET = NormalPrior(0.0, 0.5)
NOISE = InverseGammaPrior(3.0, 0.2)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return 1.5 * np.exp(-0.8 * TIMES) + 0.1 + 0.08 * rng.standard_normal(TIMES.size)


def _model(observed, groups=None):
    with pm.Model() as model:
        k = pm.LogNormal("k", 0.0, 0.5)
        marginal_normal(
            "y",
            pt.exp(-k * TIMES),
            observed,
            sigma=NOISE,
            scale=SCALE,
            offset=OFFSET,
            scale_groups=groups,
        )
    return model


def _posterior(values: np.ndarray) -> az.InferenceData:
    """A posterior of ``k`` with the given draws, (chain, draw)."""
    return az.from_dict(posterior={"k": values})


def _conditional_moments(observed, k):
    """Means and variances of scale, offset and sigma given ``k``, by quadrature of the
    joint (scale and offset in whitened coordinates, ln v outside)."""
    g = np.exp(-k * TIMES)
    design = np.stack([g, np.ones_like(g)], axis=1)
    reference = reference_variance(NOISE.alpha, NOISE.beta)
    precision = np.diag([reference / SCALE.sigma**2, reference / OFFSET.sigma**2])
    means = np.array([SCALE.mu, OFFSET.mu])
    p = precision + design.T @ design
    centre = np.linalg.solve(p, precision @ means + design.T @ observed)
    root = np.linalg.cholesky(np.linalg.inv(p))
    x, w = np.polynomial.legendre.leggauss(48)
    w0, w1 = np.meshgrid(12 * x, 12 * x, indexing="ij")
    weights = np.outer(w, w) * 144

    def moment(f):
        def section(u):
            v = math.exp(u)
            s = centre[0] + math.sqrt(v) * root[0, 0] * w0
            o = centre[1] + math.sqrt(v) * (root[1, 0] * w0 + root[1, 1] * w1)
            mean = s[..., None] * g + o[..., None]
            log = normal_logpdf(observed, mean, math.sqrt(v)).sum(axis=-1)
            log += normal_logpdf(s, SCALE.mu, SCALE.sigma * math.sqrt(v / reference))
            log += normal_logpdf(o, OFFSET.mu, OFFSET.sigma * math.sqrt(v / reference))
            log += inverse_gamma_logpdf(v, NOISE.alpha, NOISE.beta) + 2 * u
            return float(np.sum(weights * f(s, o, v) * np.exp(log + 40)))

        return integrate.quad(section, -14.0, 2.0, epsabs=0, epsrel=1e-8, limit=200)[0]

    mass = moment(lambda s, o, v: 1.0)
    result = {}
    for name, f in (
        ("y_scale", lambda s, o, v: s),
        ("y_offset", lambda s, o, v: o),
        ("y_sigma", lambda s, o, v: math.sqrt(v) + 0 * s),
    ):
        mean = moment(f) / mass
        variance = moment(lambda s, o, v, f=f, m=mean: (f(s, o, v) - m) ** 2) / mass
        result[name] = (mean, variance)
    return result


def test_recovered_draws_have_the_conditional_posterior_moments():
    observed = _data()
    model = _model(observed)
    draws = 4000
    ks = np.array([0.7, 0.9])
    idata = _posterior(np.repeat(ks[:, None], draws, axis=1))
    recover_marginalized(idata, model, random_seed=4)
    for chain, k in enumerate(ks):
        moments = _conditional_moments(observed, k)
        for name, (mean, variance) in moments.items():
            values = idata.posterior[name].values[chain]
            assert abs(values.mean() - mean) < 4 * math.sqrt(variance / draws), (name, k)
            assert values.var() == pytest.approx(variance, rel=0.09), (name, k)


def test_names_dims_seeds_and_the_linear_option():
    observed = _data(1)
    model = _model(observed, groups=np.arange(TIMES.size) % 3)
    idata = _posterior(np.full((2, 5), 0.8))
    first = recover_marginalized(idata, model, random_seed=1)
    posterior = first.posterior
    assert posterior["y_scale"].dims == ("chain", "draw", "y_scale_dim_0")
    assert posterior["y_scale"].shape == (2, 5, 3)
    assert posterior["y_offset"].dims == ("chain", "draw")
    assert posterior["y_sigma"].dims == ("chain", "draw")
    assert np.all(posterior["y_sigma"].values > 0)
    again = recover_marginalized(_posterior(np.full((2, 5), 0.8)), model, random_seed=1)
    np.testing.assert_array_equal(again.posterior["y_scale"], posterior["y_scale"])
    with model:  # the model from the context
        other = recover_marginalized(_posterior(np.full((2, 5), 0.8)), random_seed=2)
    assert not np.array_equal(other.posterior["y_scale"], posterior["y_scale"])
    # compiled once, applied to stretches of draws: the same bits as one call per stretch
    recovery = MarginalRecovery(model)
    rng = np.random.default_rng(1)
    pieces = [recovery(_posterior(np.full((2, 5), 0.8)), random_seed=rng) for _ in range(2)]
    np.testing.assert_array_equal(pieces[0].posterior["y_scale"], posterior["y_scale"])
    assert not np.array_equal(pieces[1].posterior["y_scale"], posterior["y_scale"])


def test_a_log_scaling_is_reported_as_its_value():
    observed = 1.5 * np.exp(-0.8 * TIMES)
    with pm.Model() as model:
        k = pm.LogNormal("k", 0.0, 0.5)
        marginal_normal(
            "y",
            pt.exp(-k * TIMES),
            observed,
            sigma=0.01,
            scale=NormalPrior(0.0, 1.0),
            transformation="log10",
        )
    idata = recover_marginalized(_posterior(np.full((1, 400), 0.8)), model, random_seed=0)
    # log10 s ~ Normal(log10 1.5, (0.01 / sqrt(12))^2) (the prior's pull is 1e-4 of it)
    log_scale = np.log10(idata.posterior["y_scale"].values)
    sd = 0.01 / math.sqrt(TIMES.size)
    assert abs(log_scale.mean() - math.log10(1.5)) < 4 * sd / math.sqrt(400)
    assert log_scale.std() == pytest.approx(sd, rel=0.15)


def test_errors():
    with pm.Model() as plain:
        pm.Normal("k", 0, 1)
    with pytest.raises(ValueError, match="no marginalised parameters"):
        recover_marginalized(_posterior(np.zeros((1, 2))), plain)
    model = _model(_data())
    with pytest.raises(ValueError, match=r"no draws of \['k'\]"):
        recover_marginalized(az.from_dict(posterior={"q": np.zeros((1, 2))}), model)
    with pm.Model() as clash:
        k = pm.LogNormal("k", 0.0, 0.5)
        pm.Normal("y_scale", 0, 1)
        marginal_normal("y", pt.exp(-k * TIMES), _data(), sigma=0.1, scale=SCALE)
    idata = az.from_dict(posterior={"k": np.ones((1, 2)), "y_scale": np.ones((1, 2))})
    with pytest.raises(ValueError, match="'y_scale' is also a free variable"):
        recover_marginalized(idata, clash)


@pytest.mark.slow
def test_recovered_posterior_matches_sampling_the_explicit_model():
    """Sample the marginal model and recover; sample the model with the scaling, offset and
    noise variance explicit (the same normal-inverse-gamma prior): posterior means agree
    within Monte Carlo error."""
    observed = _data(2)
    reference = reference_variance(NOISE.alpha, NOISE.beta)
    options = dict(draws=1500, tune=1000, chains=2, random_seed=5, progressbar=False)
    marginal = _model(observed)
    with marginal:
        idata_marginal = pm.sample(**options)
    recover_marginalized(idata_marginal, marginal, random_seed=6)
    with pm.Model():
        k = pm.LogNormal("k", 0.0, 0.5)
        v = pm.InverseGamma("v", NOISE.alpha, NOISE.beta)
        widen = pt.sqrt(v / reference)
        s = pm.Normal("y_scale", SCALE.mu, SCALE.sigma * widen)
        o = pm.Normal("y_offset", OFFSET.mu, OFFSET.sigma * widen)
        pm.Deterministic("y_sigma", pt.sqrt(v))
        pm.Normal("y", s * pt.exp(-k * TIMES) + o, pt.sqrt(v), observed=observed)
        idata_explicit = pm.sample(target_accept=0.95, **options)
    for name in ("k", "y_scale", "y_offset", "y_sigma"):
        a = az.summary(idata_marginal, var_names=[name])
        b = az.summary(idata_explicit, var_names=[name])
        difference = abs(float(a["mean"].iloc[0]) - float(b["mean"].iloc[0]))
        error = math.hypot(float(a["mcse_mean"].iloc[0]), float(b["mcse_mean"].iloc[0]))
        assert difference < 4 * error, (name, difference, error)
