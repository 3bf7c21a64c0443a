"""Explicit embedded Runge–Kutta pairs: ``rk45`` (Dormand–Prince) and ``ckrk`` (Cash–Karp).

Both propagate the fifth-order solution (local extrapolation) and control the
error of the embedded fourth-order one in the weighted RMS norm. Output at
requested times comes from inside the accepted steps, never from forcing a
step to end there: Dormand–Prince's fourth-order continuous extension for
``rk45``; for ``ckrk`` (which has no continuous extension) a Cash–Karp
sub-step from the accepted step's start to the output time, fifth-order like
the step itself (5 extra right-hand-side evaluations per output time).

Step sizes follow Gustafsson's PI controller with Hairer's DOPRI5 constants
(``PI_BETA = 0.04``): the previous step's error damps the growth after an
accepted step. With the plain integral controller (``h err^(-1/5)``) an explicit
method on a stiff problem, whose steps are limited by stability, grows its step
by up to 2x after a step with a small error and lands far outside the stability
region: on Robertson at rtol = atol = 1e-6, ``h |lambda|`` of accepted steps
reached 5.8 (the stiff component grows 35-fold in that step) against a real
stability boundary of 3.3, the fast species ``y2`` was thrown past the unstable
root of ``k1 y1 - k2 y2^2 - k3 y2 y3`` (``y2 < -3.65e-5``), from where the exact
solution itself escapes to ``-inf`` in finite time, and the run ended in a
step-size underflow at t = 0.11 for about half of all initial step sizes. The
PI controller keeps ``h |lambda|`` below 4 and reaches t = 1 from every initial
step tried (``tests/solvers/test_solve_behaviour.py``).

Every accepted step has a finite error estimate, a finite new state (all
components, also those outside the error test) and, for ``rk45``, a finite
derivative there (its next first stage); a step that fails any of these is
retried with a quarter of the step (``NON_FINITE_RHS`` after
``MAX_NON_FINITE_RETRIES`` in a row), and every run checks the outputs it wrote
before it reports success.

A run can record its trajectory like the multistep driver: every
``record_every`` accepted steps the time, the leading ``rec_y.shape[1]``
components and (if ``rec_f`` has rows) their derivative at the step's end (for
``rk45`` its FSAL stage, for ``ckrk`` the first stage of the next step). With
``record_every = 1`` and rows in ``rec_dense``, ``rk45`` also stores
``sum_s D_s k_s`` of each step, with which :func:`dormand_prince_dense_output`
evaluates its continuous extension between two consecutive records.

A run can stop at events, as the multistep driver does (see
:mod:`pymc_odesens.solvers.event_location`): the conditions are checked over each
accepted step on the dense output (``ckrk`` samples its interior by the cubic Hermite
interpolant of the step's ends and locates the event time with Cash–Karp sub-steps,
so that ``tau`` has the step's own order), and ``t_stop`` is hit exactly.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.error_norm import (
    checked_status,
    error_weights,
    first_non_finite,
    grouped_rms_norm,
    initial_step_size,
    largest_weighted_component,
)
from pymc_odesens.solvers.event_location import (
    EVENT_SAMPLES,
    MAX_ROOT_ITERATIONS,
    bracket_done,
    bracket_resolution,
    first_point,
    illinois_step,
    initial_sides,
    start_bracket,
    triggered,
    update_sides,
)

__all__ = [
    "integrate_explicit_rk",
    "dormand_prince_dense_output",
    "DORMAND_PRINCE",
    "CASH_KARP",
    "RK_METHOD_IDS",
    "RK_SIGNATURE",
]

DORMAND_PRINCE = 0
CASH_KARP = 1
RK_METHOD_IDS = {"rk45": DORMAND_PRINCE, "ckrk": CASH_KARP}

SAFETY = 0.9
MIN_FACTOR = 0.2
MAX_FACTOR = 10.0
MAX_NON_FINITE_RETRIES = 30
# Gustafsson's PI step-size controller as in Hairer's DOPRI5: after an accepted step
# h_new = h SAFETY err^(-PI_ALPHA) err_prev^PI_BETA (err_prev: the previous accepted
# step's error norm, at least PI_ERR_FLOOR); after a rejection h SAFETY err^(-PI_ALPHA).
PI_BETA = 0.04
PI_ALPHA = 0.2 - 0.75 * PI_BETA
PI_ERR_FLOOR = 1e-4

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

RK_SIGNATURE = types.int64(
    KERNEL_TYPE,  # rhs
    types.float64,  # t0
    types.float64[::1],  # y0
    types.float64[::1],  # p
    types.float64[::1],  # times
    types.float64[::1],  # rtol (per component)
    types.float64[::1],  # atol (per component)
    types.int64,  # max_num_steps
    types.int64,  # n_state: block size N (the error norm is the largest over blocks)
    types.int64,  # n_err: leading components in the error norm
    types.int64,  # method id
    types.int64,  # record_every: record every k-th accepted step (0: no recording)
    types.float64[::1],  # rec_t (capacity,)
    types.float64[:, ::1],  # rec_y (capacity, recorded components)
    types.float64[:, ::1],  # rec_f (capacity or 0, recorded components)
    types.int64[::1],  # rec_count (1,): number of records written
    types.float64[:, ::1],  # rec_dense (capacity or 0, recorded components): rk45's sum D_s k_s
    KERNEL_TYPE,  # event conditions g(t, y) (called only if there are directions)
    types.int64[::1],  # direction of each implicit condition (none: no implicit events)
    types.float64[::1],  # g_zero (2 per condition): start codes, then bands (event_location)
    types.float64,  # t_stop: end a step exactly here and stop (an explicit event); inf: none
    types.float64[::1],  # event_out (event_location.EVENT_OUT_SIZE)
    types.float64[::1],  # z_event: the vector just before the event
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
    # Hairer's CONTD5: y(t_old + theta h) with the continuous extension of DOPRI5
    # (the leading out.size components).
    n = out.size
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


@njit(cache=True, inline="always")
def dormand_prince_dense_output(t_a, y_a, f_a, t_b, y_b, f_b, d_b, t, out):
    """Dormand–Prince's continuous extension at ``t`` in ``[t_a, t_b]`` from two records.

    ``y``/``f`` at both ends of one accepted step and ``d_b = sum_s D_s k_s`` of
    that step (``rec_dense``); the same polynomial as the dense output of the run.
    """
    h = t_b - t_a
    theta = (t - t_a) / h
    th1 = 1.0 - theta
    for i in range(y_a.size):
        r2 = y_b[i] - y_a[i]
        r3 = h * f_a[i] - r2
        r4 = r2 - h * f_b[i] - r3
        r5 = h * d_b[i]
        out[i] = y_a[i] + theta * (r2 + th1 * (r3 + theta * (r4 + th1 * r5)))


@njit(cache=True)
def _record(t, y, f, dense, method, rec_t, rec_y, rec_f, rec_dense, rec_count):
    """Append ``t``, the leading components of ``y`` (and ``f``, ``dense``); False when full."""
    k = rec_count[0]
    if k >= rec_t.size:
        return False
    rec_t[k] = t
    for i in range(rec_y.shape[1]):
        rec_y[k, i] = y[i]
    if rec_f.shape[0] > 0:
        for i in range(rec_f.shape[1]):
            rec_f[k, i] = f[i]
    if rec_dense.shape[0] > 0:
        for i in range(rec_dense.shape[1]):
            rec_dense[k, i] = dense[i] if method == DORMAND_PRINCE else 0.0
    rec_count[0] = k + 1
    return True


@njit(cache=True)
def _non_finite_stage_component(k, n_stages, y_new, n):
    for s in range(n_stages):
        bad = first_non_finite(k[s], n)
        if bad >= 0:
            return bad
    return first_non_finite(y_new, n)


@njit(cache=True)
def _hermite(t, h, y, f, y_new, f_new, t_out, out):
    # the cubic Hermite interpolant of the step's ends (leading out.size components)
    s = (t_out - t) / h
    s2 = s * s
    s3 = s2 * s
    h00 = 2.0 * s3 - 3.0 * s2 + 1.0
    h10 = s3 - 2.0 * s2 + s
    h01 = -2.0 * s3 + 3.0 * s2
    h11 = s3 - s2
    for i in range(out.size):
        out[i] = h00 * y[i] + h * h10 * f[i] + h01 * y_new[i] + h * h11 * f_new[i]


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


@njit(RK_SIGNATURE, cache=True, nogil=True)
def integrate_explicit_rk(
    rhs,
    t0,
    y0,
    p,
    times,
    rtol,
    atol,
    max_num_steps,
    n_state,
    n_err,
    method,
    record_every,
    rec_t,
    rec_y,
    rec_f,
    rec_count,
    rec_dense,
    events,
    directions,
    g_zero,
    t_stop,
    event_out,
    z_event,
    y_out,
    stats,
    info,
):
    """Integrate ``y' = rhs(t, y, p)`` from ``t0`` and write ``y`` at ``times`` into ``y_out``.

    ``y`` may be made of blocks of ``n_state`` components (the state and its
    sensitivity columns); the local error is the largest weighted RMS norm of
    the blocks among the first ``n_err`` components (CVODES' norm).

    Returns a status code of :mod:`pymc_odesens.solvers.status` (``RECORD_FULL``
    when the recording arrays are too short, ``EVENT`` / ``STOP`` at an event, as
    :func:`~pymc_odesens.solvers.multistep.run_multistep`); ``stats`` and ``info`` are filled
    in place. ``times`` must be non-decreasing and >= t0.
    """
    n = y0.size
    rec_count[0] = 0
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
    dense_coef = np.zeros(n)
    v = np.zeros(1)
    n_cond = directions.size
    g_now = np.empty(max(n_cond, 1))
    g_new = np.empty(max(n_cond, 1))
    g_trial = np.empty(max(n_cond, 1))
    sides = np.zeros(max(n_cond, 1), dtype=np.int64)
    band = np.zeros(max(n_cond, 1))  # event_location: noise bands of resting conditions
    bracket = np.empty(5)
    state = np.empty(n_state)  # the state part of the dense output, for the conditions
    n_accepted = 0
    t = t0
    out_index = 0
    while out_index < n_times and times[out_index] <= t0:
        y_out[out_index, :] = y0
        out_index += 1
    if out_index == n_times:
        return checked_status(st.SUCCESS, y_out, out_index, times, info)
    t_end = times[n_times - 1]
    t_limit = min(t_end, t_stop)
    if n_cond > 0:
        events(t, y.ctypes, p.ctypes, v.ctypes, g_now.ctypes)
        initial_sides(g_now, g_zero, sides, band)
    rhs(t, y.ctypes, p.ctypes, v.ctypes, k[0].ctypes)
    stats[st.N_RHS] += 1
    bad = first_non_finite(k[0], n)
    if bad >= 0:
        info[0], info[1], info[2] = t, 0.0, bad
        return st.NON_FINITE_RHS
    if record_every > 0:
        if not _record(t, y, k[0], dense_coef, method, rec_t, rec_y, rec_f, rec_dense, rec_count):
            info[0], info[1], info[2], info[3] = t, 0.0, -1, rec_t.size
            return st.RECORD_FULL
    h = initial_step_size(
        rhs,
        t,
        y,
        k[0],
        p,
        v,
        rtol,
        atol,
        n_state,
        n_err,
        n_err,
        4,
        t_limit - t,
        y_new,
        f_new,
        weights,
    )
    stats[st.N_RHS] += 1
    steps_since_output = 0
    non_finite_retries = 0
    rejected_last = False
    err_previous = PI_ERR_FLOOR
    while out_index < n_times:
        min_step = 10.0 * (np.nextafter(t, np.inf) - t)
        if h < min_step:
            info[0], info[1] = t, h
            if non_finite_retries > 0:
                info[2] = _non_finite_stage_component(k, n_stages, y_new, n)
                return st.NON_FINITE_RHS
            info[2] = largest_weighted_component(err, weights, n_err)
            return st.STEP_TOO_SMALL
        if steps_since_output >= max_num_steps:
            info[0], info[1], info[2], info[3] = t, h, -1, max_num_steps
            return st.MAX_NUM_STEPS
        last = False
        if t + h >= t_limit:
            h = t_limit - t
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
        t_new = t_limit if last else t + h
        if method == DORMAND_PRINCE:
            rhs(t_new, y_new.ctypes, p.ctypes, v.ctypes, k[6].ctypes)
            stats[st.N_RHS] += 1
            for i in range(n):
                err[i] += h * e_w[6] * k[6, i]
        error_weights(y, y_new, rtol, atol, n_err, weights)
        err_norm = grouped_rms_norm(err, weights, n_state, n_err, n_err)
        if (
            not np.isfinite(err_norm)
            or first_non_finite(y_new, n) >= 0
            or (method == DORMAND_PRINCE and first_non_finite(k[6], n) >= 0)
        ):
            # also the components outside the error test (sensitivities without error
            # control) and the derivative at the step's end, the next step's first stage
            non_finite_retries += 1
            stats[st.N_REJECTED] += 1
            if non_finite_retries > MAX_NON_FINITE_RETRIES:
                info[0], info[1] = t, h
                info[2] = _non_finite_stage_component(k, n_stages, y_new, n)
                return st.NON_FINITE_RHS
            h *= 0.25
            rejected_last = True
            continue
        non_finite_retries = 0
        if err_norm > 1.0:
            stats[st.N_REJECTED] += 1
            h *= max(MIN_FACTOR, SAFETY * err_norm ** (-PI_ALPHA))
            rejected_last = True
            continue
        # accepted
        stats[st.N_STEPS] += 1
        steps_since_output += 1
        n_accepted += 1
        if n_cond > 0:
            if method == CASH_KARP:
                # f at the step's end (the next step's first stage) for the Hermite samples
                rhs(t_new, y_new.ctypes, p.ctypes, v.ctypes, f_new.ctypes)
                stats[st.N_RHS] += 1
            else:
                f_new[:] = k[6]
            # sign changes over EVENT_SAMPLES sub-intervals of the step, earliest first
            found = -1
            tau = t_new
            g_res = 0.0
            t_a = t
            for sample in range(1, EVENT_SAMPLES + 1):
                if sample == EVENT_SAMPLES:
                    t_b = t_new
                    events(t_b, y_new.ctypes, p.ctypes, v.ctypes, g_new.ctypes)
                else:
                    t_b = t + h * sample / EVENT_SAMPLES
                    if method == DORMAND_PRINCE:
                        _dense_dormand_prince(t, h, y, y_new, k, (t_b - t) / h, state)
                    else:
                        _hermite(t, h, y, k[0], y_new, f_new, t_b, state)
                    events(t_b, state.ctypes, p.ctypes, v.ctypes, g_new.ctypes)
                for j in range(n_cond):
                    if triggered(sides[j], g_new[j], band[j], directions[j]) == 0:
                        continue
                    start_bracket(bracket, t_a, g_now[j], t_b, g_new[j])
                    tm = first_point(t_a, g_now[j], t_b, g_new[j])
                    iterations = 0
                    while not bracket_done(bracket) and iterations < MAX_ROOT_ITERATIONS:
                        if method == DORMAND_PRINCE:
                            _dense_dormand_prince(t, h, y, y_new, k, (tm - t) / h, state)
                            events(tm, state.ctypes, p.ctypes, v.ctypes, g_trial.ctypes)
                        else:
                            _cash_karp_substep(rhs, t, y, k, p, v, tm - t, k_sub, y_stage, dense)
                            stats[st.N_RHS] += 5
                            events(tm, dense.ctypes, p.ctypes, v.ctypes, g_trial.ctypes)
                        tm = illinois_step(bracket, tm, g_trial[j])
                        iterations += 1
                    if found < 0 or bracket[2] < tau:
                        found, tau, g_res = j, bracket[2], bracket_resolution(bracket)
                if found >= 0:
                    break
                update_sides(sides, g_new, g_now, band, n_cond)
                t_a = t_b
            if found >= 0:
                while out_index < n_times and times[out_index] < tau:
                    t_out = times[out_index]
                    if method == DORMAND_PRINCE:
                        _dense_dormand_prince(t, h, y, y_new, k, (t_out - t) / h, dense)
                    else:
                        _cash_karp_substep(rhs, t, y, k, p, v, t_out - t, k_sub, y_stage, dense)
                        stats[st.N_RHS] += 5
                    y_out[out_index, :] = dense
                    out_index += 1
                if tau == t_new:
                    z_event[:] = y_new
                elif method == DORMAND_PRINCE:
                    _dense_dormand_prince(t, h, y, y_new, k, (tau - t) / h, z_event)
                else:
                    _cash_karp_substep(rhs, t, y, k, p, v, tau - t, k_sub, y_stage, z_event)
                    stats[st.N_RHS] += 5
                event_out[0], event_out[1], event_out[2], event_out[3] = (
                    tau,
                    found,
                    out_index,
                    g_res,
                )
                return checked_status(st.EVENT, y_out, out_index, times, info)
        if t_new >= t_stop:
            while out_index < n_times and times[out_index] < t_stop:
                t_out = times[out_index]
                if method == DORMAND_PRINCE:
                    _dense_dormand_prince(t, h, y, y_new, k, (t_out - t) / h, dense)
                else:
                    _cash_karp_substep(rhs, t, y, k, p, v, t_out - t, k_sub, y_stage, dense)
                    stats[st.N_RHS] += 5
                y_out[out_index, :] = dense
                out_index += 1
            z_event[:] = y_new
            event_out[0], event_out[1], event_out[2], event_out[3] = t_new, -1.0, out_index, 0.0
            return checked_status(st.STOP, y_out, out_index, times, info)
        recording = record_every > 0 and n_accepted % record_every == 0
        if recording and method == DORMAND_PRINCE and rec_dense.shape[0] > 0:
            for i in range(n):
                acc = 0.0
                for s in range(7):
                    if DP_D[s] != 0.0:
                        acc += DP_D[s] * k[s, i]
                dense_coef[i] = acc
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
            factor = SAFETY * err_norm ** (-PI_ALPHA) * err_previous**PI_BETA
            factor = max(MIN_FACTOR, min(MAX_FACTOR, factor))
        err_previous = max(err_norm, PI_ERR_FLOOR)
        if rejected_last:
            factor = min(1.0, factor)
        rejected_last = False
        t = t_new
        y[:] = y_new
        if method == DORMAND_PRINCE:
            k[0, :] = k[6]
        elif n_cond > 0:
            k[0, :] = f_new  # evaluated for the event check
        else:
            rhs(t, y.ctypes, p.ctypes, v.ctypes, k[0].ctypes)
            stats[st.N_RHS] += 1
        if recording:
            if not _record(
                t, y, k[0], dense_coef, method, rec_t, rec_y, rec_f, rec_dense, rec_count
            ):
                info[0], info[1], info[2], info[3] = t, h, -1, rec_t.size
                return st.RECORD_FULL
        h *= factor
        if math.isinf(h):
            h = t_end - t
    return checked_status(st.SUCCESS, y_out, out_index, times, info)
