"""Layer 3: model-agnostic numba integrators with Stan's names and controls."""

from pymc_odesens.solvers.controls import METHODS, SolverControls, resolve_controls
from pymc_odesens.solvers.errors import (
    EventAccumulationError,
    EventSensitivityError,
    EventTimeError,
    MaxNumStepsError,
    NewtonConvergenceError,
    NonFiniteInputError,
    NonFiniteRhsError,
    OdeSolverError,
    StepSizeTooSmallError,
)
from pymc_odesens.solvers.event_instant import seed_event_order
from pymc_odesens.solvers.solve import OdeSolution, solve

__all__ = [
    "METHODS",
    "SolverControls",
    "resolve_controls",
    "OdeSolution",
    "solve",
    "OdeSolverError",
    "MaxNumStepsError",
    "StepSizeTooSmallError",
    "NonFiniteRhsError",
    "NewtonConvergenceError",
    "EventTimeError",
    "EventAccumulationError",
    "EventSensitivityError",
    "NonFiniteInputError",
    "seed_event_order",
]
