"""PEtab v2 problems: a small one against its closed form (experiments of periods, changes
that persist, placeholders of their own names, v2 noise distributions and priors); the v2
form of the shared benchmark problems (petab's own v1-to-v2 conversion) gives the
log-likelihood and gradient of their v1 form; what the importer does not cover is refused
by name."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import petab.v2
import pymc as pm
import pytest

from pymc_odesens.petab import PetabError, PetabProblem, PetabUnsupportedError
from pymc_odesens.petab.problem_files import problem_file
from tests.conftest import PETAB_DIR
from tests.petab.test_model import value_point
from tests.petab.turnover_v2 import (
    TURNOVER_V2_PARAMETERS,
    K,
    edited_turnover_v2_problem,
    nominal_theta,
    turnover_v2_llh,
    turnover_v2_measurements,
    write_turnover_v2_problem,
)
from tests.petab.v2_conversion import converted_to_v2, linear_gradient, same_linear_values

TIGHT = {"relative_tolerance": 1e-10, "absolute_tolerance": 1e-12}


@pytest.fixture(scope="module")
def v2_yaml(tmp_path_factory):
    return write_turnover_v2_problem(tmp_path_factory.mktemp("turnover_v2"))


@pytest.fixture(scope="module")
def v2_problem(v2_yaml):
    return PetabProblem.from_yaml(v2_yaml, **TIGHT)


def _theta(problem: PetabProblem, x) -> dict:
    return {**nominal_theta(), **dict(zip(problem.parameters.ids, problem.parameters.unscale(x)))}


def test_structure(v2_problem, v2_yaml):
    assert v2_problem.format_version == 2
    assert isinstance(v2_problem.petab_v2_problem, petab.v2.Problem)
    assert v2_problem.name == "turnover_v2"
    parameters = v2_problem.parameters
    assert parameters.ids == ("k_pre", "u_stim", "scale", "sigma")  # u_pre: estimate false
    # log-uniform and log-normal priors: the log scale; the others linear
    assert parameters.scales == ("log", "lin", "log", "lin")
    np.testing.assert_allclose(v2_problem.x_nominal, [math.log(0.4), 2.0, math.log(1.5), 0.1])
    labels = sorted(e.label for e in v2_problem.experiments)
    assert labels == ["model_as_is", "pre -> pre_only", "pre -> pre_stim", "set"]
    # the pre-equilibration's k persists into pre_stim (its own condition sets only u)
    conditions = v2_problem.petab_problem.condition_df
    assert conditions.loc["pre_stim", "k"] == "k_pre"
    assert conditions.loc["pre_stim", "u"] == "u_stim"
    assert math.isnan(conditions.loc["pre_stim", "A"])  # A continues from the steady state
    # the placeholders under the names v1 gives them
    observable = v2_problem.observables["obs_a"]
    assert [s.name for s in observable.observable_placeholders] == ["observableParameter1_obs_a"]
    assert [s.name for s in observable.noise_placeholders] == ["noiseParameter1_obs_a"]
    # a folder holding the problem reads the same
    assert PetabProblem.from_yaml(v2_yaml.parent).format_version == 2


@pytest.mark.parametrize("shift", [0.0, 0.1])
def test_log_likelihood_equals_the_closed_form(v2_problem, shift):
    x = v2_problem.x_nominal + shift * np.cos(np.arange(len(v2_problem.parameters)))
    theta = _theta(v2_problem, x)
    assert v2_problem.log_likelihood(x) == pytest.approx(turnover_v2_llh(theta), rel=1e-8)
    expected = turnover_v2_measurements(theta)
    simulated = v2_problem.simulate(x)
    np.testing.assert_allclose(simulated["simulation"], expected["h"], rtol=1e-8)
    np.testing.assert_allclose(simulated["noise"], expected["sigma"], rtol=1e-8)


def test_gradient_against_central_differences(v2_problem):
    x = v2_problem.x_nominal + 0.1 * np.sin(np.arange(len(v2_problem.parameters)))
    gradient = v2_problem.log_likelihood_gradient(x)
    h = 1e-5
    central = [
        (v2_problem.log_likelihood(x + h * e) - v2_problem.log_likelihood(x - h * e)) / (2 * h)
        for e in np.eye(len(x))
    ]
    np.testing.assert_allclose(gradient, central, rtol=1e-6, atol=1e-8)


def test_the_model_has_the_v2_priors(v2_problem):
    """The log-density of the PyMC model: the log-likelihood plus petab's v2 priors (of the
    linear value, truncated to the bounds) carried to each parameter's scale, and the
    uniform density on the bounds where no prior is given."""
    x = v2_problem.x_nominal + 0.05 * np.cos(np.arange(len(v2_problem.parameters)))
    model = v2_problem.build_model()
    point = value_point(model, dict(zip(v2_problem.parameters.ids, x)))
    logp = model.compile_logp(jacobian=False)(point)
    priors = {p.id: p for p in v2_problem.petab_v2_problem.parameters}
    expected = v2_problem.log_likelihood(x)
    for pid, value, scale in zip(v2_problem.parameters.ids, x, v2_problem.parameters.scales):
        theta = math.exp(value) if scale == "log" else value
        parameter = priors[pid]
        distribution = parameter.prior_dist
        if distribution is None:
            expected += -math.log(parameter.ub - parameter.lb)
        else:
            expected += math.log(distribution.pdf(theta))
        if scale == "log":
            expected += value  # d theta / d x = theta
    assert isinstance(model, pm.Model)
    # PyMC's TruncatedNormal is 1.9e-9 off the exact log-density of scale's prior here
    # (scipy, mpmath and petab agree with each other)
    assert logp == pytest.approx(expected, abs=1e-8)


# --- v1 = v2 on the shared benchmark problems ------------------------------------------
# every shared problem at the default options; one that the v1 importer refuses or cannot
# evaluate is compared by its error: the same in both forms
SHARED = (
    "Boehm_JProteomeRes2014",
    "Brannmark_JBC2010",
    "Elowitz_Nature2000",
    "Fiedler_BMCSystBiol2016",
    "Fujita_SciSignal2010",
    "Bachmann_MSB2011",
    "Schwen_PONE2014",
    "Beer_MolBioSystems2014",
    "Isensee_JCB2018",
    "Chen_MSB2009",
    "Bertozzi_PNAS2020",
    "Raia_CancerResearch2011",
    "Lang_PLOSComputBiol2024",
    "Smith_BMCSystBiol2013",
    "Liu_IFACPapersOnLine2025",
    "Raimundez_PCB2020",
)
# in the default run: a linear, a pre-equilibrated and a log10 observable problem
DEFAULT = ("Boehm_JProteomeRes2014", "Brannmark_JBC2010", "Elowitz_Nature2000")


def _v1_and_v2_yaml(name: str, tmp_path):
    folder = PETAB_DIR / name
    if not folder.is_dir():
        pytest.fail(f"PEtab problem {folder} not found; set PYMC_ODESENS_SHARED_DIR")
    v1_yaml = problem_file(folder)
    return v1_yaml, converted_to_v2(v1_yaml, tmp_path / name)


def _shifted(problem: PetabProblem) -> np.ndarray:
    """The nominal values, those on a log scale moved a little (lin ones may sit at 0)."""
    x = problem.x_nominal
    shift = 0.02 * np.sin(np.arange(len(x)))
    log = np.array(problem.parameters.scales) != "lin"
    return np.where(np.isfinite(x) & log, x + shift, x)


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=() if n in DEFAULT else pytest.mark.slow, id=n) for n in SHARED],
)
def test_the_v2_form_gives_the_v1_log_likelihood_and_gradient(name, tmp_path):
    v1_yaml, v2_yaml = _v1_and_v2_yaml(name, tmp_path)
    try:
        v1 = PetabProblem.from_yaml(v1_yaml)
    except Exception as error:  # refused: the v2 form is refused alike
        with pytest.raises(type(error)) as raised:
            PetabProblem.from_yaml(v2_yaml)
        assert str(raised.value).startswith(str(error)[:60])
        return
    v2 = PetabProblem.from_yaml(v2_yaml)
    x1 = _shifted(v1)
    x2 = same_linear_values(x1, v1.parameters.scales, v2.parameters.scales)
    try:
        llh1, gradient1 = v1.log_likelihood_and_gradient(x1)
    except Exception as error:  # not evaluated (a singular steady state, say): alike
        with pytest.raises(type(error)):
            v2.log_likelihood_and_gradient(x2)
        return
    assert (v1.format_version, v2.format_version) == (1, 2)
    assert v2.parameters.ids == v1.parameters.ids
    assert v2.n_measurements == v1.n_measurements
    assert v2.system.n_states == v1.system.n_states
    assert v2.system.n_params == v1.system.n_params
    llh2, gradient2 = v2.log_likelihood_and_gradient(x2)
    assert np.isfinite(llh1)
    assert llh2 == pytest.approx(llh1, rel=1e-10)
    assert v2.log_likelihood(x2) == pytest.approx(v1.log_likelihood(x1), rel=1e-10)
    d1 = linear_gradient(gradient1, x1, v1.parameters.scales)
    d2 = linear_gradient(gradient2, x2, v2.parameters.scales)
    finite = np.isfinite(d1)  # a parameter at 0 on a log scale (Lang) has none
    np.testing.assert_allclose(
        d2[finite], d1[finite], rtol=1e-10, atol=1e-10 * np.max(np.abs(d1[finite]))
    )


# --- what is refused, by name ----------------------------------------------------------
def _rows(*rows):
    def add(df):
        for row in rows:
            df.loc[len(df)] = row

    return add


def _cell(column, where, value):
    return _cells(where, **{column: value})


def _cells(where, **values):
    def edit(df):
        for column, value in values.items():
            df.loc[where(df), column] = value

    return edit


REFUSED = {
    "several periods": (
        [("experiments.tsv", _rows(["set", "5", "pre"]))],
        PetabUnsupportedError,
        r"experiment 'set' has 2 periods after the pre-equilibration \(start times: 0.0, 5.0\)",
    ),
    "a start other than 0": (
        [("experiments.tsv", _cell("time", lambda df: df["experimentId"] == "set", "-1"))],
        PetabUnsupportedError,
        r"experiment 'set' starts its simulation at time -1.0",
    ),
    "a condition value that is an expression": (
        [("conditions.tsv", _cell("targetValue", lambda df: df.index == 2, "2 * u_stim"))],
        PetabUnsupportedError,
        r"condition table, row 2 \(stim\), column targetValue \(target 'u'\) = '2 \* u_stim'",
    ),
    # (petab's checks refuse it in a simulation's first period; after pre-equilibration,
    # PEtab v2 evaluates it with the model's values at the period's start)
    "a condition value that is a model entity": (
        [("conditions.tsv", _rows(["stim", "A", "k"]))],
        PetabUnsupportedError,
        r"row 5 \(stim\), column targetValue \(target 'A'\) = 'k': only a number or an id of "
        r"the parameter table",
    ),
    "a prior v1 has no counterpart for": (
        [
            (
                "parameters.tsv",
                _cells(
                    lambda df: df["parameterId"] == "sigma",
                    priorDistribution="cauchy",
                    priorParameters="0;1",
                ),
            )
        ],
        PetabUnsupportedError,
        r"parameter table, row 3 \(sigma\), column priorDistribution = 'cauchy'",
    ),
    "a parameterScale column": (
        [
            (
                "parameters.tsv",
                lambda df: df.insert(1, "parameterScale", ["log10", "lin", "lin", "lin", "lin"]),
            )
        ],
        PetabUnsupportedError,
        r"row 0 \(k_pre\), column parameterScale = 'log10': PEtab v2 has no parameterScale",
    ),
    "an observableTransformation column": (
        [
            (
                "observables.tsv",
                lambda df: df.insert(2, "observableTransformation", ["log10", "lin"]),
            )
        ],
        PetabUnsupportedError,
        r"row 0 \(obs_a\), column observableTransformation = 'log10'",
    ),
    # petab 0.8.2's checks do not yet let an observable formula name another observable
    # (PEtab v2 does); the importer would refuse it by name after them
    "a reference to another observable": (
        [("observables.tsv", _cell("observableFormula", lambda df: df.index == 1, "A + obs_a"))],
        PetabError,
        r"'obs_a'",
    ),
    "a listed placeholder the formula does not use": (
        [
            (
                "observables.tsv",
                _cell("observablePlaceholders", lambda df: df.index == 0, "my_scale;x"),
            ),
            (
                "measurements.tsv",
                lambda df: df.__setitem__(
                    "observableParameters",
                    [f"{v};1.0" if v else v for v in df["observableParameters"]],
                ),
            ),
        ],
        PetabUnsupportedError,
        r"row 0 \(obs_a\), column observablePlaceholders: the placeholder 'x' does not occur in "
        r"the observableFormula",
    ),
    "a measurement of an unknown observable": (
        [("measurements.tsv", _cell("observableId", lambda df: df.index == 0, "obs_c"))],
        PetabError,
        r"petab's checks of this PEtab v2 problem: .*obs_c",
    ),
}


def _edited(folder, edits):
    yaml = write_turnover_v2_problem(folder)
    for table, edit in edits:
        path = folder / table
        df = pd.read_csv(path, sep="\t", keep_default_na=False, dtype=str)
        edit(df)
        df.to_csv(path, sep="\t", index=False)
    return yaml


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_is_not_covered_is_refused_by_name(case, tmp_path):
    edits, error, message = REFUSED[case]
    with pytest.raises(error, match=message):
        PetabProblem.from_yaml(_edited(tmp_path, edits))


def test_several_models_and_extensions_are_refused(tmp_path):
    yaml = write_turnover_v2_problem(tmp_path)
    text = yaml.read_text()
    shutil.copy(tmp_path / "model.xml", tmp_path / "model2.xml")
    yaml.write_text(
        text.replace(
            "model_files:\n",
            "model_files:\n  second:\n    location: model2.xml\n    language: sbml\n",
        )
    )
    with pytest.raises(PetabUnsupportedError, match=r"lists 2 models \('second', 'turnover'\)"):
        PetabProblem.from_yaml(yaml)
    yaml.write_text(text + "extensions:\n  sciml:\n    version: 1.0.0\n    required: true\n")
    with pytest.raises(PetabUnsupportedError, match=r"PEtab extensions \('sciml'\)"):
        PetabProblem.from_yaml(yaml)


def test_a_table_petab_cannot_read_is_named(tmp_path):
    yaml = edited_turnover_v2_problem(
        tmp_path,
        "parameters.tsv",
        _cell("estimate", lambda df: df["parameterId"] == "sigma", "maybe"),
    )
    with pytest.raises(PetabError, match="the petab library cannot read this PEtab v2 problem"):
        PetabProblem.from_yaml(yaml)


def test_an_error_of_the_v1_form_says_so(tmp_path):
    # a compartment's size set by a condition: refused where the v1 form is read
    yaml = edited_turnover_v2_problem(tmp_path, "conditions.tsv", _rows(["set_a", "cell", "2.0"]))
    with pytest.raises(PetabUnsupportedError, match=r"compartment.*PEtab v2 problem turnover_v2"):
        PetabProblem.from_yaml(yaml)


def test_a_measurement_table_without_experiments(tmp_path):
    """Every measurement without experiment: the model as it is (u = 1, k = 0.5)."""
    yaml = edited_turnover_v2_problem(
        tmp_path, "measurements.tsv", lambda df: df.__setitem__("experimentId", "")
    )
    problem = PetabProblem.from_yaml(yaml, **TIGHT)
    assert [e.label for e in problem.experiments] == ["model_as_is"]
    table = problem.petab_problem.measurement_df
    a = 1.0 / K + (1.0 - 1.0 / K) * np.exp(-K * table["time"].to_numpy())
    factor = np.where(table["observableId"] == "obs_a", 1.5, 1.0)  # scale's nominal value
    factor[table["observableParameters"].astype(str) == "2.0"] = 2.0
    np.testing.assert_allclose(problem.simulate()["simulation"], factor * a, rtol=1e-8)


def test_the_parameter_table_row_numbers(v2_problem):
    # the v1 form keeps the v2 table's rows in order (messages name them)
    assert list(v2_problem.petab_problem.parameter_df.index) == list(TURNOVER_V2_PARAMETERS)
