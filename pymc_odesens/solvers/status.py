"""Status codes returned by the compiled integrators and their translation to exceptions.

Every integrator returns one of these codes and fills ``info`` with
``[t, step_size, component, tolerance-or-limit]`` so that the Python side can
raise a specific :class:`~pymc_odesens.solvers.errors.OdeSolverError`.
"""

from __future__ import annotations

import numpy as np

from pymc_odesens.solvers.errors import (
    EventTimeError,
    MaxNumStepsError,
    NewtonConvergenceError,
    NonFiniteRhsError,
    StepSizeTooSmallError,
)

SUCCESS = 0
MAX_NUM_STEPS = 1
STEP_TOO_SMALL = 2
NON_FINITE_RHS = 3
NEWTON_FAILED = 4
RECORD_FULL = 5  # internal: the trajectory recording arrays are full
EVENT = 6  # internal: stopped at an implicit event (see solvers.event_location)
STOP = 7  # internal: stopped at the requested stop time (an explicit event)
BAD_EVENT_TIME = 8  # an explicit event time is not finite (info[0]: its value)
NON_FINITE_JUMP = 9  # the state after an event is not finite (info[3]: the event index)
NON_FINITE_DERIVATIVE = 10  # a derivative of the rhs needed for a gradient is not finite

INFO_SIZE = 4

# Order of the entries of ``stats`` (int64 array filled by the integrators).
STAT_NAMES = (
    "n_steps",
    "n_rejected_steps",
    "n_rhs_evals",
    "n_jac_evals",
    "n_lu_decompositions",
    "n_newton_iterations",
    "n_newton_failures",
)
N_STEPS, N_REJECTED, N_RHS, N_JAC, N_LU, N_NEWTON_ITERS, N_NEWTON_FAILS = range(len(STAT_NAMES))


def new_stats() -> np.ndarray:
    """Zeroed statistics array."""
    return np.zeros(len(STAT_NAMES), dtype=np.int64)


def stats_dict(stats: np.ndarray) -> dict[str, int]:
    """Statistics as a name -> count dict."""
    return {name: int(v) for name, v in zip(STAT_NAMES, stats)}


def raise_for_status(
    status: int, info: np.ndarray, method: str, state_names=None, event_names=None
) -> None:
    """Raise the exception that matches ``status`` (nothing on success).

    ``state_names`` is a sequence of component names, or a function returning
    one (called only on failure: long name lists cost time on every solve);
    ``event_names`` the system's event names (for ``NON_FINITE_JUMP``).
    """
    if status == SUCCESS:
        return
    if callable(state_names):
        state_names = state_names()
    t, h, component, extra = float(info[0]), float(info[1]), int(info[2]), info[3]
    comp = None if component < 0 else component
    where = f"t = {t:.10g}, step size h = {h:.3g}"
    if comp is not None:
        label = (
            state_names[comp]
            if state_names is not None and comp < len(state_names)
            else f"component {comp}"
        )
        what = (
            f"state {comp} ({label})"
            if state_names is not None and comp < len(state_names)
            else label
        )
    if status == MAX_NUM_STEPS:
        raise MaxNumStepsError(
            f"{method}: more than max_num_steps = {int(extra)} steps before the next output time "
            f"at {where}; raise max_num_steps, loosen the tolerances or try a stiff method "
            "(bdf)",
            t=t,
            step_size=h,
            component=comp,
            method=method,
        )
    if status == STEP_TOO_SMALL:
        detail = f"; largest weighted error in {what}" if comp is not None else ""
        raise StepSizeTooSmallError(
            f"{method}: step size underflow at {where}{detail}; the problem may be stiff, "
            "singular or its tolerances too tight",
            t=t,
            step_size=h,
            component=comp,
            method=method,
        )
    if status == NON_FINITE_RHS:
        detail = f" in {what}" if comp is not None else ""
        raise NonFiniteRhsError(
            f"{method}: the right-hand side is not finite (NaN or inf){detail} at {where}, "
            "and smaller steps did not help",
            t=t,
            step_size=h,
            component=comp,
            method=method,
        )
    if status == NEWTON_FAILED:
        detail = f"; slowest component {what}" if comp is not None else ""
        raise NewtonConvergenceError(
            f"{method}: the Newton iteration failed {int(extra)} times in one step "
            f"at {where}{detail}",
            t=t,
            step_size=h,
            component=comp,
            method=method,
        )
    if status == NON_FINITE_JUMP:
        event = int(extra)
        name = (
            repr(event_names[event])
            if event_names is not None and event < len(event_names)
            else str(event)
        )
        raise NonFiniteRhsError(
            f"{method}: the state after event {name} at t = {t:.10g} is not finite "
            f"(NaN or inf) in {what}",
            t=t,
            step_size=h,
            component=comp,
            method=method,
        )
    if status == NON_FINITE_DERIVATIVE:
        raise NonFiniteRhsError(
            f"{method}: a derivative of the right-hand side (J_y or df/dp) is not finite "
            f"(NaN or inf) at t = {t:.10g}"
            + (f" in {what}" if comp is not None else "")
            + "; the gradient is not defined there",
            t=t,
            step_size=h,
            component=comp,
            method=method,
        )
    if status == BAD_EVENT_TIME:
        raise EventTimeError(
            f"{method}: explicit event time {int(extra)} is not finite at these parameters: "
            f"it evaluates to {t!r}",
            t=t,
            step_size=h,
            component=None,
            method=method,
        )
    if status == RECORD_FULL:
        raise RuntimeError(
            f"{method}: trajectory recording full ({int(extra)} records) at {where}; "
            "the caller must provide larger recording arrays"
        )
    raise RuntimeError(f"{method}: unknown solver status {status}")
