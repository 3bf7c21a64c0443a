"""The HMC moves' trajectory length in tempered SMC, adapted from the particles' jumps.

A fixed number of leapfrog steps fits one stage and not the next: at the hot stages the
target is broad and a few steps cross it, near ``beta = 1`` a long ridge may need many.
With ``adapt_n_leapfrog=True`` (:func:`pymc_odesens.inference.sample_smc`) each particle's
move takes a number of leapfrog steps drawn uniformly from ``1 ... 2 L`` (about ``L`` on
average, :func:`draw_leapfrog_steps`), from the particle's own random stream. After each
move the particles' squared jumps, in the population's standard deviations
(:meth:`~pymc_odesens.inference.smc_mass_matrix.PopulationMetric.squared_distance`; 0 for a
rejected move), are grouped by their number of steps into four quartiles, and the next
``L`` is the median number of steps of the group with the largest expected squared jump
per gradient evaluation (:func:`next_leapfrog_mean`): the criterion of Buchholz, Chopin and
Jacob (2021, "Adaptive tuning of Hamiltonian Monte Carlo within sequential Monte Carlo",
Bayesian Analysis 16:745). ``L`` can thus grow by up to about 3/4 per move, or shrink by up
to one half, and stays within ``1 ... max_leapfrog``; from ``L = 1`` the draws still reach
2 steps, so it can grow again. A move whose mean acceptance is below half its target (the
first move of a stage, whose step size was adapted to the previous, wider target, rejects
most long trajectories) leaves ``L`` as it is: its jumps measure the step size, not the
length. The random length also keeps a fixed length from hitting a period of the
dynamics.

Measured on Boehm_JProteomeRes2014 (4 runs of 100 particles, benchmarks/README.md), the
adaptation reached means of 4 to 45 steps and twice the wall time of 10 fixed steps,
with the same evidence error: it is off by default.

Each move leaves the tempered target invariant whatever its number of steps (drawn
independently of the position), so the adaptation changes the cost and the mixing, never
the target.
"""

from __future__ import annotations

import numpy as np

__all__ = ["draw_leapfrog_steps", "next_leapfrog_mean"]

GROUPS = 4
"""The particles are grouped by their number of steps into this many quantile groups."""


def draw_leapfrog_steps(mean: int, rng: np.random.Generator) -> int:
    """A number of leapfrog steps, uniform on ``1 ... 2 mean`` (``mean + 1/2`` on average)."""
    return int(rng.integers(1, 2 * int(mean) + 1))


def next_leapfrog_mean(
    steps: np.ndarray,
    squared_jumps: np.ndarray,
    gradient_evaluations: np.ndarray,
    current: int,
    maximum: int,
) -> int:
    """The mean number of leapfrog steps for the next move (module docstring).

    Parameters
    ----------
    steps : numpy.ndarray
        Each particle's number of leapfrog steps in this move (0: not moved, left out).
    squared_jumps : numpy.ndarray
        Each particle's squared jump (0 for a rejected move).
    gradient_evaluations : numpy.ndarray
        What each particle's move cost (fewer than ``steps`` when its trajectory stopped
        early at a failed solve or a divergence).
    current : int
        This move's mean, kept when no move was accepted or too few particles moved; the
        next one is at least half of it.
    maximum : int
        The largest mean allowed.
    """
    steps, jumps = np.asarray(steps), np.asarray(squared_jumps)
    costs = np.asarray(gradient_evaluations)
    moved = np.flatnonzero(steps > 0)
    if len(moved) < 2 * GROUPS or not np.any(jumps[moved] > 0):
        return int(current)
    order = moved[np.argsort(steps[moved], kind="stable")]
    best, best_median = -1.0, int(current)
    for group in np.array_split(order, GROUPS):
        cost = float(np.sum(costs[group]))
        if cost <= 0.0:
            continue
        efficiency = float(np.sum(jumps[group])) / cost
        if efficiency > best:
            best, best_median = efficiency, int(round(float(np.median(steps[group]))))
    return int(min(max(best_median, (int(current) + 1) // 2, 1), maximum))
