"""Samplers on a PEtab model: PyMC's NUTS, nutpie (NUMBA mode) and SMMALA (short runs)."""

import numpy as np
import pymc as pm
import pytest

from pymc_odesens import SMMALA
from pymc_odesens.petab import PetabProblem
from tests.petab.benchmark_collection import problem_yaml
from tests.petab.test_model import value_point

BOEHM = "Boehm_JProteomeRes2014"


@pytest.fixture(scope="module")
def boehm():
    return PetabProblem.from_yaml(problem_yaml(BOEHM))


def _finite_posterior(idata, problem):
    for pid in problem.parameters.ids:
        values = idata.posterior[pid].values
        assert np.isfinite(values).all(), pid


@pytest.mark.slow
def test_pymc_nuts(boehm):
    with boehm.build_model():
        idata = pm.sample(draws=40, tune=40, chains=1, random_seed=3, progressbar=False)
    _finite_posterior(idata, boehm)
    # the noise level of pSTAT5A_rel is well identified: near the nominal 0.59 (log10)
    assert abs(float(idata.posterior["sd_pSTAT5A_rel"].mean()) - 0.59) < 0.3


@pytest.mark.slow
def test_nutpie_compiles_the_model_in_numba_mode(boehm):
    pytest.importorskip("nutpie")
    model = boehm.build_model()
    # the NUMBA-mode log-density equals the default one
    point = value_point(model, dict(zip(boehm.parameters.ids, boehm.x_nominal)))
    numba_logp = model.compile_logp(mode="NUMBA")(point)
    assert numba_logp == pytest.approx(model.compile_logp()(point), rel=1e-10)
    with model:
        idata = pm.sample(
            draws=40, tune=40, chains=1, nuts_sampler="nutpie", random_seed=3, progressbar=False
        )
    _finite_posterior(idata, boehm)


@pytest.mark.slow
def test_smmala(boehm):
    with boehm.build_model():
        step = SMMALA()
        idata = pm.sample(
            draws=30,
            tune=30,
            chains=1,
            step=step,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    _finite_posterior(idata, boehm)
    assert float(idata.sample_stats["accept"].mean()) > 0.05
