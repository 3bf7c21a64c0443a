"""pymc_odesens: fast ODE solves with exact sensitivities for PyMC.

Define a system once with :class:`OdeSystem` (sympy derives its exact
Jacobians, numba compiles them) and integrate it with :func:`solve`, using
Stan's methods (``rk45``, ``ckrk``, ``bdf``, ``adams``) and controls.
"""

from pymc_odesens import math
from pymc_odesens.model import OdeSystem
from pymc_odesens.pymc import (
    OdeSolverFailureWarning,
    choose_sensitivity_route,
    failure_counts,
    failure_summary,
    ode_solution,
    reset_failure_counts,
)
from pymc_odesens.sensitivity import (
    AdjointCheckpoints,
    AdjointGradient,
    SensitivityResult,
    adjoint_forward,
    adjoint_gradient,
    solve_sensitivity,
)
from pymc_odesens.solvers import (
    MaxNumStepsError,
    NewtonConvergenceError,
    NonFiniteRhsError,
    OdeSolution,
    OdeSolverError,
    StepSizeTooSmallError,
    solve,
)

__all__ = [
    "OdeSystem",
    "ode_solution",
    "choose_sensitivity_route",
    "failure_counts",
    "failure_summary",
    "reset_failure_counts",
    "OdeSolverFailureWarning",
    "math",
    "solve",
    "solve_sensitivity",
    "SensitivityResult",
    "adjoint_gradient",
    "adjoint_forward",
    "AdjointGradient",
    "AdjointCheckpoints",
    "OdeSolution",
    "OdeSolverError",
    "MaxNumStepsError",
    "StepSizeTooSmallError",
    "NonFiniteRhsError",
    "NewtonConvergenceError",
]
__version__ = "0.1.0"
