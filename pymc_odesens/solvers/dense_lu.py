"""Allocation-free dense LU factorisation with partial pivoting (numba).

Used for the Newton matrix ``I - c J_y`` of the implicit methods; one
factorisation serves every block of a block-diagonal system.
"""

from __future__ import annotations

from numba import njit

__all__ = ["lu_factor", "lu_solve"]


@njit(cache=True)
def lu_factor(a, pivots):
    """Factorise the square matrix ``a`` in place (``P a = L U``).

    Returns False when a zero pivot makes the matrix singular.
    """
    n = a.shape[0]
    for k in range(n):
        best = abs(a[k, k])
        row = k
        for i in range(k + 1, n):
            if abs(a[i, k]) > best:
                best = abs(a[i, k])
                row = i
        pivots[k] = row
        if best == 0.0:
            return False
        if row != k:
            for j in range(n):
                tmp = a[k, j]
                a[k, j] = a[row, j]
                a[row, j] = tmp
        inv = 1.0 / a[k, k]
        for i in range(k + 1, n):
            a[i, k] *= inv
            m = a[i, k]
            if m != 0.0:
                for j in range(k + 1, n):
                    a[i, j] -= m * a[k, j]
    return True


@njit(cache=True)
def lu_solve(lu, pivots, b, offset):
    """Solve ``A x = b[offset:offset+n]`` in place with the factors of :func:`lu_factor`."""
    n = lu.shape[0]
    for k in range(n):
        r = pivots[k]
        if r != k:
            tmp = b[offset + k]
            b[offset + k] = b[offset + r]
            b[offset + r] = tmp
    for i in range(n):
        s = b[offset + i]
        for j in range(i):
            s -= lu[i, j] * b[offset + j]
        b[offset + i] = s
    for i in range(n - 1, -1, -1):
        s = b[offset + i]
        for j in range(i + 1, n):
            s -= lu[i, j] * b[offset + j]
        b[offset + i] = s / lu[i, i]
