"""Load balance of a distributed log-likelihood: experiments into chunks, chunks onto workers.

The experiments are cut once into *chunks* (contiguous runs of about equal size,
:func:`experiment_chunks`): the unit a worker evaluates, keeps resident and returns a
partial log-likelihood and gradient for. The chunks never change, so neither does the sum
over them (in chunk order): the result does not depend on which worker evaluated which
chunk, on how many workers there are, or on a worker lost on the way.

Which worker evaluates which chunk does change. The first evaluations use an even split
by chunk count (:func:`even_assignment`); each worker measures the wall time of every
chunk it evaluates, and :func:`rebalanced` moves chunks from the most to the least loaded
worker while that lowers the largest load (the time of one evaluation), as Torsten's
group solvers balance by measured cost. The moves start from the current assignment, so
that few chunks move (a moved chunk is compiled on its new worker once).
"""

from __future__ import annotations

import numpy as np

__all__ = ["even_assignment", "experiment_chunks", "makespan", "rebalanced"]


def experiment_chunks(n_experiments: int, n_chunks: int) -> tuple[tuple[int, ...], ...]:
    """``n_chunks`` contiguous runs of the experiments ``0 .. n_experiments - 1``, their
    sizes differing by at most one (the larger first).

    Raises
    ------
    ValueError
        ``n_chunks`` is not between 1 and ``n_experiments``.
    """
    if isinstance(n_chunks, bool) or not isinstance(n_chunks, int | np.integer):
        raise ValueError(f"n_chunks: expected an integer, got {n_chunks!r}")
    if not 1 <= n_chunks <= n_experiments:
        raise ValueError(
            f"n_chunks: expected 1 to {n_experiments} (the number of experiments), got {n_chunks}"
        )
    edges = np.linspace(0, n_experiments, n_chunks + 1).round().astype(int)
    sizes = np.diff(edges)
    sizes = np.sort(sizes)[::-1]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    return tuple(tuple(range(int(a), int(b))) for a, b in zip(starts[:-1], starts[1:]))


def even_assignment(n_chunks: int, n_slots: int) -> np.ndarray:
    """Each chunk's slot (worker thread) when nothing is measured yet: contiguous blocks of
    chunks, their counts differing by at most one."""
    if n_slots < 1:
        raise ValueError(f"n_slots: expected at least 1, got {n_slots}")
    return (np.arange(n_chunks) * n_slots // n_chunks).astype(np.int64)


def makespan(costs: np.ndarray, owner: np.ndarray, n_slots: int) -> float:
    """The largest summed cost of one slot's chunks: the time of one evaluation."""
    loads = np.bincount(owner, weights=costs, minlength=n_slots)
    return float(loads.max(initial=0.0))


def rebalanced(costs: np.ndarray, owner: np.ndarray, n_slots: int) -> np.ndarray:
    """A new owner per chunk with a smaller :func:`makespan`, moving few chunks.

    Repeatedly moves one chunk from the most loaded slot to the least loaded one: the chunk
    whose cost is nearest half their difference among those that lower the larger of the
    two loads; stops when no move does. Owners outside ``0 .. n_slots - 1`` (a slot that
    is gone) are first given to the least loaded slots, largest chunk first.

    Parameters
    ----------
    costs : numpy.ndarray, (C,)
        Each chunk's measured cost (seconds), all finite and non-negative.
    owner : numpy.ndarray of int, (C,)
        Each chunk's slot now.
    n_slots : int

    Returns
    -------
    numpy.ndarray of int, (C,)
    """
    costs = np.asarray(costs, dtype=float)
    owner = np.array(owner, dtype=np.int64)
    loads = np.zeros(n_slots)
    orphans = []
    for c, s in enumerate(owner):
        if 0 <= s < n_slots:
            loads[s] += costs[c]
        else:
            orphans.append(c)
    for c in sorted(orphans, key=lambda c: -costs[c]):
        s = int(np.argmin(loads))
        owner[c] = s
        loads[s] += costs[c]
    for _ in range(4 * len(costs) + n_slots):
        high, low = int(np.argmax(loads)), int(np.argmin(loads))
        gap = loads[high] - loads[low]
        if gap <= 0.0:
            break
        candidates = np.flatnonzero((owner == high) & (costs > 0.0) & (costs < gap))
        if candidates.size == 0:
            break
        c = int(candidates[np.argmin(np.abs(costs[candidates] - gap / 2.0))])
        owner[c] = low
        loads[high] -= costs[c]
        loads[low] += costs[c]
    return owner
