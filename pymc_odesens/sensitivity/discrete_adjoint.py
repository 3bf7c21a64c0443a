"""Discrete adjoint of a logged ``bdf`` run: the exact gradient of its steps.

The forward run logs every operation on its history (see
:mod:`pymc_odesens.solvers.multistep`: the initial table, each re-sampling for a
new step size, each accepted step with its order and size) and snapshots the
history every ``num_steps_between_checkpoints`` accepted steps. With the step
sizes and orders held fixed, one step is linear in the history except for its
corrector, whose solution ``y = y_pred + c f(t, y, p) - psi`` has the
derivative ``(I - c J_y)^{-1}`` (implicit function theorem). The backward pass
therefore needs no error control and no backward ODE: for each stretch between
snapshots, last first, it

1. replays the logged operations from the snapshot (the corrector by Newton
   with the method's tolerance), keeping ``y`` and the factors of
   ``I - c J_y(t, y)`` of each step of the stretch only;
2. walks the stretch backwards, adding the cotangents of the outputs the steps
   produced (the adjoints of the dense output), and propagating the cotangent
   of the history through the table update, the corrector
   (``w = (I - c J_y)^{-T} y_bar``, ``p_bar += c (df/dp)^T w``), the predictor
   and the re-samplings.

The stretch keeps the non-zeros of ``J_y`` at each step's solution (not its factors:
the backward walk factorises ``I - c J_y`` again, dense or sparse as the forward run did,
:mod:`pymc_odesens.solvers.newton_matrix`), so that its memory is the steps times the
Jacobian's non-zeros.

With events, the forward run is one logged run per stretch between the instants
where the integration stopped; going backwards, the events of an instant are undone
between runs as in the continuous adjoint
(:func:`~pymc_odesens.sensitivity.event_adjoint.undo_event_instants`, with the
event-time terms), and the cotangent of the state before them enters the run's last
step through its dense output.

The result is the gradient of the computed solution (for the logged step
sequence), which is what a sampler that uses the computed likelihood needs.
Where a derivative it needs is not finite (``J_y`` at a replayed step, making
the transposed solve non-finite, or ``df/dp``), the pass stops with
``NON_FINITE_DERIVATIVE`` at that step's time instead of returning NaN.
Memory is the log (four numbers per operation), the snapshots and one
stretch's states and Jacobians.

Only ``bdf`` runs are differentiated this way. The derivative of an ``adams``
run of a stiff problem is unstable: error control keeps its steps at the edge
of the method's stability region, where the linearised steps amplify, and on
robertson at rtol 1e-8 the discrete gradient was off by a factor 1e6 (the
continuous adjoint, which has its own error control, is not).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE
from pymc_odesens.sensitivity.event_adjoint import instant_workspace, undo_event_instants
from pymc_odesens.solvers import bdf_formula
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.difference_table import change_step_size, change_step_size_adjoint
from pymc_odesens.solvers.error_norm import error_weights, first_non_finite, weighted_rms_norm
from pymc_odesens.solvers.multistep import (
    LU_GAMMA_CHANGE,
    NEWTON_TOLERANCE,
    OP_INIT,
    OP_RESAMPLE,
    OP_STEP,
)
from pymc_odesens.solvers.newton import CONVERGED, newton_corrector
from pymc_odesens.solvers.newton_matrix import (
    factor_newton_matrix,
    new_newton_factor,
    solve_newton,
    solve_newton_transpose,
    structure_size,
)

__all__ = ["DISCRETE_ADJOINT_SIGNATURE", "discrete_adjoint_backward"]

DISCRETE_ADJOINT_SIGNATURE = types.int64(
    KERNEL_TYPE,  # rhs
    KERNEL_TYPE,  # J_y: non-zeros in the order of the Newton structure
    types.int64[::1],  # Newton structure of I - c J_y (solvers.newton_matrix)
    KERNEL_TYPE,  # vjp_y: J_y^T v
    KERNEL_TYPE,  # vjp_p: (df/dp)^T v
    types.float64[::1],  # p
    types.float64[::1],  # output times (T,)
    types.float64[:, ::1],  # cotangent (T, N)
    types.float64[:, ::1],  # op_log (rows used: n_ops)
    types.float64[:, ::1],  # snapshots (rows used: n_snapshots)
    types.int64,  # n_ops
    types.int64,  # n_snapshots
    types.float64[::1],  # rtol (N,): the forward run's, for the replayed Newton iterations
    types.float64[::1],  # atol (N,)
    KERNEL_TYPE,  # event_adjoint_jump
    KERNEL_TYPE,  # event_time_gradient
    types.float64[::1],  # ev_t: event log (solvers.event_instant), times (E,)
    types.int64[::1],  # ev_index (INSTANT_END rows close an instant)
    types.int64[::1],  # ev_slot
    types.float64[:, ::1],  # ev_y: state before each event / after each instant (E, N)
    types.float64[::1],  # y0_bar (N,), written
    types.float64[::1],  # p_bar (P,), written
    types.int64[::1],  # stats of the replay
    types.float64[::1],  # info
)


FULL_NEWTON_ITERATIONS = 20


@njit(cache=True)
def _full_newton(
    rhs, jac, newton, p, v, t_new, y_pred, c, psi, weights, jac_values, ints, floats, y, d, f,
    work, stats,
):  # fmt: skip
    """Solve ``y = y_pred + d``, ``d = c f(t_new, y) - psi`` with a fresh Jacobian each
    iteration; ``(converged, ints, floats)`` (the factor storage), converged once a
    correction is below the Newton tolerance."""
    n = y.size
    for i in range(n):
        y[i] = y_pred[i]
        d[i] = 0.0
    for _ in range(FULL_NEWTON_ITERATIONS):
        rhs(t_new, y.ctypes, p.ctypes, v.ctypes, f.ctypes)
        jac(t_new, y.ctypes, p.ctypes, v.ctypes, jac_values.ctypes)
        stats[st.N_RHS] += 1
        stats[st.N_JAC] += 1
        stats[st.N_NEWTON_ITERS] += 1
        factored, ints, floats = factor_newton_matrix(newton, ints, floats, jac_values, c, stats)
        if not factored:
            return False, ints, floats
        for i in range(n):
            f[i] = c * f[i] - psi[i] - d[i]
        solve_newton(newton, ints, floats, f, work)
        for i in range(n):
            y[i] += f[i]
            d[i] += f[i]
        norm = weighted_rms_norm(f, weights, n)
        if not np.isfinite(norm):
            return False, ints, floats
        if norm <= NEWTON_TOLERANCE:
            return True, ints, floats
    return False, ints, floats


@njit(cache=True)
def _time_before(op_log, index):
    """Time of the history just before log row ``index`` (the last step's end, or t0)."""
    for k in range(index - 1, -1, -1):
        if op_log[k, 0] != OP_RESAMPLE:
            return op_log[k, 3]
    return op_log[0, 3]


@njit(cache=True)
def _run_start(op_log, index):
    """Start time of the run that holds log row ``index`` (its OP_INIT row's time)."""
    for k in range(index - 1, -1, -1):
        if op_log[k, 0] == OP_INIT:
            return op_log[k, 3]
    return op_log[0, 3]


@njit(cache=True)
def _add_dense_cotangent(
    g, t_out, t_new, h, order, y_cur_bar, table_bar, eye, zero_rows, poly, dense_weights
):
    """Adjoint of the step's output at ``t_out``: ``y_new`` itself at ``t_new``, else
    the dense output ``sum_j w_j table[j]`` (its weights are its value for the identity
    table)."""
    n = g.size
    if t_out == t_new:
        for i in range(n):
            y_cur_bar[i] += g[i]
        return
    bdf_formula.dense_output(eye, order, t_new, h, zero_rows, t_out, poly, dense_weights)
    for j in range(dense_weights.size):
        wj = dense_weights[j]
        if wj != 0.0:
            for i in range(n):
                table_bar[j, i] += wj * g[i]


@njit(cache=True)
def _stretch(op_log, snapshots, s, n_ops, n_snapshots):
    """Log rows ``[start, end)`` replayed from snapshot ``s`` (up to the next snapshot or
    the next run's OP_INIT row)."""
    start = int(snapshots[s, 0])
    end = int(snapshots[s + 1, 0]) if s + 1 < n_snapshots else n_ops
    for k in range(start, end):
        if op_log[k, 0] == OP_INIT:
            return start, k
    return start, end


@njit(cache=True)
def _longest_stretch(op_log, snapshots, n_ops, n_snapshots):
    longest = 0
    for s in range(n_snapshots):
        start, end = _stretch(op_log, snapshots, s, n_ops, n_snapshots)
        steps = 0
        for k in range(start, end):
            if op_log[k, 0] == OP_STEP:
                steps += 1
        longest = max(longest, steps)
    return longest


@njit(DISCRETE_ADJOINT_SIGNATURE, cache=True, nogil=True)
def discrete_adjoint_backward(
    rhs,
    jac,
    newton,
    vjp_y,
    vjp_p,
    p,
    times,
    cotangent,
    op_log,
    snapshots,
    n_ops,
    n_snapshots,
    rtol,
    atol,
    adjoint_jump,
    time_gradient,
    ev_t,
    ev_index,
    ev_slot,
    ev_y,
    y0_bar,
    p_bar,
    stats,
    info,
):
    """Cotangents of ``y0`` and ``p`` of a logged run, given ``cotangent[i] = dL/dy(t_i)``.

    With events the log holds one run per stretch between the instants where the
    integration stopped (each run starting with its ``OP_INIT`` row). Going backwards,
    at the end of a run the cotangents of the outputs at or after its end time (right
    limits: the state after the events, or frozen after a terminal one) are added to
    ``lambda``, the event instant there (if events executed) is undone as in the
    continuous adjoint, and ``lambda`` enters the run's last step through the dense
    output at that time; at the start of a run its initial table gives ``lambda`` at
    the run's initial state.

    Returns a status of :mod:`pymc_odesens.solvers.status` (``NEWTON_FAILED``
    if a replayed corrector does not converge even with a fresh Jacobian).
    """
    n = y0_bar.size
    n_p = p_bar.size
    rows = (snapshots.shape[1] - 1 - n) // n
    n_times = times.size
    longest = _longest_stretch(op_log, snapshots, n_ops, n_snapshots)

    table = np.empty((rows, n))
    table_bar = np.zeros((rows, n))
    y_cur = np.empty(n)
    y_cur_bar = np.zeros(n)
    y_pred = np.empty(n)
    psi = np.empty(n)
    d = np.empty(n)
    f = np.empty(n)
    weights = np.empty(n)
    block_work = np.empty((n, 1))
    nnz = max(structure_size(newton), 1)
    jac_values = np.empty(nnz)
    fresh_i, fresh_f = new_newton_factor(newton)  # Newton matrices at predicted states
    previous_i, previous_f = new_newton_factor(newton)  # at the previous step's solution
    backward_i, backward_f = new_newton_factor(newton)  # the backward walk's
    rate = np.ones(1)
    r_mat = np.empty((rows, rows))
    u_mat = np.empty((rows, rows))
    ru_mat = np.empty((rows, rows))
    tmp = np.empty((rows, n))
    work = np.empty(n)
    v = np.zeros(1)
    # one stretch: the state after each step, J_y there, c and the time before it
    seg_y = np.empty((max(longest, 1), n))
    seg_jac = np.empty((max(longest, 1), nnz))
    seg_c = np.empty(max(longest, 1))
    seg_t_before = np.empty(max(longest, 1))
    # adjoint work
    d_bar = np.empty(n)
    w = np.empty(n)
    y_pred_bar = np.empty(n)
    psi_bar = np.empty(n)
    grad_p = np.empty(max(n_p, 1))
    eye = np.eye(rows)
    zero_rows = np.zeros(rows)
    poly = np.zeros(rows + 2)
    dense_weights = np.empty(rows)

    lam = np.zeros(n)  # cotangent of the state between runs
    instant_work = instant_workspace(ev_index, n, n_p)
    for i in range(n_p):
        p_bar[i] = 0.0
    out_index = n_times - 1
    k_event = ev_t.size - 1

    for s in range(n_snapshots - 1, -1, -1):
        start, end = _stretch(op_log, snapshots, s, n_ops, n_snapshots)
        ends_run = end == n_ops or op_log[end, 0] == OP_INIT
        inject = False
        tau = np.inf
        if ends_run:
            t_start = _run_start(op_log, start)
            if end < n_ops:
                tau = op_log[end, 3]  # the next run starts where this one stopped
            elif k_event >= 0 and ev_t[k_event] > t_start:
                tau = ev_t[k_event]  # the last run ended at a terminal instant
            if tau < np.inf:
                # outputs from tau on are right limits (after the instant's events)
                while out_index >= 0 and times[out_index] >= tau:
                    for i in range(n):
                        lam[i] += cotangent[out_index, i]
                    out_index -= 1
                code, k_event = undo_event_instants(
                    adjoint_jump,
                    time_gradient,
                    rhs,
                    p,
                    ev_t,
                    ev_index,
                    ev_slot,
                    ev_y,
                    k_event,
                    tau,
                    lam,
                    p_bar,
                    instant_work,
                    info,
                )
                if code != st.SUCCESS:
                    return code
                inject = True
        for i in range(n):
            y_cur[i] = snapshots[s, 1 + i]
        base = 1 + n
        for j in range(rows):
            for i in range(n):
                table[j, i] = snapshots[s, base + j * n + i]
        t = _time_before(op_log, start)

        # 1. replay the stretch
        m = 0
        have_lu = False
        c_lu = 0.0
        for k in range(start, end):
            kind = op_log[k, 0]
            order = int(op_log[k, 1])
            if kind == OP_RESAMPLE:
                change_step_size(table, order, op_log[k, 2], r_mat, u_mat, ru_mat, tmp)
                continue
            h = op_log[k, 2]
            t_new = op_log[k, 3]
            c = bdf_formula.predict(table, order, h, y_cur, y_pred, psi)
            error_weights(y_pred, y_pred, rtol, atol, n, weights)
            converged = False
            for attempt in range(2):
                if attempt == 1 or not have_lu or abs(c / c_lu - 1.0) > LU_GAMMA_CHANGE:
                    jac(t_new, y_pred.ctypes, p.ctypes, v.ctypes, jac_values.ctypes)
                    stats[st.N_JAC] += 1
                    factored, fresh_i, fresh_f = factor_newton_matrix(
                        newton, fresh_i, fresh_f, jac_values, c, stats
                    )
                    if not factored:
                        continue
                    use_i, use_f = fresh_i, fresh_f
                    c_use = c
                    rate[0] = 1.0
                else:
                    # the factors at the previous step's solution (have_lu: m > 0)
                    use_i, use_f = previous_i, previous_f
                    c_use = c_lu
                outcome, _ = newton_corrector(
                    rhs,
                    p,
                    v,
                    t_new,
                    y_pred,
                    c,
                    c_use,
                    psi,
                    newton,
                    use_i,
                    use_f,
                    weights,
                    n,
                    n,
                    NEWTON_TOLERANCE,
                    rate,
                    seg_y[m],
                    d,
                    f,
                    block_work,
                    stats,
                )
                if outcome == CONVERGED:
                    converged = True
                    break
            if not converged:
                # the modified iteration diverged where the forward run's converged (its
                # iterates and factors differed): Newton with a fresh J_y at each iterate
                converged, fresh_i, fresh_f = _full_newton(
                    rhs,
                    jac,
                    newton,
                    p,
                    v,
                    t_new,
                    y_pred,
                    c,
                    psi,
                    weights,
                    jac_values,
                    fresh_i,
                    fresh_f,
                    seg_y[m],
                    d,
                    f,
                    work,
                    stats,
                )
            if not converged:
                info[0], info[1], info[2], info[3] = t, h, -1, FULL_NEWTON_ITERATIONS
                return st.NEWTON_FAILED
            stats[st.N_STEPS] += 1
            # J_y at the solution: the backward pass's Newton matrix, and (factorised) the
            # next replayed step's
            jac(t_new, seg_y[m].ctypes, p.ctypes, v.ctypes, seg_jac[m].ctypes)
            stats[st.N_JAC] += 1
            factored, previous_i, previous_f = factor_newton_matrix(
                newton, previous_i, previous_f, seg_jac[m], c, stats
            )
            if not factored:
                info[0], info[1], info[2], info[3] = t_new, h, -1, 0.0
                return st.NEWTON_FAILED
            have_lu = True
            c_lu = c
            rate[0] = 1.0
            seg_c[m] = c
            seg_t_before[m] = t
            bdf_formula.accept(table, order, d, c, work)
            for i in range(n):
                y_cur[i] = seg_y[m, i]
            t = t_new
            m += 1

        # 2. backwards through the stretch
        for k in range(end - 1, start - 1, -1):
            kind = op_log[k, 0]
            order = int(op_log[k, 1])
            if kind == OP_RESAMPLE:
                change_step_size_adjoint(table_bar, order, op_log[k, 2], r_mat, u_mat, ru_mat, tmp)
                continue
            m -= 1
            h = op_log[k, 2]
            t_new = op_log[k, 3]
            c = seg_c[m]
            if inject:
                # the state before the run's events: this step's value or dense output
                _add_dense_cotangent(
                    lam,
                    tau,
                    t_new,
                    h,
                    order,
                    y_cur_bar,
                    table_bar,
                    eye,
                    zero_rows,
                    poly,
                    dense_weights,
                )
                for i in range(n):
                    lam[i] = 0.0
                inject = False
            # outputs this step produced: those in (t_before, t_new]
            while out_index >= 0 and times[out_index] > seg_t_before[m]:
                _add_dense_cotangent(
                    cotangent[out_index],
                    times[out_index],
                    t_new,
                    h,
                    order,
                    y_cur_bar,
                    table_bar,
                    eye,
                    zero_rows,
                    poly,
                    dense_weights,
                )
                out_index -= 1
            # table update and y_cur = y: cotangents of d and of y
            bdf_formula.accept_adjoint(table_bar, order, c, d_bar)
            # d = y - y_pred; y = y_pred + c f(y) - psi
            for i in range(n):
                w[i] = y_cur_bar[i] + d_bar[i]
                y_cur_bar[i] = 0.0
            factored, backward_i, backward_f = factor_newton_matrix(
                newton, backward_i, backward_f, seg_jac[m], c, stats
            )
            if not factored:
                info[0], info[1], info[2], info[3] = t_new, h, -1, 0.0
                return st.NEWTON_FAILED
            solve_newton_transpose(newton, backward_i, backward_f, w, work)
            bad = first_non_finite(w, n)
            if bad >= 0:
                info[0], info[1], info[2], info[3] = t_new, h, bad, 0.0
                return st.NON_FINITE_DERIVATIVE
            for i in range(n):
                y_pred_bar[i] = w[i] - d_bar[i]
                psi_bar[i] = -w[i]
            if n_p > 0:
                vjp_p(t_new, seg_y[m].ctypes, p.ctypes, w.ctypes, grad_p.ctypes)
                if first_non_finite(grad_p, n_p) >= 0:
                    info[0], info[1], info[2], info[3] = t_new, h, -1, 0.0
                    return st.NON_FINITE_DERIVATIVE
                for i in range(n_p):
                    p_bar[i] += c * grad_p[i]
            # the predictor read the history before the step
            bdf_formula.predict_adjoint(table_bar, order, h, y_cur_bar, y_pred_bar, psi_bar)

        if op_log[start - 1, 0] == OP_INIT:
            # the run's start: outputs there (right limits) and its initial table
            # (its state z and h0 f(t, z)) give lambda at z
            t_start = op_log[start - 1, 3]
            h0 = op_log[start - 1, 2]
            while out_index >= 0 and times[out_index] >= t_start:
                for i in range(n):
                    lam[i] += cotangent[out_index, i]
                out_index -= 1
            for i in range(n):
                y_cur[i] = snapshots[s, 1 + i]
                lam[i] += y_cur_bar[i] + table_bar[0, i]
                w[i] = h0 * table_bar[1, i]
            vjp_y(t_start, y_cur.ctypes, p.ctypes, w.ctypes, work.ctypes)
            for i in range(n):
                lam[i] += work[i]
            if n_p > 0:
                vjp_p(t_start, y_cur.ctypes, p.ctypes, w.ctypes, grad_p.ctypes)
                for i in range(n_p):
                    p_bar[i] += grad_p[i]
            for j in range(rows):
                for i in range(n):
                    table_bar[j, i] = 0.0
            for i in range(n):
                y_cur_bar[i] = 0.0

    # outputs at t0 (or frozen after a terminal event before any run) and the events at t0
    while out_index >= 0:
        for i in range(n):
            lam[i] += cotangent[out_index, i]
        out_index -= 1
    code, k_event = undo_event_instants(
        adjoint_jump,
        time_gradient,
        rhs,
        p,
        ev_t,
        ev_index,
        ev_slot,
        ev_y,
        k_event,
        -np.inf,
        lam,
        p_bar,
        instant_work,
        info,
    )
    if code != st.SUCCESS:
        return code
    for i in range(n):
        y0_bar[i] = lam[i]
    bad = first_non_finite(y0_bar, n)
    if bad >= 0 or first_non_finite(p_bar, n_p) >= 0:
        # a run's initial table, an output's dense cotangent or an event's jump
        info[0], info[1], info[2], info[3] = op_log[0, 3], 0.0, bad, 0.0
        return st.NON_FINITE_DERIVATIVE
    return st.SUCCESS
