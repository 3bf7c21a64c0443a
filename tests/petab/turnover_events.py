"""The turnover model with SBML events, written as a PEtab problem for tests: a dose
(``time >= t_dose``), a cut of the production (``time >= t_cut``: ``v``, a parameter that an
event assigns, becomes a state), a window (``time <= t_window``) and refills located by root
finding (``A < th``), each time and amount set per condition; see
tests/petab/test_model_events.py."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import petab.v1 as petab

from tests.petab.turnover import turnover_sbml

__all__ = [
    "CUT",
    "DOSE",
    "PARAMETERS",
    "REFILL",
    "SIGMA",
    "TIGHT",
    "WINDOW",
    "write_problem",
]

TIGHT = dict(relative_tolerance=1e-10, absolute_tolerance=1e-12)
SIGMA = 0.1

# id: (scale, lower, upper, nominal, estimate)
PARAMETERS = {
    "k": ("log10", 1e-2, 1e2, 0.7, 1),
    "u_stim": ("lin", 0.0, 10.0, 2.0, 1),
    "frac": ("lin", 0.0, 1.0, 0.6, 1),
    "dose_amount": ("lin", 0.0, 5.0, 0.8, 1),
    "w": ("lin", 0.0, 5.0, 0.5, 1),
    "t_first": ("lin", 0.1, 3.0, 1.2, 1),
    "u_pre": ("lin", 0.0, 10.0, 1.0, 0),
}

# the parameters of the model (turnover_sbml's and _sbml's); the table's others count only
# where a condition uses them
MODEL_PARAMETERS = ("u", "k", "b", "c", "d", "v", "frac", "dose", "w", "t_dose", "t_cut")
MODEL_PARAMETERS += ("t_window", "th")

# dosing: A + dose at t_dose; cut: the production v * u scaled by frac at t_cut (v is a
# parameter that an event assigns: a state); window: A + w when t <= t_window becomes true
# (only at a start); refill: A + 1 whenever A falls below th (located by root finding)
DOSE = {
    "id": "dosing",
    "trigger": "time >= t_dose",
    "assignments": {"A": "A + dose"},
    "initial_value": False,
}
CUT = {"id": "cut", "trigger": "time >= t_cut", "assignments": {"v": "v * frac"}}
WINDOW = {"id": "window", "trigger": "time <= t_window", "assignments": {"A": "A + w"}}
REFILL = {"id": "refill", "trigger": "A < th", "assignments": {"A": "A + 1"}}


def _sbml(events) -> str:
    return turnover_sbml(
        a0=1.0,
        production="u * v",
        parameters={
            "v": (1.0, False),
            "frac": 0.5,
            "dose": 0.0,
            "w": 0.0,
            "t_dose": 10.0,
            "t_cut": 10.0,
            "t_window": -1.0,
            "th": 0.0,
        },
        events=events,
    )


def write_problem(folder: Path, events, conditions: dict, measurements: list) -> Path:
    """An event problem in ``folder``: the turnover model with ``events``, the conditions
    ``{id: {parameter: value}}``, measurements ``(pre, simulation, times)`` of ``A`` with
    normal noise ``SIGMA`` (data: 1.0 everywhere; the likelihood is checked against petab's
    formula, not against a fit)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.xml").write_text(_sbml(events))
    petab.write_condition_df(
        pd.DataFrame([{"conditionId": c, **v} for c, v in conditions.items()]).set_index(
            "conditionId"
        ),
        folder / "conditions.tsv",
    )
    petab.write_observable_df(
        pd.DataFrame(
            {"observableId": ["obs_A"], "observableFormula": ["A"], "noiseFormula": [SIGMA]}
        ).set_index("observableId"),
        folder / "observables.tsv",
    )
    rows = [
        {
            "observableId": "obs_A",
            "preequilibrationConditionId": pre,
            "simulationConditionId": sim,
            "measurement": 1.0 + 0.1 * j,
            "time": t,
        }
        for pre, sim, times in measurements
        for j, t in enumerate(times)
    ]
    petab.write_measurement_df(pd.DataFrame(rows), folder / "measurements.tsv")
    # the parameters the conditions use, and those of the model (petab's check refuses a
    # parameter table entry nothing uses)
    used = {v for values in conditions.values() for v in values.values() if isinstance(v, str)}
    table = pd.DataFrame(
        [
            {
                "parameterId": pid,
                "parameterScale": scale,
                "lowerBound": lower,
                "upperBound": upper,
                "nominalValue": nominal,
                "estimate": estimate,
            }
            for pid, (scale, lower, upper, nominal, estimate) in PARAMETERS.items()
            if pid in used or pid in MODEL_PARAMETERS
        ]
    ).set_index("parameterId")
    petab.write_parameter_df(table, folder / "parameters.tsv")
    yaml = folder / "events.yaml"
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
