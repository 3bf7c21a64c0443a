"""Adjoints of the multistep building blocks (re-sampling of the difference table, its
update after a step, the transposed LU solve): ``<A x, y> = <x, A^T y>`` to rounding."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens.solvers.dense_lu import lu_factor, lu_solve, lu_solve_transpose
from pymc_odesens.solvers.difference_table import (
    change_step_size,
    change_step_size_adjoint,
    update_after_step,
    update_after_step_adjoint,
)

ROWS, N = 8, 3


def _work():
    return [np.empty((ROWS, ROWS)) for _ in range(3)] + [np.empty((ROWS, N))]


@pytest.mark.parametrize("order", [1, 2, 3, 5])
@pytest.mark.parametrize("factor", [0.25, 0.7, 2.5])
def test_change_step_size_adjoint(order, factor):
    rng = np.random.default_rng(order)
    x, y = rng.standard_normal((2, ROWS, N))
    ax = x.copy()
    change_step_size(ax, order, factor, *_work())
    aty = y.copy()
    change_step_size_adjoint(aty, order, factor, *_work())
    assert not np.allclose(ax, x)  # the map does something
    np.testing.assert_allclose(np.sum(ax * y), np.sum(x * aty), rtol=1e-12)


@pytest.mark.parametrize("order", [1, 2, 4, 5])
def test_update_after_step_adjoint(order):
    """The map (table, d) -> table' and its adjoint table'_bar -> (table_bar, d_bar)."""
    rng = np.random.default_rng(10 + order)
    table, table_bar = rng.standard_normal((2, ROWS, N))
    d = rng.standard_normal(N)
    new = table.copy()
    update_after_step(new, order, d)
    back = table_bar.copy()
    d_bar = np.empty(N)
    update_after_step_adjoint(back, order, d_bar)
    np.testing.assert_allclose(
        np.sum(new * table_bar), np.sum(table * back) + d @ d_bar, rtol=1e-12
    )


@pytest.mark.parametrize("seed", range(4))
def test_lu_solve_transpose(seed):
    rng = np.random.default_rng(seed)
    n = 7
    a = rng.standard_normal((n, n))
    a[0, 0] = 0.0  # forces a pivot
    lu, pivots = a.copy(), np.empty(n, dtype=np.int64)
    assert lu_factor(lu, pivots)
    b = rng.standard_normal(n)
    x = b.copy()
    lu_solve_transpose(lu, pivots, x)
    np.testing.assert_allclose(a.T @ x, b, rtol=0, atol=1e-12 * np.abs(b).max() * n)
    z = b.copy()
    lu_solve(lu, pivots, z, 0)
    np.testing.assert_allclose(a @ z, b, rtol=0, atol=1e-12 * np.abs(b).max() * n)
