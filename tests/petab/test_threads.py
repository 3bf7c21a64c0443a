"""One PetabProblem shared by several threads: every call gives the bits of one thread."""

import numpy as np
import pytest

from pymc_odesens.petab import PetabProblem
from tests.petab.benchmark_collection import problem_yaml
from tests.petab.turnover import write_turnover_problem
from tests.threads import CALLS, THREADS, assert_same_bits, in_threads


def _points(problem: PetabProblem, count: int, seed: int) -> list[np.ndarray]:
    """The nominal point and small seeded perturbations of it (on the parameter scales)."""
    rng = np.random.default_rng(seed)
    x0 = problem.x_nominal
    return [x0] + [x0 + 0.01 * rng.standard_normal(x0.size) for _ in range(count - 1)]


@pytest.fixture(scope="module")
def boehm():
    return PetabProblem.from_yaml(problem_yaml("Boehm_JProteomeRes2014"))


def test_gradients_of_a_shared_problem(boehm):
    points = _points(boehm, THREADS * CALLS, seed=0)
    alone = [boehm.log_likelihood_gradient(x) for x in points]
    assert np.isfinite(np.array(alone)).all()
    assert len({g.tobytes() for g in alone}) == len(points)  # the points differ
    assert_same_bits(alone, in_threads(boehm.log_likelihood_gradient, points))


def test_values_simulations_and_gradients_of_a_shared_problem(boehm):
    calls = {
        "log_likelihood": boehm.log_likelihood,
        "log_likelihood_and_gradient": boehm.log_likelihood_and_gradient,
        "simulate": lambda x: boehm.simulate(x)[["simulation", "noise"]].to_numpy(),
    }
    points = _points(boehm, 12, seed=1)
    work = [(name, x) for x in points for name in calls]

    def call(item):
        name, x = item
        return calls[name](x)

    alone = [call(item) for item in work]
    assert_same_bits(alone, in_threads(call, work))


@pytest.mark.parametrize("route", ["forward", "adjoint"])
def test_a_shared_problem_with_preequilibration(tmp_path, route):
    """The turnover problem: steady states (pre-equilibration, time = inf) in the graph."""
    problem = PetabProblem.from_yaml(
        write_turnover_problem(tmp_path),
        sensitivity=route,
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    )
    assert any(e.preequilibration for e in problem.experiments)
    points = _points(problem, THREADS * 20, seed=2)
    alone = [problem.log_likelihood_and_gradient(x) for x in points]
    assert_same_bits(alone, in_threads(problem.log_likelihood_and_gradient, points))
