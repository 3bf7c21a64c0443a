"""`find_steady_state`: Newton, the integration fallback and the final factorisation, compiled.

One routine for every model (the kernels are function-pointer arguments), compiled eagerly
for one signature and cached on disk, so that the Python function
:func:`pymc_odesens.steady_state` and the numba implementations of the PyMC Ops (through a
C entry point) run the same machine code:

1. ``method="auto"`` or ``"newton"``: damped Newton from ``y0``
   (:mod:`~pymc_odesens.sensitivity.steady_state_newton`);
2. ``"auto"`` after Newton failed, or ``"integration"``: ``bdf`` over growing horizons
   (:mod:`~pymc_odesens.sensitivity.steady_state_integration`) until the state has
   settled: the residual test holds at the end of a horizon *and* the state changed by
   less than its tolerances over the horizon's second half (weighted RMS norm of the
   change below 1). With ``"auto"`` Newton is tried again from the end of every horizon
   (the state is then usually within its basin), as AMICI retries Newton after simulating;
3. at the steady state ``J_y`` is evaluated and the bordered Jacobian factorised (Newton
   leaves its factors at the state it converged to): its reciprocal condition estimate
   says whether the implicit-function sensitivities exist
   (:func:`~pymc_odesens.sensitivity.steady_state_linear.factor_steady_state_jacobian`
   factorises it again for them).

Why the second condition: the residual test compares ``|f_i|`` (per unit of time) with
``atol + rtol |y_i|``, so a state that drifts (``y' = k``: ``|f| = k`` while ``|y|``
grows like ``k t``) passes it once ``t`` is about ``1 / rtol``, and so does any state that
grows without bound more slowly than exponentially. Its change over the last half of a
horizon (a time as long as half the time integrated) is about ``k t / 2``, never within
``rtol |y|``; a state that has settled changes by no more than its tolerances, however slow
the approach was, and rounding errors do not make it move.

The bordered Jacobian is factorised dense or sparse as its ``structure`` says, the
integration's Newton matrices as the integrator's ``newton`` structure says (both chosen by
the control ``linear_solver``); the Jacobian comes as its non-zeros (``jac_y_values``), so
no ``N x N`` array exists on the sparse path.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE
from pymc_odesens.sensitivity import steady_state_status as ss
from pymc_odesens.sensitivity.steady_state_integration import (
    FIRST_HORIZON,
    HORIZON_GROWTH,
    integrate_segment,
    settled_change,
)
from pymc_odesens.sensitivity.steady_state_linear import (
    factor_bordered_jacobian,
    reciprocal_condition,
)
from pymc_odesens.sensitivity.steady_state_newton import damped_newton, residual_norm
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.newton_matrix import new_newton_factor, structure_size

__all__ = ["STEADY_STATE_SIGNATURE", "find_steady_state"]

STEADY_STATE_SIGNATURE = types.int64(
    types.int64,  # mode: AUTO, NEWTON or INTEGRATION
    KERNEL_TYPE,  # rhs of the vector z (the system's, or with forward sensitivities)
    KERNEL_TYPE,  # J_y's non-zeros (jac_y_values) of the system
    types.float64,  # t0
    types.float64[::1],  # z: in the start, out the steady state (N, or N (1 + B))
    types.float64[::1],  # p
    types.float64[:, ::1],  # conservation laws C (M, N)
    types.int64[::1],  # dependent state of each law (M,)
    types.float64[::1],  # rtol per component of z
    types.float64[::1],  # atol per component of z
    types.int64,  # n_state N
    types.int64,  # max_newton_iterations
    types.int64,  # max_num_steps (all horizons together)
    types.float64,  # max_time (integrated time)
    types.int64,  # nonnegative (1: Newton iterates may not go below -atol)
    types.int64[::1],  # structure of the bordered Jacobian (steady_state_linear)
    types.int64[::1],  # source of its values (steady_state_linear.bordered_pattern)
    types.int64[::1],  # Newton structure of the integration (newton_matrix)
    types.int64[::1],  # stats (steady_state_status.STAT_NAMES)
    types.float64[::1],  # info (steady_state_status.INFO_SIZE)
)


@njit(STEADY_STATE_SIGNATURE, cache=True, nogil=True)
def find_steady_state(
    mode,
    rhs,
    jac,
    t0,
    z,
    p,
    cons,
    dependent,
    rtol,
    atol,
    n_state,
    max_newton_iterations,
    max_num_steps,
    max_time,
    nonnegative,
    structure,
    source,
    newton,
    stats,
    info,
):
    """Find the steady state from ``z`` (see the module docstring); returns a status code.

    ``z`` holds the steady state on success (and the last state reached on failure);
    ``info`` the residual norm, the time reached, the reciprocal condition estimate of the
    bordered Jacobian (0 when singular), the route, Newton's last outcome and the
    integrator's last status and information.
    """
    n = n_state
    n_z = z.size
    m = dependent.size
    newton_allowed = n_z == n
    f = np.zeros(n_z)
    f_trial = np.zeros(n_z)
    weights = np.zeros(n_z)
    step = np.zeros(n)
    y_trial = np.zeros(n)
    y_newton = np.zeros(n)
    z_half = np.zeros(n_z)  # the state half way through the last horizon
    jac_work = np.zeros(max(structure_size(newton), 1))
    values = np.zeros(max(structure_size(structure), 1))
    scales = np.zeros(2 * n + 1)
    ints, floats = new_newton_factor(structure)
    unused = np.zeros(1)
    totals = np.zeros(m)
    for r in range(m):
        for j in range(n):
            totals[r] += cons[r, j] * z[j]
    info[:] = 0.0
    info[ss.INFO_NEWTON] = ss.NEWTON_NOT_RUN
    info[ss.INFO_TIME] = t0
    route = ss.ROUTE_NONE
    status = ss.NOT_REACHED
    t = t0
    norm = math.inf
    solver_stats = np.zeros(len(st.STAT_NAMES), dtype=np.int64)
    solver_info = np.zeros(st.INFO_SIZE)
    horizon = FIRST_HORIZON
    horizons = 0
    while True:
        # Newton from y0 (unless "integration"), then from the end of every horizon ("auto")
        if newton_allowed and (mode == ss.AUTO or (mode == ss.NEWTON and horizons == 0)):
            y_newton[:] = z
            stats[ss.N_NEWTON_ATTEMPTS] += 1
            outcome, newton_norm, ints, floats = damped_newton(
                rhs,
                jac,
                t,
                y_newton,
                p,
                cons,
                dependent,
                totals,
                rtol,
                atol,
                max_newton_iterations,
                nonnegative,
                structure,
                source,
                jac_work,
                ints,
                floats,
                values,
                scales,
                f,
                f_trial,
                weights,
                step,
                y_trial,
                stats,
            )
            info[ss.INFO_NEWTON] = outcome
            if outcome == ss.NEWTON_CONVERGED:
                # the factors of the bordered Jacobian at y_newton are in ints, floats
                z[:] = y_newton
                norm = newton_norm
                route = ss.ROUTE_NEWTON if horizons == 0 else ss.ROUTE_INTEGRATION_NEWTON
                break
            if mode == ss.NEWTON:
                norm = newton_norm
                break
        # integration over the next horizon, within the budgets of steps and time
        steps_left = max_num_steps - solver_stats[st.N_STEPS]
        if t - t0 >= max_time or steps_left <= 0:
            break
        t_next = min(t + horizon, t0 + max_time)
        t_start = t
        code = integrate_segment(
            rhs,
            jac,
            newton,
            t,
            t_next,
            z,
            z_half,
            p,
            rtol,
            atol,
            n,
            steps_left,
            solver_stats,
            solver_info,
        )
        horizons += 1
        info[ss.INFO_SOLVER_STATUS] = code
        for k in range(st.INFO_SIZE):
            info[ss.INFO_SOLVER + k] = solver_info[k]
        if code != st.SUCCESS:
            if code != st.MAX_NUM_STEPS:
                status = ss.INTEGRATION_FAILED
            break
        t = t_next
        info[ss.INFO_TIME] = t
        norm = residual_norm(rhs, t, z, p, unused, rtol, atol, n, f, weights)
        stats[ss.N_RHS] += 1
        change = settled_change(z_half, z, rtol, atol, n, weights, info)
        info[ss.INFO_HALF_TIME] = 0.5 * (t_start + t)
        if norm < 1.0 and change < 1.0:
            route = ss.ROUTE_INTEGRATION
            break
        horizon *= HORIZON_GROWTH
    stats[ss.N_HORIZONS] += horizons
    stats[ss.N_INTEGRATION_STEPS] += solver_stats[st.N_STEPS]
    stats[ss.N_RHS] += solver_stats[st.N_RHS]
    stats[ss.N_JAC] += solver_stats[st.N_JAC]
    stats[ss.N_LU] += solver_stats[st.N_LU]
    info[ss.INFO_RESIDUAL] = norm
    info[ss.INFO_ROUTE] = route
    if route == ss.ROUTE_NONE:
        return status
    # the bordered Jacobian at the steady state: factors for the sensitivities (Newton
    # left them at the state it converged to)
    ok = True
    if route == ss.ROUTE_INTEGRATION:
        y_star = z[:n].copy()
        jac(t, y_star.ctypes, p.ctypes, unused.ctypes, jac_work.ctypes)
        stats[ss.N_JAC] += 1
        stats[ss.N_LU] += 1
        ok, ints, floats = factor_bordered_jacobian(
            structure, source, jac_work, cons, ints, floats, values, scales
        )
    if ok:
        info[ss.INFO_RCOND] = reciprocal_condition(
            structure, ints, floats, scales, f_trial[:n], step, y_trial, y_newton
        )
    return ss.CONVERGED
