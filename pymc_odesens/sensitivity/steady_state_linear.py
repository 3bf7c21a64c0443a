"""The linear algebra of steady states: the bordered Jacobian, its factors and solves.

A system with M linear conservation laws ``C y = T`` has a singular ``J_y``. Its steady
state solves ``G(y) = 0`` with ``G_i = f_i`` for the states ``i`` not in ``dependent`` and
``G_{dependent[r]} = C_r y - T_r``: the rows of ``f`` that the laws make redundant
(``C f = 0`` identically) are replaced by the laws. The Jacobian of ``G`` is ``J_y`` with
the rows ``dependent`` replaced by ``C``, non-singular at a regular steady state; it serves
Newton's method, the implicit-function sensitivities and their adjoint.

The matrix is equilibrated (rows, then columns scaled by their largest entry, as LAPACK's
``dgeequ``) before the dense LU of :mod:`pymc_odesens.solvers.dense_lu`, so that pivoting
and the reciprocal condition estimate do not depend on the units of states and rates.
Every solve takes the scales into account: with ``A_hat = R A K``,
``A x = b`` is ``x = K A_hat^-1 R b`` and ``A^T x = b`` is ``x = R A_hat^-T K b``.

These four functions are the interface through which a steady-state routine touches a
matrix: a sparse factorisation slots in here without changing the Newton iteration or the
sensitivities.
"""

from __future__ import annotations

from numba import njit

from pymc_odesens.solvers.dense_lu import lu_factor, lu_solve, lu_solve_transpose

__all__ = [
    "factor_bordered_jacobian",
    "solve_bordered",
    "solve_bordered_transpose",
    "reciprocal_condition",
    "MIN_RECIPROCAL_CONDITION",
]

MIN_RECIPROCAL_CONDITION = 1e-13
"""Below this estimate of ``1 / cond_1`` of the equilibrated bordered Jacobian, a steady
state counts as singular: its sensitivities are not defined by the implicit function
theorem (a rank-deficient matrix gives about 1e-16)."""


@njit(cache=True)
def factor_bordered_jacobian(jac, cons, dependent, lu, pivots, scales):
    """Assemble, equilibrate and factorise the bordered Jacobian.

    Parameters
    ----------
    jac : (N, N) ``J_y``
    cons : (M, N) conservation laws ``C``
    dependent : (M,) the row of each law
    lu : (N, N) out: the factors
    pivots : (N,) out
    scales : (2N + 1,) out: row scales ``R``, column scales ``K``, then ``||A_hat||_1``

    Returns False when the matrix has a zero row, column or pivot (singular).
    """
    n = jac.shape[0]
    for i in range(n):
        for j in range(n):
            lu[i, j] = jac[i, j]
    for r in range(dependent.size):
        row = dependent[r]
        for j in range(n):
            lu[row, j] = cons[r, j]
    for i in range(n):
        largest = 0.0
        for j in range(n):
            largest = max(largest, abs(lu[i, j]))
        if not (largest > 0.0) or largest == float("inf"):
            return False
        scales[i] = 1.0 / largest
        for j in range(n):
            lu[i, j] *= scales[i]
    norm_one = 0.0
    for j in range(n):
        largest = 0.0
        for i in range(n):
            largest = max(largest, abs(lu[i, j]))
        if not (largest > 0.0):
            return False
        scales[n + j] = 1.0 / largest
        column_sum = 0.0
        for i in range(n):
            lu[i, j] *= scales[n + j]
            column_sum += abs(lu[i, j])
        norm_one = max(norm_one, column_sum)
    scales[2 * n] = norm_one
    return lu_factor(lu, pivots)


@njit(cache=True)
def solve_bordered(lu, pivots, scales, b):
    """Solve ``A x = b`` in place (``A`` factorised by :func:`factor_bordered_jacobian`)."""
    n = lu.shape[0]
    for i in range(n):
        b[i] *= scales[i]
    lu_solve(lu, pivots, b, 0)
    for j in range(n):
        b[j] *= scales[n + j]


@njit(cache=True)
def solve_bordered_transpose(lu, pivots, scales, b):
    """Solve ``A^T x = b`` in place."""
    n = lu.shape[0]
    for j in range(n):
        b[j] *= scales[n + j]
    lu_solve_transpose(lu, pivots, b)
    for i in range(n):
        b[i] *= scales[i]


@njit(cache=True)
def reciprocal_condition(lu, pivots, scales, x, y, z):
    """Estimate of ``1 / (||A_hat||_1 ||A_hat^-1||_1)`` for the equilibrated factors.

    Hager's (1984) estimate of ``||A_hat^-1||_1`` from a few solves with the factors
    (``||A_hat||_1`` was stored in ``scales[2N]`` by :func:`factor_bordered_jacobian`);
    ``x``, ``y`` and ``z`` are work vectors of length N.
    """
    n = lu.shape[0]
    norm_one = scales[2 * n]
    if n == 0:
        return 1.0
    for i in range(n):
        x[i] = 1.0 / n
    estimate = 0.0
    for _ in range(5):
        for i in range(n):
            y[i] = x[i]
        lu_solve(lu, pivots, y, 0)
        total = 0.0
        for i in range(n):
            total += abs(y[i])
        if not (total < float("inf")):
            return 0.0
        if total <= estimate:
            break
        estimate = total
        for i in range(n):
            z[i] = 1.0 if y[i] >= 0.0 else -1.0
        lu_solve_transpose(lu, pivots, z)
        best, index, dot = -1.0, 0, 0.0
        for i in range(n):
            dot += z[i] * x[i]
            if abs(z[i]) > best:
                best, index = abs(z[i]), i
        if best <= dot:
            break
        for i in range(n):
            x[i] = 0.0
        x[index] = 1.0
    if estimate == 0.0:
        return 0.0
    return 1.0 / (norm_one * estimate)
