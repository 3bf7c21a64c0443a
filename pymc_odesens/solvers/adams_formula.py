"""Adams–Moulton formulas (orders 1–12) on a difference table of ``f``.

``table[j] = nabla^j f_n``. The Adams–Bashforth predictor of order q is
``y_pred = y_n + h sum_{j<q} gamma_j table[j]``; the Adams–Moulton corrector
of order q is then ``y = y_pred + h gamma_{q-1} (f(y) - f_e)`` with the
extrapolated slope ``f_e = sum_{j<q} table[j]`` (so ``c = h gamma_{q-1}``,
``psi = c f_e``), and ``(f(y) - f_e) = nabla^q f_{n+1}``. The local error of
AM_q is ``h gamma*_q nabla^q f_{n+1} = (gamma*_q / gamma_{q-1}) d``.

``gamma_j`` (Adams–Bashforth) and ``gamma*_j`` (Adams–Moulton) are the
coefficients of the backward-difference forms, from their recurrences
``sum_{i<=m} gamma_i / (m + 1 - i) = 1`` and
``sum_{i<=m} gamma*_i / (m + 1 - i) = 0`` (m >= 1, ``gamma*_0 = 1``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pymc_odesens.solvers.difference_table import update_after_step

MAX_ORDER = 12


def _coefficients(count: int, rhs_value: float) -> np.ndarray:
    g = np.zeros(count)
    g[0] = 1.0
    for m in range(1, count):
        g[m] = rhs_value - sum(g[i] / (m + 1 - i) for i in range(m))
    return g


GAMMA = _coefficients(MAX_ORDER + 2, 1.0)  # Adams–Bashforth: 1, 1/2, 5/12, 3/8, ...
GAMMA_STAR = _coefficients(MAX_ORDER + 2, 0.0)  # Adams–Moulton: 1, -1/2, -1/12, -1/24, ...


@njit(cache=True)
def initialise(table, y0, f0, h):
    """Order-1 table: the initial slope."""
    for i in range(y0.size):
        table[0, i] = f0[i]


@njit(cache=True)
def predict(table, order, h, y_cur, y_pred, psi):
    """Fill ``y_pred`` and ``psi``; return ``c``."""
    n = y_pred.size
    c = h * GAMMA[order - 1]
    for i in range(n):
        s = 0.0
        fe = 0.0
        for j in range(order):
            s += GAMMA[j] * table[j, i]
            fe += table[j, i]
        y_pred[i] = y_cur[i] + h * s
        psi[i] = c * fe
    return c


@njit(cache=True)
def error_scale(order):
    """Local error = error_scale * d."""
    return abs(GAMMA_STAR[order] / GAMMA[order - 1])


@njit(cache=True)
def accept(table, order, d, c, work):
    """Append the accepted slope: ``nabla^q f_{n+1} = d / c``."""
    for i in range(d.size):
        work[i] = d[i] / c
    update_after_step(table, order - 1, work)


@njit(cache=True)
def neighbour_error_vector(table, order, h, which, out):
    """Local error estimate at order ``order - 1`` (which=-1) or ``order + 1`` (which=+1)."""
    n = out.size
    q = order - 1 if which < 0 else order + 1
    k = h * abs(GAMMA_STAR[q])
    for i in range(n):
        out[i] = k * table[q, i]


@njit(cache=True)
def dense_output(table, order, t_new, h, y_new, t_out, poly, out):
    """``y(t_new + s h) = y_new + h int_0^s P(u) du``, P the slope polynomial of the step.

    P interpolates ``f`` at the last ``order`` points, so the interpolant
    reproduces both ends of the step exactly.
    """
    n = out.size
    s = (t_out - t_new) / h
    for i in range(n):
        out[i] = y_new[i]
    # poly holds the coefficients (in u) of c_j(u) = u (u+1) ... (u+j-1) / j!
    for m in range(poly.size):
        poly[m] = 0.0
    poly[0] = 1.0
    for j in range(order):
        if j > 0:
            # multiply by (u + j - 1) / j
            for m in range(j, 0, -1):
                poly[m] = (poly[m - 1] + (j - 1) * poly[m]) / j
            poly[0] = (j - 1) * poly[0] / j
        integral = 0.0
        power = s
        for m in range(j + 1):
            integral += poly[m] * power / (m + 1)
            power *= s
        for i in range(n):
            out[i] += h * integral * table[j, i]
