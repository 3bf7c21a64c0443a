"""The SMC moves' number of leapfrog steps: random per particle, its mean adapted to the
expected squared jump per gradient evaluation."""

import numpy as np
import pymc as pm
import pytest

from pymc_odesens.inference import sample_smc
from pymc_odesens.inference.smc_trajectory import draw_leapfrog_steps, next_leapfrog_mean


def test_steps_are_uniform_on_one_to_twice_the_mean():
    rng = np.random.default_rng(0)
    steps = np.array([draw_leapfrog_steps(10, rng) for _ in range(20_000)])
    assert steps.min() == 1 and steps.max() == 20
    counts = np.bincount(steps, minlength=21)[1:]
    # each of the 20 values has probability 1/20: counts 1000 +- 31
    assert np.all(np.abs(counts - 1000) < 5 * np.sqrt(1000))
    assert steps.mean() == pytest.approx(10.5, abs=0.1)
    # from a mean of 1 a particle still draws 2 steps, half of the time
    ones = [draw_leapfrog_steps(1, rng) for _ in range(2000)]
    assert set(ones) == {1, 2} and abs(np.mean(ones) - 1.5) < 0.05


def _population(jump_of_steps):
    steps = np.tile(np.arange(1, 41), 4)  # the draws of L = 20
    return steps, jump_of_steps(steps.astype(float)), steps.copy()


def test_the_mean_follows_the_largest_jump_per_gradient():
    # jumps growing faster than the cost (a ridge: longer trajectories pay): the top group
    steps, jumps, cost = _population(lambda s: s**2)
    top = np.sort(steps)[-len(steps) // 4 :]
    assert next_leapfrog_mean(steps, jumps, cost, 20, 100) == round(np.median(top))
    # a jump that does not grow with the trajectory (it turns back): the bottom group,
    # but not below half of the current mean
    steps, jumps, cost = _population(lambda s: np.ones_like(s))
    bottom = np.sort(steps)[: len(steps) // 4]
    assert round(np.median(bottom)) < 10
    assert next_leapfrog_mean(steps, jumps, cost, 20, 100) == 10
    steps = np.tile(np.arange(1, 18), 8)  # the draws of L = 8.5: bottom median 2.5
    assert next_leapfrog_mean(steps, np.ones(len(steps)), steps, 9, 100) == 5  # (9 + 1) // 2
    # the most efficient length in the middle: jump ~ sin^2 of a half period of 40 steps,
    # per step largest near 15 steps: the second quarter (11 ... 20), median 15.5 -> 16
    steps, jumps, cost = _population(lambda s: np.sin(np.pi * s / 40.0) ** 2)
    assert next_leapfrog_mean(steps, jumps, cost, 20, 100) == 16
    # the cost is what was spent: trajectories stopped early by failures cost less
    steps, jumps, cost = _population(lambda s: s**2)
    assert next_leapfrog_mean(steps, jumps, cost, 20, 30) == 30  # capped at the maximum


def test_the_mean_stays_without_information():
    steps, jumps, cost = _population(lambda s: np.zeros_like(s))  # nothing accepted
    assert next_leapfrog_mean(steps, jumps, cost, 17, 100) == 17
    few = np.array([3, 5, 0, 0])  # fewer than 8 particles moved
    assert next_leapfrog_mean(few, np.ones(4), few, 17, 100) == 17


def _ridge_model():
    # a, b ~ N(0, 10^2); a + b observed with noise 0.01, a - b with noise 1: a ridge along
    # a = -b, 100 times longer than wide, which a diagonal mass matrix does not straighten
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 10.0)
        b = pm.Normal("b", 0.0, 10.0)
        pm.Normal("u", a + b, 0.01, observed=0.3)
        pm.Normal("v", a - b, 1.0, observed=-0.5)
    return model


@pytest.mark.slow  # a sampling run (30 s); the rule's unit tests above run by default
def test_on_a_ridge_the_trajectories_grow_and_the_posterior_is_right():
    fit = sample_smc(
        _ridge_model(),
        draws=100,
        runs=2,
        adapt_n_leapfrog=True,
        max_leapfrog=25,
        cores=1,
        random_seed=2,
        progressbar=False,
    )
    stats = fit.sample_stats
    beta = stats["beta"].values
    last = [row[np.isfinite(b)][-1] for row, b in zip(stats["n_leapfrog"].values, beta)]
    assert min(last) > 15  # grown from n_leapfrog = 10 in every run (at most 25)
    # the exact Gaussian posterior
    design = np.array([[1.0, 1.0], [1.0, -1.0]])
    noise = np.diag([0.01**-2, 1.0])
    precision = np.eye(2) / 100.0 + design.T @ noise @ design
    covariance = np.linalg.inv(precision)
    mean = covariance @ design.T @ noise @ np.array([0.3, -0.5])
    draws = np.column_stack([fit.posterior[v].values.ravel() for v in ("a", "b")])
    sd = np.sqrt(np.diag(covariance))
    # 200 particles of ESS at least 50: means within 4 standard errors of 50
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * sd / np.sqrt(50))
    np.testing.assert_allclose(draws.std(axis=0), sd, rtol=0.25)
