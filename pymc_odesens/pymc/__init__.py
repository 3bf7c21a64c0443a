"""Layer 5: PyTensor Ops and PyMC-facing functions."""

from pymc_odesens.pymc import numba_dispatch, numba_pbs  # noqa: F401  (register the numba Ops)
from pymc_odesens.pymc.failures import (
    OdeSolverFailureWarning,
    failure_counts,
    failure_summary,
    reset_failure_counts,
)
from pymc_odesens.pymc.fisher import fisher_information_tensor
from pymc_odesens.pymc.ode_solution import (
    SENSITIVITY_ROUTES,
    choose_sensitivity_route,
    ode_solution,
)
from pymc_odesens.pymc.pbs_branches import pbs_branch_counts, pbs_branch_summary
from pymc_odesens.pymc.smmala import SMMALA

__all__ = [
    "ode_solution",
    "choose_sensitivity_route",
    "SENSITIVITY_ROUTES",
    "OdeSolverFailureWarning",
    "failure_counts",
    "failure_summary",
    "reset_failure_counts",
    "fisher_information_tensor",
    "SMMALA",
    "pbs_branch_counts",
    "pbs_branch_summary",
]
