"""Integration of a hybrid ODE: runs of an integrator between event instants, and the instants.

The integrators stop where a root atom of the events changes sign (status ``EVENT``,
located on their dense output) or at the next scheduled time (``STOP``: an explicit
event's time or a time atom's, which their steps hit exactly). This driver then
processes the *instant* there (:mod:`pymc_odesens.solvers.event_instant`): which events
fire, in which order, their jumps (generated ``jump`` kernels of the plain state or of
the state and its sensitivity columns: the driver does not know which), cascades, and
the sides of the atoms for the next run, which starts at the instant's time: a clean
restart, since the method's history ends at the discontinuity. A jump that leaves a
component NaN or infinite (the state, or a sensitivity column through the event time's
derivative) ends the integration with ``NON_FINITE_JUMP``. ``t0`` is an instant
too (events whose trigger is true there with ``initial_value`` false, explicit events
due at ``t0``). Output times equal to an instant's time receive the state after it (the
right limit); after a terminal event the state stays at its value after the instant.

Compiled once for every model and method (kernels are function-pointer arguments).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.event_instant import new_workspace, process_instant
from pymc_odesens.solvers.event_location import EVENT_OUT_SIZE
from pymc_odesens.solvers.multistep import ADAMS, BDF, run_multistep
from pymc_odesens.solvers.runge_kutta import integrate_explicit_rk

__all__ = [
    "HYBRID_SIGNATURE",
    "EXPLICIT_SCHEDULE_SIGNATURE",
    "METHOD_CODES",
    "integrate_hybrid",
    "explicit_schedule",
]

METHOD_CODES = {"rk45": 0, "ckrk": 1, "bdf": 2, "adams": 3}
"""Method codes of :func:`integrate_hybrid`; rk45 and ckrk codes equal their RK method ids."""

HYBRID_SIGNATURE = types.int64(
    types.int64,  # method code (METHOD_CODES)
    KERNEL_TYPE,  # rhs of the integrated vector
    KERNEL_TYPE,  # J_y of its first block (non-zeros in the order of the structure)
    types.int64[::1],  # newton: structure of I - c J_y (solvers.newton_matrix)
    KERNEL_TYPE,  # event_conditions: the root atoms
    KERNEL_TYPE,  # event_condition_rates: their time derivatives
    KERNEL_TYPE,  # event_triggers
    KERNEL_TYPE,  # event_priorities
    KERNEL_TYPE,  # jump of the integrated vector at an event (v = [event, dtau...])
    KERNEL_TYPE,  # time sensitivity of its columns (v = [cause]; not called without columns)
    types.int64[::1],  # sign changes of each root atom that stop a run (+1, -1, 0 both)
    types.int64[:, ::1],  # event table (codegen.event_tables)
    types.int64[:, ::1],  # cause table: class and an event of each cause code c at c + 1
    types.float64[::1],  # scheduled times, sorted
    types.int64[::1],  # their owners: explicit event index, or -1 - m for time atom m
    types.int64[::1],  # their slots (positions in event_times)
    types.float64,  # t0
    types.float64[::1],  # z0
    types.float64[::1],  # p
    types.float64[::1],  # output times
    types.float64[::1],  # rtol per component
    types.float64[::1],  # atol per component
    types.int64,  # max_num_steps (also bounds the events between two output times)
    types.int64,  # n_state
    types.int64,  # n_lu
    types.int64,  # n_err
    types.int64,  # record_every (0: none)
    types.float64[::1],  # rec_t
    types.float64[:, ::1],  # rec_y
    types.float64[:, ::1],  # rec_f (0 rows: no derivatives)
    types.int64[::1],  # rec_count (1,)
    types.float64[:, ::1],  # op_log: step log of the bdf/adams runs (0 rows: none)
    types.float64[:, ::1],  # snapshots of their history (log positions over all runs)
    types.int64[::1],  # op_count (2,): log rows and snapshots over all runs
    types.float64[::1],  # ev_t: event log, times
    types.int64[::1],  # ev_index: event index (INSTANT_END rows close an instant)
    types.int64[::1],  # ev_slot: executions back to the trigger time / the instant's cause
    types.float64[:, ::1],  # ev_z: leading components of the vector before each event
    types.int64[::1],  # ev_count (1,)
    types.float64[:, ::1],  # z_out (T, len(z0))
    types.int64[::1],  # stats
    types.float64[::1],  # info
)


@njit(cache=True)
def _run(
    code,
    rhs,
    jac,
    newton,
    conditions,
    directions,
    g_zero,
    t0,
    z0,
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
    t_stop,
    event_out,
    z_event,
    z_out,
    stats,
    info,
):
    if code < 2:
        op_count[0] = 0  # explicit methods keep no step log
        op_count[1] = 0
        return integrate_explicit_rk(
            rhs,
            t0,
            z0,
            p,
            times,
            rtol,
            atol,
            max_num_steps,
            n_state,
            n_err,
            code,
            record_every,
            rec_t,
            rec_y,
            rec_f,
            rec_count,
            np.zeros((0, 0)),
            conditions,
            directions,
            g_zero,
            t_stop,
            event_out,
            z_event,
            z_out,
            stats,
            info,
        )
    family = BDF if code == 2 else ADAMS
    return run_multistep(
        family,
        rhs,
        jac,
        newton,
        t0,
        z0,
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
        conditions,
        directions,
        g_zero,
        t_stop,
        event_out,
        z_event,
        z_out,
        stats,
        info,
    )


EXPLICIT_SCHEDULE_SIGNATURE = types.int64(
    KERNEL_TYPE,  # event_times: the scheduled times (one per slot)
    types.int64[::1],  # owner of each slot (explicit event index, or -1 - m time atom m)
    types.int64[::1],  # position of each slot within its event's times
    types.float64,  # t0
    types.float64[::1],  # p
    types.float64[::1],  # out: sorted times
    types.int64[::1],  # out: their owners
    types.int64[::1],  # out: their slots
)


@njit(EXPLICIT_SCHEDULE_SIGNATURE, cache=True, nogil=True)
def explicit_schedule(
    times_kernel, slot_event, slot_time, t0, p, stop_times, stop_owner, stop_slot
):
    """Evaluate the scheduled times at ``p`` and sort them (ties in slot order).

    Fills the three output arrays (one entry per slot: time, owner, slot); returns the
    index of a slot whose time is not finite (its value then in ``stop_times[0]``), or -1.
    ``slot_time`` is unused (kept for the messages of the callers).
    """
    n_slots = slot_event.size
    if n_slots == 0:
        return -1
    values = np.empty(n_slots)
    unused = np.zeros(1)
    times_kernel(t0, unused.ctypes, p.ctypes, unused.ctypes, values.ctypes)
    for s in range(n_slots):
        if not np.isfinite(values[s]):
            stop_times[0] = values[s]
            return s
    order = np.argsort(values, kind="mergesort")
    for s in range(n_slots):
        stop_times[s] = values[order[s]]
        stop_owner[s] = slot_event[order[s]]
        stop_slot[s] = order[s]
    return -1


@njit(HYBRID_SIGNATURE, cache=True, nogil=True)
def integrate_hybrid(
    code,
    rhs,
    jac,
    newton,
    conditions,
    rates,
    triggers,
    priorities,
    jump,
    time_sensitivity,
    directions,
    table,
    cause_table,
    stop_times,
    stop_owner,
    stop_slot,
    t0,
    z0,
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
    ev_t,
    ev_index,
    ev_slot,
    ev_z,
    ev_count,
    z_out,
    stats,
    info,
):
    """Integrate through the event instants; write the vector at ``times`` into ``z_out``.

    With a step log (``op_log`` has rows; ``bdf``/``adams`` only), each run
    appends its log (starting with its ``OP_INIT`` row) and snapshots, whose
    log positions count from the start of ``op_log``.

    Returns a status code of :mod:`pymc_odesens.solvers.status` (``RECORD_FULL``
    when the recording, the step log or the event log is too short).
    """
    n_times = times.size
    n_roots = directions.size
    n_stop = stop_times.size
    n_time = 0
    for k in range(n_stop):
        if stop_owner[k] < 0:
            n_time += 1
    atom_time = np.zeros(n_time)
    for k in range(n_stop):
        if stop_owner[k] < 0:
            atom_time[-1 - stop_owner[k]] = stop_times[k]
    z = z0.copy()
    z_event = np.empty(z0.size)
    event_out = np.zeros(EVENT_OUT_SIZE)
    g_zero = np.zeros(2 * n_roots)  # start codes and bands (event_location)
    workspace = new_workspace(z0.size, n_roots, n_roots + n_time, table.shape[0])
    count = np.zeros(1, dtype=np.int64)
    rec_total = 0
    logging = op_log.shape[0] > 0
    op_count[0] = 0
    op_count[1] = 0
    run_count = np.zeros(2, dtype=np.int64)
    ev_count[0] = 0
    t = t0
    out_index = 0
    t_last = times[n_times - 1] if n_times > 0 else t0
    k_stop = 0
    while k_stop < n_stop and stop_times[k_stop] < t0:
        k_stop += 1
    # t0 is the first instant (triggers true there with initial_value false, explicit
    # events due at t0); later ones are where a run stopped
    initial = True
    j_cross = -1
    resolution = 0.0
    events_since_output = 0
    while True:
        k_to = k_stop
        while k_to < n_stop and stop_times[k_to] <= t and t <= t_last:
            k_to += 1
        status, executions, terminal = process_instant(
            t,
            z,
            p,
            initial,
            j_cross,
            resolution,
            rtol,
            atol,
            k_stop,
            k_to,
            n_state,
            rhs,
            conditions,
            rates,
            triggers,
            priorities,
            jump,
            time_sensitivity,
            directions,
            table,
            cause_table,
            stop_owner,
            stop_slot,
            atom_time,
            g_zero,
            workspace,
            ev_t,
            ev_index,
            ev_slot,
            ev_z,
            ev_count,
            info,
        )
        if status != st.SUCCESS:
            return status
        initial = False
        k_stop = k_to
        events_since_output += executions
        if terminal:
            while out_index < n_times:
                z_out[out_index, :] = z
                out_index += 1
            return st.SUCCESS
        if out_index >= n_times:
            return st.SUCCESS
        if events_since_output > max_num_steps:
            info[0], info[1], info[2], info[3] = t, 0.0, -1, max_num_steps
            return st.MAX_NUM_STEPS
        t_stop = np.inf
        if k_stop < n_stop and stop_times[k_stop] <= t_last:
            t_stop = stop_times[k_stop]
        rec_rows = rec_f.shape[0]
        if logging and (op_log.shape[0] - op_count[0] < 2 or snapshots.shape[0] - op_count[1] < 1):
            info[0], info[1], info[2], info[3] = t, 0.0, -1, op_log.shape[0]
            return st.RECORD_FULL
        status = _run(
            code,
            rhs,
            jac,
            newton,
            conditions,
            directions,
            g_zero,
            t,
            z,
            p,
            times[out_index:],
            rtol,
            atol,
            max_num_steps,
            n_state,
            n_lu,
            n_err,
            record_every,
            rec_t[rec_total:],
            rec_y[rec_total:],
            rec_f[min(rec_total, rec_rows) :],
            count,
            op_log[op_count[0] :],
            snapshots[op_count[1] :],
            run_count,
            t_stop,
            event_out,
            z_event,
            z_out[out_index:],
            stats,
            info,
        )
        rec_total += count[0]
        rec_count[0] = rec_total
        if logging:
            # the run counted its snapshots' log positions from its own first row
            for j in range(min(run_count[1], snapshots.shape[0] - op_count[1])):
                snapshots[op_count[1] + j, 0] += op_count[0]
            op_count[0] += run_count[0]
            op_count[1] += run_count[1]
            if op_count[0] > op_log.shape[0] or op_count[1] > snapshots.shape[0]:
                info[0], info[1], info[2], info[3] = t, 0.0, -1, op_log.shape[0]
                return st.RECORD_FULL
        if status == st.SUCCESS:
            return st.SUCCESS
        if status != st.EVENT and status != st.STOP:
            return status
        written = int(event_out[2])
        if written > 0:
            events_since_output = 0
        out_index += written
        t = event_out[0]
        z[:] = z_event
        j_cross = int(event_out[1]) if status == st.EVENT else -1
        resolution = event_out[3]
