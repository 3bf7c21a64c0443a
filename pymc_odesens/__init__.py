"""pymc_odesens: fast ODE solves with exact sensitivities for PyMC.

Define a system once with :class:`OdeSystem` (sympy derives its exact
Jacobians, numba compiles them) and integrate it with :func:`solve`, using
Stan's methods (``rk45``, ``ckrk``, ``bdf``, ``adams``) and controls;
sensitivities by :func:`solve_sensitivity` (forward, adjoint, PBS/PBSR/Exp),
steady states with their sensitivities by :func:`steady_state`, PyMC tensors by
:func:`ode_solution` (pre-equilibration: :class:`Preequilibration`) and
:func:`steady_state_solution`, events by :class:`ImplicitEvent` and
:class:`ExplicitEvent`.
"""

from pymc_odesens import math, stan
from pymc_odesens.model import ExplicitEvent, ImplicitEvent, OdeSystem
from pymc_odesens.pymc import (
    SMMALA,
    OdeSolverFailureWarning,
    Preequilibration,
    choose_sensitivity_route,
    failure_counts,
    failure_summary,
    fisher_information_tensor,
    ode_solution,
    reset_failure_counts,
    steady_state_solution,
)
from pymc_odesens.sensitivity import (
    AdjointCheckpoints,
    AdjointGradient,
    FisherInformationResult,
    SensitivityResult,
    SteadyStateError,
    SteadyStateGradient,
    SteadyStateNotReachedError,
    SteadyStateResult,
    SteadyStateSingularError,
    adjoint_forward,
    adjoint_gradient,
    fisher_information,
    solve_sensitivity,
    steady_state,
)
from pymc_odesens.solvers import (
    EventTimeError,
    MaxNumStepsError,
    NewtonConvergenceError,
    NonFiniteInputError,
    NonFiniteRhsError,
    OdeSolution,
    OdeSolverError,
    StepSizeTooSmallError,
    solve,
)

__all__ = [
    "OdeSystem",
    "ImplicitEvent",
    "ExplicitEvent",
    "ode_solution",
    "steady_state_solution",
    "Preequilibration",
    "choose_sensitivity_route",
    "failure_counts",
    "failure_summary",
    "reset_failure_counts",
    "OdeSolverFailureWarning",
    "math",
    "stan",
    "solve",
    "solve_sensitivity",
    "SensitivityResult",
    "steady_state",
    "SteadyStateResult",
    "SteadyStateGradient",
    "SteadyStateError",
    "SteadyStateNotReachedError",
    "SteadyStateSingularError",
    "adjoint_gradient",
    "adjoint_forward",
    "AdjointGradient",
    "AdjointCheckpoints",
    "fisher_information",
    "FisherInformationResult",
    "fisher_information_tensor",
    "SMMALA",
    "OdeSolution",
    "OdeSolverError",
    "MaxNumStepsError",
    "StepSizeTooSmallError",
    "NonFiniteRhsError",
    "NewtonConvergenceError",
    "EventTimeError",
    "NonFiniteInputError",
]
__version__ = "0.1.0"
