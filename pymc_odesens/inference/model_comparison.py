"""Model comparison by the evidence: log Bayes factors with their Monte Carlo errors."""

from __future__ import annotations

from collections.abc import Mapping

import arviz as az
import numpy as np
import pandas as pd
from scipy.special import logsumexp

from pymc_odesens.inference.smc import sample_smc
from pymc_odesens.inference.smc_evidence import log_evidence

__all__ = ["compare_models"]


def compare_models(
    models: Mapping[str, object],
    method: str = "evidence",
    *,
    reference: str | None = None,
    **sample_kwargs,
) -> pd.DataFrame:
    """Log evidences and log Bayes factors of several models, with their errors.

    Parameters
    ----------
    models : mapping of str to InferenceData or model
        By name: the result of :func:`~pymc_odesens.inference.sample_smc`, or what
        :func:`~pymc_odesens.inference.sample_smc` takes as ``model`` (a ``pymc.Model``, a
        PEtab problem, a callable returning a model), which is then sampled with
        ``**sample_kwargs``.
    method : {"evidence"}
        The evidence (marginal likelihood) from tempered SMC; no other method yet.
    reference : str, optional
        The model the Bayes factors are against (default: the one of largest evidence).
    **sample_kwargs
        For :func:`~pymc_odesens.inference.sample_smc` (``draws``, ``runs``,
        ``random_seed``...), used for the models given as models.

    Returns
    -------
    pandas.DataFrame
        One row per model (index ``model``), largest evidence first: ``log_evidence`` and
        its Monte Carlo standard error ``mcse``
        (:func:`~pymc_odesens.inference.smc_evidence.combined_log_evidence`);
        ``log_bayes_factor`` (``log Z - log Z_reference``) and ``log_bayes_factor_se``
        (``sqrt(mcse^2 + mcse_reference^2)``, 0 for the reference); ``probability``, the
        posterior probability of each model when all are equally probable a priori.

    Raises
    ------
    ValueError
        ``method`` is not ``"evidence"``, ``models`` is empty, ``reference`` is not one of
        its names, or an InferenceData has no ``sample_stats.log_marginal_likelihood``.
    """
    if method != "evidence":
        raise ValueError(f"method: only 'evidence' is supported; got {method!r}")
    if not models:
        raise ValueError("models: give at least one model or InferenceData by name")
    if reference is not None and reference not in models:
        raise ValueError(f"reference: {reference!r} is not one of {list(models)}")
    rows = {}
    for name, item in models.items():
        idata = item if isinstance(item, az.InferenceData) else sample_smc(item, **sample_kwargs)
        rows[name] = log_evidence(idata)
    names = list(rows)
    values = np.array([rows[n][0] for n in names])
    errors = np.array([rows[n][1] for n in names])
    ref = int(np.argmax(values)) if reference is None else names.index(reference)
    bayes = values - values[ref]
    bayes_se = np.sqrt(errors**2 + errors[ref] ** 2)
    bayes_se[ref] = 0.0
    table = pd.DataFrame(
        {
            "log_evidence": values,
            "mcse": errors,
            "log_bayes_factor": bayes,
            "log_bayes_factor_se": bayes_se,
            "probability": np.exp(values - logsumexp(values)),
        },
        index=pd.Index(names, name="model"),
    )
    return table.sort_values("log_evidence", ascending=False)
