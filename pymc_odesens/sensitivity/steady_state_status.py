"""Codes, statistics and information slots of the compiled steady-state routines."""

from __future__ import annotations

__all__ = [
    "AUTO",
    "NEWTON",
    "INTEGRATION",
    "MODES",
    "CONVERGED",
    "NOT_REACHED",
    "INTEGRATION_FAILED",
    "SINGULAR",
    "ROUTE_NONE",
    "ROUTE_NEWTON",
    "ROUTE_INTEGRATION",
    "ROUTE_INTEGRATION_NEWTON",
    "ROUTE_NAMES",
    "NEWTON_OUTCOMES",
    "STAT_NAMES",
    "INFO_SIZE",
]

# what to try (the ``method`` argument)
AUTO = 0
NEWTON = 1
INTEGRATION = 2
MODES = {"auto": AUTO, "newton": NEWTON, "integration": INTEGRATION}

# status returned by find_steady_state
CONVERGED = 0
NOT_REACHED = 1  # Newton failed (method "newton"), or integration ran out of time or steps
INTEGRATION_FAILED = 2  # the integrator stopped with an error (info holds its status)
SINGULAR = 3  # set by callers: converged, but the bordered Jacobian is singular there

# the route that reached the steady state
ROUTE_NONE = 0
ROUTE_NEWTON = 1  # damped Newton from y0
ROUTE_INTEGRATION = 2  # integration until the residual test held
ROUTE_INTEGRATION_NEWTON = 3  # integration for a while, then Newton from the state reached
ROUTE_NAMES = ("none", "newton", "integration", "integration+newton")

# outcome of one damped Newton run
NEWTON_CONVERGED = 0
NEWTON_SINGULAR = 1  # the bordered Jacobian had a zero pivot
NEWTON_DAMPING_FAILED = 2  # no damping factor above the lower bound decreased the residual
NEWTON_MAX_ITERATIONS = 3
NEWTON_NON_FINITE = 4  # f is not finite at the starting point
NEWTON_NOT_RUN = -1
NEWTON_OUTCOMES = {
    NEWTON_NOT_RUN: "not run",
    NEWTON_CONVERGED: "converged",
    NEWTON_SINGULAR: "singular Jacobian",
    NEWTON_DAMPING_FAILED: "no damped step decreased the residual",
    NEWTON_MAX_ITERATIONS: "iteration limit reached",
    NEWTON_NON_FINITE: "right-hand side not finite",
}

# int64 statistics
STAT_NAMES = (
    "n_newton_iterations",
    "n_damping_steps",
    "n_newton_attempts",
    "n_integration_steps",
    "n_horizons",
    "n_rhs_evals",
    "n_jac_evals",
    "n_lu_decompositions",
)
(
    N_NEWTON_ITERATIONS,
    N_DAMPING_STEPS,
    N_NEWTON_ATTEMPTS,
    N_INTEGRATION_STEPS,
    N_HORIZONS,
    N_RHS,
    N_JAC,
    N_LU,
) = range(len(STAT_NAMES))

# float64 information
INFO_RESIDUAL = 0  # weighted RMS norm of f at the returned state
INFO_TIME = 1  # time reached (t0 for Newton from y0)
INFO_RCOND = 2  # reciprocal condition estimate of the bordered Jacobian there (0: singular)
INFO_ROUTE = 3  # ROUTE_* code
INFO_NEWTON = 4  # outcome of the last Newton run (NEWTON_*)
INFO_SOLVER_STATUS = 5  # status of the integrator's last run (solvers.status)
INFO_SOLVER = 6  # its info: t, step size, component, extra (4 slots)
# the last horizon's second half: how much the state changed (settled_change)
INFO_CHANGE = 10  # weighted RMS norm of the change (below 1: settled)
INFO_CHANGE_COMPONENT = 11  # the component that changed most (of z: state, then blocks)
INFO_CHANGE_FROM = 12  # its value half way through the horizon
INFO_CHANGE_TO = 13  # and at the end
INFO_HALF_TIME = 14  # the time half way through the horizon
INFO_SIZE = 15
