"""Layer 5: PyTensor Ops and PyMC-facing functions."""

from pymc_odesens.pymc import (
    numba_dispatch,  # noqa: F401  (registers the numba Ops)
    numba_pbs,  # noqa: F401  (and the PBS ones)
    steady_state_numba,  # noqa: F401  (and those of steady states)
)
from pymc_odesens.pymc.checkpoint import TraceCheckpoint
from pymc_odesens.pymc.concurrent_calls import ConcurrentCallError
from pymc_odesens.pymc.failures import (
    OdeSolverFailureWarning,
    failure_counts,
    failure_summary,
    reset_failure_counts,
)
from pymc_odesens.pymc.fisher import fisher_information_tensor
from pymc_odesens.pymc.mode_metric import PosteriorMode, find_posterior_mode, mode_metric_nuts
from pymc_odesens.pymc.numba_cache import register_cacheable
from pymc_odesens.pymc.numba_scipy_special import register_scipy_special_ops
from pymc_odesens.pymc.ode_solution import (
    SENSITIVITY_ROUTES,
    choose_sensitivity_route,
    ode_solution,
)
from pymc_odesens.pymc.ops import (
    OdeAdjointOp,
    OdeAdjointVJPOp,
    OdeDiscreteAdjointOp,
    OdeDiscreteAdjointVJPOp,
    OdeForwardOp,
    OdePbsOp,
    OdeStatesOp,
)
from pymc_odesens.pymc.pbs_branches import pbs_branch_counts, pbs_branch_summary
from pymc_odesens.pymc.per_thread_function import PerThreadFunction
from pymc_odesens.pymc.pooled_metric import (
    pooled_covariance,
    resume_pooled_metric,
    sample_pooled_metric,
    sampler_coordinates,
)
from pymc_odesens.pymc.sampling import (
    sample,
    sample_posterior_predictive,
    sampling_compile_kwargs,
)
from pymc_odesens.pymc.smmala import SMMALA
from pymc_odesens.pymc.steady_state_ops import SteadyStateOp, SteadyStateVJPOp
from pymc_odesens.pymc.steady_state_solution import Preequilibration, steady_state_solution
from pymc_odesens.pymc.time_limit import TimeLimit

# compiled NUMBA-mode graphs with these Ops go into PyTensor's on-disk cache
register_cacheable(
    OdeStatesOp,
    OdeForwardOp,
    OdePbsOp,
    OdeAdjointOp,
    OdeAdjointVJPOp,
    OdeDiscreteAdjointOp,
    OdeDiscreteAdjointVJPOp,
    SteadyStateOp,
    SteadyStateVJPOp,
)
# and so do graphs with scipy.special functions (the digamma of a negative binomial's gradient)
register_scipy_special_ops()

__all__ = [
    "ode_solution",
    "steady_state_solution",
    "Preequilibration",
    "choose_sensitivity_route",
    "SENSITIVITY_ROUTES",
    "OdeSolverFailureWarning",
    "failure_counts",
    "failure_summary",
    "reset_failure_counts",
    "fisher_information_tensor",
    "SMMALA",
    "sample",
    "mode_metric_nuts",
    "sample_pooled_metric",
    "pooled_covariance",
    "resume_pooled_metric",
    "TraceCheckpoint",
    "TimeLimit",
    "sampler_coordinates",
    "find_posterior_mode",
    "PosteriorMode",
    "sample_posterior_predictive",
    "sampling_compile_kwargs",
    "pbs_branch_counts",
    "pbs_branch_summary",
    "PerThreadFunction",
    "ConcurrentCallError",
]
