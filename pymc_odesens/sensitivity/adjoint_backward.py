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
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.multistep import run_multistep
from pymc_odesens.solvers.recorded_trajectory import recording_views, set_record_count

__all__ = ["backward_pass", "BACKWARD_INFO_SIZE", "PHASE_REINTEGRATION", "PHASE_BACKWARD"]

BACKWARD_INFO_SIZE = 5  # t, h, component, extra (as status.INFO_SIZE) and the phase
PHASE_REINTEGRATION = 0
PHASE_BACKWARD = 1

BACKWARD_SIGNATURE = types.int64(
    types.int64,  # forward family (multistep.BDF or ADAMS), for the re-integration
    types.int64,  # backward family
    KERNEL_TYPE,  # rhs
    KERNEL_TYPE,  # jac_y
    KERNEL_TYPE,  # adjoint_rhs
    KERNEL_TYPE,  # adjoint_jac
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
    adjoint_rhs,
    adjoint_jac,
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
    z,
    stats_f,
    stats_b,
    info,
):
    """Integrate the adjoint from ``times[-1]`` to ``t0``; ``z`` ends as ``[lambda(t0), mu(t0)]``.

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
    target_f = np.empty(1)
    y_end = np.empty((1, n))
    target_s = np.empty(1)
    z_end = np.empty((1, n_z))
    for i in range(n_z):
        z[i] = 0.0
    t_end = times[n_times - 1]
    loaded = -1
    t_cur = t_end
    i = n_times - 1
    while True:
        target = times[i] if i >= 0 else t0
        while t_cur > target:
            # the checkpoint stretch that holds t_cur: last j with ckpt_t[j] < t_cur
            j = n_ckpt - 1
            while j > 0 and ckpt_t[j] >= t_cur:
                j -= 1
            if j != loaded:
                stretch_end = ckpt_t[j + 1] if j + 1 < n_ckpt else t_end
                target_f[0] = stretch_end
                code = run_multistep(
                    family_forward,
                    rhs,
                    jac,
                    ckpt_t[j],
                    ckpt_y[j].copy(),
                    p,
                    target_f,
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
                    y_end,
                    stats_f,
                    info,
                )
                if code != st.SUCCESS:
                    info[4] = PHASE_REINTEGRATION
                    return code
                set_record_count(buf, rec_count[0])
                loaded = j
            a = max(target, ckpt_t[j])
            target_s[0] = -a
            code = run_multistep(
                family_backward,
                adjoint_rhs,
                adjoint_jac,
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
        if i < 0:
            break
        while i >= 0 and times[i] == t_cur:
            for k in range(n):
                z[k] += cotangent[i, k]
            i -= 1
    return st.SUCCESS
