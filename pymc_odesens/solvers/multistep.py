"""Variable-order, variable-step multistep driver shared by ``bdf`` and ``adams``.

The history is a backward-difference table on an equally spaced grid (a step
size change re-samples it, see :mod:`pymc_odesens.solvers.difference_table`);
the formula family (``bdf_formula`` or ``adams_formula``) supplies the
predictor, the corrector constants, the error constant, the table update and
the dense output. Everything else is shared and follows CVODE:

- a modified Newton corrector with the analytic ``J_y``; the LU factors of
  ``I - c J_y`` (dense or sparse, :mod:`pymc_odesens.solvers.newton_matrix`) are
  reused across steps until ``c`` has moved by more than 30 % or 20 steps have
  passed (the correction is scaled for the stale ``c``);
- ``J_y`` is re-evaluated after 50 steps or when Newton fails to converge with
  an old Jacobian; after a failure with a fresh Jacobian the step is divided
  by 4, and 10 failures in one step end the integration;
- after three error-test failures in one step the order drops to 1;
- a step shorter than ``EXACT_STEP_ULPS`` ulps of ``t`` is one that ``t`` can make:
  ``h`` is rounded to ``(t + h) - t`` (the history rescaled, rarely: a step that ``t``
  makes stays one until ``t`` crosses a power of two), so that ``f`` is evaluated at the
  times the formula assumes. CVODE takes ``t + h`` as it rounds; where ``f`` changes fast
  in time (an input ramp at ``t = 1800``, ``x'' = 3.8e9``) the half-ulp offset in time
  alone is an error of ``h |x''| ulp/2``, above an absolute tolerance of 1e-16 for any
  step longer than an ulp. The step size underflows when it falls below one ulp of ``t``
  (CVODE only warns that ``t + h == t``);
- a step retried after a Newton or error-test failure is shorter than the one that
  failed: rounding to a time ``t`` can make, or to the next output time, could give the
  failed step back (when it is a few ulps long), and the retries would never end; the
  retry then ends one representable time earlier, until the step underflows;
- order and step are re-selected from error estimates at orders q-1, q, q+1
  once q+1 steps of equal size have been taken.

For a vector made of B blocks of N components (the state and its forward
sensitivities), the same N x N factorisation serves every block. Components
after the first ``n_lu`` are quadratures (their right-hand side does not
depend on them, as in the adjoint's ``mu' = J_p^T lambda``): their Newton
matrix is the identity, so they converge one iteration behind the blocks.

Error norms are CVODES': the largest weighted RMS norm over the blocks (and
over the quadratures as one more group), never one RMS over all components.
Relative tolerances are per component, so that one integration can carry
states and quadratures with different controls (Stan's adjoint interface).
A run can stop at events (see :mod:`pymc_odesens.solvers.event_location`): at the
first accepted step over which an implicit condition changes sign in its direction
(the event time located on the dense output; status ``EVENT``), or at ``t_stop``, which
the step sequence then hits exactly (status ``STOP``). Outputs before the event are
written, ``z_event`` receives the vector just before it; the caller applies the jump
and starts a new run there (a clean restart at order 1, as the history is no longer
valid). A run can record its trajectory: every ``record_every`` accepted steps the
time, the leading ``rec_y.shape[1]`` components and (if ``rec_f`` has rows)
their derivative are stored; this serves both the adjoint's checkpoints and
the step-by-step data that its backward pass interpolates.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE
from pymc_odesens.solvers import adams_formula, bdf_formula
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.difference_table import change_step_size
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
from pymc_odesens.solvers.multistep_layout import (
    ADAMS,
    BDF,
    NO_STEP_LOG,
    OP_INIT,
    OP_RESAMPLE,
    OP_STEP,
    OP_WIDTH,
    snapshot_width,
    table_rows,
)
from pymc_odesens.solvers.newton import (
    CONVERGED,
    DIVERGED,
    NEWTON_MAX_ITERATIONS,
    NON_FINITE,
    newton_corrector,
)
from pymc_odesens.solvers.newton_matrix import (
    factor_newton_matrix,
    new_newton_factor,
    structure_size,
)

__all__ = [
    "run_multistep",
    "MULTISTEP_SIGNATURE",
    "BDF",
    "ADAMS",
    "OP_INIT",
    "OP_RESAMPLE",
    "OP_STEP",
    "OP_WIDTH",
    "NO_STEP_LOG",
    "table_rows",
    "snapshot_width",
]

MIN_FACTOR = 0.2
MAX_FACTOR = 10.0
LU_GAMMA_CHANGE = 0.3  # CVODE's dgmax
LU_MAX_AGE = 20  # CVODE's msbp
JAC_MAX_AGE = 50  # CVODE's msbj
MAX_CONVERGENCE_FAILURES = 10  # CVODE's maxncf
ERROR_FAILURES_BEFORE_ORDER_ONE = 3  # CVODE's mxnef1
# A step shorter than this many ulps of t is rounded to the one t can make, (t + h) - t
# (longer ones: evaluating f half an ulp off costs h |y''| ulp / 2, negligible beside the
# step's truncation error); a rounding by a relative amount above ROUNDING_RESTARTS_COUNT
# restarts the count of equal steps (as any other change of h)
EXACT_STEP_ULPS = 2.0**20
ROUNDING_RESTARTS_COUNT = 1e-6
# Order/step selection after q+1 equal steps: CVODE's biases against changing the
# order (error estimates at q-1, q, q+1 are inflated by these factors) and its
# threshold below which h is kept so that the factorisation stays valid.
BIAS_LOWER = 6.0
BIAS_SAME = 6.0
BIAS_HIGHER = 10.0
STEP_CHANGE_THRESHOLD = 1.5
# Newton stops when its estimate of the error left in the iterate, ||d_m|| min(1, rate),
# is below this in the weighted norm in which the error test asks for 1 (CVODE's nlscoef).
# Measured on the reference models against the relative bound 0.03 and scipy's
# max(10 eps / rtol, min(0.03, sqrt(rtol))): same accuracy, 1.1-1.4 instead of 2-2.5
# right-hand sides per step.
NEWTON_TOLERANCE = 0.1

MULTISTEP_SIGNATURE = types.int64(
    types.int64,  # formula family: BDF or ADAMS
    KERNEL_TYPE,  # rhs (of the full, possibly block-augmented vector)
    KERNEL_TYPE,  # J_y of the first block: its non-zeros in the order of the structure
    types.int64[::1],  # newton: structure of I - c J_y (solvers.newton_matrix)
    types.float64,  # t0
    types.float64[::1],  # y0
    types.float64[::1],  # p
    types.float64[::1],  # times
    types.float64[::1],  # rtol (per component)
    types.float64[::1],  # atol (per component)
    types.int64,  # max_num_steps
    types.int64,  # n_state (block size N)
    types.int64,  # n_lu: leading components solved with the N x N LU (a multiple of N)
    types.int64,  # n_err
    types.int64,  # record_every: record every k-th accepted step (0: no recording)
    types.float64[::1],  # rec_t (capacity,)
    types.float64[:, ::1],  # rec_y (capacity, recorded components)
    types.float64[:, ::1],  # rec_f (capacity or 0, recorded components)
    types.int64[::1],  # rec_count (1,): number of records written
    types.float64[:, ::1],  # op_log (capacity or 0, OP_WIDTH): the step log (discrete adjoint)
    types.float64[:, ::1],  # snapshots (capacity, 1 + n + table size) at every record
    types.int64[::1],  # op_count (2,): log rows and snapshots written
    KERNEL_TYPE,  # event conditions g(t, y) (called only if there are directions)
    types.int64[::1],  # direction of each implicit condition (none: no implicit events)
    types.float64[::1],  # g_zero (2 per condition): start codes, then bands (event_location)
    types.float64,  # t_stop: end a step exactly here and stop (an explicit event); inf: none
    types.float64[::1],  # event_out (event_location.EVENT_OUT_SIZE)
    types.float64[::1],  # z_event: the vector just before the event
    types.float64[:, ::1],  # y_out
    types.int64[::1],  # stats
    types.float64[::1],  # info
)


@njit(cache=True)
def _max_order(family):
    return bdf_formula.MAX_ORDER if family == BDF else adams_formula.MAX_ORDER


@njit(cache=True)
def _initialise(family, table, y0, f0, h):
    if family == BDF:
        bdf_formula.initialise(table, y0, f0, h)
    else:
        adams_formula.initialise(table, y0, f0, h)


@njit(cache=True)
def _predict(family, table, order, h, y_cur, y_pred, psi):
    if family == BDF:
        return bdf_formula.predict(table, order, h, y_cur, y_pred, psi)
    return adams_formula.predict(table, order, h, y_cur, y_pred, psi)


@njit(cache=True)
def _error_scale(family, order):
    if family == BDF:
        return bdf_formula.error_scale(order)
    return adams_formula.error_scale(order)


@njit(cache=True)
def _accept(family, table, order, d, c, work):
    if family == BDF:
        bdf_formula.accept(table, order, d, c, work)
    else:
        adams_formula.accept(table, order, d, c, work)


@njit(cache=True)
def _neighbour_error(family, table, order, h, which, out):
    if family == BDF:
        bdf_formula.neighbour_error_vector(table, order, h, which, out)
    else:
        adams_formula.neighbour_error_vector(table, order, h, which, out)


@njit(cache=True)
def _dense_output(family, table, order, t_new, h, y_new, t_out, poly, out):
    if family == BDF:
        bdf_formula.dense_output(table, order, t_new, h, y_new, t_out, poly, out)
    else:
        adams_formula.dense_output(table, order, t_new, h, y_new, t_out, poly, out)


@njit(cache=True)
def _log_op(op_log, op_count, kind, order, value, t):
    """Append one row to the step log (nothing without one).

    Rows past its capacity are counted, not written: the run checks
    :func:`_log_overflow` once per step.
    """
    if op_log.shape[0] == 0:
        return
    k = op_count[0]
    if k < op_log.shape[0]:
        op_log[k, 0] = kind
        op_log[k, 1] = order
        op_log[k, 2] = value
        op_log[k, 3] = t
    op_count[0] = k + 1


@njit(cache=True)
def _log_overflow(op_log, snapshots, op_count):
    return op_log.shape[0] > 0 and (
        op_count[0] > op_log.shape[0] or op_count[1] > snapshots.shape[0]
    )


@njit(cache=True)
def _resample(table, order, factor, r_mat, u_mat, ru_mat, tmp, op_log, op_count):
    """:func:`change_step_size`, logged."""
    change_step_size(table, order, factor, r_mat, u_mat, ru_mat, tmp)
    _log_op(op_log, op_count, np.int64(OP_RESAMPLE), order, factor, 0.0)


@njit(cache=True)
def _snapshot(op_log, snapshots, op_count, y_cur, table):
    """Store the history (log position, ``y_cur``, table); counted past capacity."""
    if op_log.shape[0] == 0:
        return
    k = op_count[1]
    if k < snapshots.shape[0]:
        n = y_cur.size
        snapshots[k, 0] = op_count[0]
        for i in range(n):
            snapshots[k, 1 + i] = y_cur[i]
        base = 1 + n
        for j in range(table.shape[0]):
            for i in range(n):
                snapshots[k, base + j * n + i] = table[j, i]
    op_count[1] = k + 1


@njit(cache=True)
def _record(t, y, f, rec_t, rec_y, rec_f, rec_count):
    """Append ``t``, the leading components of ``y`` (and ``f``); False when full."""
    k = rec_count[0]
    if k >= rec_t.size:
        return False
    rec_t[k] = t
    for i in range(rec_y.shape[1]):
        rec_y[k, i] = y[i]
    if rec_f.shape[0] > 0:
        for i in range(rec_f.shape[1]):
            rec_f[k, i] = f[i]
    rec_count[0] = k + 1
    return True


@njit(cache=True)
def _underflow(t, h, last_non_finite, err, weights, n_err, info):
    """The status of a step size below one ulp of ``t`` (``info`` filled): the right-hand
    side was not finite at the last try, or the error test failed."""
    info[0], info[1] = t, h
    if last_non_finite >= 0:
        info[2] = last_non_finite
        return st.NON_FINITE_RHS
    info[2] = largest_weighted_component(err, weights, n_err)
    return st.STEP_TOO_SMALL


@njit(MULTISTEP_SIGNATURE, cache=True, nogil=True)
def run_multistep(
    family,
    rhs,
    jac,
    newton,
    t0,
    y0,
    p,
    times,
    rtol,
    atol,
    max_num_steps,
    n_state,
    n_lu,
    n_err,
    record_every,
    rec_t,
    rec_y,
    rec_f,
    rec_count,
    op_log,
    snapshots,
    op_count,
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
    """Integrate with the formula ``family`` (BDF or ADAMS); write ``y`` at ``times``.

    Compiled once, eagerly, for both families and every model (kernels are
    function-pointer arguments): ``bdf`` and ``adams`` share this machine code.

    Returns a status code of :mod:`pymc_odesens.solvers.status`
    (``RECORD_FULL`` when the recording arrays, the step log or the snapshots
    are too short, ``EVENT`` / ``STOP`` at an event).
    """
    max_order = _max_order(family)
    n = y0.size
    n_times = times.size
    out_index = 0
    # this run's record and step-log counts start at zero, also for a run that ends where
    # it starts (an event at the last output time), which records nothing: the caller
    # adds these counts to its totals
    rec_count[0] = 0
    op_count[0] = 0
    op_count[1] = 0
    while out_index < n_times and times[out_index] <= t0:
        y_out[out_index, :] = y0
        out_index += 1
    if out_index == n_times:
        return checked_status(st.SUCCESS, y_out, out_index, times, info)
    t_end = times[n_times - 1]
    t_limit = min(t_end, t_stop)
    n_cond = directions.size

    table = np.zeros((max_order + 3, n))
    r_mat = np.empty((max_order + 1, max_order + 1))
    u_mat = np.empty((max_order + 1, max_order + 1))
    ru_mat = np.empty((max_order + 1, max_order + 1))
    tmp = np.empty((max_order + 1, n))
    poly = np.zeros(max_order + 2)
    y_cur = y0.copy()
    jac_values = np.empty(max(structure_size(newton), 1))
    factor_ints, factor_floats = new_newton_factor(newton)
    block_work = np.empty((n_state, max(1, n_lu // n_state)))
    y_pred = np.empty(n)
    psi = np.empty(n)
    y_new = np.empty(n)
    d = np.empty(n)
    f = np.empty(n)
    err = np.zeros(n)
    weights = np.ones(n)
    work = np.empty(n)
    dense = np.empty(n)
    v = np.zeros(1)
    g_now = np.empty(max(n_cond, 1))
    g_new = np.empty(max(n_cond, 1))
    g_trial = np.empty(max(n_cond, 1))
    sides = np.zeros(max(n_cond, 1), dtype=np.int64)
    band = np.zeros(max(n_cond, 1))  # event_location: noise bands of resting conditions
    bracket = np.empty(5)
    state = np.empty(n_state)  # the state part of the dense output, for the conditions

    t = t0
    if n_cond > 0:
        events(t, y0.ctypes, p.ctypes, v.ctypes, g_now.ctypes)
        initial_sides(g_now, g_zero, sides, band)
    rhs(t, y0.ctypes, p.ctypes, v.ctypes, f.ctypes)
    stats[st.N_RHS] += 1
    bad = first_non_finite(f, n)
    if bad >= 0:
        info[0], info[1], info[2] = t, 0.0, bad
        return st.NON_FINITE_RHS
    if record_every > 0:
        if not _record(t, y0, f, rec_t, rec_y, rec_f, rec_count):
            info[0], info[1], info[2], info[3] = t, 0.0, -1, rec_t.size
            return st.RECORD_FULL
    h = initial_step_size(
        rhs, t, y0, f, p, v, rtol, atol, n_state, n_lu, n_err, 1, t_limit - t, work, dense, weights
    )
    stats[st.N_RHS] += 1
    _initialise(family, table, y0, f, h)
    # np.int64(...), not literal constants: numba compiles a callee once per literal
    # argument value (a separate specialisation, inlined into this driver each time)
    order = np.int64(1)
    _log_op(op_log, op_count, np.int64(OP_INIT), order, h, t)
    _snapshot(op_log, snapshots, op_count, y_cur, table)
    n_equal_steps = 0
    n_accepted = 0

    jac(t, y0.ctypes, p.ctypes, v.ctypes, jac_values.ctypes)
    stats[st.N_JAC] += 1
    jac_age = 0
    jac_current = True
    c_lu = 0.0
    lu_age = 0
    have_lu = False
    rate = np.ones(1)  # Newton's convergence-rate estimate, kept across steps
    steps_since_output = 0

    while out_index < n_times:
        if steps_since_output >= max_num_steps:
            info[0], info[1], info[2], info[3] = t, h, -1, max_num_steps
            return st.MAX_NUM_STEPS
        convergence_failures = 0
        error_failures = 0
        last_non_finite = -1
        accepted = False
        n_iter = 0
        t_failed = np.inf  # where the last step shortened after a failure would have ended
        while not accepted:
            ulp = np.nextafter(t, np.inf) - t
            if h < ulp:
                return _underflow(t, h, last_non_finite, err, weights, n_err, info)
            t_new = min(t + h, t_limit)
            shortened = t_new >= t_failed
            if shortened:
                # the step was shortened after a failure, but ending at t_limit or at a time
                # t can make brings it back to the step that failed (a few ulps long): take
                # the next shorter one, so that every retry is shorter and the loop ends
                t_new = np.nextafter(t_failed, -np.inf)
                if t_new <= t:
                    return _underflow(t, h, last_non_finite, err, weights, n_err, info)
            if t_new == t_limit:
                factor = (t_limit - t) / h
                _resample(table, order, factor, r_mat, u_mat, ru_mat, tmp, op_log, op_count)
                n_equal_steps = 0
                h = t_limit - t
            elif shortened or (h < EXACT_STEP_ULPS * ulp and t_new - t != h):
                # t cannot make the step h: take the one it makes, so that the formula's
                # h is the difference of the times at which f is evaluated
                factor = (t_new - t) / h
                _resample(table, order, factor, r_mat, u_mat, ru_mat, tmp, op_log, op_count)
                if shortened or abs(factor - 1.0) > ROUNDING_RESTARTS_COUNT:
                    n_equal_steps = 0
                h = t_new - t
            c = _predict(family, table, order, h, y_cur, y_pred, psi)
            error_weights(y_pred, y_pred, rtol, atol, n, weights)
            if not have_lu or abs(c / c_lu - 1.0) > LU_GAMMA_CHANGE or lu_age >= LU_MAX_AGE:
                factored, factor_ints, factor_floats = factor_newton_matrix(
                    newton, factor_ints, factor_floats, jac_values, c, stats
                )
                if not factored:
                    # singular Newton matrix: treat as a convergence failure
                    outcome = DIVERGED
                    have_lu = False
                else:
                    c_lu = c
                    lu_age = 0
                    have_lu = True
                    rate[0] = 1.0
            if have_lu:
                outcome, n_iter = newton_corrector(
                    rhs,
                    p,
                    v,
                    t_new,
                    y_pred,
                    c,
                    c_lu,
                    psi,
                    newton,
                    factor_ints,
                    factor_floats,
                    weights,
                    n_lu,
                    n,  # Newton converges on every component
                    NEWTON_TOLERANCE,
                    rate,
                    y_new,
                    d,
                    f,
                    block_work,
                    stats,
                )
            if outcome != CONVERGED:
                stats[st.N_NEWTON_FAILS] += 1
                if outcome == NON_FINITE:
                    last_non_finite = first_non_finite(f, n)
                    if last_non_finite < 0:
                        last_non_finite = max(first_non_finite(y_new, n), 0)
                else:
                    last_non_finite = -1
                if not jac_current:
                    jac(t_new, y_pred.ctypes, p.ctypes, v.ctypes, jac_values.ctypes)
                    stats[st.N_JAC] += 1
                    jac_current = True
                    jac_age = 0
                    have_lu = False
                    continue
                convergence_failures += 1
                if convergence_failures >= MAX_CONVERGENCE_FAILURES:
                    info[0], info[1], info[3] = t, h, convergence_failures
                    if last_non_finite >= 0:
                        info[2] = last_non_finite
                        return st.NON_FINITE_RHS
                    info[2] = -1
                    return st.NEWTON_FAILED
                t_failed = t_new
                h *= 0.25
                _resample(table, order, 0.25, r_mat, u_mat, ru_mat, tmp, op_log, op_count)
                n_equal_steps = 0
                continue
            last_non_finite = -1
            # local error test
            error_weights(y_new, y_new, rtol, atol, n, weights)
            scale_err = _error_scale(family, order)
            for i in range(n):
                err[i] = scale_err * d[i]
            err_norm = grouped_rms_norm(err, weights, n_state, n_lu, n_err)
            if not (err_norm <= 1.0):  # also NaN
                stats[st.N_REJECTED] += 1
                error_failures += 1
                safety = (
                    0.9 * (2 * NEWTON_MAX_ITERATIONS + 1) / (2 * NEWTON_MAX_ITERATIONS + n_iter)
                )
                if error_failures >= ERROR_FAILURES_BEFORE_ORDER_ONE and order > 1:
                    order = np.int64(1)
                    factor = 0.1
                else:
                    factor = max(MIN_FACTOR, safety * err_norm ** (-1.0 / (order + 1)))
                    if order > 1:
                        # CVODE: after a failure, also consider order q-1
                        _neighbour_error(family, table, order, h, np.int64(-1), work)
                        err_minus = grouped_rms_norm(work, weights, n_state, n_lu, n_err)
                        if err_minus == 0.0:
                            factor_minus = 1.0
                        else:
                            factor_minus = safety * err_minus ** (-1.0 / order)
                        if factor_minus > factor:
                            order -= 1
                            factor = max(MIN_FACTOR, min(1.0, factor_minus))
                if factor < 1.0:  # (1: the same step again, at a lower order)
                    t_failed = t_new
                h *= factor
                _resample(table, order, factor, r_mat, u_mat, ru_mat, tmp, op_log, op_count)
                n_equal_steps = 0
                continue
            accepted = True

        # accepted step
        stats[st.N_STEPS] += 1
        steps_since_output += 1
        n_equal_steps += 1
        lu_age += 1
        jac_age += 1
        jac_current = False
        _accept(family, table, order, d, c, work)
        for i in range(n):
            y_cur[i] = y_new[i]
        n_accepted += 1
        _log_op(op_log, op_count, np.int64(OP_STEP), order, h, t_new)
        if n_cond > 0:
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
                    _dense_output(family, table, order, t_new, h, y_new, t_b, poly, state)
                    events(t_b, state.ctypes, p.ctypes, v.ctypes, g_new.ctypes)
                for j in range(n_cond):
                    if triggered(sides[j], g_new[j], band[j], directions[j]) == 0:
                        continue
                    start_bracket(bracket, t_a, g_now[j], t_b, g_new[j])
                    tm = first_point(t_a, g_now[j], t_b, g_new[j])
                    iterations = 0
                    while not bracket_done(bracket) and iterations < MAX_ROOT_ITERATIONS:
                        _dense_output(family, table, order, t_new, h, y_new, tm, poly, state)
                        events(tm, state.ctypes, p.ctypes, v.ctypes, g_trial.ctypes)
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
                    _dense_output(
                        family, table, order, t_new, h, y_new, times[out_index], poly, dense
                    )
                    y_out[out_index, :] = dense
                    out_index += 1
                if tau == t_new:
                    z_event[:] = y_new
                else:
                    _dense_output(family, table, order, t_new, h, y_new, tau, poly, z_event)
                event_out[0], event_out[1], event_out[2], event_out[3] = (
                    tau,
                    found,
                    out_index,
                    g_res,
                )
                return checked_status(st.EVENT, y_out, out_index, times, info)
        if t_new >= t_stop:
            while out_index < n_times and times[out_index] < t_stop:
                _dense_output(family, table, order, t_new, h, y_new, times[out_index], poly, dense)
                y_out[out_index, :] = dense
                out_index += 1
            z_event[:] = y_new
            event_out[0], event_out[1], event_out[2], event_out[3] = t_new, -1.0, out_index, 0.0
            return checked_status(st.STOP, y_out, out_index, times, info)
        if record_every > 0 and n_accepted % record_every == 0:
            if rec_f.shape[0] > 0:
                # the slope the formula took at t_new, (d + psi) / c, not f(t_new, y_new):
                # on stiff components f amplifies the Newton error left in y_new by
                # h |J_y| and a Hermite interpolant through it would swing by as much
                for i in range(n):
                    f[i] = (d[i] + psi[i]) / c
            if not _record(t_new, y_new, f, rec_t, rec_y, rec_f, rec_count):
                info[0], info[1], info[2], info[3] = t_new, h, -1, rec_t.size
                return st.RECORD_FULL
            _snapshot(op_log, snapshots, op_count, y_cur, table)
        if _log_overflow(op_log, snapshots, op_count):
            info[0], info[1], info[2], info[3] = t_new, h, -1, op_log.shape[0]
            return st.RECORD_FULL
        while out_index < n_times and times[out_index] <= t_new:
            if times[out_index] == t_new:
                y_out[out_index, :] = y_new
            else:
                _dense_output(family, table, order, t_new, h, y_new, times[out_index], poly, dense)
                y_out[out_index, :] = dense
            out_index += 1
            steps_since_output = 0
        t = t_new
        if out_index == n_times:
            break
        if jac_age >= JAC_MAX_AGE:
            jac(t, y_new.ctypes, p.ctypes, v.ctypes, jac_values.ctypes)
            stats[st.N_JAC] += 1
            jac_current = True
            jac_age = 0
            have_lu = False
        if n_equal_steps < order + 1:
            continue
        # order and step-size selection
        if order > 1:
            _neighbour_error(family, table, order, h, np.int64(-1), work)
            err_minus = grouped_rms_norm(work, weights, n_state, n_lu, n_err)
        else:
            err_minus = np.inf
        if order < max_order:
            _neighbour_error(family, table, order, h, np.int64(1), work)
            err_plus = grouped_rms_norm(work, weights, n_state, n_lu, n_err)
        else:
            err_plus = np.inf
        best = -1.0
        delta = 0
        for k, e, bias in (
            (-1, err_minus, BIAS_LOWER),
            (0, err_norm, BIAS_SAME),
            (1, err_plus, BIAS_HIGHER),
        ):
            if np.isinf(e):
                fac = 0.0
            else:
                fac = 1.0 / ((bias * e) ** (1.0 / (order + k + 1)) + 1e-6)
            if fac > best:
                best = fac
                delta = k
        if best < STEP_CHANGE_THRESHOLD:
            continue  # keep h and order: the factorisation stays valid
        order += delta
        factor = min(MAX_FACTOR, best)
        h *= factor
        _resample(table, order, factor, r_mat, u_mat, ru_mat, tmp, op_log, op_count)
        n_equal_steps = 0
    return checked_status(st.SUCCESS, y_out, out_index, times, info)
