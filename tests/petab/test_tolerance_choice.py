"""Gradients checked by tightening the tolerances (``gradient_check``).

The ill-conditioned problem is Crauste_CellSystems2017's model of a CD8 T-cell response
(five species, twelve log10-scaled rate constants; the benchmark collection's nominal values
and measurements), written here as a PEtab problem: its nominal parameters lie 3.5e-7
(log10 units) from values at which the pathogen's quadratic growth wins and the solution
blows up in finite time, so that the gradient is what is left of measurement terms that
cancel 17 000-fold, and at AMICI's default tolerances the gradient's relative error was 17
(forward sensitivities) to 378 (adjoints) (docs/petab.md, "Ill-conditioned gradients").
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import petab.v1 as petab
import pytest

from pymc_odesens.petab import GradientConvergenceError, PetabProblem, SolverOptions
from pymc_odesens.petab.tolerance_choice import (
    AGREEMENT,
    SMALLEST_RELATIVE_TOLERANCE,
    TIGHTENING_FACTOR,
    choose_tolerances,
    gradient_difference,
)
from pymc_odesens.solvers.errors import StepSizeTooSmallError
from tests.model.sbml.sbml_text import build_sbml
from tests.petab.turnover import write_turnover_problem

# the benchmark collection's nominal values (parameter table of Crauste_CellSystems2017)
NOMINAL = {
    "delta_EL": 0.517945937424841,
    "delta_LM": 0.022580636941607,
    "delta_NE": 0.011930787933602,
    "mu_EE": 3.91359465940441e-05,
    "mu_LE": 1.00000000000007e-10,
    "mu_LL": 8.11520130499257e-06,
    "mu_N": 0.739907304399124,
    "mu_P": 1.00000003522094e-05,
    "mu_PE": 1.41248724084794e-10,
    "mu_PL": 3.63403086241783e-05,
    "rho_E": 0.507415649004014,
    "rho_P": 0.126382292625502,
}
# (observable, time, measurement, noise sd): its measurement table
MEASUREMENTS = [
    ("Naive", 4, 459, 290),
    ("Naive", 6, 74, 64),
    ("EarlyEffector", 4, 386, 266),
    ("EarlyEffector", 6, 1172, 526),
    ("EarlyEffector", 7, 47470, 23855),
    ("EarlyEffector", 8, 175825, 19722),
    ("EarlyEffector", 13, 4911, 3048),
    ("EarlyEffector", 15, 7417, 2924),
    ("EarlyEffector", 22, 3359, 1540),
    ("LateEffector", 6, 888, 182),
    ("LateEffector", 7, 4577, 1976),
    ("LateEffector", 8, 32860, 4105),
    ("LateEffector", 13, 46727, 23601),
    ("LateEffector", 15, 27586, 6841),
    ("LateEffector", 22, 13650, 7266),
    ("LateEffector", 28, 3936, 2705),
    ("Memory", 8, 289, 80),
    ("Memory", 13, 9564, 4206),
    ("Memory", 15, 15631, 5745),
    ("Memory", 22, 41744, 15987),
    ("Memory", 28, 32705, 7909),
]
# The exact log-likelihood and gradient (on the log10 scale, parameter-table order) at the
# nominal values: scipy's DOP853 on the states and forward sensitivities (the Jacobians
# written by hand, df/dp by complex step) at rtol 1e-13, atol 1e-16; scipy's Radau at the
# same tolerances agrees to 1.1e-6 relative (the gradient) and 5e-16 (the value).
EXACT_LLH = -190.96397757574493
EXACT_GRADIENT = np.array(
    [
        -2.45565491e00,
        -3.43438804e-01,
        1.04057917e01,
        -1.75359315e01,
        -1.73927738e-04,
        -2.87130445e00,
        -9.45995896e00,
        1.54144150e-03,
        5.49868440e-04,
        3.09951575e01,
        9.77020007e01,
        -1.06433614e02,
    ]
)


def write_immune_response_problem(folder) -> str:
    """Crauste_CellSystems2017's model, tables and nominal values as a PEtab problem."""
    p = NOMINAL
    sbml = build_sbml(
        compartments={"default": 1.0},
        species=[
            {"id": "Naive", "concentration": 8090.0},
            {"id": "EarlyEffector", "concentration": 0.0},
            {"id": "LateEffector", "concentration": 0.0},
            {"id": "Memory", "concentration": 0.0},
            {"id": "Pathogen", "concentration": 1.0},
        ],
        parameters=dict(p),
        # the collection's twelve reactions, summed per species
        rate_rules={
            "Naive": "-mu_N * Naive - delta_NE * Pathogen * Naive",
            "EarlyEffector": "delta_NE * Pathogen * Naive + rho_E * EarlyEffector * Pathogen"
            " - mu_EE * EarlyEffector^2 - delta_EL * EarlyEffector",
            "LateEffector": "delta_EL * EarlyEffector - mu_LL * LateEffector^2"
            " - mu_LE * EarlyEffector * LateEffector - delta_LM * LateEffector",
            "Memory": "delta_LM * LateEffector",
            "Pathogen": "rho_P * Pathogen^2 - mu_PE * EarlyEffector * Pathogen"
            " - mu_PL * LateEffector * Pathogen - mu_P * Pathogen",
        },
        model_id="immune_response",
    )
    (folder / "model.xml").write_text(sbml)
    petab.write_condition_df(
        pd.DataFrame({"conditionId": ["infection"]}).set_index("conditionId"),
        folder / "conditions.tsv",
    )
    names = sorted({m[0] for m in MEASUREMENTS})
    petab.write_observable_df(
        pd.DataFrame(
            {
                "observableId": [f"obs_{n}" for n in names],
                "observableFormula": names,
                "noiseFormula": [f"noiseParameter1_obs_{n}" for n in names],
                "observableTransformation": "lin",
                "noiseDistribution": "normal",
            }
        ).set_index("observableId"),
        folder / "observables.tsv",
    )
    petab.write_measurement_df(
        pd.DataFrame(
            [
                {
                    "observableId": f"obs_{n}",
                    "simulationConditionId": "infection",
                    "measurement": float(m),
                    "time": float(t),
                    "noiseParameters": float(s),
                }
                for n, t, m, s in MEASUREMENTS
            ]
        ),
        folder / "measurements.tsv",
    )
    lower = {"mu_LE": 1e-10, "mu_PE": 1e-10, "mu_LL": 1e-10}
    petab.write_parameter_df(
        pd.DataFrame(
            [
                {
                    "parameterId": pid,
                    "parameterScale": "log10",
                    "lowerBound": lower.get(pid, 1e-5),
                    "upperBound": 1000.0,
                    "nominalValue": value,
                    "estimate": 1,
                }
                for pid, value in p.items()
            ]
        ).set_index("parameterId"),
        folder / "parameters.tsv",
    )
    yaml = folder / "immune_response.yaml"
    yaml.write_text(
        "format_version: 1\n"
        "parameter_file: parameters.tsv\n"
        "problems:\n"
        "- condition_files: [conditions.tsv]\n"
        "  measurement_files: [measurements.tsv]\n"
        "  observable_files: [observables.tsv]\n"
        "  sbml_files: [model.xml]\n"
    )
    return str(yaml)


@pytest.fixture(scope="module")
def immune_response_yaml(tmp_path_factory):
    return write_immune_response_problem(tmp_path_factory.mktemp("immune_response"))


@pytest.fixture(scope="module")
def turnover(tmp_path_factory):
    return PetabProblem.from_yaml(write_turnover_problem(tmp_path_factory.mktemp("turnover")))


def relative_error(gradient):
    return np.linalg.norm(gradient - EXACT_GRADIENT) / np.linalg.norm(EXACT_GRADIENT)


@pytest.mark.parametrize("sensitivity", ["auto", "forward", "adjoint"])
def test_the_gradient_at_default_options_is_the_exact_one(immune_response_yaml, sensitivity):
    problem = PetabProblem.from_yaml(immune_response_yaml, sensitivity=sensitivity)
    llh, gradient = problem.log_likelihood_and_gradient()
    # the check's criterion (1 % between successive tolerances) bounds the error
    assert relative_error(gradient) < 0.01
    assert llh == pytest.approx(EXACT_LLH, abs=1e-9)
    choice = problem.tolerance_choice
    assert choice.checked and choice.tightened
    assert choice.relative_tolerance <= 1e-12
    rtols = list(choice.differences)
    assert rtols[0] == 1e-8 and all(d > AGREEMENT for d in list(choice.differences.values())[:-1])
    assert list(choice.differences.values())[-1] <= AGREEMENT
    # the PyMC model and the workers' options simulate with the checked tolerances
    assert problem.gradient_options().relative_tolerance == choice.relative_tolerance
    factory = dict(problem.model_factory().options)
    assert factory["relative_tolerance"] == choice.relative_tolerance
    assert factory["gradient_check"] is False


def test_unchecked_the_gradient_at_default_tolerances_is_far_off(immune_response_yaml):
    """The mechanism, as measured: at AMICI's tolerances the gradient is parallel to the exact
    one and many times its size (the error of the expansion phase, t = 4 to 8)."""
    problem = PetabProblem.from_yaml(immune_response_yaml, gradient_check=False)
    llh, gradient = problem.log_likelihood_and_gradient()
    assert relative_error(gradient) > 10
    cosine = gradient @ EXACT_GRADIENT / np.linalg.norm(gradient) / np.linalg.norm(EXACT_GRADIENT)
    assert abs(cosine) > 1 - 1e-6
    assert llh == pytest.approx(EXACT_LLH, abs=2e-3)  # the value itself is close
    assert not problem.tolerance_choice.checked


def test_a_step_across_the_blow_up_fails_with_the_solvers_error(immune_response_yaml):
    """1e-6 (log10) more of the pathogen's growth rate and it blows up at t = 10.3: central
    differences of any usable step fail there, correctly."""
    problem = PetabProblem.from_yaml(immune_response_yaml, gradient_check=False)
    x = problem.x_nominal
    x[problem.parameters.ids.index("rho_P")] += 1e-6
    with pytest.raises(StepSizeTooSmallError, match="step size underflow at t = 10"):
        problem.log_likelihood(x)


def test_a_well_conditioned_problem_keeps_its_tolerances(turnover):
    choice = turnover.tolerance_choice
    assert choice.checked and not choice.tightened
    assert choice.relative_tolerance == turnover.options.relative_tolerance
    assert list(choice.differences) == [turnover.options.relative_tolerance]
    assert turnover.gradient_options().relative_tolerance == turnover.options.relative_tolerance


def test_gradient_check_is_checked():
    with pytest.raises(TypeError, match="gradient_check must be True or False; got 'yes'"):
        SolverOptions(gradient_check="yes")


# choose_tolerances on given gradients -------------------------------------------------
def converging(errors: dict):
    """A gradient (1, 2) plus ``errors[rtol]`` times (1, 1); records the tolerances asked."""
    asked = []

    def gradient(rtol, atol):
        asked.append((rtol, atol))
        error = errors[min(errors, key=lambda r: abs(math.log(r / rtol)))]
        if isinstance(error, Exception):
            raise error
        return np.array([1.0, 2.0]) + error

    return gradient, asked


def test_tolerances_are_kept_when_the_gradient_settles_at_once():
    gradient, asked = converging({1e-8: 1e-6, 1e-9: 1e-7})
    choice = choose_tolerances("p", 1e-8, 1e-16, gradient)
    assert (choice.relative_tolerance, choice.absolute_tolerance) == (1e-8, 1e-16)
    assert not choice.tightened and choice.checked
    assert asked == [(1e-8, 1e-16), (1e-8 / TIGHTENING_FACTOR, 1e-16 / TIGHTENING_FACTOR)]


def test_tolerances_are_tightened_until_successive_gradients_agree():
    gradient, _ = converging({1e-8: 30.0, 1e-9: 4.0, 1e-10: 0.5, 1e-11: 0.01, 1e-12: 0.001})
    choice = choose_tolerances("p", 1e-8, 1e-16, gradient)
    assert choice.relative_tolerance == pytest.approx(1e-11)
    assert choice.absolute_tolerance == pytest.approx(1e-19)
    assert choice.tightened
    assert list(choice.differences.values())[-1] <= AGREEMENT
    assert len(choice.differences) == 4


def test_a_gradient_that_never_settles_is_a_named_error():
    gradient, _ = converging({10.0**-k: 10.0 ** (-k / 8) * (-1) ** k for k in range(8, 17)})
    with pytest.raises(GradientConvergenceError) as raised:
        choose_tolerances("immune", 1e-8, 1e-16, gradient)
    message = str(raised.value)
    assert "immune: the gradient does not settle" in message
    assert f"{SMALLEST_RELATIVE_TOLERANCE:g}" in message and "1e-08: " in message
    assert "gradient_check=False" in message


def test_a_failed_tighter_solve_keeps_the_tolerances_or_names_the_unsettled_gradient():
    failure = StepSizeTooSmallError("bdf: step size underflow at t = 1")
    gradient, _ = converging({1e-8: 1e-3, 1e-9: failure})
    choice = choose_tolerances("p", 1e-8, 1e-8, gradient)
    assert choice.relative_tolerance == 1e-8 and not choice.differences
    assert "StepSizeTooSmallError" in choice.failures[1e-9]
    gradient, _ = converging({1e-8: 10.0, 1e-9: 0.0, 1e-10: failure})
    with pytest.raises(GradientConvergenceError, match="relative_tolerance 1e-10 failed"):
        choose_tolerances("p", 1e-8, 1e-8, gradient)


def test_a_gradient_that_fails_at_the_given_tolerances_is_not_checked():
    failure = StepSizeTooSmallError("bdf: step size underflow at t = 1")
    gradient, asked = converging({1e-8: failure})
    choice = choose_tolerances("p", 1e-8, 1e-16, gradient)
    assert not choice.checked and choice.relative_tolerance == 1e-8
    assert "StepSizeTooSmallError" in choice.failures[1e-8] and len(asked) == 1


def test_a_zero_or_non_finite_gradient_is_not_checked():
    for value in (np.zeros(2), np.array([np.nan, 1.0])):
        choice = choose_tolerances("p", 1e-8, 1e-16, lambda r, a, v=value: v)
        assert not choice.checked and choice.relative_tolerance == 1e-8


def test_gradient_difference():
    assert gradient_difference(np.array([1.0, 0.0]), np.array([2.0, 0.0])) == 0.5
    assert gradient_difference(np.zeros(2), np.zeros(2)) == 0.0
    assert gradient_difference(np.ones(2), np.zeros(2)) == math.inf
