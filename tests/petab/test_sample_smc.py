"""sample_smc on a PEtab problem: the problem itself is the model argument; workers build the
model from its YAML file (PetabModelFactory) and give the same result bit for bit."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from pymc_odesens.inference import log_evidence, sample_smc
from pymc_odesens.petab import PetabProblem
from tests.petab.turnover import write_turnover_problem

OPTIONS = dict(draws=60, runs=2, n_leapfrog=5, max_moves=3, progressbar=False, random_seed=4)


@pytest.fixture(scope="module")
def turnover(tmp_path_factory):
    return PetabProblem.from_yaml(write_turnover_problem(tmp_path_factory.mktemp("smc")))


@pytest.mark.slow  # 7.4 min wall (4.1 min CPU) on the shared 2-core machine
def test_a_petab_problem_samples_here_and_in_workers_alike(turnover):
    here = sample_smc(turnover, cores=1, **OPTIONS)
    with ThreadPoolExecutor(max_workers=2) as executor:
        workers = sample_smc(turnover, executor=executor, **OPTIONS)
    estimate, mcse = log_evidence(here)
    assert np.isfinite(estimate) and np.isfinite(mcse)
    names = [p for p in here.posterior.data_vars]
    assert names and set(names) == set(workers.posterior.data_vars)
    for name in names:
        np.testing.assert_array_equal(here.posterior[name].values, workers.posterior[name].values)
    np.testing.assert_array_equal(
        here.sample_stats["log_marginal_likelihood"].values,
        workers.sample_stats["log_marginal_likelihood"].values,
    )
    assert np.all(np.isfinite(here.sample_stats["particle_log_likelihood"].values))
