"""Status codes returned by the compiled integrators and their translation to exceptions.

Every integrator returns one of these codes and fills ``info`` with
``[t, step_size, component, tolerance-or-limit]`` so that the Python side can
raise a specific :class:`~pymc_odesens.solvers.errors.OdeSolverError`.
"""

from __future__ import annotations

import numpy as np

from pymc_odesens.solvers.errors import (
    EventAccumulationError,
    EventSensitivityError,
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
EVENT_ACCUMULATION = 16  # events accumulate (info[3]: one of the ACCUMULATION_* reasons)
EVENT_NOT_DIFFERENTIABLE = 17  # sensitivity across an event instant undefined (NOT_SMOOTH_*)

# info[3] of EVENT_ACCUMULATION (info[2]: the event index, info[1]: time since the last
# crossing of the same condition)
ACCUMULATION_RECROSSING = 1  # a condition crossed zero again within the resolution of t
ACCUMULATION_CASCADE = 2  # the events at one time kept triggering one another
ACCUMULATION_RETRIGGERED = 3  # a trigger fired again before its first firing executed
# info[3] of EVENT_NOT_DIFFERENTIABLE (info[2]: the first event of the instant)
NOT_SMOOTH_CROSSING = 1  # the condition crossed zero with zero speed (or d tau not finite)
NOT_SMOOTH_CAUSES = 2  # simultaneous events whose times move differently with p

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
    ``event_names`` the system's event names (for the event failures).
    """
    if status == SUCCESS:
        return
    if callable(state_names):
        state_names = state_names()
    t, h, component, extra = float(info[0]), float(info[1]), int(info[2]), info[3]
    comp = None if component < 0 else component
    where = f"t = {t:.10g}, step size h = {h:.3g}"
    what = ""
    if comp is not None:
        named = state_names is not None and comp < len(state_names)
        what = f"state {comp} ({state_names[comp]})" if named else f"component {comp}"

    def detail(text: str) -> str:
        return text.format(what) if comp is not None else ""

    if status == MAX_NUM_STEPS:
        error, message = (
            MaxNumStepsError,
            f"more than max_num_steps = {int(extra)} steps before the next output time at "
            f"{where}; raise max_num_steps, loosen the tolerances or try a stiff method (bdf)",
        )
    elif status == STEP_TOO_SMALL:
        error, message = (
            StepSizeTooSmallError,
            f"step size underflow at {where}{detail('; largest weighted error in {}')}; the "
            "problem may be stiff, singular or its tolerances too tight",
        )
    elif status == NON_FINITE_RHS:
        error, message = (
            NonFiniteRhsError,
            f"the right-hand side is not finite (NaN or inf){detail(' in {}')} at {where}, "
            "and smaller steps did not help",
        )
    elif status == NEWTON_FAILED:
        error, message = (
            NewtonConvergenceError,
            f"the Newton iteration failed {int(extra)} times in one step at {where}"
            f"{detail('; slowest component {}')}",
        )
    elif status == NON_FINITE_JUMP:
        error, message = (
            NonFiniteRhsError,
            f"the state after {_event_label(int(extra), event_names)} at t = {t:.10g} is not "
            f"finite (NaN or inf){detail(' in {}')}",
        )
    elif status in (EVENT_ACCUMULATION, EVENT_NOT_DIFFERENTIABLE):
        comp = None
        error, message = _event_failure(status, info, event_names)
    elif status == NON_FINITE_DERIVATIVE:
        error, message = (
            NonFiniteRhsError,
            "a derivative of the right-hand side (J_y or df/dp) is not finite (NaN or inf) at "
            f"t = {t:.10g}{detail(' in {}')}; the gradient is not defined there",
        )
    elif status == BAD_EVENT_TIME:
        comp = None
        error, message = (
            EventTimeError,
            f"explicit event time {int(extra)} is not finite at these parameters: it "
            f"evaluates to {t!r}",
        )
    elif status == RECORD_FULL:
        raise RuntimeError(
            f"{method}: trajectory recording full ({int(extra)} records) at {where}; "
            "the caller must provide larger recording arrays"
        )
    else:
        raise RuntimeError(f"{method}: unknown solver status {status}")
    raise error(f"{method}: {message}", t=t, step_size=h, component=comp, method=method)


def _event_label(index: int, event_names) -> str:
    if event_names is not None and 0 <= index < len(event_names):
        return f"event {event_names[index]!r}"
    return f"event {index}" if index >= 0 else "an event"


def _event_failure(status: int, info: np.ndarray, event_names) -> tuple:
    """``(exception class, message)`` of EVENT_ACCUMULATION and EVENT_NOT_DIFFERENTIABLE."""
    t, since, reason = float(info[0]), float(info[1]), int(info[3])
    event = _event_label(int(info[2]), event_names)
    if status == EVENT_ACCUMULATION:
        if reason == ACCUMULATION_RECROSSING:
            detail = (
                f"the condition of {event} crossed zero again {since:.3g} after its previous "
                "crossing, below the resolution of t: the events accumulate (Zeno behaviour) "
                "and the solution cannot be continued past this time"
            )
        elif reason == ACCUMULATION_CASCADE:
            detail = (
                f"{event} and the events it sets off keep triggering one another at this "
                "time (more than the limit of executions at one time)"
            )
        else:
            detail = (
                f"the trigger of {event} fired again at this time before its first firing "
                "executed (two executions of one event at one time are not supported)"
            )
        return EventAccumulationError, f"events accumulate at t = {t:.10g}: {detail}"
    if reason == NOT_SMOOTH_CROSSING:
        detail = (
            f"the condition that set off {event} crossed zero with zero speed "
            "(dg/dt + dg/dy f = 0), so the event time does not depend smoothly on the "
            "parameters"
        )
    else:
        detail = (
            f"{event} executed at a time shared by events whose times move differently "
            "with the parameters (times that coincide only at these values), so the "
            "derivative is one-sided"
        )
    return EventSensitivityError, f"no sensitivity across the events at t = {t:.10g}: {detail}"
