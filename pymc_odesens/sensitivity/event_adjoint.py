"""The adjoint of an event instant, shared by the continuous and the discrete adjoint.

At an instant at ``tau`` the forward pass (:mod:`pymc_odesens.solvers.event_instant`)
carries the sensitivities as total derivatives ``T = S + f dtau`` through the events
executed there, ``T_{i+1} = P_u T_i + P_a (a_y T_{q_i} + a_p + a_t dtau)`` (``P_a`` the
components event ``i`` assigns, ``q_i`` the execution its values were taken at), and
``dtau = dtau/dxi_0 S_0 + dtau/dp`` from the instant's cause. Going backwards with the
cotangent ``lambda`` of the state after the instant this module applies the transpose:

    mu      = -f(xi_end) . lambda                   (0 after a terminal event)
    per event, last first:
        lambda_i      = P_u lambda_{i+1} + [q_i = i] a_y^T P_a lambda_{i+1}
        lambda_{q_i} += a_y^T P_a lambda_{i+1}      (q_i < i: added on reaching q_i)
        dL/dp        += a_p^T P_a lambda_{i+1},     mu += a_t . P_a lambda_{i+1}
    c = f(xi_0) . lambda_0 + mu
    lambda(tau-) = lambda_0 + c dtau/dxi_0,         dL/dp += c dtau/dp

with one ``event_adjoint_jump`` kernel call per event and one ``event_time_gradient``
call per instant (:mod:`pymc_odesens.codegen.event_source`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.error_norm import first_non_finite
from pymc_odesens.solvers.event_instant import INSTANT_END_TERMINAL, NOT_DIFFERENTIABLE

__all__ = ["frozen_time", "instant_workspace", "undo_event_instants"]


@njit(cache=True)
def frozen_time(ev_t, ev_index):
    """The time of the last instant if it executed a terminal event (the state is constant
    after it), else inf."""
    k = ev_t.size - 1
    if k >= 0 and ev_index[k] == INSTANT_END_TERMINAL:
        return ev_t[k]
    return np.inf


@njit(cache=True)
def instant_workspace(ev_index, n, n_p):
    """Work arrays of :func:`undo_event_instants`: cotangents of the states within an
    instant (as many rows as the longest instant has events), the kernels' outputs."""
    longest = 1
    run = 0
    for k in range(ev_index.size):
        if ev_index[k] >= 0:
            run += 1
            longest = max(longest, run)
        else:
            run = 0
    acc = np.zeros((longest, n))
    out = np.zeros(2 * n + n_p + 1)
    grad = np.zeros(n + n_p)
    f = np.zeros(n)
    v_jump = np.zeros(1 + n)
    v_cause = np.zeros(1)
    return acc, out, grad, f, v_jump, v_cause


@njit(cache=True)
def undo_event_instants(
    adjoint_jump,
    time_gradient,
    rhs,
    p,
    ev_t,
    ev_index,
    ev_slot,
    ev_y,
    k_event,
    t_from,
    lam,
    p_bar,
    workspace,
    info,
):
    """Undo the instants logged up to row ``k_event`` (a row closing an instant) at times
    ``>= t_from``, last first: ``lam`` (the cotangent of the state after them) becomes that
    of the state before them, their terms go to ``p_bar``.

    Returns ``(status, the last log row not undone)``; ``status`` SUCCESS,
    EVENT_NOT_DIFFERENTIABLE or NON_FINITE_DERIVATIVE (an event's transposed assignment is
    not finite), with ``info`` filled.
    """
    acc, out, grad, f, v_jump, v_cause = workspace
    n = lam.size
    n_p = p_bar.size
    unused = np.zeros(1)
    while k_event >= 0 and ev_t[k_event] >= t_from:
        t = ev_t[k_event]
        first = k_event
        while first > 0 and ev_index[first - 1] >= 0:
            first -= 1
        m = k_event - first
        cause = ev_slot[k_event]
        if cause == NOT_DIFFERENTIABLE:
            info[0], info[1], info[2], info[3] = t, 0.0, ev_index[first], st.NOT_SMOOTH_CAUSES
            return st.EVENT_NOT_DIFFERENTIABLE, first - 1
        mu = 0.0
        if ev_index[k_event] != INSTANT_END_TERMINAL:
            rhs(t, ev_y[k_event].ctypes, p.ctypes, unused.ctypes, f.ctypes)
            for i in range(n):
                mu -= f[i] * lam[i]
        for i in range(m):
            for j in range(n):
                acc[i, j] = 0.0
        for i in range(m - 1, -1, -1):
            row = first + i
            q = i - ev_slot[row]  # the execution whose state the assignment read
            v_jump[0] = ev_index[row]
            for j in range(n):
                v_jump[1 + j] = lam[j]
            adjoint_jump(t, ev_y[first + q].ctypes, p.ctypes, v_jump.ctypes, out.ctypes)
            bad = first_non_finite(out, out.size)
            if bad >= 0:
                info[0], info[1], info[2], info[3] = t, 0.0, bad, ev_index[row]
                return st.NON_FINITE_DERIVATIVE, k_event
            for j in range(n):
                lam[j] = out[j] + acc[i, j]
                if q == i:
                    lam[j] += out[n + j]
                else:
                    acc[q, j] += out[n + j]
            for k in range(n_p):
                p_bar[k] += out[2 * n + k]
            mu += out[2 * n + n_p]
        rhs(t, ev_y[first].ctypes, p.ctypes, unused.ctypes, f.ctypes)
        c = mu
        for i in range(n):
            c += f[i] * lam[i]
        v_cause[0] = cause
        time_gradient(t, ev_y[first].ctypes, p.ctypes, v_cause.ctypes, grad.ctypes)
        for i in range(n + n_p):
            if not np.isfinite(grad[i]):
                info[0], info[1], info[2] = t, 0.0, ev_index[first]
                info[3] = st.NOT_SMOOTH_CROSSING
                return st.EVENT_NOT_DIFFERENTIABLE, first - 1
        for i in range(n):
            lam[i] += c * grad[i]
        for k in range(n_p):
            p_bar[k] += c * grad[n + k]
        k_event = first - 1
    return st.SUCCESS, k_event
