"""The PEtab v2 form of a v1 problem, by the petab library's own conversion, for tests.

``petab.v2.petab1to2`` writes the v2 tables. Two things it does not state as the v1 problem
does, which this helper sets in the observable table it wrote:

- petab 0.8.2 leaves ``noiseDistribution`` empty for every observable (the merge of
  ``observableTransformation`` into it returns nothing: libpetab-python#502, fixed in
  petab 0.9.0), so that log-scaled and laplace observables would become ``normal``;
- v2 has no ``log10-normal`` (libpetab-python#413 maps it onto ``log-normal`` with a
  warning: another noise model). ``log10(m) ~ N(log10 h, sigma)`` is
  ``ln(m) ~ N(ln h, sigma ln 10)``, the same density of ``m``: ``log-normal`` with the noise
  formula times ``log(10)`` (laplace alike).

The priors of ``parameterScale*`` types on ``log10`` come out as v2 priors of ``log(theta)``
with the same parameters (another prior); log-likelihoods and their gradients do not depend
on priors.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import petab.v1 as petab
import yaml
from petab.v2.petab1to2 import petab1to2

__all__ = ["converted_to_v2", "linear_gradient", "same_linear_values"]

_V2_DISTRIBUTION = {
    ("lin", "normal"): "normal",
    ("lin", "laplace"): "laplace",
    ("log", "normal"): "log-normal",
    ("log", "laplace"): "log-laplace",
    ("log10", "normal"): "log-normal",
    ("log10", "laplace"): "log-laplace",
}


def converted_to_v2(v1_yaml: Path, folder: Path) -> Path:
    """Write the v2 form of the v1 problem ``v1_yaml`` into ``folder``; its YAML."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v1 = petab.Problem.from_yaml(str(v1_yaml))
        petab1to2(v1_yaml, folder)
    v2_yaml = folder / Path(v1_yaml).name
    config = yaml.safe_load(v2_yaml.read_text())
    for name in config["observable_files"]:
        path = folder / name
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
        distributions, noises = [], []
        for oid, noise in zip(table["observableId"], table["noiseFormula"]):
            row = v1.observable_df.loc[oid]
            transformation = _cell(row, "observableTransformation", "lin")
            distribution = _cell(row, "noiseDistribution", "normal")
            distributions.append(_V2_DISTRIBUTION[transformation, distribution])
            noises.append(f"log(10) * ({noise})" if transformation == "log10" else noise)
        table["noiseDistribution"] = distributions
        table["noiseFormula"] = noises
        table.to_csv(path, sep="\t", index=False)
    return v2_yaml


def _cell(row: pd.Series, column: str, default: str) -> str:
    value = row.get(column, default)
    return value.strip() if isinstance(value, str) and value.strip() else default


def _derivative(x, scales):
    """d theta / d x of each parameter on its scale."""
    x = np.asarray(x, dtype=float)
    out = np.ones_like(x)
    for k, scale in enumerate(scales):
        if scale == "log":
            out[k] = np.exp(x[k])
        elif scale == "log10":
            out[k] = np.exp(x[k] * np.log(10.0)) * np.log(10.0)
    return out


def same_linear_values(x, scales, other_scales):
    """``x`` (on ``scales``) on ``other_scales``, such that the importer unscales both to
    the same bits (it computes ``exp(x)`` and ``exp(x ln 10)``)."""
    result = np.array(x, dtype=float)
    for k, (scale, other) in enumerate(zip(scales, other_scales)):
        if scale == other:
            continue
        if other == "lin":
            result[k] = np.exp(x[k]) if scale == "log" else np.exp(x[k] * math.log(10.0))
        elif other == "log" and scale == "log10":
            result[k] = x[k] * math.log(10.0)
        else:
            result[k] = math.log(x[k]) if scale == "lin" else x[k] / math.log(10.0)
    return result


def linear_gradient(gradient, x, scales):
    """A gradient with respect to ``x`` (on ``scales``) as one with respect to the linear
    values."""
    return gradient / _derivative(x, scales)
