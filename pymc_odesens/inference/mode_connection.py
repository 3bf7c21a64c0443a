"""Optima that are one mode: the hill-valley test along the segment between them.

A multistart search groups its starts' end points by closeness
(:func:`~pymc_odesens.inference.mode_search.cluster_starts`: log-posteriors within
``objective_tolerance`` and every coordinate within ``parameter_tolerance``). On a posterior
with ridges, where a parameter combination is not identified (Fujita_SciSignal2010's optima
are ridges over decades), local maximisations stop at different points of the same ridge,
often not converged, and closeness splits one mode into several: ``smc_modes`` then weighs
them apart and ``sample_smc_modes`` runs NUTS in each, although every chain would cross the
whole ridge.

The hill-valley test (Maree, Alderliesten and Bosman, "Real-valued evolutionary multi-modal
multi-objective optimization by hill-valley clustering", GECCO 2019) asks instead whether
a valley separates two optima: the log-posterior is evaluated at ``points`` evenly spaced
interior points of the straight segment between them (the midpoint first); they are one
mode when it stays above the lower optimum's minus ``barrier`` at every point. A valley
shallower than ``barrier`` log-units does not separate modes for a sampler either (NUTS
crosses it), so ``barrier`` of about 1 suits the sampling that follows. The test can only
join: two optima joined are connected within ``barrier`` along the segment; two kept apart
may still be connected along a curved path (a curved ridge), as before the test.

Cost: at most ``points`` log-posterior evaluations (without gradient) per pair of clusters
tested, fewer where the midpoint already fails: ``C (C - 1) / 2`` pairs for ``C`` clusters
at most. Each cluster is tested against the best optimum of every group formed before it,
in rank order, and joins the first it is connected to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pymc_odesens.inference.arguments import positive_int, positive_number

__all__ = ["connected", "connected_groups"]


def _interior(points: int) -> np.ndarray:
    """``points`` evenly spaced interior fractions of a segment, the midpoint first."""
    t = np.arange(1, points + 1) / (points + 1.0)
    return t[np.argsort(np.abs(t - 0.5), kind="stable")]


def connected(
    a: tuple[np.ndarray, float],
    b: tuple[np.ndarray, float],
    log_posterior: Callable[[np.ndarray], float],
    barrier: float,
    points: int,
) -> bool:
    """Whether the log-posterior stays above ``min(a, b) - barrier`` at ``points`` interior
    points of the segment between two optima ``(x, log_posterior)`` (module docstring); a
    failed evaluation (``-inf`` or NaN) separates."""
    (xa, value_a), (xb, value_b) = a, b
    floor = min(value_a, value_b) - barrier
    for t in _interior(points):
        value = log_posterior(xa + t * (xb - xa))
        if not value >= floor:
            return False
    return True


def connected_groups(
    optima: Sequence[tuple[np.ndarray, float]],
    log_posterior: Callable[[np.ndarray], float],
    barrier: float = 1.0,
    points: int = 9,
) -> list[list[int]]:
    """Groups of ``optima`` that the hill-valley test joins.

    Parameters
    ----------
    optima : sequence of (numpy.ndarray, float)
        Each optimum's optimisation vector and log-posterior, ranked (best first: the
        best starts of ``ModeSearchResult.clusters``).
    log_posterior : callable
        ``x -> log-posterior`` in the same coordinates (``ModeObjective.log_posterior``).
    barrier : float
        Log-units below the lower of two optima that the segment between them may reach
        and still join them (> 0).
    points : int
        Interior points of each segment evaluated (>= 1).

    Returns
    -------
    list of list of int
        Positions in ``optima``, each group in rank order, groups ranked by their first:
        each optimum joins the first group whose first optimum it is connected to.

    Raises
    ------
    ValueError
        ``barrier`` is not a positive finite number or ``points`` not a positive integer.
    """
    barrier = positive_number("barrier", barrier, " of log-units")
    points = positive_int("points", points)
    groups: list[list[int]] = []
    for position, optimum in enumerate(optima):
        for group in groups:
            if connected(optima[group[0]], optimum, log_posterior, barrier, points):
                group.append(position)
                break
        else:
            groups.append([position])
    return groups
