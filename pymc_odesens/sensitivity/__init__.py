"""Layer 4: sensitivities of ODE solutions (forward and adjoint; PBS to follow)."""

from pymc_odesens.sensitivity.adjoint import (
    AdjointCheckpoints,
    AdjointGradient,
    adjoint_forward,
    adjoint_gradient,
)
from pymc_odesens.sensitivity.adjoint_controls import AdjointControls
from pymc_odesens.sensitivity.result import SensitivityResult
from pymc_odesens.sensitivity.solve_sensitivity import SENSITIVITY_METHODS, solve_sensitivity

__all__ = [
    "SENSITIVITY_METHODS",
    "SensitivityResult",
    "solve_sensitivity",
    "AdjointCheckpoints",
    "AdjointControls",
    "AdjointGradient",
    "adjoint_forward",
    "adjoint_gradient",
]
