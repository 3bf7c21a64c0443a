"""Layer 5: PyTensor Ops and PyMC-facing functions."""

from pymc_odesens.pymc.failures import (
    OdeSolverFailureWarning,
    failure_counts,
    failure_summary,
    reset_failure_counts,
)
from pymc_odesens.pymc.ode_solution import (
    SENSITIVITY_ROUTES,
    choose_sensitivity_route,
    ode_solution,
)

__all__ = [
    "ode_solution",
    "choose_sensitivity_route",
    "SENSITIVITY_ROUTES",
    "OdeSolverFailureWarning",
    "failure_counts",
    "failure_summary",
    "reset_failure_counts",
]
