"""A small PEtab problem whose observation parameters exercise marginalisation.

The turnover model (:mod:`tests.petab.turnover`: ``A(t) = u/k + (A0 - u/k) exp(-k t)``, a
constant species ``B = 0.4``) observed through observables that each show one case
(formula; noise; transformation: what it tests):

- ``obs_lin``: ``scale_lin * A + offset_lin``; ``sd_lin``; lin: a scaling, an offset and
  the noise (normal-inverse-gamma);
- ``obs_log10``: ``observableParameter1 * A`` (``scale_log10`` in condition c1,
  ``scale_log10b`` in c2); ``sd_log10``; log10: scalings through a placeholder;
- ``obs_log``: ``scale_log * A``; ``2 * noiseParameter1`` (``sd_log``); log: a noise
  weight of 2;
- ``obs_laplace``: ``A + offset_laplace``; 0.1, laplace noise: refused;
- ``obs_in_log``: ``A + offset_in_log + fixed_offset``; 0.1; log10: an offset inside a
  logarithm, refused; a parameter with ``estimate = 0``;
- ``obs_sum_noise``: ``A``; ``sd_a + sd_b``: a noise formula of two parameters, refused;
- ``obs_model``: ``k * A``; 0.1: a parameter of the dynamics, refused;
- ``obs_couple1``, ``obs_couple2``: ``scale_c * A``, ``scale_c * B``; ``sd_c1``, ``sd_c2``:
  a scaling that links two noise parameters (the noise is then sampled);
- ``obs_bilinear``: ``s_first * (A + o_second)``; 0.1: not jointly linear, the first in
  the parameter table kept.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import petab.v1 as petab

from tests.petab.turnover import turnover_sbml, turnover_solution

__all__ = ["MARGINAL_PARAMETERS", "write_marginal_problem"]

# id: (scale, lower, upper, nominal, prior type, prior parameters)
MARGINAL_PARAMETERS = {
    "k": ("log10", 1e-3, 1e3, 0.7, "", ""),
    "u_stim": ("lin", 0.0, 10.0, 2.0, "", ""),
    "scale_lin": ("log10", 1e-2, 1e2, 1.5, "", ""),
    "offset_lin": ("lin", -2.0, 2.0, 0.3, "normal", "0.2;0.5"),
    "sd_lin": ("log10", 1e-3, 1e1, 0.1, "", ""),
    "scale_log10": ("log10", 1e-3, 1e3, 2.0, "parameterScaleNormal", "0.2;0.8"),
    "scale_log10b": ("log10", 1e-3, 1e3, 3.0, "", ""),
    "sd_log10": ("log", 1e-3, 1e1, 0.05, "", ""),
    "scale_log": ("lin", 1e-2, 1e2, 0.8, "logNormal", "0.0;1.0"),
    "sd_log": ("log10", 1e-3, 1e1, 0.03, "", ""),
    "offset_laplace": ("lin", -1.0, 1.0, 0.05, "", ""),
    "offset_in_log": ("lin", 0.0, 1.0, 0.1, "", ""),
    "sd_a": ("log10", 1e-3, 1.0, 0.05, "", ""),
    "sd_b": ("log10", 1e-3, 1.0, 0.05, "", ""),
    "scale_c": ("log10", 1e-2, 1e2, 1.2, "", ""),
    "sd_c1": ("log10", 1e-3, 1.0, 0.1, "", ""),
    "sd_c2": ("log10", 1e-3, 1.0, 0.1, "", ""),
    "s_first": ("log10", 1e-2, 1e2, 1.1, "", ""),
    "o_second": ("lin", -1.0, 1.0, 0.2, "", ""),
}

OBSERVABLES = {
    # id: (formula, noise formula, transformation, distribution)
    "obs_lin": ("scale_lin * A + offset_lin", "sd_lin", "lin", "normal"),
    "obs_log10": ("observableParameter1_obs_log10 * A", "sd_log10", "log10", "normal"),
    "obs_log": ("scale_log * A", "2 * noiseParameter1_obs_log", "log", "normal"),
    "obs_laplace": ("A + offset_laplace", "0.1", "lin", "laplace"),
    "obs_in_log": ("A + offset_in_log + fixed_offset", "0.1", "log10", "normal"),
    "obs_sum_noise": ("A", "sd_a + sd_b", "lin", "normal"),
    "obs_model": ("k * A", "0.1", "lin", "normal"),
    "obs_couple1": ("scale_c * A", "sd_c1", "lin", "normal"),
    "obs_couple2": ("scale_c * B", "sd_c2", "lin", "normal"),
    "obs_bilinear": ("s_first * (A + o_second)", "0.1", "lin", "normal"),
}


def _values(observable: str, a: float, theta: dict) -> tuple[float, float]:
    """``(h, sigma)`` of one measurement at ``A = a``."""
    if observable == "obs_lin":
        return theta["scale_lin"] * a + theta["offset_lin"], theta["sd_lin"]
    if observable == "obs_log10":
        return theta["scale_log10"] * a, theta["sd_log10"]
    if observable == "obs_log10b":
        return theta["scale_log10b"] * a, theta["sd_log10"]
    if observable == "obs_log":
        return theta["scale_log"] * a, 2 * theta["sd_log"]
    if observable == "obs_laplace":
        return a + theta["offset_laplace"], 0.1
    if observable == "obs_in_log":
        return a + theta["offset_in_log"], 0.1
    if observable == "obs_sum_noise":
        return a, theta["sd_a"] + theta["sd_b"]
    if observable == "obs_model":
        return theta["k"] * a, 0.1
    if observable == "obs_couple1":
        return theta["scale_c"] * a, theta["sd_c1"]
    if observable == "obs_couple2":
        return theta["scale_c"] * 0.4, theta["sd_c2"]
    return theta["s_first"] * (a + theta["o_second"]), 0.1


def write_marginal_problem(folder: Path, seed: int = 5) -> Path:
    """Write the problem (data: the model at the nominal values plus its noise) into
    ``folder``; return its YAML."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.xml").write_text(turnover_sbml())
    conditions = pd.DataFrame({"conditionId": ["c1", "c2"], "u": ["u_stim", 0.5]})
    petab.write_condition_df(conditions.set_index("conditionId"), folder / "conditions.tsv")
    observables = pd.DataFrame(
        [
            {
                "observableId": oid,
                "observableFormula": formula,
                "noiseFormula": noise,
                "observableTransformation": transformation,
                "noiseDistribution": distribution,
            }
            for oid, (formula, noise, transformation, distribution) in OBSERVABLES.items()
        ]
    ).set_index("observableId")
    petab.write_observable_df(observables, folder / "observables.tsv")
    nominal = {pid: spec[3] for pid, spec in MARGINAL_PARAMETERS.items()}
    rng = np.random.default_rng(seed)
    rows = []
    for oid in OBSERVABLES:
        for condition, u in (("c1", nominal["u_stim"]), ("c2", 0.5)):
            placeholder = {"c1": "scale_log10", "c2": "scale_log10b"}[condition]
            for t in (0.5, 1.5, 3.0):
                a = float(turnover_solution(t, 1.0, u, nominal["k"]))
                h, sigma = _values(
                    oid if condition == "c1" or oid != "obs_log10" else "obs_log10b", a, nominal
                )
                transformation = OBSERVABLES[oid][2]
                if transformation == "lin":
                    m = h + sigma * rng.standard_normal()
                elif transformation == "log":
                    m = h * np.exp(sigma * rng.standard_normal())
                else:
                    m = h * 10 ** (sigma * rng.standard_normal())
                rows.append(
                    {
                        "observableId": oid,
                        "simulationConditionId": condition,
                        "measurement": round(float(m), 8),
                        "time": t,
                        "observableParameters": placeholder if oid == "obs_log10" else "",
                        "noiseParameters": "sd_log" if oid == "obs_log" else "",
                    }
                )
    petab.write_measurement_df(pd.DataFrame(rows), folder / "measurements.tsv")
    table = pd.DataFrame(
        [
            {
                "parameterId": pid,
                "parameterScale": scale,
                "lowerBound": lower,
                "upperBound": upper,
                "nominalValue": value,
                "estimate": 1,
                "objectivePriorType": prior,
                "objectivePriorParameters": parameters,
            }
            for pid, (scale, lower, upper, value, prior, parameters) in MARGINAL_PARAMETERS.items()
        ]
        + [
            {
                "parameterId": "fixed_offset",
                "parameterScale": "lin",
                "lowerBound": -1,
                "upperBound": 1,
                "nominalValue": 0.0,
                "estimate": 0,
                "objectivePriorType": "",
                "objectivePriorParameters": "",
            }
        ]
    ).set_index("parameterId")
    petab.write_parameter_df(table, folder / "parameters.tsv")
    yaml = folder / "marginal.yaml"
    yaml.write_text(
        "format_version: 1\n"
        "parameter_file: parameters.tsv\n"
        "problems:\n"
        "- condition_files: [conditions.tsv]\n"
        "  measurement_files: [measurements.tsv]\n"
        "  observable_files: [observables.tsv]\n"
        "  sbml_files: [model.xml]\n"
    )
    return yaml
