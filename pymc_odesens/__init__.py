"""pymc_odesens: fast ODE solves with exact sensitivities for PyMC.

Define a system once with :class:`OdeSystem` (sympy derives its exact
Jacobians, numba compiles them) and integrate it with :func:`solve`, using
Stan's methods (``rk45``, ``ckrk``, ``bdf``, ``adams``) and controls;
sensitivities by :func:`solve_sensitivity` (forward, adjoint, PBS/PBSR/Exp),
PyMC tensors by :func:`ode_solution`, events by :class:`ImplicitEvent` and
:class:`ExplicitEvent`.
"""

from pymc_odesens import math, stan
from pymc_odesens.model import ExplicitEvent, ImplicitEvent, OdeSystem
from pymc_odesens.pymc import (
    SMMALA,
    OdeSolverFailureWarning,
    choose_sensitivity_route,
    failure_counts,
    failure_summary,
    fisher_information_tensor,
    ode_solution,
    pbs_branch_counts,
    pbs_branch_summary,
    reset_failure_counts,
)
from pymc_odesens.sensitivity import (
    AdjointCheckpoints,
    AdjointGradient,
    FisherInformationResult,
    NonFiniteSensitivityError,
    SensitivityResult,
    adjoint_forward,
    adjoint_gradient,
    fisher_information,
    solve_sensitivity,
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
    "choose_sensitivity_route",
    "pbs_branch_counts",
    "pbs_branch_summary",
    "failure_counts",
    "failure_summary",
    "reset_failure_counts",
    "OdeSolverFailureWarning",
    "math",
    "stan",
    "solve",
    "solve_sensitivity",
    "SensitivityResult",
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
    "NonFiniteSensitivityError",
]
__version__ = "0.1.0"
