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

The runs' particle populations combine into one estimate of the posterior with the weights
:func:`evidence_weights`, ``Z_r / sum_s Z_s``: ``Z_r`` times run ``r``'s particle
distribution is an unbiased estimate of the evidence times the posterior (Del Moral 2004),
so the ratio of the sums is consistent in the number of runs as well as of particles. When
the runs agree on the evidence these weights are nearly equal; when a run lost a mode that
holds most of the posterior mass (its evidence is far lower), they leave it out, where an
equal-weight average of the runs would keep its population.
"""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
from scipy.special import logsumexp

__all__ = [
    "combined_log_evidence",
    "effective_runs",
    "evidence_weights",
    "log_evidence",
    "run_log_evidence",
    "warn_if_one_run",
]


def combined_log_evidence(per_run: np.ndarray) -> tuple[float, float]:
    """``(log evidence, Monte Carlo standard error)`` from the runs' log evidences
    (module docstring)."""
    per_run = np.asarray(per_run, dtype=float).ravel()
    if per_run.size == 0:
        raise ValueError("per_run: no runs")
    estimate = float(logsumexp(per_run) - np.log(per_run.size))
    mcse = float(np.std(per_run, ddof=1) / np.sqrt(per_run.size)) if per_run.size > 1 else np.nan
    return estimate, mcse


def evidence_weights(per_run: np.ndarray) -> np.ndarray:
    """Each run's weight ``Z_r / sum_s Z_s`` from the runs' log evidences (module docstring).

    Raises
    ------
    ValueError
        No runs, or a log evidence that is not finite (a run whose evidence is unknown
        cannot be weighed).
    """
    per_run = np.asarray(per_run, dtype=float).ravel()
    if per_run.size == 0:
        raise ValueError("per_run: no runs")
    if not np.all(np.isfinite(per_run)):
        raise ValueError(f"per_run: expected finite log evidences, got {per_run.tolist()}")
    return np.exp(per_run - logsumexp(per_run))


def effective_runs(weights: np.ndarray) -> float:
    """``1 / sum_r w_r^2``: how many runs of equal weight the weights ``w`` (summing to 1)
    are worth; 1 when one run holds all the weight."""
    weights = np.asarray(weights, dtype=float)
    return float(1.0 / np.sum(weights**2))


def warn_if_one_run(
    caller: str, log_evidence: np.ndarray, weights: np.ndarray, consequence: str
) -> float:
    """The effective number of runs of ``weights``; below 2 (with several runs) a
    ``RuntimeWarning`` from ``caller`` names the runs' log evidences, the run that holds the
    weight, and ``consequence``."""
    effective = effective_runs(weights)
    if len(weights) > 1 and effective < 2.0:
        warnings.warn(
            f"{caller}: the runs' log evidences {np.round(log_evidence, 2).tolist()} disagree: "
            f"{effective:.2f} effective runs carry the weight (run {int(np.argmax(weights))} "
            f"holds {np.max(weights):.3g}), so {consequence}. The other runs lost mass that "
            "this one holds: give the runs more particles",
            RuntimeWarning,
            stacklevel=3,
        )
    return effective


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


def run_log_evidence(idata: az.InferenceData) -> np.ndarray:
    """Each run's log evidence, ``idata.sample_stats.log_marginal_likelihood``.

    Raises
    ------
    ValueError
        It is missing, or not one finite value per run (``chain`` of the posterior).
    """
    stats = getattr(idata, "sample_stats", None)
    if stats is None or "log_marginal_likelihood" not in stats:
        raise ValueError(
            "idata: no sample_stats.log_marginal_likelihood per run; the runs are weighed "
            "by their evidence: give the result of sample_smc"
        )
    runs = idata.posterior.sizes["chain"]
    values = np.asarray(stats["log_marginal_likelihood"].values, dtype=float).ravel()
    if values.size != runs or not np.all(np.isfinite(values)):
        raise ValueError(
            f"idata: expected a finite log evidence for each of the {runs} runs in "
            f"sample_stats.log_marginal_likelihood, got {values.tolist()}"
        )
    return values
