"""The weighted root-mean-square norm of Stan / CVODES and the initial step size.

``||e|| = sqrt( (1/n) sum_i (e_i / (rtol_i |y_i| + atol_i))^2 )``; a step is
accepted when the norm of its local error estimate is at most 1.

A vector made of blocks (the state and its forward sensitivities, or the
adjoint state and its quadratures) is measured as CVODES does: the largest of
the norms of its groups, each a weighted RMS over its own components
(:func:`grouped_rms_norm`). One RMS over all components would let many
well-resolved sensitivity columns dilute the state's error by up to
``sqrt(1 + P)``.

A NaN anywhere makes the norm NaN: the error test ``norm <= 1`` then fails, as
it must. (Python's and numba's ``max(0.0, nan)`` is ``0.0``: combining the
groups with ``max`` silently dropped a NaN group, and rk45/ckrk accepted steps
whose sensitivities had turned NaN.)
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from pymc_odesens.solvers import status as st

__all__ = [
    "error_weights",
    "weighted_rms_norm",
    "grouped_rms_norm",
    "larger_norm",
    "first_non_finite",
    "non_finite_output",
    "checked_status",
    "initial_step_size",
]


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


@njit(cache=True, inline="always")
def larger_norm(a, b):
    """``max(a, b)`` that keeps a NaN (the builtin ``max(0.0, nan)`` is ``0.0``)."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return max(a, b)


@njit(cache=True, inline="always")
def grouped_rms_norm(e, weights, n_block, n_blocked, n_err):
    """CVODES' norm of a block vector: the largest weighted RMS norm of its groups.

    The first ``min(n_blocked, n_err)`` components form groups of ``n_block``
    (the state, then one group per sensitivity column); the components from
    ``n_blocked`` to ``n_err`` (quadratures) form one more group. Only the first
    ``n_err`` components count. With one block this is :func:`weighted_rms_norm`.
    NaN if any counted component is NaN (or an infinite error meets a zero weight).
    """
    n_grouped = min(n_blocked, n_err)
    if n_block <= 0 or n_grouped <= n_block:
        norm = weighted_rms_norm(e, weights, min(n_grouped, n_err))
    else:
        norm = 0.0
        for start in range(0, n_grouped, n_block):
            s = 0.0
            for i in range(start, start + n_block):
                x = e[i] * weights[i]
                s += x * x
            norm = larger_norm(norm, math.sqrt(s / n_block))
    if n_err > n_blocked:
        s = 0.0
        for i in range(n_blocked, n_err):
            x = e[i] * weights[i]
            s += x * x
        norm = larger_norm(norm, math.sqrt(s / (n_err - n_blocked)))
    return norm


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
def non_finite_output(y_out, n_rows, times, info):
    """True if a value among the first ``n_rows`` output rows is NaN or infinite.

    The last guard of every integrator run before it reports success: ``info``
    then holds the row's output time and the offending component (step size 0).
    """
    n = y_out.shape[1]
    for row in range(n_rows):
        bad = first_non_finite(y_out[row], n)
        if bad >= 0:
            info[0], info[1], info[2] = times[row], 0.0, bad
            return True
    return False


@njit(cache=True, inline="always")
def checked_status(status, y_out, n_rows, times, info):
    """``status``, or ``NON_FINITE_RHS`` if one of the first ``n_rows`` outputs is not finite."""
    if non_finite_output(y_out, n_rows, times, info):
        return st.NON_FINITE_RHS
    return status


@njit(cache=True)
def initial_step_size(
    rhs,
    t0,
    y0,
    f0,
    p,
    v,
    rtol,
    atol,
    n_block,
    n_blocked,
    n_err,
    order,
    span,
    work_y,
    work_f,
    weights,
):
    """Hairer–Nørsett–Wanner's starting step for a method of the given ``order``.

    One extra right-hand-side evaluation (returned count is 1). ``span`` bounds
    the result from above; as in CVODE, ``100 * unit roundoff * |t|`` bounds it
    from below (a step that does not change ``t`` in floating point cannot be
    taken), and never by more than ``span`` itself.
    """
    n = y0.size
    floor = min(span, 100.0 * 2.220446049250313e-16 * max(abs(t0), abs(t0 + span)))
    error_weights(y0, y0, rtol, atol, n_err, weights)
    d0 = grouped_rms_norm(y0, weights, n_block, n_blocked, n_err)
    d1 = grouped_rms_norm(f0, weights, n_block, n_blocked, n_err)
    if d0 < 1e-5 or d1 < 1e-5:
        h0 = 1e-6
    else:
        h0 = 0.01 * d0 / d1
    h0 = max(min(h0, span), floor)
    if h0 <= 0.0:
        return span
    for i in range(n):
        work_y[i] = y0[i] + h0 * f0[i]
    rhs(t0 + h0, work_y.ctypes, p.ctypes, v.ctypes, work_f.ctypes)
    for i in range(n):
        work_f[i] = (work_f[i] - f0[i]) / h0
    d2 = grouped_rms_norm(work_f, weights, n_block, n_blocked, n_err)
    if not np.isfinite(d2):
        return max(h0 * 1e-3, floor)
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / (order + 1))
    return max(min(100.0 * h0, h1, span), floor)
