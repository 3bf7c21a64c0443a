"""Integration of a hybrid ODE: runs of an integrator between events, and the jumps at them.

The integrators stop at the first event of a run (status ``EVENT`` for an implicit
event, located on their dense output; ``STOP`` at the next explicit event time, which
their steps hit exactly). This driver applies the jump there, with a generated
``jump`` kernel (the plain state's affect, or the augmented jump of the state and its
sensitivity columns: the driver does not know which), logs the event and starts a
new run at the event time: a clean restart, since the method's history ends at the
discontinuity. Output times equal to an event time receive the state after it (the
right limit); several explicit events at one time apply in declaration order, an
implicit event before explicit ones at the same time; after a terminal event the
state stays at its value after the jump.

Compiled once for every model and method (kernels are function-pointer arguments).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.event_location import EVENT_OUT_SIZE
from pymc_odesens.solvers.multistep import ADAMS, BDF, run_multistep
from pymc_odesens.solvers.runge_kutta import integrate_explicit_rk

__all__ = [
    "HYBRID_SIGNATURE",
    "EXPLICIT_SCHEDULE_SIGNATURE",
    "METHOD_CODES",
    "integrate_hybrid",
    "explicit_schedule",
    "G_ZERO_MARGIN",
]

METHOD_CODES = {"rk45": 0, "ckrk": 1, "bdf": 2, "adams": 3}
"""Method codes of :func:`integrate_hybrid`; rk45 and ckrk codes equal their RK method ids."""

G_ZERO_MARGIN = 10.0
"""After an implicit event the condition counts as zero (side undetermined, so that the
event cannot fire again at once) while ``|g| <= G_ZERO_MARGIN x`` its resolution at the
located root."""

HYBRID_SIGNATURE = types.int64(
    types.int64,  # method code (METHOD_CODES)
    KERNEL_TYPE,  # rhs of the integrated vector
    KERNEL_TYPE,  # J_y of its first block (non-zeros in the order of the structure)
    types.int64[::1],  # newton: structure of I - c J_y (solvers.newton_matrix)
    KERNEL_TYPE,  # event conditions (implicit events)
    KERNEL_TYPE,  # jump of the integrated vector at an event (v = [event, slot])
    types.int64[::1],  # event index of each implicit condition
    types.int64[::1],  # direction of each implicit condition
    types.float64[::1],  # explicit event times, sorted
    types.int64[::1],  # their event indices
    types.int64[::1],  # their positions within their events' times
    types.int64[::1],  # terminal flag by event index
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
    types.int64[::1],  # ev_index: event indices
    types.int64[::1],  # ev_slot: time positions (explicit; -1 implicit)
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
    KERNEL_TYPE,  # times of the explicit events (one per slot)
    types.int64[::1],  # event index of each slot
    types.int64[::1],  # position of each slot within its event's times
    types.float64,  # t0
    types.float64[::1],  # p
    types.float64[::1],  # out: sorted times
    types.int64[::1],  # out: their event indices
    types.int64[::1],  # out: their positions
)


@njit(EXPLICIT_SCHEDULE_SIGNATURE, cache=True, nogil=True)
def explicit_schedule(
    times_kernel, slot_event, slot_time, t0, p, stop_times, stop_event, stop_slot
):
    """Evaluate the explicit event times at ``p`` and sort them (ties in declaration order).

    Fills the three output arrays (one entry per slot); returns the index of a
    slot whose time is not finite, or -1.
    """
    n_slots = slot_event.size
    if n_slots == 0:
        return -1
    values = np.empty(n_slots)
    unused = np.zeros(1)
    times_kernel(t0, unused.ctypes, p.ctypes, unused.ctypes, values.ctypes)
    for s in range(n_slots):
        if not np.isfinite(values[s]):
            return s
    order = np.argsort(values, kind="mergesort")
    for s in range(n_slots):
        stop_times[s] = values[order[s]]
        stop_event[s] = slot_event[order[s]]
        stop_slot[s] = slot_time[order[s]]
    return -1


@njit(cache=True)
def _log_event(t, event, slot, z_before, ev_t, ev_index, ev_slot, ev_z, ev_count):
    k = ev_count[0]
    if k >= ev_t.size:
        return False
    ev_t[k] = t
    ev_index[k] = event
    ev_slot[k] = slot
    for i in range(ev_z.shape[1]):
        ev_z[k, i] = z_before[i]
    ev_count[0] = k + 1
    return True


@njit(HYBRID_SIGNATURE, cache=True, nogil=True)
def integrate_hybrid(
    code,
    rhs,
    jac,
    newton,
    conditions,
    jump,
    implicit_index,
    directions,
    stop_times,
    stop_event,
    stop_slot,
    terminal,
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
    """Integrate through the events; write the vector at ``times`` into ``z_out``.

    With a step log (``op_log`` has rows; ``bdf``/``adams`` only), each run
    appends its log (starting with its ``OP_INIT`` row) and snapshots, whose
    log positions count from the start of ``op_log``.

    Returns a status code of :mod:`pymc_odesens.solvers.status` (``RECORD_FULL``
    when the recording, the step log or the event log is too short).
    """
    n = z0.size
    n_times = times.size
    n_cond = directions.size
    n_stop = stop_times.size
    z = z0.copy()
    z_event = np.empty(n)
    v = np.zeros(2)
    event_out = np.zeros(EVENT_OUT_SIZE)
    g_zero = np.zeros(n_cond)
    count = np.zeros(1, dtype=np.int64)
    rec_total = 0
    logging = op_log.shape[0] > 0
    op_count[0] = 0
    op_count[1] = 0
    run_count = np.zeros(2, dtype=np.int64)
    ev_count[0] = 0
    t = t0
    out_index = 0
    k_stop = 0
    while k_stop < n_stop and stop_times[k_stop] < t0:
        k_stop += 1
    t_last = times[n_times - 1] if n_times > 0 else t0
    events_since_output = 0
    while True:
        # explicit events at t (the start, or the stop time just reached)
        while k_stop < n_stop and stop_times[k_stop] <= t and t <= t_last:
            e = stop_event[k_stop]
            if not _log_event(t, e, stop_slot[k_stop], z, ev_t, ev_index, ev_slot, ev_z, ev_count):
                info[0], info[1], info[2], info[3] = t, 0.0, -1, ev_t.size
                return st.RECORD_FULL
            v[0], v[1] = e, stop_slot[k_stop]
            jump(t, z.ctypes, p.ctypes, v.ctypes, z_event.ctypes)
            z[:] = z_event
            k_stop += 1
            events_since_output += 1
            for j in range(n_cond):
                g_zero[j] = 0.0
            if terminal[e] != 0:
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
        if status == st.STOP:
            z[:] = z_event
            for j in range(n_cond):
                g_zero[j] = 0.0
            continue
        j_cond = int(event_out[1])
        e = implicit_index[j_cond]
        if not _log_event(t, e, -1, z_event, ev_t, ev_index, ev_slot, ev_z, ev_count):
            info[0], info[1], info[2], info[3] = t, 0.0, -1, ev_t.size
            return st.RECORD_FULL
        v[0], v[1] = e, -1.0
        jump(t, z_event.ctypes, p.ctypes, v.ctypes, z.ctypes)
        events_since_output += 1
        for j in range(n_cond):
            g_zero[j] = 0.0
        g_zero[j_cond] = G_ZERO_MARGIN * event_out[3]
        if terminal[e] != 0:
            while out_index < n_times:
                z_out[out_index, :] = z
                out_index += 1
            return st.SUCCESS
