"""The Newton matrix I - c J, dense or sparse: same solutions, bounded storage, the choice."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens.solvers import newton_matrix as nm
from pymc_odesens.solvers.sparse_lu import SparseLuPattern, sparse_factor_sizes
from pymc_odesens.solvers.status import new_stats


def structures(n, rows, cols):
    return {
        "dense": nm.dense_structure(n, rows, cols),
        "sparse": nm._sparse_structure(n, rows, cols, SparseLuPattern(n, rows, cols)),
    }


def newton_dense(n, rows, cols, values, c):
    a = np.eye(n)
    a[rows, cols] -= c * values
    return a


def random_jacobian(rng, n, fill):
    mask = rng.random((n, n)) < fill
    rows, cols = np.nonzero(mask)
    return rows.astype(np.int64), cols.astype(np.int64), rng.normal(size=rows.size)


@pytest.mark.parametrize("c", [0.01, 1.0, 1e4])
def test_dense_and_sparse_solve_the_same_systems(c):
    rng = np.random.default_rng(11)
    n = 200
    rows, cols, values = random_jacobian(rng, n, 0.03)
    b = rng.normal(size=n)
    blocks = rng.normal(size=(5, n))
    for kind, structure in structures(n, rows, cols).items():
        assert nm.structure_kind(structure) == kind
        assert nm.structure_size(structure) == rows.size
        ints, floats = nm.new_newton_factor(structure)
        stats = new_stats()
        for trial in range(3):  # the sparse path refactorises after the first
            scaled = values * (1.0 + 0.1 * trial)
            ok, ints, floats = nm.factor_newton_matrix(structure, ints, floats, scaled, c, stats)
            assert ok
            a = newton_dense(n, rows, cols, scaled, c)
            tol = 1e-12 * np.linalg.cond(a)
            x = b.copy()
            nm.solve_newton(structure, ints, floats, x, np.zeros(n))
            np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=tol, atol=tol)
            x = b.copy()
            nm.solve_newton_transpose(structure, ints, floats, x, np.zeros(n))
            np.testing.assert_allclose(x, np.linalg.solve(a.T, b), rtol=tol, atol=tol)
            x = blocks.ravel().copy()
            nm.solve_newton_blocks(structure, ints, floats, x, 5, np.zeros((n, 5)))
            expected = np.linalg.solve(a, blocks.T).T
            np.testing.assert_allclose(x.reshape(5, n), expected, rtol=tol, atol=tol)
        assert stats.sum() > 0


def test_sparse_storage_is_never_n_by_n_and_grows_when_needed():
    rng = np.random.default_rng(12)
    n = 300
    rows, cols, values = random_jacobian(rng, n, 0.01)
    structure = nm._sparse_structure(n, rows, cols, SparseLuPattern(n, rows, cols))
    structure[nm._CAPACITY] = 1  # far too little room for L and U
    ints, floats = nm.new_newton_factor(structure)
    assert ints.size + floats.size < n * n // 10
    ok, ints2, floats2 = nm.factor_newton_matrix(structure, ints, floats, values, 50.0, new_stats())
    assert ok
    assert floats2.size > floats.size
    x = np.ones(n)
    nm.solve_newton(structure, ints2, floats2, x, np.zeros(n))
    a = newton_dense(n, rows, cols, values, 50.0)
    np.testing.assert_allclose(a @ x, np.ones(n), atol=1e-10)
    nnz_l, nnz_u, capacity = sparse_factor_sizes(ints2)
    assert max(nnz_l, nnz_u) < n * n // 2
    assert capacity <= 2 * max(nnz_l, nnz_u) + n  # room doubles only as far as needed


def test_singular_newton_matrix_is_reported_on_both_paths():
    # J = I/c makes I - c J zero on the diagonal block of the first two states
    n = 3
    rows = np.array([0, 1, 2], dtype=np.int64)
    cols = np.array([0, 1, 2], dtype=np.int64)
    values = np.array([2.0, 2.0, 1.0])
    for structure in structures(n, rows, cols).values():
        ints, floats = nm.new_newton_factor(structure)
        ok, _, _ = nm.factor_newton_matrix(structure, ints, floats, values, 0.5, new_stats())
        assert not ok


def test_auto_choice_by_size_density_and_fill():
    small = nm.SPARSE_MIN_STATES - 1
    assert nm.choose_linear_solver("auto", small, small) == "dense"
    big = 10 * nm.SPARSE_MIN_STATES
    assert nm.choose_linear_solver("auto", big, 4 * big) == "sparse"
    assert nm.choose_linear_solver("auto", big, 4 * big, fill=10 * big) == "sparse"
    assert nm.choose_linear_solver("auto", big, 4 * big, fill=big * big // 2) == "dense"
    assert nm.choose_linear_solver("auto", big, big * big // 2) == "dense"
    assert nm.choose_linear_solver("sparse", 2, 4) == "sparse"
    assert nm.choose_linear_solver("dense", big, 4 * big) == "dense"
    with pytest.raises(ValueError, match="linear_solver must be one of 'auto', 'dense', 'sparse'"):
        nm.choose_linear_solver("klu", 10, 10)


def test_full_dense_structure_is_the_dense_structure_of_every_entry():
    n = 5
    rows = np.repeat(np.arange(n), n)
    cols = np.tile(np.arange(n), n)
    np.testing.assert_array_equal(nm.full_dense_structure(n), nm.dense_structure(n, rows, cols))
    # factorised with the whole Jacobian written row by row, it solves (I - c J) x = b
    rng = np.random.default_rng(3)
    jac = rng.normal(size=(n, n))
    structure = nm.full_dense_structure(n)
    ints, floats = nm.new_newton_factor(structure)
    ok, ints, floats = nm.factor_newton_matrix(
        structure, ints, floats, jac.ravel(), 0.3, new_stats()
    )
    assert ok
    b = rng.normal(size=n)
    x = b.copy()
    nm.solve_newton(structure, ints, floats, x, np.zeros(n))
    np.testing.assert_allclose((np.eye(n) - 0.3 * jac) @ x, b, rtol=1e-12, atol=1e-12)
