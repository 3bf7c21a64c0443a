"""Sparse LU on a static pattern: solves against dense linear algebra, pivoting on awkward
patterns, refactorisation, fill-reducing ordering, errors."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens.solvers.sparse_lu import (
    FACTOR_OK,
    FACTOR_OUT_OF_SPACE,
    FACTOR_SINGULAR,
    PIVOT_TOLERANCE,
    SparseLuPattern,
    matrix_values,
    minimum_degree_ordering,
    new_sparse_factor,
    sparse_factor_pivots,
    sparse_factor_sizes,
    sparse_lu_factor,
    sparse_lu_refactor,
    sparse_lu_solve,
    sparse_lu_solve_blocks,
    sparse_lu_solve_transpose,
)


class Factors:
    """A matrix given by its pattern and values, factorised by the module's functions."""

    def __init__(self, n, rows, cols, capacity=None):
        self.pattern = SparseLuPattern(n, rows, cols, diagonal=False)
        self.n = n
        capacity = capacity or 4 * self.pattern.fill_estimate + n
        self.ints, self.floats = new_sparse_factor(
            n, capacity, self.pattern.order, self.pattern.inverse_order, self.pattern.nnz
        )

    def values(self, entries):
        a_val = np.zeros(self.pattern.nnz)
        a_val[self.pattern.entry_position] = entries
        return a_val

    def factor(self, entries, tolerance=PIVOT_TOLERANCE):
        p = self.pattern
        return sparse_lu_factor(
            p.a_ptr, p.a_idx, self.values(entries), tolerance, self.ints, self.floats
        )

    def refactor(self, entries, tolerance=PIVOT_TOLERANCE):
        p = self.pattern
        return sparse_lu_refactor(
            p.a_ptr, p.a_idx, self.values(entries), tolerance, self.ints, self.floats
        )

    @property
    def pivots(self):
        return sparse_factor_pivots(self.ints)

    def solve(self, b):
        out = np.array(b, dtype=float)
        sparse_lu_solve(self.ints, self.floats, out, 0, np.zeros(self.n))
        return out

    def solve_transpose(self, b):
        out = np.array(b, dtype=float)
        sparse_lu_solve_transpose(self.ints, self.floats, out, np.zeros(self.n))
        return out

    def solve_blocks(self, b):
        out = np.ascontiguousarray(b, dtype=float).ravel().copy()
        blocks = b.shape[0]
        sparse_lu_solve_blocks(self.ints, self.floats, out, blocks, np.zeros((self.n, blocks)))
        return out.reshape(b.shape)


def dense(n, rows, cols, entries):
    a = np.zeros((n, n))
    a[rows, cols] = entries
    return a


def random_pattern(rng, n, fill, diagonal=True):
    mask = rng.random((n, n)) < fill
    if diagonal:
        mask |= np.eye(n, dtype=bool)
    rows, cols = np.nonzero(mask)
    return rows.astype(np.int64), cols.astype(np.int64)


def assert_solves(f, a, rng):
    n = a.shape[0]
    b = rng.normal(size=n)
    scale = np.linalg.norm(a, 1) * np.linalg.norm(np.linalg.solve(a, b), np.inf)
    assert np.abs(a @ f.solve(b) - b).max() < 1e-13 * scale
    assert np.abs(a.T @ f.solve_transpose(b) - b).max() < 1e-13 * scale
    blocks = rng.normal(size=(4, n))
    x = f.solve_blocks(blocks)
    assert np.abs(a @ x.T - blocks.T).max() < 1e-13 * scale * 4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_sparse_matrices_of_size_200(seed):
    rng = np.random.default_rng(seed)
    n = 200
    rows, cols = random_pattern(rng, n, 0.03)
    entries = rng.normal(size=rows.size) + 4.0 * (rows == cols)
    f = Factors(n, rows, cols)
    assert f.factor(entries) == FACTOR_OK
    a = dense(n, rows, cols, entries)
    assert_solves(f, a, rng)
    # the same pattern with other values: refactorisation with the old pivots
    entries2 = entries * rng.uniform(0.5, 1.5, size=entries.size)
    assert f.refactor(entries2) == FACTOR_OK
    assert_solves(f, dense(n, rows, cols, entries2), rng)


def test_zero_diagonal_needs_row_exchanges():
    """A structurally zero diagonal (a permuted diagonal plus a few couplings): every pivot
    comes from another row, and solves are still exact."""
    rng = np.random.default_rng(3)
    n = 200
    perm = rng.permutation(n)
    while np.any(perm == np.arange(n)):
        perm = rng.permutation(n)
    rows = np.arange(n)
    cols = perm
    extra = rng.integers(0, n, size=(300, 2))
    extra = extra[extra[:, 0] != extra[:, 1]]
    keys = np.unique(np.concatenate([rows * n + cols, extra[:, 0] * n + extra[:, 1]]))
    rows, cols = keys // n, keys % n
    assert not np.any(rows == cols)
    entries = rng.normal(size=rows.size)
    entries[np.isin(keys, np.arange(n) * n + perm)] += 5.0
    f = Factors(n, rows, cols)
    assert f.factor(entries) == FACTOR_OK
    assert np.any(f.pivots != np.arange(n))  # rows were exchanged
    assert_solves(f, dense(n, rows, cols, entries), rng)


def test_tiny_diagonal_is_not_taken_as_pivot():
    """Numerically awkward: a 2x2 rotation block [[eps, 1], [1, eps]] per pair. Diagonal pivots
    would divide by eps (growth 1/eps); threshold pivoting exchanges the rows."""
    n = 100
    eps = 1e-14
    rows, cols, entries = [], [], []
    for k in range(0, n, 2):
        rows += [k, k, k + 1, k + 1]
        cols += [k, k + 1, k, k + 1]
        entries += [eps, 1.0, 1.0, eps]
    rows, cols, entries = np.array(rows), np.array(cols), np.array(entries)
    f = Factors(n, rows, cols)
    assert f.factor(entries) == FACTOR_OK
    a = dense(n, rows, cols, entries)
    b = np.arange(n, dtype=float)
    np.testing.assert_allclose(f.solve(b), np.linalg.solve(a, b), rtol=1e-14, atol=1e-14)
    # with diagonal pivots forced (tolerance 0 keeps the diagonal), the growth shows
    forced = Factors(n, rows, cols)
    assert forced.factor(entries, tolerance=0.0) == FACTOR_OK
    assert np.abs(forced.floats).max() > 1e13


def test_refactorisation_refuses_a_pivot_that_became_too_small():
    rng = np.random.default_rng(4)
    n = 50
    rows, cols = random_pattern(rng, n, 0.1)
    entries = rng.normal(size=rows.size) + 10.0 * (rows == cols)
    f = Factors(n, rows, cols)
    assert f.factor(entries) == FACTOR_OK
    # the diagonal pivots of the first factorisation are now tiny: refactorisation must
    # report it, and a new factorisation with pivoting succeeds
    entries2 = entries - 10.0 * (rows == cols) + 1e-12 * (rows == cols)
    a2 = dense(n, rows, cols, entries2)
    if abs(np.linalg.det(a2)) > 0:
        assert f.refactor(entries2) == FACTOR_SINGULAR
        assert f.factor(entries2) == FACTOR_OK
        assert_solves(f, a2, rng)


def test_singular_matrix_is_reported():
    n = 3
    rows = np.array([0, 0, 1, 1, 2])
    cols = np.array([0, 1, 0, 1, 2])
    entries = np.array([1.0, 2.0, 2.0, 4.0, 1.0])  # rows 0 and 1 are proportional
    assert np.linalg.matrix_rank(dense(n, rows, cols, entries)) < n
    assert Factors(n, rows, cols).factor(entries) == FACTOR_SINGULAR


def test_too_little_room_is_reported_not_overrun():
    rng = np.random.default_rng(5)
    n = 40
    rows, cols = random_pattern(rng, n, 0.2)
    entries = rng.normal(size=rows.size) + 3.0 * (rows == cols)
    small = Factors(n, rows, cols, capacity=n)
    assert small.factor(entries) == FACTOR_OUT_OF_SPACE
    _, _, capacity = sparse_factor_sizes(small.ints)
    work = small.floats[2 * capacity : 2 * capacity + n]
    assert np.all(work == 0.0)  # work space left clean for the retry
    assert matrix_values(small.ints, small.floats).size == small.pattern.nnz
    assert Factors(n, rows, cols).factor(entries) == FACTOR_OK


def test_minimum_degree_puts_a_hub_last():
    """An arrow matrix (one row and column coupled to every other) fills completely when the
    hub is eliminated first; minimum degree eliminates it last (of the last two, which then
    both have degree one), with no fill at all."""
    n = 30
    hub = 0
    rows = np.concatenate([np.arange(n), np.full(n - 1, hub), np.arange(1, n)])
    cols = np.concatenate([np.arange(n), np.arange(1, n), np.full(n - 1, hub)])
    order, fill = minimum_degree_ordering(n, rows, cols)
    assert sorted(order.tolist()) == list(range(n))
    assert hub in order[-2:]
    assert fill == 2 * (n - 1) + n  # L and U hold the arrow and the diagonal only


def test_pattern_errors_name_the_problem():
    with pytest.raises(ValueError, match="duplicate entries"):
        SparseLuPattern(3, [0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"lie in \[0, 3\)"):
        SparseLuPattern(3, [0, 3], [1, 1])
    with pytest.raises(ValueError, match="same length"):
        SparseLuPattern(3, [0, 1], [1])
