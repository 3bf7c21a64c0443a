"""Integration towards a steady state: ``bdf`` over horizons of growing length (compiled).

As AMICI does when Newton's method fails, the system is integrated and the residual test is
checked as time goes on. Our integrators return states at requested times, so the test is
checked at the ends of horizons ``t0 + 1, t0 + 11, t0 + 111, ...`` (each ten times longer
than the last, so that slow systems need few restarts and fast ones are not over-run:
once at the steady state, ``bdf``'s steps grow geometrically). Every horizon is one run of
the shared multistep integrator from the state reached; the runs share one budget of steps,
and the time is bounded by ``max_time``. The integrated vector may be the state alone or
the state with its forward sensitivities (blocks of N, one LU for all, as in
:mod:`pymc_odesens.sensitivity.forward`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pymc_odesens.solvers.event_location import EVENT_OUT_SIZE
from pymc_odesens.solvers.multistep import BDF, OP_WIDTH, run_multistep

__all__ = ["integrate_segment", "FIRST_HORIZON", "HORIZON_GROWTH"]

FIRST_HORIZON = 1.0
"""Length of the first horizon (time units of the model)."""
HORIZON_GROWTH = 10.0
"""Each horizon is this many times longer than the one before."""


@njit(cache=True)
def integrate_segment(
    rhs, jac, newton, t, t_next, z, p, rtol, atol, n_state, max_num_steps, solver_stats, solver_info
):
    """Integrate ``z`` from ``t`` to ``t_next`` with ``bdf`` (``z`` updated on success).

    ``jac`` is the ``jac_y_values`` kernel and ``newton`` the integrator's Newton structure
    (:func:`pymc_odesens.solvers.newton_matrix.newton_structure`): the Newton matrices of
    the integration are dense or sparse as the control ``linear_solver`` chose.

    Returns the integrator's status (:mod:`pymc_odesens.solvers.status`).
    """
    n_z = z.size
    times = np.array([t_next])
    z_out = np.empty((1, n_z))
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
            z[i] = z_out[0, i]
    return code
