"""The weighted root-mean-square norm of Stan / CVODES and the initial step size.

``||e|| = sqrt( (1/n) sum_i (e_i / (rtol_i |y_i| + atol_i))^2 )``; a step is
accepted when the norm of its local error estimate is at most 1.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["error_weights", "weighted_rms_norm", "initial_step_size"]


@njit(cache=True, inline="always")
def error_weights(y_a, y_b, rtol, atol, n, weights):
    """``weights[i] = 1 / (rtol[i] max(|y_a[i]|, |y_b[i]|) + atol[i])`` for ``i < n``."""
    for i in range(n):
        weights[i] = 1.0 / (rtol[i] * max(abs(y_a[i]), abs(y_b[i])) + atol[i])


@njit(cache=True, inline="always")
def weighted_rms_norm(e, weights, n):
    """Weighted RMS norm of the first ``n`` entries of ``e``."""
    if n == 0:
        return 0.0
    s = 0.0
    for i in range(n):
        x = e[i] * weights[i]
        s += x * x
    return math.sqrt(s / n)


@njit(cache=True)
def largest_weighted_component(e, weights, n):
    """Index of the entry with the largest weighted magnitude (-1 if none)."""
    best, index = -1.0, -1
    for i in range(n):
        x = abs(e[i] * weights[i])
        if not (x <= best):  # also catches NaN
            best, index = x, i
    return index


@njit(cache=True)
def first_non_finite(x, n):
    """Index of the first NaN or infinite entry among the first ``n`` (-1 if none)."""
    for i in range(n):
        if not np.isfinite(x[i]):
            return i
    return -1


@njit(cache=True)
def initial_step_size(
    rhs, t0, y0, f0, p, v, rtol, atol, n_err, order, span, work_y, work_f, weights
):
    """Hairer–Nørsett–Wanner's starting step for a method of the given ``order``.

    One extra right-hand-side evaluation (returned count is 1). ``span`` bounds
    the result from above.
    """
    n = y0.size
    error_weights(y0, y0, rtol, atol, n_err, weights)
    d0 = weighted_rms_norm(y0, weights, n_err)
    d1 = weighted_rms_norm(f0, weights, n_err)
    if d0 < 1e-5 or d1 < 1e-5:
        h0 = 1e-6
    else:
        h0 = 0.01 * d0 / d1
    h0 = min(h0, span)
    for i in range(n):
        work_y[i] = y0[i] + h0 * f0[i]
    rhs(t0 + h0, work_y.ctypes, p.ctypes, v.ctypes, work_f.ctypes)
    for i in range(n):
        work_f[i] = (work_f[i] - f0[i]) / h0
    d2 = weighted_rms_norm(work_f, weights, n_err)
    if not np.isfinite(d2):
        return h0 * 1e-3
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / (order + 1))
    return min(100.0 * h0, h1, span)
