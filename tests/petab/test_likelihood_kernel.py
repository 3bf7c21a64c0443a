"""The generated log-likelihood kernel (``pymc_odesens.petab.likelihood_kernel``): equal to
the measurement distributions of the PyMC model, cached under a key that follows its code,
and its errors."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_odesens.codegen.cache import artefact_path
from pymc_odesens.petab import PetabError, PetabProblem
from pymc_odesens.petab.noise import measurement_distribution
from pymc_odesens.petab.problem import python_mode
from tests.petab.turnover import (
    edited_turnover_problem,
    non_positive_simulation,
    write_turnover_problem,
)

REPO = Path(__file__).resolve().parents[2]
TOLERANCES = {"relative_tolerance": 1e-10, "absolute_tolerance": 1e-12}


@pytest.fixture(scope="module")
def turnover_yaml(tmp_path_factory):
    return write_turnover_problem(tmp_path_factory.mktemp("turnover"))


@pytest.fixture(scope="module")
def turnover(turnover_yaml):
    return PetabProblem.from_yaml(turnover_yaml, **TOLERANCES)


def test_kernel_equals_the_measurement_distributions(turnover):
    # the PyMC model's route: one distribution per observable, log-densities summed
    x = pt.vector("x", shape=(len(turnover.parameters),))
    graph = turnover.graph
    z = graph.z(x)
    y = graph.states(z, turnover.options, turnover.gradient_route)  # same simulations
    terms = []
    for o in graph.observables(z, y):
        ob = o.group.observable
        dist = measurement_distribution(ob.distribution, ob.transformation, o.h, o.sigma)
        terms.append(pm.logp(dist, o.group.data).sum())
    llh = pt.sum(pt.stack(terms))
    outputs = [llh, pytensor.grad(llh, x)]
    distributions = pytensor.function([x], outputs, mode=python_mode())
    for shift in (0.0, 0.07):
        x0 = turnover.x_nominal + shift
        expected_value, expected_gradient = distributions(x0)
        value, gradient = turnover.log_likelihood_and_gradient(x0)
        assert value == pytest.approx(float(expected_value), rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-9, atol=1e-12)
        assert turnover.log_likelihood(x0) == pytest.approx(value, rel=1e-13, abs=1e-13)


def _key(yaml) -> str:
    return PetabProblem.from_yaml(yaml, **TOLERANCES).likelihood_kernel.key


def test_cache_key_follows_the_code(turnover, turnover_yaml, tmp_path):
    key = turnover.likelihood_kernel.key
    assert artefact_path(key, ".py").is_file()  # on disk: the next process loads it
    assert _key(turnover_yaml) == key

    def transformation(df):
        df.loc[df.observableId == "obs_log_b", "observableTransformation"] = "log10"

    def distribution(df):
        df.loc[df.observableId == "obs_log_b", "noiseDistribution"] = "laplace"

    def formula(df):
        df.loc[df.observableId == "obs_laplace", "noiseFormula"] = "sigma_abs + 0.2 * obs_laplace"

    keys = {
        name: _key(edited_turnover_problem(tmp_path / name, "observables.tsv", edit))
        for name, edit in [("t", transformation), ("d", distribution), ("f", formula)]
    }
    assert len({key, *keys.values()}) == 4

    # the measurements are data, not code: same kernel, other numbers
    def data(df):
        df.loc[0, "measurement"] *= 1.5

    changed = PetabProblem.from_yaml(
        edited_turnover_problem(tmp_path / "m", "measurements.tsv", data), **TOLERANCES
    )
    assert changed.likelihood_kernel.key == key
    assert changed.log_likelihood() != pytest.approx(turnover.log_likelihood(), rel=1e-6)


def test_non_positive_measurement_of_a_log_observable_is_named(tmp_path):
    def edit(df):
        df.loc[0, "measurement"] = -1.0

    problem = PetabProblem.from_yaml(edited_turnover_problem(tmp_path, "measurements.tsv", edit))
    with pytest.raises(PetabError, match=r"row 0 \(obs_log10\): the measurement -1.0 is not"):
        problem.log_likelihood()


def test_non_positive_noise_parameter_is_an_error(tmp_path):
    def edit(df):
        df.loc[0, "noiseParameters"] = "-0.1"

    problem = PetabProblem.from_yaml(edited_turnover_problem(tmp_path, "measurements.tsv", edit))
    with pytest.raises(FloatingPointError, match=r"1 measurement\(s\) have a noise parameter"):
        problem.log_likelihood()


@pytest.mark.parametrize(
    "observable, factor, transformation",
    [
        ("obs_log10", "0", None),  # normal, log10
        ("obs_log_laplace", "-1", "log"),  # laplace, log
        ("obs_log_b", "-0.5", None),  # normal, log
    ],
)
def test_non_positive_simulation_on_a_log_scale(tmp_path, observable, factor, transformation):
    # the density of a positive measurement is zero there: llh -inf (it was NaN for a
    # negative simulation), and the gradient that of a rejection, zero (it was NaN, or the
    # adjoint refused the infinite cotangent)
    edit = non_positive_simulation(observable, factor, transformation)
    problem = PetabProblem.from_yaml(
        edited_turnover_problem(tmp_path, "observables.tsv", edit), **TOLERANCES
    )
    for x in (problem.x_nominal, problem.x_nominal + 0.05):
        assert problem.log_likelihood(x) == -np.inf
        value, gradient = problem.log_likelihood_and_gradient(x)
        assert value == -np.inf
        np.testing.assert_array_equal(gradient, np.zeros(len(problem.parameters)))


def test_non_finite_simulation_is_named(tmp_path):
    def edit(df):
        row = df["observableId"] == "obs_laplace"
        df.loc[row, "observableFormula"] = "log(A - 100) + offset"  # A < 100: NaN

    problem = PetabProblem.from_yaml(edited_turnover_problem(tmp_path, "observables.tsv", edit))
    message = r"3 measurement\(s\) have a simulated observable that is NaN or infinite, the "
    message += r"first of observable 'obs_laplace' at time 0"
    with pytest.raises(FloatingPointError, match=message):
        problem.log_likelihood()
    with pytest.raises(FloatingPointError, match=message):
        problem.log_likelihood_gradient()


def _several_table_parameters(df) -> None:
    # one formula with several parameter-table ids (a set of symbols, in hash order)
    row = df["observableId"] == "obs_laplace"
    df.loc[row, "observableFormula"] = "A + offset + 0.001 * scale * sigma_rel * sigma_abs"


def test_cache_key_is_the_same_in_every_process(tmp_path):
    # string hashes (and so the order of sets of symbols) differ between processes: the key
    # must not follow them, or every process regenerates and recompiles the kernel
    yaml = edited_turnover_problem(tmp_path, "observables.tsv", _several_table_parameters)
    child = (
        "import sys, warnings; warnings.simplefilter('ignore');"
        "from pymc_odesens.petab import PetabProblem;"
        "print(PetabProblem.from_yaml(sys.argv[1]).likelihood_kernel.key)"
    )
    keys = set()
    for seed in ("1", "2"):  # these two order the five symbols differently
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", child, str(yaml)],
            env=env,
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        keys.add(done.stdout.strip().splitlines()[-1])
    assert keys == {_key(yaml)}
