"""Names in observable and noise formulas: placeholders of the observable itself (a noise
formula may use those of its observable formula), parameter-table ids whatever their shape,
and the errors that name the rest. Raia_CancerResearch2011 (additive-plus-relative noise
with the observable's own observableParameter) and Lang_PLOSComputBiol2024 (parameter-table
ids shaped like placeholders) against the collection's simulated data, with the
log-likelihood cross-checked by petab's ``calculate_llh``."""

from __future__ import annotations

import glob

import numpy as np
import pandas as pd
import pytest
import sympy as sp
from petab.v1.calculate import (
    calculate_llh,
    calculate_single_llh,
    evaluate_noise_formula,
    get_symbolic_noise_formulas,
)

from pymc_odesens.petab import PetabError, PetabProblem
from pymc_odesens.petab.observables import petab_formula
from tests.conftest import PETAB_DIR
from tests.petab.turnover import turnover_observables, write_turnover_problem

TRANSFORMATION = {
    "obs_log10": "log10",
    "obs_laplace": "lin",
    "obs_log_laplace": "log10",
    "obs_log_b": "log",
}
DISTRIBUTION = {"obs_laplace": "laplace", "obs_log_laplace": "laplace"}
TIGHT = {"relative_tolerance": 1e-10, "absolute_tolerance": 1e-12}


def _edit(path, edit):
    df = pd.read_csv(path, sep="\t", keep_default_na=False, dtype=str)
    edit(df)
    df.to_csv(path, sep="\t", index=False)


def _turnover_with(folder, noise: dict, parameters: list = ()):
    """The turnover problem with the noise formulas ``noise`` (observable id -> formula)
    and the fixed parameters ``parameters`` ((id, value), ...) added to its table."""
    yaml = write_turnover_problem(folder)

    def observables(df):
        for oid, formula in noise.items():
            df.loc[df["observableId"] == oid, "noiseFormula"] = formula

    def table(df):
        for pid, value in parameters:
            df.loc[len(df)] = {
                **dict.fromkeys(df.columns, ""),
                "parameterId": pid,
                "parameterScale": "lin",
                "lowerBound": "0",
                "upperBound": "10",
                "nominalValue": str(value),
                "estimate": "0",
            }

    _edit(folder / "observables.tsv", observables)
    _edit(folder / "parameters.tsv", table)
    return yaml


def _check_noise(problem: PetabProblem, sigma_of) -> None:
    """The noise of every measurement (``simulate()``'s column ``noise``) is ``sigma_of(row,
    theta)``, and the log-likelihood PEtab's with the closed-form simulation."""
    x = problem.x_nominal + 0.05 * np.cos(np.arange(len(problem.parameters)))
    theta = dict(zip(problem.parameters.ids, problem.parameters.unscale(x)))
    measurements = problem.petab_problem.measurement_df
    h, _ = turnover_observables(measurements, theta)
    sigma = np.array([sigma_of(row, theta) for _, row in measurements.iterrows()])
    simulated = problem.simulate(x)
    np.testing.assert_allclose(simulated["simulation"], h, rtol=1e-7)
    np.testing.assert_allclose(simulated["noise"], sigma, rtol=1e-8)
    expected = sum(
        calculate_single_llh(m, hi, TRANSFORMATION[o], DISTRIBUTION.get(o, "normal"), si)
        for m, hi, si, o in zip(measurements["measurement"], h, sigma, measurements["observableId"])
    )
    assert problem.log_likelihood(x) == pytest.approx(expected, rel=1e-8, abs=1e-6)


def test_a_noise_formula_with_the_observables_own_observable_parameter(tmp_path):
    # additive plus relative, the relative part on the scaled observable (Raia's form)
    yaml = _turnover_with(
        tmp_path,
        {"obs_log10": "noiseParameter1_obs_log10 + 0.01 * observableParameter1_obs_log10 * A"},
    )
    problem = PetabProblem.from_yaml(yaml, **TIGHT)

    def sigma_of(row, theta):
        h, sigma = turnover_observables(pd.DataFrame([row]), theta)
        if row["observableId"] != "obs_log10":
            return sigma[0]
        if row["simulationConditionId"] == "stim":  # op: scale, np: 0.1
            return 0.1 + 0.01 * h[0]
        return theta["sigma_abs"] + 0.01 * h[0]  # op: 0.5, np: sigma_abs

    _check_noise(problem, sigma_of)


def test_a_parameter_table_id_shaped_like_another_observables_placeholder(tmp_path):
    # noiseParameter1_obs_laplace is a parameter (obs_laplace has no noise placeholder)
    yaml = _turnover_with(
        tmp_path,
        {"obs_log_laplace": "noiseParameter1_obs_laplace * sigma_rel"},
        [("noiseParameter1_obs_laplace", 0.3)],
    )
    problem = PetabProblem.from_yaml(yaml, **TIGHT)
    assert "noiseParameter1_obs_laplace" not in {
        s.name for s in problem.observables["obs_log_laplace"].noise_placeholders
    }

    def sigma_of(row, theta):
        h, sigma = turnover_observables(pd.DataFrame([row]), theta)
        if row["observableId"] == "obs_log_laplace":
            return 0.3 * theta["sigma_rel"]
        return sigma[0]

    _check_noise(problem, sigma_of)


def test_a_placeholder_of_another_observable_is_named(tmp_path):
    yaml = _turnover_with(tmp_path, {"obs_log_laplace": "noiseParameter1_obs_log10"})
    with pytest.raises(PetabError, match="noiseParameter1_obs_log10"):
        PetabProblem.from_yaml(yaml)


def test_an_observable_parameter_the_observable_formula_lacks_is_named(tmp_path):
    # obs_laplace's formula has no placeholder: its noise formula cannot have one
    yaml = _turnover_with(tmp_path, {"obs_laplace": "observableParameter1_obs_laplace"})
    with pytest.raises(PetabError, match="observableParameter1_obs_laplace"):
        PetabProblem.from_yaml(yaml)


# --- the benchmark collection ------------------------------------------------------------
def _problem_folder(name: str):
    folder = PETAB_DIR / name
    if not folder.is_dir():
        pytest.fail(f"PEtab problem {folder} not found; set PYMC_ODESENS_SHARED_DIR")
    return folder


_KEYS = ["observableId", "simulationConditionId", "preequilibrationConditionId", "time"]


def _keyed(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for column in _KEYS:
        if column not in df:
            df[column] = ""
        df[column] = df[column].astype(object).fillna("").astype(str)
    df["time"] = df["time"].astype(float)
    df["rank"] = df.groupby(_KEYS).cumcount()
    return df[[*_KEYS, "rank", "simulation"]]


def _simulated_data(problem: PetabProblem, folder) -> pd.DataFrame:
    """The collection's simulatedData table in today's column names and observable ids
    (Raia's is of an earlier version: ``simulationCondition``, observable ``RecSurf`` for
    ``observable_RecSurf``)."""
    path = glob.glob(str(folder / "simulatedData_*.tsv"))
    assert len(path) == 1, f"expected one simulatedData table, found {path}"
    theirs = pd.read_csv(path[0], sep="\t").rename(
        columns={
            "simulationCondition": "simulationConditionId",
            "preequilibrationCondition": "preequilibrationConditionId",
        }
    )
    known = set(problem.observables)
    theirs["observableId"] = [
        o if o in known else f"observable_{o}" for o in theirs["observableId"]
    ]
    assert set(theirs["observableId"]) <= known
    return theirs


def _noise_of_the_observable(problem: PetabProblem) -> pd.DataFrame:
    """The observable table with each noise formula in the observable's id and parameters
    only: the observable formula in it replaced by the observable's id (so that petab's
    ``calculate_llh``, which cannot evaluate model quantities, evaluates it)."""
    table = problem.petab_problem.observable_df.copy()
    noises = []
    for oid, row in table.iterrows():
        formula = petab_formula(str(row["observableFormula"]))
        noise = petab_formula(str(row["noiseFormula"])).subs(formula, sp.Symbol(oid, real=True))
        names = {s.name for s in noise.free_symbols}
        placeholders = {n for n in names if n.startswith("noiseParameter")}
        tables = set(problem.petab_problem.parameter_df.index)
        assert names <= {oid} | placeholders | tables, (oid, noise)
        noises.append(str(noise))
    table["noiseFormula"] = noises
    return table


def _check_collection_problem(name: str, central_parameters: int) -> None:
    folder = _problem_folder(name)
    problem = PetabProblem.from_yaml(folder / f"{name}.yaml")
    llh, gradient = problem.log_likelihood_and_gradient()
    assert np.isfinite(llh) and np.all(np.isfinite(gradient))
    assert problem.log_likelihood() == pytest.approx(llh, rel=1e-12)

    ours = problem.simulate()
    merged = _keyed(ours).merge(
        _keyed(_simulated_data(problem, folder)),
        on=[*_KEYS, "rank"],
        suffixes=("_ours", "_theirs"),
        validate="one_to_one",
    )
    assert len(merged) == len(ours)
    np.testing.assert_allclose(
        merged["simulation_ours"], merged["simulation_theirs"], rtol=1e-4, atol=1e-10
    )

    # petab's log-likelihood of our simulations, the noise formulas evaluated by petab
    observables = _noise_of_the_observable(problem)
    formulas = get_symbolic_noise_formulas(observables)
    parameters = problem.petab_problem.parameter_df
    theirs_sigma = [
        evaluate_noise_formula(row, formulas, parameters, row["simulation"])
        for _, row in ours.iterrows()
    ]
    np.testing.assert_allclose(ours["noise"], theirs_sigma, rtol=1e-12)
    measurements = problem.petab_problem.measurement_df
    expected = calculate_llh(measurements, ours.drop(columns="noise"), observables, parameters)
    assert llh == pytest.approx(expected, rel=1e-9)

    # central differences on the parameters with the largest gradient entries
    x = problem.x_nominal
    chosen = np.argsort(-np.abs(gradient))[:central_parameters]
    h = 1e-4
    for k in chosen:
        e = np.zeros_like(x)
        e[k] = h
        central = (problem.log_likelihood(x + e) - problem.log_likelihood(x - e)) / (2 * h)
        assert gradient[k] == pytest.approx(central, rel=1e-3), problem.parameters.ids[k]


def test_raia_noise_with_its_observable_parameters():
    _check_collection_problem("Raia_CancerResearch2011", central_parameters=4)


@pytest.mark.slow
def test_lang_parameters_shaped_like_placeholders():
    _check_collection_problem("Lang_PLOSComputBiol2024", central_parameters=3)
