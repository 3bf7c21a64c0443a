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
        event = int(extra)
        named = event_names is not None and event < len(event_names)
        error, message = (
            NonFiniteRhsError,
            f"the state after event {repr(event_names[event]) if named else event} at "
            f"t = {t:.10g} is not finite (NaN or inf){detail(' in {}')}",
        )
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
