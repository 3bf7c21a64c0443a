"""A PEtab problem simulated by libRoadRunner: an independent check of our simulation and
log-likelihood at the nominal parameter values.

Run it with the interpreter that has libRoadRunner (the AMICI virtualenv, never the
package's)::

    /work/amici_env/bin/python benchmarks/peers/roadrunner_petab.py \\
        ../shared/petab/Chen_MSB2009/Chen_MSB2009.yaml \\
        --restarts 1799.99 1800 2659.99 2660 --rtol 1e-10 --atol 1e-8

It prints the log-likelihood (``petab.calculate_llh`` on libRoadRunner's simulation) and
the largest relative difference per observable from the problem's ``simulatedData``
table. libRoadRunner loads the SBML model itself (CVODE inside); the integration stops
and restarts (CVODE re-initialised) at ``--restarts`` (the model's switching times, where
AMICI restarts at its heaviside roots) and at every measurement time. Covered: problems
without pre-equilibration, whose condition table sets model parameters or initial
concentrations and whose observable and noise parameters are numbers or parameter ids.
"""

from __future__ import annotations

import argparse
import glob
from pathlib import Path

import numpy as np
import petab.v1 as petab
import roadrunner
import sympy as sp
import yaml


def _value(entry, nominal: dict) -> float:
    try:
        return float(entry)
    except ValueError:
        return float(nominal[entry])


def _overrides(entries, placeholder: str, observable: str, nominal: dict) -> dict:
    values = [_value(v, nominal) for v in petab.split_parameter_replacement_list(entries)]
    return {f"{placeholder}{k + 1}_{observable}": v for k, v in enumerate(values)}


def simulate(problem: petab.Problem, sbml: Path, restarts, rtol: float, atol: float):
    """The measurement table with libRoadRunner's ``simulation`` column."""
    runner = roadrunner.RoadRunner(str(sbml))
    runner.integrator.relative_tolerance = rtol
    runner.integrator.absolute_tolerance = atol
    runner.integrator.maximum_num_steps = 10**6
    species = list(runner.model.getFloatingSpeciesIds())
    model_parameters = set(runner.model.getGlobalParameterIds())
    nominal = problem.parameter_df[petab.NOMINAL_VALUE].to_dict()
    measurements = problem.measurement_df.copy()
    if (
        petab.PREEQUILIBRATION_CONDITION_ID in measurements
        and (measurements[petab.PREEQUILIBRATION_CONDITION_ID].fillna("").astype(str) != "").any()
    ):
        raise SystemExit("pre-equilibration is not covered")
    formulas = {
        oid: sp.sympify(row[petab.OBSERVABLE_FORMULA])
        for oid, row in problem.observable_df.iterrows()
    }
    simulated = np.full(len(measurements), np.nan)
    for condition_id, rows in measurements.groupby(petab.SIMULATION_CONDITION_ID):
        runner.resetAll()
        for pid, value in nominal.items():
            if pid in model_parameters:
                runner[pid] = float(value)
        for key, value in problem.condition_df.loc[condition_id].items():
            if key == petab.CONDITION_NAME:
                continue
            runner[f"init([{key}])" if key in species else key] = _value(value, nominal)
        # the initial assignments (species set from parameters) again, from the values set
        runner.reset()
        stops = sorted({0.0, *map(float, restarts), *rows[petab.TIME].astype(float)})
        # (getFloatingSpeciesConcentrations is gone from libRoadRunner 2.10: the named array's
        # columns are the floating species in the same order)
        states = {0.0: np.asarray(runner.getFloatingSpeciesConcentrationsNamedArray()).ravel()}
        runner.timeCourseSelections = ["time"] + [f"[{s}]" for s in species]
        for start, end in zip(stops[:-1], stops[1:]):
            states[end] = np.array(runner.simulate(start, end, 2))[-1, 1:]
        for index, row in rows.iterrows():
            values = dict(zip(species, states[float(row[petab.TIME])]))
            values.update(nominal)
            values.update(
                _overrides(
                    row.get(petab.OBSERVABLE_PARAMETERS, ""),
                    "observableParameter",
                    row[petab.OBSERVABLE_ID],
                    nominal,
                )
            )
            formula = formulas[row[petab.OBSERVABLE_ID]]
            simulated[measurements.index.get_loc(index)] = float(
                formula.subs({s: values[str(s)] for s in formula.free_symbols})
            )
    measurements[petab.SIMULATION] = simulated
    return measurements.drop(columns=[petab.MEASUREMENT])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("yaml", type=Path)
    parser.add_argument("--restarts", type=float, nargs="*", default=[])
    parser.add_argument("--rtol", type=float, default=1e-10)
    parser.add_argument("--atol", type=float, default=1e-8)
    args = parser.parse_args()
    problem = petab.Problem.from_yaml(str(args.yaml))
    files = yaml.safe_load(args.yaml.read_text())["problems"][0]["sbml_files"]
    sbml = args.yaml.parent / files[0]
    simulation = simulate(problem, sbml, args.restarts, args.rtol, args.atol)
    llh = petab.calculate_llh(
        problem.measurement_df, simulation, problem.observable_df, problem.parameter_df
    )
    print(f"rtol {args.rtol:g}, atol {args.atol:g}: log-likelihood {llh!r}")
    tables = glob.glob(str(args.yaml.parent / "simulatedData_*.tsv"))
    if tables:
        theirs = petab.get_simulation_df(tables[0])
        key = [petab.OBSERVABLE_ID, petab.SIMULATION_CONDITION_ID, petab.TIME]
        merged = simulation.merge(theirs[[*key, petab.SIMULATION]], on=key, suffixes=("", "_t"))
        relative = (merged[petab.SIMULATION] - merged[f"{petab.SIMULATION}_t"]).abs() / merged[
            f"{petab.SIMULATION}_t"
        ].abs().clip(lower=1e-12)
        print("largest relative difference from simulatedData:")
        print(relative.groupby(merged[petab.OBSERVABLE_ID]).max().to_string())


if __name__ == "__main__":
    main()
