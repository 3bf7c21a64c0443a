"""pymc_odesens: fast ODE solves with exact sensitivities for PyMC.

Define a system once with :class:`OdeSystem` (sympy derives its exact
Jacobians, numba compiles them) and integrate it with :func:`solve`, using
Stan's methods (``rk45``, ``ckrk``, ``bdf``, ``adams``) and controls;
sensitivities by :func:`solve_sensitivity` (forward, or the Peano-Baker series:
PBS/PBSR/Exp), adjoint gradients by :func:`adjoint_gradient`, steady states with their
sensitivities by :func:`steady_state`, PyMC tensors by :func:`ode_solution` (starting from
a steady state: :class:`Preequilibration`) and :func:`steady_state_solution`, sampling by
:func:`sample` (``pm.sample`` with the log-density compiled in PyTensor's NUMBA mode) and
:func:`sample_posterior_predictive`,
events by :class:`ImplicitEvent`, :class:`ExplicitEvent` and :class:`TriggerEvent`.

The PyTensor and PyMC layers (:mod:`pymc_odesens.ops`: :func:`ode_solution`, ...;
:mod:`pymc_odesens.inference`: :func:`sample`, :class:`SMMALA`, ...; :mod:`pymc_odesens.petab`
and :mod:`pymc_odesens.stan`) import pymc and pytensor, which takes seconds; they are loaded
when first used, so ``import pymc_odesens`` for :func:`solve` alone does not pay for them.
"""

from importlib import import_module

from pymc_odesens.caching.compile_notice import install_compile_notices
from pymc_odesens.caching.numba_cache_guard import purge_stale_numba_cache
from pymc_odesens.caching.numba_cache_verification import verify_numba_cache

# before any module loads numba-cached machine code: drop it if the sources changed, and
# have numba verify (SHA-256) what it loads of the package's functions from now on; any
# compile that runs longer than a moment says so on stderr (a new install compiles minutes)
purge_stale_numba_cache()
verify_numba_cache()
install_compile_notices()

# isort: split
from pymc_odesens import math
from pymc_odesens.caching.disk_cache import KernelCacheError, KernelCacheWarning
from pymc_odesens.model import ExplicitEvent, ImplicitEvent, OdeSystem, TriggerEvent
from pymc_odesens.sensitivity import (
    AdjointCheckpoints,
    AdjointGradient,
    FisherInformationResult,
    NonFiniteSensitivityError,
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
    EventAccumulationError,
    EventSensitivityError,
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
from pymc_odesens.version import __version__  # noqa: F401

_LAZY = {
    # the ops and inference layers import pymc and pytensor (seconds): loaded on first use,
    # so that a user who only solves and differentiates ODEs never pays for them
    "SMMALA": "pymc_odesens.inference",
    "sample": "pymc_odesens.inference",
    "mode_metric_nuts": "pymc_odesens.inference",
    "sample_pooled_metric": "pymc_odesens.inference",
    "resume_pooled_metric": "pymc_odesens.inference",
    "TraceCheckpoint": "pymc_odesens.inference",
    "TimeLimit": "pymc_odesens.inference",
    "find_posterior_mode": "pymc_odesens.inference",
    "find_modes": "pymc_odesens.inference",
    "sample_posterior_predictive": "pymc_odesens.inference",
    "sampling_compile_kwargs": "pymc_odesens.inference",
    "recover_marginalized": "pymc_odesens.inference",
    "marginal_normal": "pymc_odesens.ops",
    "NormalPrior": "pymc_odesens.ops",
    "InverseGammaPrior": "pymc_odesens.ops",
    "convergence_report": "pymc_odesens.inference",
    "sample_smc": "pymc_odesens.inference",
    "SmcTimeLimitReached": "pymc_odesens.inference",
    "compare_models": "pymc_odesens.inference",
    "log_evidence": "pymc_odesens.inference",
    "smc_modes": "pymc_odesens.inference",
    "sample_smc_modes": "pymc_odesens.inference",
    "sample_nuts_from_smc": "pymc_odesens.inference",
    "OdeSolverFailureWarning": "pymc_odesens.ops",
    "choose_sensitivity_route": "pymc_odesens.ops",
    "failure_counts": "pymc_odesens.ops",
    "failure_summary": "pymc_odesens.ops",
    "fisher_information_tensor": "pymc_odesens.ops",
    "ode_solution": "pymc_odesens.ops",
    "reset_failure_counts": "pymc_odesens.ops",
    "Preequilibration": "pymc_odesens.ops",
    "steady_state_solution": "pymc_odesens.ops",
    "pbs_branch_counts": "pymc_odesens.ops",
    "pbs_branch_summary": "pymc_odesens.ops",
    "PerThreadFunction": "pymc_odesens.ops",
    "ConcurrentCallError": "pymc_odesens.ops",
}
_LAZY_MODULES = ("stan", "ops", "inference", "petab", "pymc")


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
    elif name in _LAZY_MODULES:
        value = import_module(f"pymc_odesens.{name}")
    else:
        raise AttributeError(f"module 'pymc_odesens' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"stan", "ops", "inference", "petab"})


__all__ = [
    "OdeSystem",
    "ImplicitEvent",
    "ExplicitEvent",
    "TriggerEvent",
    "ode_solution",
    "steady_state_solution",
    "Preequilibration",
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
    "sample",
    "mode_metric_nuts",
    "sample_pooled_metric",
    "resume_pooled_metric",
    "TraceCheckpoint",
    "TimeLimit",
    "find_posterior_mode",
    "find_modes",
    "sample_posterior_predictive",
    "sampling_compile_kwargs",
    "convergence_report",
    "sample_smc",
    "SmcTimeLimitReached",
    "compare_models",
    "log_evidence",
    "smc_modes",
    "sample_smc_modes",
    "sample_nuts_from_smc",
    "OdeSolution",
    "OdeSolverError",
    "MaxNumStepsError",
    "StepSizeTooSmallError",
    "NonFiniteRhsError",
    "NewtonConvergenceError",
    "EventTimeError",
    "EventAccumulationError",
    "EventSensitivityError",
    "NonFiniteInputError",
    "NonFiniteSensitivityError",
    "KernelCacheWarning",
    "KernelCacheError",
    "PerThreadFunction",
    "ConcurrentCallError",
    "marginal_normal",
    "NormalPrior",
    "InverseGammaPrior",
    "recover_marginalized",
]
