"""Layer 5: PyTensor Ops over the solvers and sensitivities, and the tensors built from them.

- :func:`ode_solution`, :func:`steady_state_solution` and :class:`Preequilibration`: ODE
  solutions and steady states as PyTensor tensors with exact gradients;
- the Ops themselves (``ode_ops.py``, ``steady_state_ops.py``) over the numerics of a batch of
  experiments (``experiments.py``, ``steady_state_experiments.py``), their implementations in
  PyTensor's NUMBA mode (``numba_dispatch.py``, ``numba_pbs.py``, ``steady_state_numba.py``,
  through the C entry points of ``compiled_entries.py`` and ``steady_state_entries.py``) and
  the cache keys of NUMBA-mode graphs (``numba_cache.py``, ``numba_scipy_special.py``);
- solver failures inside a model: counted (``failures.py``) and turned into rejections with
  finite gradients (``rejection.py``);
- :func:`fisher_information_tensor` and the Peano-Baker branch counts (``pbs_branches.py``);
- marginalised observation parameters: :func:`marginal_normal` (``marginal_normal.py``) over
  the marginal likelihood Op (``marginal_likelihood.py``), its block structure
  (``marginal_structure.py``) and closed forms (``marginal_numerics.py``);
- :class:`DistributedLogLikelihoodOp`: a log-likelihood that an evaluator outside the graph
  computes (the workers of a cluster), with its numba callback (``distributed_numba.py``).

Nothing here samples or optimises: that is :mod:`pymc_odesens.inference`, one layer up.
"""

from pymc_odesens.ops import (
    distributed_numba,  # noqa: F401  (and that of the distributed log-likelihood)
    numba_dispatch,  # noqa: F401  (registers the numba Ops)
    numba_pbs,  # noqa: F401  (and the PBS ones)
    steady_state_numba,  # noqa: F401  (and those of steady states)
    unused_sensitivities,  # noqa: F401  (registers the rewrite to states-only solves)
)
from pymc_odesens.ops.concurrent_calls import ConcurrentCallError
from pymc_odesens.ops.distributed_likelihood_op import DistributedLogLikelihoodOp
from pymc_odesens.ops.experiments import experiment_threads, set_experiment_threads
from pymc_odesens.ops.failures import (
    OdeSolverFailureWarning,
    failure_counts,
    failure_summary,
    reset_failure_counts,
)
from pymc_odesens.ops.fisher_tensor import fisher_information_tensor
from pymc_odesens.ops.marginal_likelihood import (
    MarginalNormalLogLikelihood,
    MarginalNormalLogLikelihoodGradient,
    marginal_log_likelihood,
)
from pymc_odesens.ops.marginal_normal import InverseGammaPrior, NormalPrior, marginal_normal
from pymc_odesens.ops.marginal_structure import (
    MarginalColumn,
    MarginalNoise,
    MarginalNormalStructure,
)
from pymc_odesens.ops.numba_cache import register_cacheable
from pymc_odesens.ops.numba_scipy_special import register_scipy_special_ops
from pymc_odesens.ops.ode_ops import (
    OdeAdjointOp,
    OdeAdjointVJPOp,
    OdeDiscreteAdjointOp,
    OdeDiscreteAdjointVJPOp,
    OdeForwardOp,
    OdePbsOp,
    OdeStatesOp,
)
from pymc_odesens.ops.ode_solution import (
    SENSITIVITY_ROUTES,
    choose_sensitivity_route,
    ode_solution,
)
from pymc_odesens.ops.pbs_branches import pbs_branch_counts, pbs_branch_summary
from pymc_odesens.ops.per_thread_function import PerThreadFunction
from pymc_odesens.ops.steady_state_ops import SteadyStateOp, SteadyStateVJPOp
from pymc_odesens.ops.steady_state_solution import Preequilibration, steady_state_solution

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
    MarginalNormalLogLikelihood,
    MarginalNormalLogLikelihoodGradient,
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
    "pbs_branch_counts",
    "pbs_branch_summary",
    "OdeStatesOp",
    "OdeForwardOp",
    "OdePbsOp",
    "OdeAdjointOp",
    "OdeAdjointVJPOp",
    "OdeDiscreteAdjointOp",
    "OdeDiscreteAdjointVJPOp",
    "SteadyStateOp",
    "SteadyStateVJPOp",
    "DistributedLogLikelihoodOp",
    "register_cacheable",
    "experiment_threads",
    "set_experiment_threads",
    "PerThreadFunction",
    "ConcurrentCallError",
    "marginal_normal",
    "NormalPrior",
    "InverseGammaPrior",
    "marginal_log_likelihood",
    "MarginalNormalLogLikelihood",
    "MarginalNormalLogLikelihoodGradient",
    "MarginalNormalStructure",
    "MarginalColumn",
    "MarginalNoise",
]
