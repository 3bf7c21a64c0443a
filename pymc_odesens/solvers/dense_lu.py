"""Allocation-free dense LU factorisation with partial pivoting (numba).

Used for the Newton matrix ``I - c J_y`` of the implicit methods; one
factorisation serves every block of a block-diagonal system.

Each routine exists for a square 2-d array (``lu_factor``, ...) and for the same matrix
stored row-major in a flat array (``flat_lu_factor``, ...: the Newton matrices' storage,
:mod:`pymc_odesens.solvers.newton_matrix`, which passes no array views in its inner
loops); both perform the same operations in the same order.
"""

from __future__ import annotations

from numba import njit

__all__ = [
    "flat_lu_factor",
    "flat_lu_solve",
    "flat_lu_solve_blocks",
    "flat_lu_solve_transpose",
    "lu_factor",
    "lu_solve",
    "lu_solve_blocks",
    "lu_solve_transpose",
]


@njit(cache=True)
def flat_lu_factor(a, n, pivots):
    """Factorise the ``n x n`` matrix stored row-major in ``a`` in place (``P a = L U``).

    Returns False when a zero pivot makes the matrix singular.
    """
    for k in range(n):
        best = abs(a[k * n + k])
        row = k
        for i in range(k + 1, n):
            if abs(a[i * n + k]) > best:
                best = abs(a[i * n + k])
                row = i
        pivots[k] = row
        if best == 0.0:
            return False
        if row != k:
            for j in range(n):
                tmp = a[k * n + j]
                a[k * n + j] = a[row * n + j]
                a[row * n + j] = tmp
        inv = 1.0 / a[k * n + k]
        for i in range(k + 1, n):
            a[i * n + k] *= inv
            m = a[i * n + k]
            if m != 0.0:
                for j in range(k + 1, n):
                    a[i * n + j] -= m * a[k * n + j]
    return True


@njit(cache=True, inline="always")
def flat_lu_solve(lu, n, pivots, b, offset):
    """Solve ``A x = b[offset:offset+n]`` in place with the factors of :func:`flat_lu_factor`."""
    for k in range(n):
        r = pivots[k]
        if r != k:
            tmp = b[offset + k]
            b[offset + k] = b[offset + r]
            b[offset + r] = tmp
    for i in range(n):
        s = b[offset + i]
        for j in range(i):
            s -= lu[i * n + j] * b[offset + j]
        b[offset + i] = s
    for i in range(n - 1, -1, -1):
        s = b[offset + i]
        for j in range(i + 1, n):
            s -= lu[i * n + j] * b[offset + j]
        b[offset + i] = s / lu[i * n + i]


@njit(cache=True)
def flat_lu_solve_transpose(lu, n, pivots, b):
    """Solve ``A^T x = b`` in place with the factors of :func:`flat_lu_factor` (``P A = L U``).

    ``A^T = U^T L^T P``: forward substitution with ``U^T``, back substitution
    with the unit ``L^T``, then the row swaps undone in reverse order.
    """
    for i in range(n):
        s = b[i]
        for j in range(i):
            s -= lu[j * n + i] * b[j]
        b[i] = s / lu[i * n + i]
    for i in range(n - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, n):
            s -= lu[j * n + i] * b[j]
        b[i] = s
    for k in range(n - 1, -1, -1):
        r = pivots[k]
        if r != k:
            tmp = b[k]
            b[k] = b[r]
            b[r] = tmp


@njit(cache=True, inline="always")
def flat_lu_solve_blocks(lu, n, pivots, b, blocks, work):
    """Solve ``A x_k = b_k`` in place for the ``blocks`` consecutive blocks of ``b``.

    ``b[k*n:(k+1)*n]`` is block ``k``. The blocks are gathered into the columns of
    ``work`` (at least ``(n, blocks)``) so that the innermost loop of the triangular
    solves runs over the blocks with unit stride; for many blocks of a small system this
    is several times faster than one :func:`flat_lu_solve` per block.
    """
    if blocks == 1:
        flat_lu_solve(lu, n, pivots, b, 0)
        return
    for k in range(blocks):
        base = k * n
        for i in range(n):
            work[i, k] = b[base + i]
    for k in range(n):
        r = pivots[k]
        if r != k:
            for c in range(blocks):
                tmp = work[k, c]
                work[k, c] = work[r, c]
                work[r, c] = tmp
    for i in range(n):
        for j in range(i):
            m = lu[i * n + j]
            if m != 0.0:
                for c in range(blocks):
                    work[i, c] -= m * work[j, c]
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            m = lu[i * n + j]
            if m != 0.0:
                for c in range(blocks):
                    work[i, c] -= m * work[j, c]
        inv = 1.0 / lu[i * n + i]
        for c in range(blocks):
            work[i, c] *= inv
    for k in range(blocks):
        base = k * n
        for i in range(n):
            b[base + i] = work[i, k]


@njit(cache=True)
def lu_factor(a, pivots):
    """Factorise the square matrix ``a`` in place (``P a = L U``).

    Returns False when a zero pivot makes the matrix singular.
    """
    return flat_lu_factor(a.ravel(), a.shape[0], pivots)


@njit(cache=True)
def lu_solve(lu, pivots, b, offset):
    """Solve ``A x = b[offset:offset+n]`` in place with the factors of :func:`lu_factor`."""
    flat_lu_solve(lu.ravel(), lu.shape[0], pivots, b, offset)


@njit(cache=True)
def lu_solve_transpose(lu, pivots, b):
    """Solve ``A^T x = b`` in place with the factors of :func:`lu_factor` (``P A = L U``)."""
    flat_lu_solve_transpose(lu.ravel(), lu.shape[0], pivots, b)


@njit(cache=True)
def lu_solve_blocks(lu, pivots, b, blocks, work):
    """Solve ``A x_k = b_k`` in place for the ``blocks`` consecutive blocks of ``b``
    (see :func:`flat_lu_solve_blocks`)."""
    flat_lu_solve_blocks(lu.ravel(), lu.shape[0], pivots, b, blocks, work)
