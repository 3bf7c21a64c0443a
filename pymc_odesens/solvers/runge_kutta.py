"""Explicit embedded Runge–Kutta pairs: ``rk45`` (Dormand–Prince) and ``ckrk`` (Cash–Karp).

Both propagate the fifth-order solution (local extrapolation) and control the
error of the embedded fourth-order one in the weighted RMS norm. Output at
requested times comes from inside the accepted steps, never from forcing a
step to end there: Dormand–Prince's fourth-order continuous extension for
``rk45``; for ``ckrk`` (which has no continuous extension) a Cash–Karp
sub-step from the accepted step's start to the output time, fifth-order like
the step itself (5 extra right-hand-side evaluations per output time).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.error_norm import (
    error_weights,
    first_non_finite,
    initial_step_size,
    largest_weighted_component,
    weighted_rms_norm,
)

__all__ = ["integrate_explicit_rk", "DORMAND_PRINCE", "CASH_KARP", "RK_METHOD_IDS"]

DORMAND_PRINCE = 0
CASH_KARP = 1
RK_METHOD_IDS = {"rk45": DORMAND_PRINCE, "ckrk": CASH_KARP}

SAFETY = 0.9
MIN_FACTOR = 0.2
MAX_FACTOR = 10.0
MAX_NON_FINITE_RETRIES = 30

# Dormand & Prince (1980): nodes, stage matrix, 5th-order weights, error weights (b5 - b4).
DP_C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0])
DP_A = np.array(
    [
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [1 / 5, 0.0, 0.0, 0.0, 0.0, 0.0],
        [3 / 40, 9 / 40, 0.0, 0.0, 0.0, 0.0],
        [44 / 45, -56 / 15, 32 / 9, 0.0, 0.0, 0.0],
        [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0.0, 0.0],
        [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0.0],
        [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
    ]
)
DP_B = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0])
DP_E = np.array(
    [
        71 / 57600,
        0.0,
        -71 / 16695,
        71 / 1920,
        -17253 / 339200,
        22 / 525,
        -1 / 40,
    ]
)
# Continuous extension of Dormand–Prince (Hairer, Nørsett & Wanner, dense output of DOPRI5).
DP_D = np.array(
    [
        -12715105075 / 11282082432,
        0.0,
        87487479700 / 32700410799,
        -10690763975 / 1880347072,
        701980252875 / 199316789632,
        -1453857185 / 822651844,
        69997945 / 29380423,
    ]
)

# Cash & Karp (1990).
CK_C = np.array([0.0, 1 / 5, 3 / 10, 3 / 5, 1.0, 7 / 8, 0.0])
CK_A = np.array(
    [
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [1 / 5, 0.0, 0.0, 0.0, 0.0, 0.0],
        [3 / 40, 9 / 40, 0.0, 0.0, 0.0, 0.0],
        [3 / 10, -9 / 10, 6 / 5, 0.0, 0.0, 0.0],
        [-11 / 54, 5 / 2, -70 / 27, 35 / 27, 0.0, 0.0],
        [1631 / 55296, 175 / 512, 575 / 13824, 44275 / 110592, 253 / 4096, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    ]
)
CK_B = np.array([37 / 378, 0.0, 250 / 621, 125 / 594, 0.0, 512 / 1771, 0.0])
CK_E = np.array(
    [
        37 / 378 - 2825 / 27648,
        0.0,
        250 / 621 - 18575 / 48384,
        125 / 594 - 13525 / 55296,
        -277 / 14336,
        512 / 1771 - 1 / 4,
        0.0,
    ]
)

_SIGNATURE = types.int64(
    KERNEL_TYPE,  # rhs
    types.float64,  # t0
    types.float64[::1],  # y0
    types.float64[::1],  # p
    types.float64[::1],  # times
    types.float64[::1],  # rtol (per component)
    types.float64[::1],  # atol (per component)
    types.int64,  # max_num_steps
    types.int64,  # n_err: leading components in the error norm
    types.int64,  # method id
    types.float64[:, ::1],  # y_out (T, n)
    types.int64[::1],  # stats
    types.float64[::1],  # info
)


@njit(cache=True)
def _stage_state(y, h, a_row, k, n_prev, out):
    n = y.size
    for i in range(n):
        s = 0.0
        for j in range(n_prev):
            if a_row[j] != 0.0:
                s += a_row[j] * k[j, i]
        out[i] = y[i] + h * s


@njit(cache=True)
def _dense_dormand_prince(t_old, h, y_old, y_new, k, theta, out):
    # Hairer's CONTD5: y(t_old + theta h) with the continuous extension of DOPRI5.
    n = y_old.size
    th1 = 1.0 - theta
    for i in range(n):
        r2 = y_new[i] - y_old[i]
        r3 = h * k[0, i] - r2
        r4 = r2 - h * k[6, i] - r3
        r5 = 0.0
        for s in range(7):
            if DP_D[s] != 0.0:
                r5 += DP_D[s] * k[s, i]
        r5 *= h
        out[i] = y_old[i] + theta * (r2 + th1 * (r3 + theta * (r4 + th1 * r5)))


@njit(cache=True)
def _non_finite_stage_component(k, n_stages, n):
    for s in range(n_stages):
        bad = first_non_finite(k[s], n)
        if bad >= 0:
            return bad
    return -1


@njit(cache=True)
def _cash_karp_substep(rhs, t, y, k, p, v, h_sub, k_sub, y_stage, out):
    # Output inside an accepted step: one Cash–Karp step of length h_sub from the
    # step's start (k[0] = f(t, y) is reused). Fifth-order like the step itself;
    # the accepted step sequence is unaffected.
    n = y.size
    k_sub[0, :] = k[0]
    for s in range(1, 6):
        _stage_state(y, h_sub, CK_A[s], k_sub, s, y_stage)
        rhs(t + CK_C[s] * h_sub, y_stage.ctypes, p.ctypes, v.ctypes, k_sub[s].ctypes)
    for i in range(n):
        acc = 0.0
        for s in range(6):
            acc += CK_B[s] * k_sub[s, i]
        out[i] = y[i] + h_sub * acc


@njit(_SIGNATURE, cache=True, nogil=True)
def integrate_explicit_rk(
    rhs, t0, y0, p, times, rtol, atol, max_num_steps, n_err, method, y_out, stats, info
):
    """Integrate ``y' = rhs(t, y, p)`` from ``t0`` and write ``y`` at ``times`` into ``y_out``.

    Returns a status code of :mod:`pymc_odesens.solvers.status`; ``stats`` and
    ``info`` are filled in place. ``times`` must be non-decreasing and >= t0.
    """
    n = y0.size
    n_times = times.size
    if method == DORMAND_PRINCE:
        c_nodes, a_mat, b_w, e_w, n_stages = DP_C, DP_A, DP_B, DP_E, 7
    else:
        c_nodes, a_mat, b_w, e_w, n_stages = CK_C, CK_A, CK_B, CK_E, 6
    k = np.zeros((7, n))
    y = y0.copy()
    y_new = np.empty(n)
    y_stage = np.empty(n)
    k_sub = np.zeros((6, n))
    f_new = np.empty(n)
    err = np.empty(n)
    weights = np.empty(n)
    dense = np.empty(n)
    v = np.zeros(1)
    t = t0
    out_index = 0
    while out_index < n_times and times[out_index] <= t0:
        y_out[out_index, :] = y0
        out_index += 1
    if out_index == n_times:
        return st.SUCCESS
    t_end = times[n_times - 1]
    rhs(t, y.ctypes, p.ctypes, v.ctypes, k[0].ctypes)
    stats[st.N_RHS] += 1
    bad = first_non_finite(k[0], n)
    if bad >= 0:
        info[0], info[1], info[2] = t, 0.0, bad
        return st.NON_FINITE_RHS
    h = initial_step_size(
        rhs, t, y, k[0], p, v, rtol, atol, n_err, 4, t_end - t, y_new, f_new, weights
    )
    stats[st.N_RHS] += 1
    steps_since_output = 0
    non_finite_retries = 0
    rejected_last = False
    while out_index < n_times:
        min_step = 10.0 * (np.nextafter(t, np.inf) - t)
        if h < min_step:
            info[0], info[1] = t, h
            if non_finite_retries > 0:
                info[2] = _non_finite_stage_component(k, n_stages, n)
                return st.NON_FINITE_RHS
            info[2] = largest_weighted_component(err, weights, n_err)
            return st.STEP_TOO_SMALL
        if steps_since_output >= max_num_steps:
            info[0], info[1], info[2], info[3] = t, h, -1, max_num_steps
            return st.MAX_NUM_STEPS
        last = False
        if t + h >= t_end:
            h = t_end - t
            last = True
        # stages
        for s in range(1, n_stages):
            _stage_state(y, h, a_mat[s], k, s, y_stage)
            rhs(t + c_nodes[s] * h, y_stage.ctypes, p.ctypes, v.ctypes, k[s].ctypes)
        stats[st.N_RHS] += n_stages - 1
        for i in range(n):
            s_b = 0.0
            s_e = 0.0
            for s in range(6):  # Dormand–Prince's 7th (FSAL) stage is added below
                s_b += b_w[s] * k[s, i]
                s_e += e_w[s] * k[s, i]
            y_new[i] = y[i] + h * s_b
            err[i] = h * s_e
        t_new = t_end if last else t + h
        if method == DORMAND_PRINCE:
            rhs(t_new, y_new.ctypes, p.ctypes, v.ctypes, k[6].ctypes)
            stats[st.N_RHS] += 1
            for i in range(n):
                err[i] += h * e_w[6] * k[6, i]
        error_weights(y, y_new, rtol, atol, n_err, weights)
        err_norm = weighted_rms_norm(err, weights, n_err)
        if not np.isfinite(err_norm):
            non_finite_retries += 1
            stats[st.N_REJECTED] += 1
            if non_finite_retries > MAX_NON_FINITE_RETRIES:
                info[0], info[1], info[2] = t, h, _non_finite_stage_component(k, n_stages, n)
                return st.NON_FINITE_RHS
            h *= 0.25
            rejected_last = True
            continue
        non_finite_retries = 0
        if err_norm > 1.0:
            stats[st.N_REJECTED] += 1
            h *= max(MIN_FACTOR, SAFETY * err_norm ** (-0.2))
            rejected_last = True
            continue
        # accepted
        stats[st.N_STEPS] += 1
        steps_since_output += 1
        while out_index < n_times and times[out_index] <= t_new:
            t_out = times[out_index]
            if t_out == t_new:
                y_out[out_index, :] = y_new
            else:
                theta = (t_out - t) / h
                if method == DORMAND_PRINCE:
                    _dense_dormand_prince(t, h, y, y_new, k, theta, dense)
                else:
                    _cash_karp_substep(rhs, t, y, k, p, v, t_out - t, k_sub, y_stage, dense)
                    stats[st.N_RHS] += 5
                y_out[out_index, :] = dense
            out_index += 1
            steps_since_output = 0
        if err_norm == 0.0:
            factor = MAX_FACTOR
        else:
            factor = min(MAX_FACTOR, SAFETY * err_norm ** (-0.2))
        if rejected_last:
            factor = min(1.0, factor)
        rejected_last = False
        t = t_new
        y[:] = y_new
        if method == DORMAND_PRINCE:
            k[0, :] = k[6]
        else:
            rhs(t, y.ctypes, p.ctypes, v.ctypes, k[0].ctypes)
            stats[st.N_RHS] += 1
        h *= factor
        if math.isinf(h):
            h = t_end - t
    return st.SUCCESS
