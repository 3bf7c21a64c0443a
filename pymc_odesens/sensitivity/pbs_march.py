"""The PBS / PBSR / Exp march over a recorded state trajectory (numba, compiled once).

Given the solver's accepted steps ``t_0 < t_1 < ... < t_K`` with the states
(and slopes) recorded there, :func:`march_sensitivities` carries ``S`` from
``t_0`` to ``t_K`` step by step:

- ``pbs`` (Algorithm 1): one PBS step per solver step (more if ``max_step``
  asks for it);
- ``pbsr`` (Algorithm 2): ``n_int = ceil(c dt ||J_y(t_k)||)``; the Exp step when
  the Jacobians are near constant over the step (relative change below
  ``eps``) or ``n_int > n_max``, else ``n_int`` equal PBS sub-steps with the
  state at their ends interpolated between the two records;
- ``exp`` (Algorithm 3): one Exp step per solver step.

The Jacobians at a record are evaluated once and shared by the two steps that
meet there. Output times inside a step get ``S`` from a side step that starts
at the step's beginning with the same branch (its sub-step count scaled to its
length), so the march itself (and ``S`` at the records) does not depend on the
requested output times. Which branch each solver step took is written to
``branch`` / ``substeps``.

The kernels ``jac_y``, ``jac_p`` (and ``rhs``, for the Cash–Karp dense output)
are first-class function arguments, so this is compiled once for all models.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE
from pymc_odesens.sensitivity.matrix_exponential import EXPM_WORK_MATRICES
from pymc_odesens.sensitivity.pbs_interpolation import interpolate_state
from pymc_odesens.sensitivity.pbs_report import (
    BRANCH_EXP,
    BRANCH_EXP_STEADY,
    BRANCH_EXP_SUBSTEP_LIMIT,
    BRANCH_NAMES,
    BRANCH_PBS,
    BRANCH_PBS_REFINED,
)
from pymc_odesens.sensitivity.pbs_steps import (
    PBS_WORK_MATRICES,
    exp_apply,
    exp_factors,
    exp_step,
    matrix_norm,
    pbs_step,
    relative_change_below,
)

__all__ = [
    "BRANCH_NAMES",
    "BRANCH_PBS",
    "BRANCH_PBS_REFINED",
    "BRANCH_EXP_STEADY",
    "BRANCH_EXP_SUBSTEP_LIMIT",
    "BRANCH_EXP",
    "COUNTER_NAMES",
    "MARCH_SIGNATURE",
    "march_sensitivities",
]

ALGORITHM_PBS, ALGORITHM_PBSR, ALGORITHM_EXP = 0, 1, 2


COUNTER_NAMES = (
    "n_jac_y_evals",
    "n_jac_p_evals",
    "n_pbs_substeps",
    "n_exp_steps",
    "n_matrix_products",
    "n_interpolations",
    "n_interpolation_rhs_evals",
    "n_output_side_steps",
)
_JY, _JP, _PBS, _EXP, _PRODUCTS, _INTERP, _INTERP_RHS, _SIDE = range(len(COUNTER_NAMES))

MARCH_SIGNATURE = types.int64(
    types.int64,  # algorithm: 0 pbs, 1 pbsr, 2 exp
    KERNEL_TYPE,  # rhs (Cash–Karp dense output only)
    KERNEL_TYPE,  # jac_y: N x N
    KERNEL_TYPE,  # jac_p: P x N
    types.float64[::1],  # p
    types.int64,  # n_forced: leading sensitivity columns forced by J_p (P or 0)
    types.float64[::1],  # rec_t (records,)
    types.float64[:, ::1],  # rec_y (records, N)
    types.float64[:, ::1],  # rec_f (records, N)
    types.float64[:, ::1],  # rec_dense (records or 0, N): rk45's continuous extension
    types.int64,  # n_rec: number of valid records
    types.int64,  # interpolation code (pbs_options)
    types.float64[::1],  # output times (non-decreasing, within [rec_t[0], rec_t[n_rec-1]])
    types.float64[:, ::1],  # s0 (columns, N): S(t0) transposed
    types.float64[::1],  # controls: c, eps, n_max, max_step
    types.int64,  # norm code (pbs_steps)
    types.int64,  # steady-state test: 1 both Jacobians, 0 J_y only
    types.int64,  # Exp step Jacobians: 1 trapezoid (mean of both ends), 0 start
    types.float64[:, :, ::1],  # s_out (T, columns, N)
    types.int64[::1],  # branch per solver step (records - 1,)
    types.int64[::1],  # sub-steps per solver step (records - 1,)
    types.int64[::1],  # counters (COUNTER_NAMES)
)


@njit(cache=True)
def _evaluate(jac_y, jac_p, t, y, p, v, a, bt, n_forced, counters):
    jac_y(t, y.ctypes, p.ctypes, v.ctypes, a.ctypes)
    counters[_JY] += 1
    if n_forced > 0:
        jac_p(t, y.ctypes, p.ctypes, v.ctypes, bt.ctypes)
        counters[_JP] += 1


@njit(cache=True, inline="always")
def _evaluate_interpolated(
    kind,
    k,
    t,
    rec_t,
    rec_y,
    rec_f,
    rec_dense,
    rhs,
    jac_y,
    jac_p,
    p,
    v,
    ck_stages,
    ck_sub,
    ck_state,
    y_mid,
    a,
    bt,
    n_forced,
    counters,
):
    """Interpolate the state at ``t`` (inside step ``k``) into ``y_mid``.

    Evaluate the Jacobians there into ``a`` / ``bt``.
    """
    counters[_INTERP_RHS] += interpolate_state(
        kind,
        k,
        t,
        rec_t,
        rec_y,
        rec_f,
        rec_dense,
        rhs,
        p,
        v,
        ck_stages,
        ck_sub,
        ck_state,
        y_mid,
    )
    counters[_INTERP] += 1
    _evaluate(jac_y, jac_p, t, y_mid, p, v, a, bt, n_forced, counters)


@njit(cache=True)
def _finite(m):
    for x in m.ravel():
        if not math.isfinite(x):
            return False
    return True


@njit(cache=True)
def _pbs_substeps(
    k,
    t_a,
    t_end,
    n_sub,
    a_start,
    bt_start,
    a_end,
    bt_end,
    st,
    n_forced,
    kind,
    rec_t,
    rec_y,
    rec_f,
    rec_dense,
    rhs,
    jac_y,
    jac_p,
    p,
    v,
    a_l,
    bt_l,
    a_r,
    bt_r,
    y_mid,
    work,
    xt,
    out,
    ck_stages,
    ck_sub,
    ck_state,
    counters,
    end_is_record,
):
    """``n_sub`` equal PBS sub-steps from ``t_a`` (Jacobians a_start, bt_start) to ``t_end``.

    The right end's Jacobians are ``a_end``/``bt_end`` when ``end_is_record``
    (already evaluated at the record); otherwise they are evaluated at the
    interpolated state there, like every interior point.
    """
    dt = (t_end - t_a) / n_sub
    a_l[:, :] = a_start
    bt_l[:, :] = bt_start
    for j in range(1, n_sub + 1):
        if j == n_sub and end_is_record:
            pbs_step(dt, a_l, a_end, bt_l, bt_end, st, n_forced, work, xt, out)
        else:
            t_j = t_end if j == n_sub else t_a + j * dt
            _evaluate_interpolated(
                kind,
                k,
                t_j,
                rec_t,
                rec_y,
                rec_f,
                rec_dense,
                rhs,
                jac_y,
                jac_p,
                p,
                v,
                ck_stages,
                ck_sub,
                ck_state,
                y_mid,
                a_r,
                bt_r,
                n_forced,
                counters,
            )
            pbs_step(dt, a_l, a_r, bt_l, bt_r, st, n_forced, work, xt, out)
            a_l[:, :] = a_r
            bt_l[:, :] = bt_r
        counters[_PBS] += 1
        counters[_PRODUCTS] += 1
    return 0


@njit(cache=True)
def _exp_substeps(
    k,
    t_a,
    t_end,
    n_sub,
    a_start,
    bt_start,
    a_end,
    bt_end,
    end_is_record,
    trapezoid,
    st,
    n_forced,
    kind,
    rec_t,
    rec_y,
    rec_f,
    rec_dense,
    rhs,
    jac_y,
    jac_p,
    p,
    v,
    a_l,
    bt_l,
    a_r,
    bt_r,
    a_m,
    bt_m,
    y_mid,
    z,
    e,
    phi,
    expm_work,
    phit,
    gt,
    out,
    ck_stages,
    ck_sub,
    ck_state,
    counters,
):
    """``n_sub`` equal Exp steps from ``t_a`` to ``t_end``.

    Jacobians of each sub-step: those at its start, or with ``trapezoid`` the
    means of those at its two ends. Interior points use the interpolated
    state; the right end reuses ``a_end``/``bt_end`` when ``end_is_record``.
    """
    dt = (t_end - t_a) / n_sub
    for j in range(n_sub):
        if trapezoid:
            if j == 0:
                a_l[:, :] = a_start
                bt_l[:, :] = bt_start
            if j == n_sub - 1 and end_is_record:
                a_right = a_end
                bt_right = bt_end
            else:
                t_j = t_end if j == n_sub - 1 else t_a + (j + 1) * dt
                _evaluate_interpolated(
                    kind,
                    k,
                    t_j,
                    rec_t,
                    rec_y,
                    rec_f,
                    rec_dense,
                    rhs,
                    jac_y,
                    jac_p,
                    p,
                    v,
                    ck_stages,
                    ck_sub,
                    ck_state,
                    y_mid,
                    a_r,
                    bt_r,
                    n_forced,
                    counters,
                )
                a_right = a_r
                bt_right = bt_r
            for i in range(a_m.shape[0]):
                for jj in range(a_m.shape[1]):
                    a_m[i, jj] = 0.5 * (a_l[i, jj] + a_right[i, jj])
            for i in range(n_forced):
                for jj in range(bt_m.shape[1]):
                    bt_m[i, jj] = 0.5 * (bt_l[i, jj] + bt_right[i, jj])
            counters[_PRODUCTS] += exp_step(
                dt, a_m, bt_m, st, n_forced, z, e, phi, expm_work, phit, gt, out
            )
            if j < n_sub - 1:
                a_l[:, :] = a_right
                bt_l[:, :] = bt_right
        elif j == 0:
            counters[_PRODUCTS] += exp_step(
                dt, a_start, bt_start, st, n_forced, z, e, phi, expm_work, phit, gt, out
            )
        else:
            t_j = t_a + j * dt
            _evaluate_interpolated(
                kind,
                k,
                t_j,
                rec_t,
                rec_y,
                rec_f,
                rec_dense,
                rhs,
                jac_y,
                jac_p,
                p,
                v,
                ck_stages,
                ck_sub,
                ck_state,
                y_mid,
                a_l,
                bt_l,
                n_forced,
                counters,
            )
            counters[_PRODUCTS] += exp_step(
                dt, a_l, bt_l, st, n_forced, z, e, phi, expm_work, phit, gt, out
            )
        counters[_EXP] += 1
    return 0


@njit(MARCH_SIGNATURE, cache=True, nogil=True)
def march_sensitivities(
    algorithm,
    rhs,
    jac_y,
    jac_p,
    p,
    n_forced,
    rec_t,
    rec_y,
    rec_f,
    rec_dense,
    n_rec,
    kind,
    times,
    s0,
    controls,
    norm_kind,
    test_both,
    exp_trapezoid,
    s_out,
    branch,
    substeps,
    counters,
):
    """March ``S`` over the recorded steps; write it at ``times`` into ``s_out``.

    Returns 0, or 1 if a Jacobian turned non-finite (``counters`` tell where
    the march stopped; ``s_out`` is NaN from there on).
    """
    n = rec_y.shape[1]
    n_cols = s0.shape[0]
    n_p = max(n_forced, 1)
    n_times = times.size
    c_refine = controls[0]
    eps = controls[1]
    n_max = controls[2]
    max_step = controls[3]

    # work arrays, allocated once
    st = s0.copy()
    side = np.empty((n_cols, n))
    xt = np.empty((n_cols, n))
    out = np.empty((n_cols, n))
    gt = np.empty((n_cols, n))
    a_a = np.empty((n, n))
    a_b = np.empty((n, n))
    a_l = np.empty((n, n))
    a_r = np.empty((n, n))
    bt_a = np.zeros((n_p, n))
    bt_b = np.zeros((n_p, n))
    bt_l = np.zeros((n_p, n))
    bt_r = np.zeros((n_p, n))
    a_m = np.empty((n, n))
    bt_m = np.zeros((n_p, n))
    diff_a = np.empty((n, n))
    diff_b = np.empty((n_p, n))
    work = np.empty((PBS_WORK_MATRICES, n, n))
    z = np.empty((n, n))
    e = np.empty((n, n))
    phi = np.empty((n, n))
    phit = np.empty((n, n))
    expm_work = np.empty((EXPM_WORK_MATRICES, n, n))
    y_mid = np.empty(n)
    ck_stages = np.empty((1, n))
    ck_sub = np.zeros((6, n))
    ck_state = np.empty(n)
    v = np.zeros(max(n, 1))
    # warm starts of the power iterations: ||A||, ||dA||, ||B||, ||dB||
    v_a = np.zeros(n)
    v_da = np.zeros(n)
    v_b = np.zeros(n)
    v_db = np.zeros(n)
    u_n = np.empty(n)
    u_p = np.empty(n_p)

    t_a = rec_t[0]
    out_index = 0
    while out_index < n_times and times[out_index] <= t_a:
        s_out[out_index, :, :] = st
        out_index += 1
    if n_rec < 2:
        for i in range(out_index, n_times):
            s_out[i, :, :] = st
        return 0
    _evaluate(jac_y, jac_p, t_a, rec_y[0], p, v, a_a, bt_a, n_forced, counters)
    if not (_finite(a_a) and _finite(bt_a)):
        for i in range(out_index, n_times):
            s_out[i, :, :] = np.nan
        return 1
    pbsr = algorithm == ALGORITHM_PBSR
    norm_a = 0.0
    if pbsr:
        norm_a = matrix_norm(a_a, norm_kind, False, v_a, u_n)
    status = 0
    for k in range(n_rec - 1):
        t_b = rec_t[k + 1]
        h = t_b - t_a
        _evaluate(jac_y, jac_p, t_b, rec_y[k + 1], p, v, a_b, bt_b, n_forced, counters)
        if not (_finite(a_b) and _finite(bt_b)):
            status = 1
            for i in range(out_index, n_times):
                s_out[i, :, :] = np.nan
            return status
        n_split = 1
        if math.isfinite(max_step) and h > max_step:
            n_split = int(math.ceil(h / max_step))
        # choose the branch
        use_exp = algorithm == ALGORITHM_EXP
        n_sub = n_split
        code = BRANCH_EXP if use_exp else BRANCH_PBS
        norm_a_next = 0.0
        if pbsr:
            norm_a_next = matrix_norm(a_b, norm_kind, False, v_a, u_n)
            n_int_real = math.ceil(c_refine * h * norm_a)
            if not math.isfinite(n_int_real):
                n_int_real = math.inf
            if n_int_real > n_max:
                use_exp = True
                code = BRANCH_EXP_SUBSTEP_LIMIT
            else:
                steady = False
                if eps > 0.0:
                    steady = relative_change_below(
                        a_b, a_a, norm_a, eps, norm_kind, False, diff_a, v_da, u_n
                    )
                    if steady and test_both and n_forced > 0:
                        # ||J_p|| only where J_y passed (near steady states: rarely)
                        norm_b = matrix_norm(bt_a, norm_kind, True, v_b, u_p)
                        steady = relative_change_below(
                            bt_b, bt_a, norm_b, eps, norm_kind, True, diff_b, v_db, u_p
                        )
                if steady:
                    use_exp = True
                    code = BRANCH_EXP_STEADY
                else:
                    n_int = max(1, int(n_int_real))
                    n_sub = max(n_int, n_split)
                    code = BRANCH_PBS_REFINED if n_int > 1 else BRANCH_PBS
        branch[k] = code
        substeps[k] = n_sub
        # output times strictly inside the step
        if use_exp and not exp_trapezoid and n_sub == 1:
            # A, B frozen at t_a: chain the outputs, one segment after the other (exact
            # composition); segments of equal length (a uniform output grid) share e^(dt A)
            if out_index < n_times and times[out_index] < t_b:
                side[:, :] = st
            t_prev = t_a
            seg_prev = -1.0
            while out_index < n_times and times[out_index] < t_b:
                seg = times[out_index] - t_prev
                if seg > 0.0:
                    if abs(seg - seg_prev) > 1e-14 * max(abs(times[out_index]), abs(t_a)):
                        counters[_PRODUCTS] += exp_factors(seg, a_a, z, e, phi, expm_work)
                        seg_prev = seg
                    exp_apply(seg, e, phi, bt_a, side, n_forced, phit, gt, out)
                    counters[_EXP] += 1
                    counters[_SIDE] += 1
                s_out[out_index, :, :] = side
                t_prev = times[out_index]
                out_index += 1
        # side steps from (t_a, S_a) to the output times strictly inside the step (same
        # branch, sub-step count scaled to their length), then the step itself
        while True:
            inside = out_index < n_times and times[out_index] < t_b
            if inside:
                t_end = times[out_index]
                n_end = max(1, int(math.ceil(n_sub * (t_end - t_a) / h - 1e-12)))
                side[:, :] = st
                target = side
            else:
                t_end = t_b
                n_end = n_sub
                target = st
            if use_exp:
                _exp_substeps(
                    k,
                    t_a,
                    t_end,
                    n_end,
                    a_a,
                    bt_a,
                    a_b,
                    bt_b,
                    not inside,
                    exp_trapezoid,
                    target,
                    n_forced,
                    kind,
                    rec_t,
                    rec_y,
                    rec_f,
                    rec_dense,
                    rhs,
                    jac_y,
                    jac_p,
                    p,
                    v,
                    a_l,
                    bt_l,
                    a_r,
                    bt_r,
                    a_m,
                    bt_m,
                    y_mid,
                    z,
                    e,
                    phi,
                    expm_work,
                    phit,
                    gt,
                    out,
                    ck_stages,
                    ck_sub,
                    ck_state,
                    counters,
                )
            else:
                _pbs_substeps(
                    k,
                    t_a,
                    t_end,
                    n_end,
                    a_a,
                    bt_a,
                    a_b,
                    bt_b,
                    target,
                    n_forced,
                    kind,
                    rec_t,
                    rec_y,
                    rec_f,
                    rec_dense,
                    rhs,
                    jac_y,
                    jac_p,
                    p,
                    v,
                    a_l,
                    bt_l,
                    a_r,
                    bt_r,
                    y_mid,
                    work,
                    xt,
                    out,
                    ck_stages,
                    ck_sub,
                    ck_state,
                    counters,
                    not inside,
                )
            if not inside:
                break
            counters[_SIDE] += 1
            s_out[out_index, :, :] = side
            out_index += 1
        while out_index < n_times and times[out_index] <= t_b:
            s_out[out_index, :, :] = st
            out_index += 1
        # the right end becomes the left end
        t_a = t_b
        a_a, a_b = a_b, a_a
        bt_a, bt_b = bt_b, bt_a
        norm_a = norm_a_next
    for i in range(out_index, n_times):
        s_out[i, :, :] = st
    return status
