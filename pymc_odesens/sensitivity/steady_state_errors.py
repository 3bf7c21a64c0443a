"""Exceptions of the steady-state computation (part of the solvers' error hierarchy)."""

from __future__ import annotations

from pymc_odesens.solvers.errors import OdeSolverError

__all__ = ["SteadyStateError", "SteadyStateNotReachedError", "SteadyStateSingularError"]


class SteadyStateError(OdeSolverError):
    """Base class of steady-state failures.

    Attributes
    ----------
    residual_norm : float
        Weighted RMS norm of ``f`` at the last state (below 1 means converged).
    t : float
        Time reached by the integration (the start time if none ran).
    stats : dict
        The steady-state statistics so far (Newton iterations, damping steps, integration
        steps, ...).
    """

    def __init__(
        self,
        message: str,
        *,
        residual_norm: float = float("nan"),
        t: float = float("nan"),
        stats=None,
        **kwargs,
    ):
        super().__init__(message, t=t, **kwargs)
        self.residual_norm = residual_norm
        self.stats = {} if stats is None else dict(stats)


class SteadyStateNotReachedError(SteadyStateError):
    """Neither Newton's method nor integration (within its time and step bounds) reached a
    state whose residual passes the test: the system may oscillate, grow without bound or
    converge too slowly for the tolerances."""


class SteadyStateSingularError(SteadyStateError):
    """A steady state was reached, but its (bordered) Jacobian is singular there, so the
    implicit function theorem gives no sensitivities: typically a conservation law that was
    not found (coefficients that depend on parameters) or a non-isolated steady state."""
