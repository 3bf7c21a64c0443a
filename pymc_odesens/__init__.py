"""pymc_odesens: fast ODE solves with exact sensitivities for PyMC."""

from pymc_odesens import math
from pymc_odesens.model import OdeSystem

__all__ = ["OdeSystem", "math"]
__version__ = "0.1.0"
