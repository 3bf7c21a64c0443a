"""The multistart's modes weighed by their Laplace masses, and chain starts drawn from them."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy.stats import multivariate_normal, norm

from pymc_odesens.inference.laplace_mixture import (
    LaplaceMixture,
    laplace_log_mass,
    laplace_mixture,
)
from pymc_odesens.inference.laplace_start import laplace_approximation
from tests.inference.test_laplace_start import _starts
from tests.inference.test_mode_metric import PRIOR_SD, SIGMA, A, Y, _linear_model

# two separated Gaussian peaks of a flat-prior density: masses W, centres, widths
W = (0.3, 0.7)
CENTRES = (-6.0, 5.0)
WIDTHS = (0.4, 1.3)


def _two_peaks() -> pm.Model:
    with pm.Model() as model:
        x = pm.Flat("x")
        peaks = [
            np.log(w) + pm.logp(pm.Normal.dist(c, s), x) for w, c, s in zip(W, CENTRES, WIDTHS)
        ]
        pm.Potential("peaks", pt.logsumexp(pt.stack(peaks)))
    return model


def test_the_laplace_mass_of_a_gaussian_posterior_is_its_exact_evidence():
    model = _linear_model()
    laplace = laplace_approximation(model, {"a": np.zeros(2), "b": np.array(0.0)})
    covariance = PRIOR_SD**2 * A @ A.T + SIGMA**2 * np.eye(len(Y))
    exact = multivariate_normal(np.zeros(len(Y)), covariance).logpdf(Y)
    assert laplace_log_mass(laplace) == pytest.approx(exact, abs=1e-6)
    mixture, failures = laplace_mixture(model, [{"a": np.zeros(2), "b": np.array(0.0)}])
    assert failures == {} and mixture.log_evidence == pytest.approx(exact, abs=1e-6)
    np.testing.assert_allclose(mixture.weights, [1.0])


def test_separated_peaks_are_weighed_by_their_masses_not_their_heights():
    # the narrow peak is higher (0.3 / 0.4 > 0.7 / 1.3) but holds less mass
    model = _two_peaks()
    heights = [w / s for w, s in zip(W, WIDTHS)]
    assert heights[0] > heights[1]
    starts = [{"x": np.array(-5.0)}, {"x": np.array(4.0)}, {"x": np.array(6.5)}]
    mixture, failures = laplace_mixture(model, starts)
    assert failures == {}
    assert len(mixture.components) == 2
    # the two starts near 5 climbed to one mode: joined, heaviest first
    assert mixture.sources == ((1, 2), (0,))
    assert [mixture.component_of(i) for i in range(4)] == [1, 0, 0, -1]
    np.testing.assert_allclose(mixture.weights, [W[1], W[0]], atol=1e-8)
    assert mixture.log_evidence == pytest.approx(0.0, abs=1e-8)  # W sums to 1
    np.testing.assert_allclose(mixture.heaviest.mode.vector, [CENTRES[1]], atol=1e-5)
    np.testing.assert_allclose(mixture.heaviest.covariance, [[WIDTHS[1] ** 2]], rtol=1e-4)


def test_chain_starts_are_draws_of_the_mixture():
    model = _two_peaks()
    starts = [{"x": np.array(-5.0)}, {"x": np.array(4.0)}]
    mixture, _ = laplace_mixture(model, starts)
    n = 2000
    draws = _starts(model, mixture.start_values(), range(n), transformed=True)[:, 0]
    heavy = draws > 0
    # the share in each peak: the weights, within 4 binomial standard errors
    assert abs(heavy.mean() - W[1]) < 4 * np.sqrt(W[1] * W[0] / n)
    for mask, centre, width in ((heavy, CENTRES[1], WIDTHS[1]), (~heavy, CENTRES[0], WIDTHS[0])):
        part = draws[mask]
        assert abs(part.mean() - centre) < 5 * width / np.sqrt(mask.sum())
        assert part.std() == pytest.approx(width, rel=0.1)
    # and the same mixture in whitened coordinates x = m + L z
    mean, cholesky = np.array([1.0]), np.array([[2.0]])
    z = pm.draw(mixture.whitened_start(mean, cholesky), draws=n, random_seed=2)
    x = (mean + z @ cholesky.T)[:, 0]
    assert abs((x > 0).mean() - W[1]) < 4 * np.sqrt(W[1] * W[0] / n)
    assert x[x > 0].std() == pytest.approx(WIDTHS[1], rel=0.1)
    assert x[x < 0].mean() == pytest.approx(CENTRES[0], abs=5 * WIDTHS[0] / np.sqrt(n * W[0]))


def test_a_mode_without_an_approximation_is_reported_and_the_first_one_raises():
    # a Gaussian peak in (x, y) at x = -6, and one at x = 5 that does not depend on y:
    # flat along y there (the negative Hessian is singular), so that mode has no mass
    with pm.Model() as model:
        x, y = pm.Flat("x"), pm.Flat("y")
        peak = pm.logp(pm.Normal.dist(CENTRES[0], WIDTHS[0]), x) + pm.logp(
            pm.Normal.dist(0.0, 1.0), y
        )
        ridge = pm.logp(pm.Normal.dist(CENTRES[1], WIDTHS[1]), x)
        pm.Potential("peaks", pt.logsumexp(pt.stack([peak, ridge])))
    starts = [{"x": np.array(-5.0), "y": np.array(0.5)}, {"x": np.array(4.0), "y": np.array(2.0)}]
    mixture, failures = laplace_mixture(model, starts)
    assert list(failures) == [1]
    assert failures[1].startswith("finite-differences: the negative Hessian")
    assert "eigenvalues that are not positive" in failures[1]
    np.testing.assert_allclose(mixture.weights, [1.0])
    assert mixture.log_evidence == pytest.approx(0.0, abs=1e-6)  # the peak's own mass
    assert [mixture.component_of(i) for i in range(2)] == [0, -1]
    with pytest.raises(ValueError, match=r"no Laplace approximation at the first start \("):
        laplace_mixture(model, starts[::-1])


def test_a_flat_direction_has_no_laplace_mass():
    with pm.Model() as model:
        pm.Flat("free")
        x = pm.Normal("x", 0.0, 1.0)
        pm.Normal("y", x, 1.0, observed=norm.rvs(size=3, random_state=1))
    with pytest.raises(ValueError, match="eigenvalues that are not positive"):
        laplace_mixture(model, [{"free": np.array(0.0), "x": np.array(0.0)}])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"starts": []}, "starts: expected at least one start"),
        ({"hessians": ()}, "hessians: expected at least one of"),
        ({"same_mode": 0.0}, "same_mode: expected a positive distance, got 0.0"),
    ],
)
def test_arguments_are_refused_by_name(kwargs, message):
    arguments = {"starts": [{"x": np.array(-5.0)}], **kwargs}
    with pytest.raises(ValueError, match=message):
        laplace_mixture(_two_peaks(), **arguments)


def test_whitened_start_checks_its_shapes():
    mixture, _ = laplace_mixture(_two_peaks(), [{"x": np.array(-5.0)}])
    assert isinstance(mixture, LaplaceMixture)
    with pytest.raises(ValueError, match=r"mean, cholesky: expected shapes \(1,\) and \(1, 1\)"):
        mixture.whitened_start(np.zeros(2), np.eye(2))


def test_nutpie_chains_start_in_every_mode_that_holds_weight():
    # two equal peaks 11 sds apart: chains cannot cross, so each stays where it started
    from pymc_odesens.inference import sample_until_converged

    with pm.Model() as model:
        x = pm.Flat("x")
        peaks = [pm.logp(pm.Normal.dist(c, 1.0), x) for c in (-6.0, 5.0)]
        pm.Potential("peaks", pt.logsumexp(pt.stack(peaks)))
    mixture, _ = laplace_mixture(model, [{"x": np.array(-5.0)}, {"x": np.array(4.0)}])
    np.testing.assert_allclose(mixture.weights, [0.5, 0.5], atol=1e-8)
    idata, outcome = sample_until_converged(
        model,
        var_names=["x"],
        draws=50,
        tune=50,
        chains=6,
        max_draws=50,
        random_seed=3,
        whiten=mixture,
        progressbar=False,
    )
    sides = np.sign(idata.posterior["x"].values)  # (chain, draw)
    assert np.all(sides == sides[:, :1])  # every chain in one peak throughout
    assert set(sides[:, 0]) == {-1.0, 1.0}  # and both peaks have chains
    assert not outcome.converged and outcome.checks.rhat_max > 1.1  # R-hat says so (1.40)
    with pytest.raises(TypeError, match="whiten: expected a LaplaceApproximation or"):
        sample_until_converged(model, var_names=["x"], whiten={"x": 0.0})
