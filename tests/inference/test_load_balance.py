"""Chunks of experiments and their assignment to workers by measured cost."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens.inference.load_balance import (
    even_assignment,
    experiment_chunks,
    makespan,
    rebalanced,
)


@pytest.mark.parametrize("n_experiments, n_chunks", [(10, 1), (10, 3), (10, 10), (109, 64)])
def test_chunks_are_contiguous_runs_of_about_equal_size(n_experiments, n_chunks):
    chunks = experiment_chunks(n_experiments, n_chunks)
    assert len(chunks) == n_chunks
    assert [e for chunk in chunks for e in chunk] == list(range(n_experiments))
    sizes = [len(chunk) for chunk in chunks]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)


@pytest.mark.parametrize("n_chunks", [0, 11, 2.5, True])
def test_chunk_count_is_checked(n_chunks):
    with pytest.raises(ValueError, match="n_chunks: expected"):
        experiment_chunks(10, n_chunks)


def test_even_assignment_gives_every_slot_its_share():
    owner = even_assignment(10, 3)
    assert np.bincount(owner).tolist() == [4, 3, 3]
    assert np.all(np.diff(owner) >= 0)  # contiguous blocks


def test_rebalance_moves_chunks_to_the_least_loaded_slot():
    costs = np.array([4.0, 3.0, 2.0, 1.0, 1.0, 1.0])
    owner = np.array([0, 0, 0, 1, 1, 1])  # loads 9 and 3
    new = rebalanced(costs, owner, 2)
    assert makespan(costs, owner, 2) == 9.0
    assert makespan(costs, new, 2) == 6.0  # the optimum for these costs
    assert np.sum(new != owner) == 1  # one move: the chunk of cost 3


def test_rebalance_keeps_a_balanced_assignment():
    costs = np.array([1.0, 1.0, 1.0, 1.0])
    owner = np.array([0, 1, 0, 1])
    assert np.array_equal(rebalanced(costs, owner, 2), owner)


def test_rebalance_gives_chunks_of_a_lost_slot_to_the_others():
    costs = np.array([1.0, 2.0, 3.0, 4.0])
    owner = np.array([0, 1, 2, 2])  # slot 2 is gone: 2 slots now
    new = rebalanced(costs, owner, 2)
    assert set(new.tolist()) <= {0, 1}
    assert makespan(costs, new, 2) == 5.0
