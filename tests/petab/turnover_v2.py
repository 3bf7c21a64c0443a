"""A small PEtab v2 problem with a closed-form solution, written into a folder for tests.

The model is the turnover of :mod:`tests.petab.turnover` (``dA/dt = u - k A``, ``A(0) = 1``,
``u = 1``, ``k = 0.5`` in the model; ``u`` and ``k`` are set by conditions only). The
problem exercises what PEtab v2 states differently from v1:

- experiments of periods: ``pre_stim`` pre-equilibrates with ``u = u_pre, k = k_pre`` and
  then sets ``u = u_stim`` (``k`` keeps ``k_pre``: changes persist), ``pre_only``
  pre-equilibrates and changes nothing at time 0 (``u`` keeps ``u_pre``), ``set`` sets the
  species ``A = 2`` and ``u = 0.5``; measurements without experiment simulate the model as
  it is;
- placeholders with names of their own (``my_scale``, ``my_sigma``) listed in
  ``observablePlaceholders`` / ``noisePlaceholders``;
- ``log-normal`` and ``laplace`` noise, a noise formula with the observable's own id;
- ``estimate`` as ``true`` / ``false`` and v2 priors (``log-uniform`` and ``log-normal``:
  estimated on the log scale; ``uniform``; none).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from tests.petab.turnover import turnover_sbml, turnover_solution

__all__ = [
    "K",
    "TURNOVER_V2_PARAMETERS",
    "edited_turnover_v2_problem",
    "nominal_theta",
    "turnover_v2_llh",
    "turnover_v2_measurements",
    "write_turnover_v2_problem",
]

# id: (lower, upper, nominal, estimate, prior, prior parameters)
TURNOVER_V2_PARAMETERS = {
    "k_pre": (1e-3, 1e3, 0.4, "true", "log-uniform", "0.001;1000"),
    "u_stim": (0.0, 10.0, 2.0, "true", "uniform", "0;10"),
    "scale": (0.01, 100.0, 1.5, "true", "log-normal", "0.3;0.5"),
    "sigma": (1e-3, 1.0, 0.1, "true", "", ""),
    "u_pre": (0.0, 10.0, 1.2, "false", "", ""),
}
K = 0.5
"""The model's degradation rate (not in the parameter table: conditions set it)."""

_MEASUREMENTS = [
    # observable, experiment, times, observableParameters, noiseParameters
    ("obs_a", "pre_stim", [0.0, 0.5, 2.0, math.inf], "scale", "sigma"),
    ("obs_b", "set", [0.0, 1.0, 3.0], "", ""),
    ("obs_b", "", [0.5, 2.0], "", ""),
    ("obs_a", "pre_only", [1.0, 2.0], "2.0", "0.05"),
]


def _simulated(experiment: str, t: float, theta: dict) -> float:
    """``A(t)`` in closed form for the linear values ``theta`` (``u_pre`` included)."""
    k, k_pre, u_pre = K, theta["k_pre"], theta["u_pre"]
    if experiment == "pre_stim":  # from the steady state u_pre / k_pre, k stays k_pre
        return float(turnover_solution(t, u_pre / k_pre, theta["u_stim"], k_pre))
    if experiment == "pre_only":
        return u_pre / k_pre
    if experiment == "set":
        return float(turnover_solution(t, 2.0, 0.5, k))
    return float(turnover_solution(t, 1.0, 1.0, k))  # the model as it is


def turnover_v2_llh(theta: dict) -> float:
    """PEtab's log-likelihood of the problem's measurements for the linear values ``theta``
    of every parameter of the table."""
    measurements = turnover_v2_measurements(theta)
    # the data: those of the problem's table (made at the nominal values)
    measurements["measurement"] = turnover_v2_measurements(nominal_theta())["measurement"]
    total = 0.0
    for _, row in measurements.iterrows():
        m, h = row["measurement"], row["h"]
        if row["observableId"] == "obs_a":  # log-normal: log m ~ N(log h, sigma)
            s = row["sigma"]
            total += -0.5 * ((math.log(m) - math.log(h)) / s) ** 2 - math.log(
                s * m * math.sqrt(2 * math.pi)
            )
        else:  # laplace with b = 0.05 + 0.1 h
            b = row["sigma"]
            total += -abs(m - h) / b - math.log(2 * b)
    return total


def turnover_v2_measurements(theta: dict) -> pd.DataFrame:
    """The measurement table with the simulated ``h`` and noise ``sigma`` of each row for
    ``theta``, and data made from them (5 % log-normal noise, a fixed seed)."""
    rows = []
    rng = np.random.default_rng(5)
    for observable, experiment, times, op, nps in _MEASUREMENTS:
        for t in times:
            a = _simulated(experiment, t, theta)
            if observable == "obs_a":
                factor = theta["scale"] if op == "scale" else float(op)
                sigma = theta["sigma"] if nps == "sigma" else float(nps)
                h = factor * a
            else:
                h = a
                sigma = 0.05 + 0.1 * h
            rows.append(
                {
                    "observableId": observable,
                    "experimentId": experiment,
                    "time": t,
                    "observableParameters": op,
                    "noiseParameters": nps,
                    "h": h,
                    "sigma": sigma,
                    "measurement": round(h * math.exp(0.05 * rng.standard_normal()), 6),
                }
            )
    return pd.DataFrame(rows)


def nominal_theta() -> dict:
    return {pid: spec[2] for pid, spec in TURNOVER_V2_PARAMETERS.items()}


def write_turnover_v2_problem(folder: Path) -> Path:
    """Write the v2 problem's SBML model, tables and YAML into ``folder``; return the YAML.
    The measurements are the model at the nominal values times 5 % log-normal noise."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.xml").write_text(turnover_sbml())
    conditions = pd.DataFrame(
        [
            ("pre", "u", "u_pre"),
            ("pre", "k", "k_pre"),
            ("stim", "u", "u_stim"),
            ("set_a", "A", 2.0),
            ("set_a", "u", 0.5),
        ],
        columns=["conditionId", "targetId", "targetValue"],
    )
    conditions.to_csv(folder / "conditions.tsv", sep="\t", index=False)
    experiments = pd.DataFrame(
        [
            ("pre_stim", "-inf", "pre"),
            ("pre_stim", "0", "stim"),
            ("pre_only", "-inf", "pre"),
            ("pre_only", "0", ""),
            ("set", "0", "set_a"),
        ],
        columns=["experimentId", "time", "conditionId"],
    )
    experiments.to_csv(folder / "experiments.tsv", sep="\t", index=False)
    observables = pd.DataFrame(
        {
            "observableId": ["obs_a", "obs_b"],
            "observableFormula": ["my_scale * A", "A"],
            "noiseFormula": ["my_sigma", "0.05 + 0.1 * obs_b"],
            "noiseDistribution": ["log-normal", "laplace"],
            "observablePlaceholders": ["my_scale", ""],
            "noisePlaceholders": ["my_sigma", ""],
        }
    )
    observables.to_csv(folder / "observables.tsv", sep="\t", index=False)
    measurements = turnover_v2_measurements(nominal_theta()).drop(columns=["h", "sigma"])
    measurements.to_csv(folder / "measurements.tsv", sep="\t", index=False)
    parameters = pd.DataFrame(
        [
            {
                "parameterId": pid,
                "lowerBound": lower,
                "upperBound": upper,
                "nominalValue": nominal,
                "estimate": estimate,
                "priorDistribution": prior,
                "priorParameters": prior_parameters,
            }
            for pid, (lower, upper, nominal, estimate, prior, prior_parameters) in (
                TURNOVER_V2_PARAMETERS.items()
            )
        ]
    )
    parameters.to_csv(folder / "parameters.tsv", sep="\t", index=False)
    yaml = folder / "turnover_v2.yaml"
    yaml.write_text(
        "format_version: 2.0.0\n"
        "parameter_files: [parameters.tsv]\n"
        "model_files:\n"
        "  turnover:\n"
        "    location: model.xml\n"
        "    language: sbml\n"
        "condition_files: [conditions.tsv]\n"
        "experiment_files: [experiments.tsv]\n"
        "measurement_files: [measurements.tsv]\n"
        "observable_files: [observables.tsv]\n"
    )
    return yaml


def edited_turnover_v2_problem(folder: Path, table: str, edit) -> Path:
    """The v2 problem written into ``folder`` with the table file ``table`` changed by
    ``edit(df)`` (in place, or the table it returns); its YAML."""
    yaml = write_turnover_v2_problem(folder)
    path = Path(folder) / table
    df = pd.read_csv(path, sep="\t", keep_default_na=False, dtype=str)
    edited = edit(df)
    (df if edited is None else edited).to_csv(path, sep="\t", index=False)
    return yaml
