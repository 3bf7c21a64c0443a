"""Layer 4: sensitivities of ODE solutions (forward; adjoint and PBS to follow)."""

from pymc_odesens.sensitivity.result import SensitivityResult
from pymc_odesens.sensitivity.solve_sensitivity import SENSITIVITY_METHODS, solve_sensitivity

__all__ = ["SENSITIVITY_METHODS", "SensitivityResult", "solve_sensitivity"]
