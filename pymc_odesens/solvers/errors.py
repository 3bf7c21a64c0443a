"""Exceptions raised when an integration fails."""

from __future__ import annotations

__all__ = [
    "OdeSolverError",
    "MaxNumStepsError",
    "StepSizeTooSmallError",
    "NonFiniteRhsError",
    "NewtonConvergenceError",
    "EventTimeError",
    "EventAccumulationError",
    "EventSensitivityError",
    "NonFiniteInputError",
]


class OdeSolverError(RuntimeError):
    """Base class of solver failures.

    Attributes
    ----------
    t : float
        Time reached when the solver gave up.
    step_size : float
        Step size it was attempting.
    component : int or None
        Index of the offending state component, where one can be named.
    method : str
    """

    def __init__(
        self,
        message: str,
        *,
        t: float = float("nan"),
        step_size: float = float("nan"),
        component=None,
        method="",
    ):
        super().__init__(message)
        self.t = t
        self.step_size = step_size
        self.component = component
        self.method = method


class MaxNumStepsError(OdeSolverError):
    """More than ``max_num_steps`` steps between two output times."""


class StepSizeTooSmallError(OdeSolverError):
    """The step size fell below the resolution of the time variable."""


class NonFiniteRhsError(OdeSolverError):
    """The right-hand side returned NaN or infinity and smaller steps did not help.

    Also raised when an event's jump, or a derivative of the right-hand side that a
    gradient needs (``J_y``, ``df/dp``), is NaN or infinite.
    """


class NewtonConvergenceError(OdeSolverError):
    """The Newton iteration of an implicit method failed repeatedly within one step."""


class EventTimeError(OdeSolverError):
    """An explicit event's time is not finite at the given parameters (``.t`` is its value)."""


class EventAccumulationError(OdeSolverError):
    """Events accumulate (Zeno behaviour): they no longer let the time advance.

    Raised when an implicit event's condition crosses zero again within a few units in
    the last place of ``t`` of its previous crossing (the bounces of a ball with
    restitution below 1 accumulate at a finite time, and no solver can pass it), when the
    events at one time keep triggering one another (a cascade that does not end), or
    when an event's trigger fires again at the same time before its first firing has
    executed. The message names the time and the event.
    """


class EventSensitivityError(OdeSolverError):
    """A sensitivity across an event instant is not defined (it is refused, not guessed).

    Raised by forward sensitivities and adjoint gradients when the event time does not
    depend smoothly on the parameters: its condition crosses zero with zero speed
    (``dg/dt + dg/dy f = 0``), or events at the same time were set off by causes that
    move differently with the parameters (two event times that coincide only at these
    parameter values), so that the derivative is one-sided.
    """


class NonFiniteInputError(OdeSolverError, ValueError):
    """The initial state or the parameters are not finite (NaN or infinity).

    A ValueError for direct calls (the argument is bad); an OdeSolverError so
    that inside a PyMC model such a proposal is rejected (log-density -inf) and
    counted like a solver failure instead of stopping the sampler.
    """
