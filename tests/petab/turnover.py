"""A small PEtab problem with a closed-form solution, written into a folder for tests.

The model is a turnover ``dA/dt = u - k A`` (production ``u``, degradation ``k``; a
constant species ``B = 0.4`` enters an observable), so that
``A(t) = u/k + (A(0) - u/k) exp(-k t)`` and the steady state is ``u/k``. The problem
exercises what the benchmark collection does not: a laplace noise model, ``log`` and
``log10`` transformations, a noise formula that uses the observable's own value, an
initial value set by the condition table (with and without pre-equilibration), a
measurement at ``time = inf``, and every prior type.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import petab.v1 as petab

from tests.model.sbml.sbml_text import build_sbml

__all__ = [
    "TURNOVER_PARAMETERS",
    "turnover_observables",
    "turnover_sbml",
    "turnover_solution",
    "write_turnover_problem",
    "edited_turnover_problem",
    "non_positive_simulation",
]

# id: (scale, lower, upper, nominal, estimate, prior type, prior parameters)
TURNOVER_PARAMETERS = {
    "k": ("log10", 1e-3, 1e3, 0.7, 1, "normal", "0.8;0.5"),
    "u_stim": ("lin", 0.0, 10.0, 2.0, 1, "logNormal", "0.5;0.4"),
    "scale": ("log", 0.01, 100.0, 1.5, 1, "parameterScaleLaplace", "0.3;0.7"),
    "offset": ("lin", -1.0, 1.0, 0.05, 1, "laplace", "0.0;0.2"),
    "sigma_rel": ("log10", 1e-3, 1.0, 0.05, 1, "parameterScaleNormal", "-1.3;0.5"),
    "sigma_abs": ("lin", 0.0, 2.0, 0.1, 1, "uniform", "0.0;1.0"),
    "b": ("log10", 1e-2, 1e2, 0.2, 1, "logLaplace", "-1.5;0.6"),
    "c": ("lin", -5.0, 5.0, 0.3, 1, "parameterScaleUniform", "-2;2"),
    "d": ("log", 1e-3, 1e3, 2.0, 1, "", ""),
    "u_pre": ("lin", 0.0, 10.0, 1.0, 0, "", ""),
}


def turnover_solution(t, a0: float, u: float, k: float) -> np.ndarray:
    """``A(t)`` of ``dA/dt = u - k A`` from ``A(0) = a0`` (``t = inf``: the steady state)."""
    t = np.asarray(t, dtype=float)
    steady = u / k
    with np.errstate(over="ignore"):
        decay = np.where(np.isinf(t), 0.0, np.exp(-k * np.where(np.isinf(t), 0.0, t)))
    return steady + (a0 - steady) * decay


def turnover_sbml(
    *, a0: float = 1.0, production: str = "u", parameters: dict | None = None, events=()
) -> str:
    """The turnover model as SBML: ``A`` made at rate ``production``, degraded at ``k A``;
    a constant species ``B``; the parameters ``u, k, b, c, d`` (plus ``parameters``)."""
    return build_sbml(
        compartments={"cell": 1.0},
        species=[
            {"id": "A", "concentration": a0},
            {"id": "B", "concentration": 0.4, "boundary": True, "constant": True},
        ],
        parameters={"u": 1.0, "k": 0.5, "b": 0.1, "c": 0.0, "d": 1.0, **(parameters or {})},
        reactions={
            "production": {"products": [("A", 1)], "rate": production},
            "degradation": {"reactants": [("A", 1)], "rate": "k * A"},
        },
        events=events,
        model_id="turnover",
    )


def write_turnover_problem(folder: Path, sbml: str | None = None) -> Path:
    """Write the problem's SBML model (``sbml``, default :func:`turnover_sbml`), tables and
    YAML into ``folder``; return the YAML."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.xml").write_text(sbml or turnover_sbml())
    conditions = pd.DataFrame(
        {
            "conditionId": ["pre", "stim", "set", "stim_set"],
            "u": ["u_pre", "u_stim", 0.5, "u_stim"],
            "A": [np.nan, np.nan, 2.0, 3.0],
        }
    ).set_index("conditionId")
    petab.write_condition_df(conditions, folder / "conditions.tsv")
    observables = pd.DataFrame(
        {
            "observableId": ["obs_log10", "obs_laplace", "obs_log_laplace", "obs_log_b"],
            "observableFormula": [
                "observableParameter1_obs_log10 * A",
                "A + offset",
                "scale * A",
                "A * exp(b * c) + B * d",
            ],
            "noiseFormula": [
                "noiseParameter1_obs_log10",
                "sigma_abs + 0.1 * obs_laplace",
                "sigma_rel",
                "noiseParameter1_obs_log_b * noiseParameter2_obs_log_b",
            ],
            "observableTransformation": ["log10", "lin", "log10", "log"],
            "noiseDistribution": ["normal", "laplace", "laplace", "normal"],
        }
    ).set_index("observableId")
    petab.write_observable_df(observables, folder / "observables.tsv")
    rows = []
    rng = np.random.default_rng(3)
    for obs, pre, sim, times, op, nps in [
        ("obs_log10", "pre", "stim", [0.0, 0.5, 2.0, math.inf], "scale", "0.1"),
        ("obs_laplace", "", "set", [0.0, 1.0, 3.0], "", ""),
        ("obs_log_laplace", "pre", "stim_set", [0.0, 1.0, 4.0], "", ""),
        ("obs_log_b", "", "stim", [0.5, 1.5, 1.5], "", "0.2;sigma_rel"),
        ("obs_log10", "", "set", [1.0, 2.0], "0.5", "sigma_abs"),
    ]:
        for t in times:
            rows.append(
                {
                    "observableId": obs,
                    "preequilibrationConditionId": pre,
                    "simulationConditionId": sim,
                    "measurement": 1.0,
                    "time": t,
                    "observableParameters": op,
                    "noiseParameters": nps,
                }
            )
    measurements = pd.DataFrame(rows)
    # data: the model at the nominal values times 5 % log-normal noise
    nominal = {pid: spec[3] for pid, spec in TURNOVER_PARAMETERS.items() if spec[4]}
    h, _ = turnover_observables(measurements, nominal)
    measurements["measurement"] = np.round(h * np.exp(0.05 * rng.standard_normal(len(h))), 6)
    petab.write_measurement_df(measurements, folder / "measurements.tsv")
    table = pd.DataFrame(
        [
            {
                "parameterId": pid,
                "parameterScale": scale,
                "lowerBound": lower,
                "upperBound": upper,
                "nominalValue": nominal,
                "estimate": estimate,
                "objectivePriorType": prior,
                "objectivePriorParameters": prior_parameters,
            }
            for pid, (scale, lower, upper, nominal, estimate, prior, prior_parameters) in (
                TURNOVER_PARAMETERS.items()
            )
        ]
    ).set_index("parameterId")
    petab.write_parameter_df(table, folder / "parameters.tsv")
    yaml = folder / "turnover.yaml"
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


def edited_turnover_problem(folder: Path, table: str, edit) -> Path:
    """The problem written into ``folder`` with the table file ``table`` changed by
    ``edit(df)`` (in place, or the table it returns); its YAML."""
    yaml = write_turnover_problem(folder)
    path = Path(folder) / table
    df = pd.read_csv(path, sep="\t")
    edited = edit(df)
    (df if edited is None else edited).to_csv(path, sep="\t", index=False)
    return yaml


def non_positive_simulation(observable: str, factor: str, transformation: str | None = None):
    """An edit of the observable table: ``observable``'s formula times ``factor`` (0 or
    negative), on ``transformation`` if given."""

    def edit(df):
        row = df["observableId"] == observable
        df.loc[row, "observableFormula"] = (
            f"{factor} * ({df.loc[row, 'observableFormula'].iloc[0]})"
        )
        if transformation is not None:
            df.loc[row, "observableTransformation"] = transformation

    return edit


def turnover_observables(measurements: pd.DataFrame, theta: dict) -> tuple:
    """``(h, sigma)`` of every measurement row in closed form, for linear values ``theta``
    of the estimated parameters (``u_pre`` and the constant species ``B`` fixed)."""
    k, u_stim = theta["k"], theta["u_stim"]
    u_pre, b_species = 1.0, 0.4
    h, sigma = [], []
    for _, row in measurements.iterrows():
        t, obs, sim = row["time"], row["observableId"], row["simulationConditionId"]
        pre = row["preequilibrationConditionId"]
        pre = pre if isinstance(pre, str) and pre else None
        a0 = {"set": 2.0, "stim": u_pre / k if pre else 1.0, "stim_set": 3.0}[sim]
        u = 0.5 if sim == "set" else u_stim
        a = float(turnover_solution(t, a0, u, k))
        if obs == "obs_log10":
            factor = theta["scale"] if sim == "stim" else 0.5
            noise = 0.1 if sim == "stim" else theta["sigma_abs"]
            value = factor * a
        elif obs == "obs_laplace":
            value = a + theta["offset"]
            noise = theta["sigma_abs"] + 0.1 * value
        elif obs == "obs_log_laplace":
            value, noise = theta["scale"] * a, theta["sigma_rel"]
        else:
            value = a * math.exp(theta["b"] * theta["c"]) + b_species * theta["d"]
            noise = 0.2 * theta["sigma_rel"]
        h.append(value)
        sigma.append(noise)
    return np.array(h), np.array(sigma)
