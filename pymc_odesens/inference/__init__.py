"""Layer 6: tools that sample or optimise any PyMC model (an ``ode_solution`` model, a PEtab
model, or one without ODEs).

- sampling with the log-density compiled in PyTensor's NUMBA mode (:func:`sample`,
  :func:`sample_posterior_predictive`, ``sampling.py``; nutpie's start values,
  ``nutpie_start.py``; nutpie's compiled model with its callbacks cached across processes,
  :func:`compile_nutpie_model`, ``nutpie_callbacks.py``; one gradient per step method,
  ``step_assignment.py``);
- SMMALA, a Riemannian step method with the Fisher information as metric (``smmala*.py``);
- mass matrices from a posterior mode (:func:`find_posterior_mode`, :func:`mode_metric_nuts`)
  and from pooled draws (:func:`sample_pooled_metric`, :func:`resume_pooled_metric`);
- what a run tells: phases, times and solver failures (``sampling_report.py``), and the
  convergence checks with the failed ones flagged (:func:`convergence_report`);
- multistart mode finding (:func:`find_modes`: L-BFGS-B or a Fisher trust region from prior
  draws, in worker processes; ranked optima, clusters, waterfall plot) and the Laplace
  approximation at a mode as chain starts and mass matrix (:func:`laplace_approximation`),
  or as the coordinates nutpie samples in (:func:`whitened_model`); the modes weighed by
  their Laplace masses, chain starts drawn from that mixture and the Laplace evidence
  (:func:`laplace_mixture`);
- long runs: :class:`TraceCheckpoint` and :class:`TimeLimit`; sampling the same chains on
  until R-hat and ESS meet their targets or a time limit (:func:`sample_until_converged`,
  ``converged_sampling.py``);
- the posterior of marginalised parameters: :func:`recover_marginalized`
  (``marginal_recovery.py``);
- where work runs (``executor_choice.py``, ``executors.py``, ``dask_executor.py``:
  :func:`work_executor` for this process, local processes, any ``concurrent.futures``
  executor or a Dask cluster), and a log-likelihood over many experiments evaluated by a
  cluster's workers, each keeping its part resident (:class:`DistributedLogLikelihood`,
  ``distributed_likelihood.py``, ``resident_likelihood.py``, ``load_balance.py``);
- tempered sequential Monte Carlo with HMC moves and the model evidence
  (:func:`sample_smc`, ``smc*.py``), model comparison by Bayes factors
  (:func:`compare_models`, :func:`log_evidence`); the population's modes with their weights
  (:func:`smc_modes`) and NUTS in each of them (:func:`sample_smc_modes`), or NUTS seeded
  by the whole population (:func:`sample_nuts_from_smc`).

Everything here uses the Ops of :mod:`pymc_odesens.ops` only through a PyMC model.
"""

from pymc_odesens.inference.checkpoint import TraceCheckpoint
from pymc_odesens.inference.converged_sampling import ConvergedSampling, sample_until_converged
from pymc_odesens.inference.convergence import ConvergenceReport, convergence_report
from pymc_odesens.inference.distributed_likelihood import (
    BalanceReport,
    DistributedLogLikelihood,
)
from pymc_odesens.inference.executor_choice import work_executor
from pymc_odesens.inference.executors import (
    ClusterUnavailableError,
    WorkerLostError,
    WorkExecutor,
)
from pymc_odesens.inference.laplace_mixture import LaplaceMixture, laplace_mixture
from pymc_odesens.inference.laplace_start import LaplaceApproximation, laplace_approximation
from pymc_odesens.inference.marginal_recovery import recover_marginalized
from pymc_odesens.inference.mode_metric import (
    PosteriorMode,
    find_posterior_mode,
    mode_metric_nuts,
)
from pymc_odesens.inference.mode_search import ModeCluster, ModeSearchResult, StartResult
from pymc_odesens.inference.model_comparison import compare_models
from pymc_odesens.inference.multistart import StartTask, find_modes, run_start
from pymc_odesens.inference.nutpie_callbacks import compile_nutpie_model
from pymc_odesens.inference.pooled_metric import (
    pooled_covariance,
    resume_pooled_metric,
    sample_pooled_metric,
    sampler_coordinates,
)
from pymc_odesens.inference.resident_likelihood import LikelihoodSource, ResidentLikelihood
from pymc_odesens.inference.sampling import (
    sample,
    sample_posterior_predictive,
    sampling_compile_kwargs,
)
from pymc_odesens.inference.sampling_report import sampling_times, times_line
from pymc_odesens.inference.smc import SmcTimeLimitReached, sample_smc
from pymc_odesens.inference.smc_evidence import log_evidence
from pymc_odesens.inference.smc_mode_sampling import ModeSamples, sample_smc_modes
from pymc_odesens.inference.smc_modes import SmcMode, SmcModes, smc_modes
from pymc_odesens.inference.smc_seeded_nuts import sample_nuts_from_smc
from pymc_odesens.inference.smmala import SMMALA
from pymc_odesens.inference.time_limit import TimeLimit
from pymc_odesens.inference.whitened_model import WhitenedModel, whitened_model

__all__ = [
    "SMMALA",
    "sample",
    "sample_posterior_predictive",
    "sampling_compile_kwargs",
    "compile_nutpie_model",
    "find_posterior_mode",
    "PosteriorMode",
    "mode_metric_nuts",
    "find_modes",
    "ModeSearchResult",
    "ModeCluster",
    "StartResult",
    "StartTask",
    "run_start",
    "laplace_approximation",
    "laplace_mixture",
    "whitened_model",
    "WhitenedModel",
    "LaplaceApproximation",
    "LaplaceMixture",
    "sample_pooled_metric",
    "pooled_covariance",
    "resume_pooled_metric",
    "sampler_coordinates",
    "TraceCheckpoint",
    "TimeLimit",
    "recover_marginalized",
    "ConvergenceReport",
    "convergence_report",
    "sample_until_converged",
    "ConvergedSampling",
    "sampling_times",
    "times_line",
    "work_executor",
    "WorkExecutor",
    "WorkerLostError",
    "ClusterUnavailableError",
    "DistributedLogLikelihood",
    "BalanceReport",
    "LikelihoodSource",
    "ResidentLikelihood",
    "sample_smc",
    "SmcTimeLimitReached",
    "compare_models",
    "log_evidence",
    "smc_modes",
    "SmcMode",
    "SmcModes",
    "sample_smc_modes",
    "ModeSamples",
    "sample_nuts_from_smc",
]
