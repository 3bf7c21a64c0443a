"""The adjoint's backward pass, compiled once for all models.

Walks from the last output time back to ``t0``. At each output time ``t_i``
the cotangent ``dL/dy(t_i)`` is added to ``lambda``; between them the backward
system of :mod:`pymc_odesens.codegen.adjoint_source` is integrated (in
``s = -t``) by ``bdf`` or ``adams``, restarting at each output time as the
jump in ``lambda`` requires. The forward state it needs is never stored for
the whole run: the forward pass kept only checkpoints, and the stretch
between two checkpoints is re-integrated (recording every step, state and
derivative) when the backward pass enters it. Memory is the checkpoints plus
one stretch.

Every value of ``[lambda, mu]`` the pass produces is checked: the integrations
check theirs (see :mod:`pymc_odesens.solvers.multistep`), the events' adjoint jumps are
checked where they are undone (:mod:`pymc_odesens.sensitivity.event_adjoint`), and the
short explicit stretches here (``NON_FINITE_DERIVATIVE`` at the time where it happened,
in the backward phase).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.recorded_trajectory import recording_views, set_record_count
from pymc_odesens.codegen.signature import KERNEL_TYPE
from pymc_odesens.sensitivity.event_adjoint import instant_workspace, undo_event_instants
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.error_norm import first_non_finite
from pymc_odesens.solvers.event_location import EVENT_OUT_SIZE
from pymc_odesens.solvers.multistep import OP_WIDTH, run_multistep

__all__ = ["backward_pass", "BACKWARD_INFO_SIZE", "PHASE_REINTEGRATION", "PHASE_BACKWARD"]

BACKWARD_INFO_SIZE = 5  # t, h, component, extra (as status.INFO_SIZE) and the phase
PHASE_REINTEGRATION = 0
PHASE_BACKWARD = 1
# A backward stretch shorter than this many units in the last place of t (two output
# times, or an output time and a checkpoint, a few roundings apart) is too short for
# the integrator's smallest step: it is taken as one explicit Euler step instead.
SHORT_SPAN_ULPS = 100.0

BACKWARD_SIGNATURE = types.int64(
    types.int64,  # forward family (multistep.BDF or ADAMS), for the re-integration
    types.int64,  # backward family
    KERNEL_TYPE,  # rhs
    KERNEL_TYPE,  # jac_y: non-zeros in the order of the forward Newton structure
    types.int64[::1],  # forward Newton structure (I - c J_y; solvers.newton_matrix)
    KERNEL_TYPE,  # adjoint_rhs
    KERNEL_TYPE,  # adjoint_jac: the same non-zeros, at the recorded state
    types.int64[::1],  # backward Newton structure (I - c J_y^T)
    types.float64,  # t0
    types.float64[::1],  # params (P,)
    types.float64[::1],  # output times (T,)
    types.float64[:, ::1],  # cotangent dL/dy(t_i) (T, N)
    types.float64[::1],  # checkpoint times
    types.float64[:, ::1],  # checkpoint states
    types.int64,  # number of checkpoints
    types.float64[::1],  # forward rtol (N,)
    types.float64[::1],  # forward atol (N,)
    types.float64[::1],  # backward rtol (N + P,): lambda then quadratures
    types.float64[::1],  # backward atol (N + P,)
    types.int64,  # max_num_steps
    types.float64[::1],  # trajectory buffer (parameters + room for one stretch)
    KERNEL_TYPE,  # event_adjoint_jump (events only)
    KERNEL_TYPE,  # event_time_gradient (events only)
    types.float64[::1],  # event log (solvers.event_instant): times
    types.int64[::1],  # event indices (INSTANT_END rows close an instant)
    types.int64[::1],  # executions back to the trigger time / the instant's cause
    types.float64[:, ::1],  # the state before each event / after each instant
    types.float64,  # t_frozen: a terminal event's time (the state is constant after it)
    types.float64[::1],  # z (N + P,), out: [lambda(t0), mu(t0)]
    types.int64[::1],  # statistics of the re-integration
    types.int64[::1],  # statistics of the backward integration
    types.float64[::1],  # info (BACKWARD_INFO_SIZE,)
)


@njit(BACKWARD_SIGNATURE, cache=True, nogil=True)
def backward_pass(
    family_forward,
    family_backward,
    rhs,
    jac,
    newton,
    adjoint_rhs,
    adjoint_jac,
    newton_adjoint,
    t0,
    p,
    times,
    cotangent,
    ckpt_t,
    ckpt_y,
    n_ckpt,
    rtol_f,
    atol_f,
    rtol_b,
    atol_b,
    max_num_steps,
    buf,
    adjoint_jump,
    time_gradient,
    ev_t,
    ev_index,
    ev_slot,
    ev_y,
    t_frozen,
    z,
    stats_f,
    stats_b,
    info,
):
    """Integrate the adjoint from ``times[-1]`` to ``t0``; ``z`` ends as ``[lambda(t0), mu(t0)]``.

    At an output time its cotangent is added to ``lambda`` (outputs are right
    limits), then the event instant at that time is undone
    (:func:`~pymc_odesens.sensitivity.event_adjoint.undo_event_instants`), which also
    adds its terms to ``mu``. After a terminal event at ``t_frozen`` the state is
    constant, so ``lambda`` only collects cotangents there.

    Returns a status code; on failure ``info[4]`` tells the phase.
    """
    n = ckpt_y.shape[1]
    n_z = z.size
    n_times = times.size
    rec_t, rec_y, rec_f = recording_views(buf)
    rec_count = np.zeros(1, dtype=np.int64)
    no_t = np.zeros(0)
    no_rows = np.zeros((0, 0))
    no_count = np.zeros(1, dtype=np.int64)
    no_log = np.zeros((0, OP_WIDTH))
    no_log_count = np.zeros(2, dtype=np.int64)
    no_directions = np.zeros(0, dtype=np.int64)
    no_values = np.zeros(0)
    event_out = np.zeros(EVENT_OUT_SIZE)
    unused = np.zeros(1)
    dz = np.empty(n_z)
    # re-integration targets: the output times inside a stretch, then its end
    target_f = np.empty(n_times + 1)
    y_end = np.empty((n_times + 1, n))
    target_s = np.empty(1)
    z_end = np.empty((1, n_z))
    n_p = n_z - n
    instant_work = instant_workspace(ev_index, n, n_p)
    for i in range(n_z):
        z[i] = 0.0
    t_end = min(times[n_times - 1], t_frozen)
    loaded = -1
    t_cur = times[n_times - 1]
    i = n_times - 1
    k_event = ev_t.size - 1
    while True:
        while i >= 0 and times[i] >= t_cur:
            for k in range(n):
                z[k] += cotangent[i, k]
            i -= 1
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
            t_cur,
            z[:n],
            z[n:],
            instant_work,
            info,
        )
        if code != st.SUCCESS:
            info[4] = PHASE_BACKWARD
            return code
        if i < 0 and k_event < 0 and t_cur <= t0:
            break
        target = t0
        if i >= 0:
            target = max(target, times[i])
        if k_event >= 0:
            target = max(target, ev_t[k_event])
        if t_cur > t_end:
            # after a terminal event nothing moves: lambda and mu are constant
            t_cur = max(target, t_end)
            continue
        while t_cur > target:
            # the checkpoint stretch that holds t_cur: last j with ckpt_t[j] < t_cur
            j = n_ckpt - 1
            while j > 0 and ckpt_t[j] >= t_cur:
                j -= 1
            if j != loaded:
                stretch_end = ckpt_t[j + 1] if j + 1 < n_ckpt else t_end
                # max_num_steps counts steps between output times, as in the forward
                # pass: the output times inside the stretch are targets too (else a
                # stretch of more than max_num_steps steps would fail here although
                # the forward pass took it)
                n_target = 0
                for k in range(n_times):
                    if ckpt_t[j] < times[k] < stretch_end:
                        target_f[n_target] = times[k]
                        n_target += 1
                target_f[n_target] = stretch_end
                n_target += 1
                code = run_multistep(
                    family_forward,
                    rhs,
                    jac,
                    newton,
                    ckpt_t[j],
                    ckpt_y[j].copy(),
                    p,
                    target_f[:n_target],
                    rtol_f,
                    atol_f,
                    max_num_steps,
                    n,
                    n,
                    n,
                    1,
                    rec_t,
                    rec_y,
                    rec_f,
                    rec_count,
                    no_log,
                    no_rows,
                    no_log_count,
                    rhs,
                    no_directions,
                    no_values,
                    np.inf,
                    event_out,
                    no_values,
                    y_end[:n_target],
                    stats_f,
                    info,
                )
                if code != st.SUCCESS:
                    info[4] = PHASE_REINTEGRATION
                    return code
                set_record_count(buf, rec_count[0])
                loaded = j
            a = max(target, ckpt_t[j])
            ulp = np.nextafter(abs(t_cur), np.inf) - abs(t_cur)
            if t_cur - a <= SHORT_SPAN_ULPS * ulp:
                # dz/ds = F(s, z) over ds = t_cur - a: error O(ds^2), far below rounding
                adjoint_rhs(-t_cur, z.ctypes, buf.ctypes, unused.ctypes, dz.ctypes)
                stats_b[st.N_RHS] += 1
                bad = first_non_finite(dz, n_z)
                if bad >= 0:
                    info[0], info[1], info[2], info[3] = t_cur, t_cur - a, bad, 0.0
                    info[4] = PHASE_BACKWARD
                    return st.NON_FINITE_DERIVATIVE
                for k in range(n_z):
                    z[k] += (t_cur - a) * dz[k]
                t_cur = a
                continue
            target_s[0] = -a
            code = run_multistep(
                family_backward,
                adjoint_rhs,
                adjoint_jac,
                newton_adjoint,
                -t_cur,
                z.copy(),
                buf,
                target_s,
                rtol_b,
                atol_b,
                max_num_steps,
                n,
                n,
                n_z,
                0,
                no_t,
                no_rows,
                no_rows,
                no_count,
                no_log,
                no_rows,
                no_log_count,
                adjoint_rhs,
                no_directions,
                no_values,
                np.inf,
                event_out,
                no_values,
                z_end,
                stats_b,
                info,
            )
            if code != st.SUCCESS:
                info[0] = -info[0]  # report the time as t, not s
                info[4] = PHASE_BACKWARD
                return code
            for k in range(n_z):
                z[k] = z_end[0, k]
            t_cur = a
    return st.SUCCESS
