"""Integration towards a steady state: ``bdf`` over horizons of growing length (compiled).

As AMICI does when Newton's method fails, the system is integrated and the residual test is
checked as time goes on. Our integrators return states at requested times, so the test is
checked at the ends of horizons ``t0 + 1, t0 + 11, t0 + 111, ...`` (each ten times longer
than the last, so that slow systems need few restarts and fast ones are not over-run:
once at the steady state, ``bdf``'s steps grow geometrically). Each run also returns the
state half way through its horizon (dense output, no extra step): a steady state must have
settled, changing by less than its tolerances over the second half
(:func:`settled_change`), which a drifting state never does. Every horizon is one run of
the shared multistep integrator from the state reached; the runs share one budget of steps,
and the time is bounded by ``max_time``. The integrated vector may be the state alone or
the state with its forward sensitivities (blocks of N, one LU for all, as in
:mod:`pymc_odesens.sensitivity.forward`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pymc_odesens.sensitivity import steady_state_status as ss
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.error_norm import grouped_rms_norm, largest_weighted_component
from pymc_odesens.solvers.event_location import EVENT_OUT_SIZE
from pymc_odesens.solvers.multistep import BDF, OP_WIDTH, run_multistep

__all__ = ["integrate_segment", "settled_change", "FIRST_HORIZON", "HORIZON_GROWTH"]

FIRST_HORIZON = 1.0
"""Length of the first horizon (time units of the model)."""
HORIZON_GROWTH = 10.0
"""Each horizon is this many times longer than the one before."""


@njit(cache=True)
def integrate_segment(
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
    n_state,
    max_num_steps,
    solver_stats,
    solver_info,
):
    """Integrate ``z`` from ``t`` to ``t_next`` with ``bdf`` (``z`` updated on success, and
    ``z_half`` set to the state at ``(t + t_next) / 2``).

    ``jac`` is the ``jac_y_values`` kernel and ``newton`` the integrator's Newton structure
    (:func:`pymc_odesens.solvers.newton_matrix.newton_structure`): the Newton matrices of
    the integration are dense or sparse as the control ``linear_solver`` chose.

    Returns the integrator's status (:mod:`pymc_odesens.solvers.status`).
    """
    n_z = z.size
    if n_z == 0:  # a system without states (an SBML model of rules only): nothing moves
        return st.SUCCESS
    times = np.array([0.5 * (t + t_next), t_next])
    z_out = np.empty((2, n_z))
    no_t = np.zeros(0)
    no_rows = np.zeros((0, 0))
    count = np.zeros(1, dtype=np.int64)
    no_log = np.zeros((0, OP_WIDTH))
    no_log_count = np.zeros(2, dtype=np.int64)
    no_directions = np.zeros(0, dtype=np.int64)
    code = run_multistep(
        BDF,
        rhs,
        jac,
        newton,
        t,
        z,
        p,
        times,
        rtol,
        atol,
        max_num_steps,
        n_state,
        n_z,
        n_z,
        0,
        no_t,
        no_rows,
        no_rows,
        count,
        no_log,
        no_rows,
        no_log_count,
        rhs,
        no_directions,
        no_t,
        np.inf,
        np.zeros(EVENT_OUT_SIZE),
        no_t,
        z_out,
        solver_stats,
        solver_info,
    )
    if code == 0:
        for i in range(n_z):
            z_half[i] = z_out[0, i]
            z[i] = z_out[1, i]
    return code


@njit(cache=True)
def settled_change(z_half, z, rtol, atol, n_state, work, info):
    """Weighted RMS norm of ``z - z_half`` (weights ``1 / (atol + rtol |z|)``, the largest
    over blocks of ``n_state``): below 1 when the state has settled over the second half of
    the horizon.

    ``z_half`` is overwritten with the change and ``work`` (size of ``z``) with the
    weights; ``info`` receives the norm, the component that changed most and its two values
    (:mod:`~pymc_odesens.sensitivity.steady_state_status`'s ``INFO_CHANGE*``).
    """
    n_z = z.size
    for i in range(n_z):
        z_half[i] = z[i] - z_half[i]
        work[i] = 1.0 / (atol[i] + rtol[i] * abs(z[i]))
    norm = grouped_rms_norm(z_half, work, n_state, n_z, n_z)
    component = largest_weighted_component(z_half, work, n_z)
    info[ss.INFO_CHANGE] = norm
    info[ss.INFO_CHANGE_COMPONENT] = component
    if component >= 0:
        info[ss.INFO_CHANGE_FROM] = z[component] - z_half[component]
        info[ss.INFO_CHANGE_TO] = z[component]
    return norm
