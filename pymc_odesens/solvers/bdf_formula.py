"""Backward differentiation formulas (orders 1–5) on a difference table of ``y``.

``table[j] = nabla^j y_n``. Predictor ``y_pred = sum_{j<=q} table[j]``; the
corrector solves ``y = y_pred + d`` with ``d = c f(y) - psi``,
``c = h / alpha_q``, ``psi = sum_{1<=j<=q} gamma_j table[j] / alpha_q``
(``gamma_j = sum_{m<=j} 1/m``, ``alpha = gamma``); ``d = nabla^{q+1} y_{n+1}``
and the local error is ``d / (q + 1)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pymc_odesens.solvers.difference_table import update_after_step, update_after_step_adjoint

MAX_ORDER = 5
_K = np.arange(1, MAX_ORDER + 1)
GAMMA = np.concatenate((np.zeros(1), np.cumsum(1.0 / _K)))
ALPHA = GAMMA.copy()
ERROR_CONST = 1.0 / np.arange(1, MAX_ORDER + 3)


@njit(cache=True)
def initialise(table, y0, f0, h):
    """Order-1 table from the initial state and slope."""
    for i in range(y0.size):
        table[0, i] = y0[i]
        table[1, i] = h * f0[i]


@njit(cache=True)
def predict(table, order, h, y_cur, y_pred, psi):
    """Fill ``y_pred`` and ``psi``; return ``c``."""
    n = y_pred.size
    alpha = ALPHA[order]
    for i in range(n):
        s = 0.0
        for j in range(order + 1):
            s += table[j, i]
        y_pred[i] = s
        s = 0.0
        for j in range(1, order + 1):
            s += GAMMA[j] * table[j, i]
        psi[i] = s / alpha
    return h / alpha


@njit(cache=True)
def predict_adjoint(table_bar, order, h, y_cur_bar, y_pred_bar, psi_bar):
    """Adjoint of :func:`predict`: add the cotangents of ``y_pred`` and ``psi`` to the table's."""
    n = y_pred_bar.size
    alpha = ALPHA[order]
    for i in range(n):
        table_bar[0, i] += y_pred_bar[i]
    for j in range(1, order + 1):
        k = GAMMA[j] / alpha
        for i in range(n):
            table_bar[j, i] += y_pred_bar[i] + k * psi_bar[i]


@njit(cache=True)
def accept_adjoint(table_bar, order, c, d_bar):
    """Adjoint of :func:`accept`: the table's cotangent before the step, and ``d``'s."""
    update_after_step_adjoint(table_bar, order, d_bar)


@njit(cache=True)
def error_scale(order):
    """Local error = error_scale * d."""
    return ERROR_CONST[order]


@njit(cache=True)
def accept(table, order, d, c, work):
    """Append the accepted point to the table."""
    update_after_step(table, order, d)


@njit(cache=True)
def neighbour_error_vector(table, order, h, which, out):
    """Local error estimate at order ``order - 1`` (which=-1) or ``order + 1`` (which=+1)."""
    n = out.size
    if which < 0:
        k = ERROR_CONST[order - 1]
        for i in range(n):
            out[i] = k * table[order, i]
    else:
        k = ERROR_CONST[order + 1]
        for i in range(n):
            out[i] = k * table[order + 2, i]


@njit(cache=True)
def dense_output(table, order, t_new, h, y_new, t_out, poly, out):
    """Interpolating polynomial through the last ``order + 1`` points."""
    n = out.size
    for i in range(n):
        out[i] = table[0, i]
    prod = 1.0
    for j in range(1, order + 1):
        prod *= (t_out - (t_new - (j - 1) * h)) / (h * j)
        for i in range(n):
            out[i] += table[j, i] * prod
