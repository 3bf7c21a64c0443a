"""Multistart mode finding on a PEtab problem: the worker's model from the problem's factory,
the optima in PEtab's terms (ids, parameter scales, PEtab's log-likelihood)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from pymc_odesens.inference import find_modes
from pymc_odesens.petab import PetabProblem
from pymc_odesens.petab.problem import PetabModelFactory
from tests.petab.benchmark_collection import problem_yaml

BOEHM = "Boehm_JProteomeRes2014"
# the best log-likelihood of Boehm's problem found in long runs (docs/pymc.md, "Modes
# first"): k_exp_hetero on its lower bound; the nominal values give -138.2219969
BOEHM_BEST_LLH = -138.2219757


@pytest.fixture(scope="module")
def boehm():
    return PetabProblem.from_yaml(problem_yaml(BOEHM))


def test_the_model_factory_is_a_picklable_recipe(boehm):
    factory = boehm.model_factory()
    assert isinstance(factory, PetabModelFactory)
    assert factory.yaml_path == str(problem_yaml(BOEHM).resolve())
    assert dict(factory.options)["relative_tolerance"] == boehm.options.relative_tolerance
    # the automatic route is measured once, here, not in every worker
    assert dict(factory.options)["sensitivity"] == boehm.gradient_route != "auto"
    assert pickle.loads(pickle.dumps(factory)) == factory
    problem = PetabProblem(boehm.petab_problem, "no_file", boehm.options)
    with pytest.raises(ValueError, match="no_file: model_factory needs the problem's YAML"):
        problem.model_factory()


@pytest.mark.slow  # sampling run / worker processes: python -m pytest -m slow
def test_optima_in_two_worker_processes_are_petab_optima(boehm):
    result = find_modes(boehm, 2, random_seed=4, n_workers=2, method="L-BFGS-B")
    assert not result.failed
    ids = boehm.parameters.ids
    for start in result.starts:
        assert tuple(start.parameters) == ids
        x = np.array([start.parameters[pid] for pid in ids])
        lower, upper = -5.0, 5.0  # Boehm's bounds: 1e-5 to 1e5 on log10
        assert np.all((x >= lower) & (x <= upper))
        # the log-likelihood is PEtab's (our PEtab log-likelihood at the same x)
        assert start.log_likelihood == pytest.approx(boehm.log_likelihood(x), abs=1e-6)
        # uniform priors on [-5, 5] (log10): the log-posterior adds 9 log(1/10)
        assert start.log_posterior == pytest.approx(start.log_likelihood - 9 * np.log(10.0))
        assert start.log_likelihood > boehm.log_likelihood(start_vector(result, start))


def start_vector(result, start):
    return np.asarray(start.start)


@pytest.mark.slow  # sampling run / worker processes: python -m pytest -m slow
def test_the_fisher_trust_region_finds_boehms_optimum_from_prior_draws(boehm):
    # 9 starts of seed 0: start 8 reaches the best optimum, the others local optima
    result = find_modes(boehm, 9, random_seed=0, n_workers=1)
    assert result.method == "trust-region-fisher"  # "auto": normal noise everywhere
    best = result.best
    assert best.index == 8
    assert best.log_likelihood == pytest.approx(BOEHM_BEST_LLH, abs=1e-3)
    assert best.parameters["k_exp_hetero"] == pytest.approx(-5.0, abs=1e-6)
    x = np.array([best.parameters[pid] for pid in boehm.parameters.ids])
    assert boehm.log_likelihood(x) == pytest.approx(best.log_likelihood, abs=1e-6)
    assert result.clusters[0].best is best
