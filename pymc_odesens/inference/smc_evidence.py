"""Model evidence from tempered SMC runs, and model comparison by Bayes factors.

Each run of :func:`~pymc_odesens.inference.sample_smc` gives an unbiased estimate
``Z_r`` of the evidence (the product over stages of the weighted means of the incremental
weights). The runs are independent, so they combine into

- the estimate ``log((1/R) sum_r Z_r)`` (the logarithm of the mean of the unbiased
  estimates), and
- its Monte Carlo standard error ``sd(log Z_r) / sqrt(R)`` (the delta method:
  ``Var(log mean Z) ~ Var(Z) / (R Z^2) ~ Var(log Z_r) / R`` when the runs agree to well
  within one unit of log evidence; NaN for one run).

:func:`~pymc_odesens.inference.model_comparison.compare_models` turns the estimates of
several models into log Bayes factors with their errors.
"""

from __future__ import annotations

import arviz as az
import numpy as np
from scipy.special import logsumexp

__all__ = ["combined_log_evidence", "log_evidence"]


def combined_log_evidence(per_run: np.ndarray) -> tuple[float, float]:
    """``(log evidence, Monte Carlo standard error)`` from the runs' log evidences
    (module docstring)."""
    per_run = np.asarray(per_run, dtype=float).ravel()
    if per_run.size == 0:
        raise ValueError("per_run: no runs")
    estimate = float(logsumexp(per_run) - np.log(per_run.size))
    mcse = float(np.std(per_run, ddof=1) / np.sqrt(per_run.size)) if per_run.size > 1 else np.nan
    return estimate, mcse


def log_evidence(idata: az.InferenceData) -> tuple[float, float]:
    """``(log evidence, Monte Carlo standard error)`` of a :func:`sample_smc` result.

    Parameters
    ----------
    idata : arviz.InferenceData
        With ``sample_stats.log_marginal_likelihood`` per run (``chain``).

    Raises
    ------
    ValueError
        ``idata`` has no ``sample_stats.log_marginal_likelihood``.
    """
    stats = getattr(idata, "sample_stats", None)
    if stats is None or "log_marginal_likelihood" not in stats:
        raise ValueError(
            "idata: no sample_stats.log_marginal_likelihood; give the result of "
            "pymc_odesens.sample_smc (or a model, which compare_models samples)"
        )
    values = np.asarray(stats["log_marginal_likelihood"].values, dtype=float)
    if values.ndim != 1:
        raise ValueError(
            "idata: sample_stats.log_marginal_likelihood must hold one value per run (chain); "
            f"got dims {stats['log_marginal_likelihood'].dims}"
        )
    return combined_log_evidence(values)
