"""Backward-difference tables on an equally spaced grid, and their change of step size.

Both multistep methods keep the history of the solution as backward differences
``D[j] = nabla^j x_n`` of equally spaced values (``x = y`` for BDF, ``x = f``
for Adams). A new step size ``h' = r h`` re-samples the interpolating polynomial
on the new grid: ``D[:q+1] <- (R(r) U)^T D[:q+1]`` with
``R(r)[i, j] = prod_{m=1..i} (m - 1 - r j) / m`` and ``U = R(1)`` (Shampine &
Reichelt's fixed-leading-coefficient form of variable step size).
"""

from __future__ import annotations

from numba import njit

__all__ = [
    "change_step_size",
    "change_step_size_adjoint",
    "update_after_step",
    "update_after_step_adjoint",
]


@njit(cache=True)
def _fill_r(order, factor, out):
    for j in range(order + 1):
        out[0, j] = 1.0
    for i in range(1, order + 1):
        out[i, 0] = 0.0
        for j in range(1, order + 1):
            out[i, j] = out[i - 1, j] * (i - 1 - factor * j) / i


@njit(cache=True)
def _fill_resample_matrix(order, factor, r_mat, u_mat, ru_mat):
    """``ru_mat[:q+1, :q+1] <- R(factor) U``."""
    q = order + 1
    _fill_r(order, factor, r_mat)
    _fill_r(order, 1.0, u_mat)
    for i in range(q):
        for j in range(q):
            s = 0.0
            for m in range(q):
                s += r_mat[i, m] * u_mat[m, j]
            ru_mat[i, j] = s


@njit(cache=True)
def _apply_resample(table, order, ru_mat, transpose, tmp):
    """``table[:q+1] <- M table[:q+1]`` with ``M = (RU)^T``, or ``M = RU`` if ``transpose``."""
    q = order + 1
    n = table.shape[1]
    for j in range(q):
        for k in range(n):
            s = 0.0
            for i in range(q):
                m = ru_mat[j, i] if transpose else ru_mat[i, j]
                s += m * table[i, k]
            tmp[j, k] = s
    for j in range(q):
        for k in range(n):
            table[j, k] = tmp[j, k]


@njit(cache=True)
def change_step_size(table, order, factor, r_mat, u_mat, ru_mat, tmp):
    """Re-sample the first ``order + 1`` rows of ``table`` for a step ``factor`` times larger.

    ``r_mat``, ``u_mat``, ``ru_mat`` are work arrays of at least
    ``(order+1, order+1)``; ``tmp`` of at least ``(order+1, n)``.
    """
    if factor == 1.0:
        return
    _fill_resample_matrix(order, factor, r_mat, u_mat, ru_mat)
    _apply_resample(table, order, ru_mat, False, tmp)


@njit(cache=True)
def change_step_size_adjoint(table_bar, order, factor, r_mat, u_mat, ru_mat, tmp):
    """Adjoint of :func:`change_step_size`: map the cotangent of the re-sampled table back.

    ``change_step_size`` is the linear map ``D <- (RU)^T D`` on rows ``0..order``;
    its adjoint is ``D_bar <- RU D_bar`` on the same rows (the others pass through).
    """
    if factor == 1.0:
        return
    _fill_resample_matrix(order, factor, r_mat, u_mat, ru_mat)
    _apply_resample(table_bar, order, ru_mat, True, tmp)


@njit(cache=True)
def update_after_step(table, order, d):
    """Append a new point to the table, given its highest difference ``d``.

    Before: ``table[j] = nabla^j x_n`` for ``j <= order + 1``. ``d`` is
    ``nabla^{order+1} x_{n+1}`` (BDF) resp. ``nabla^{order} x_{n+1}`` (Adams,
    called with ``order - 1``). After: ``table[j] = nabla^j x_{n+1}`` for
    ``j <= order + 2``, using ``nabla^{j+1} x_{n+1} = nabla^j x_{n+1} - nabla^j x_n``.
    """
    n = table.shape[1]
    for k in range(n):
        table[order + 2, k] = d[k] - table[order + 1, k]
        table[order + 1, k] = d[k]
    for i in range(order, -1, -1):
        for k in range(n):
            table[i, k] += table[i + 1, k]


@njit(cache=True)
def update_after_step_adjoint(table_bar, order, d_bar):
    """Adjoint of :func:`update_after_step`: cotangent of the table before it, and of ``d``.

    ``table_bar`` holds the cotangent of the table after the update and is
    overwritten with the cotangent of the table before it; ``d_bar`` receives
    (is overwritten with) the cotangent of ``d``.
    """
    n = table_bar.shape[1]
    # the forward pass ran table[i] += table[i + 1] for i = order .. 0, in that order
    for i in range(order + 1):
        for k in range(n):
            table_bar[i + 1, k] += table_bar[i, k]
    for k in range(n):
        # table[order + 1] = d, after table[order + 2] = d - table[order + 1] (old)
        d_bar[k] = table_bar[order + 1, k] + table_bar[order + 2, k]
        table_bar[order + 1, k] = -table_bar[order + 2, k]
        table_bar[order + 2, k] = 0.0
