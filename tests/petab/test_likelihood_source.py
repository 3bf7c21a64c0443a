"""A PEtab problem's log-likelihood in chunks of experiments, as the workers of a distributed
log-likelihood rebuild it: the chunks sum to the problem's log-likelihood and gradient, the
same bits in this process and on a Dask cluster, files that differ on a worker named, the
PyMC model with the distributed log-likelihood in place of the measurements."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from pymc_odesens.petab import PetabLikelihoodSource, PetabProblem
from tests.petab.turnover import write_turnover_problem

OPTIONS = {"relative_tolerance": 1e-10, "absolute_tolerance": 1e-12}


@pytest.fixture(scope="module")
def turnover_yaml(tmp_path_factory):
    return write_turnover_problem(tmp_path_factory.mktemp("turnover"))


@pytest.fixture(scope="module")
def turnover(turnover_yaml):
    return PetabProblem.from_yaml(turnover_yaml, **OPTIONS)


def _points(problem) -> list[np.ndarray]:
    x = problem.x_nominal
    return [x, x + 0.05 * np.arange(1, len(x) + 1) / len(x)]


@pytest.mark.parametrize("chunks", [[(0,), (1, 2), (3,)], [(0, 1, 2, 3)], [(0, 3), (1, 2)]])
def test_chunks_of_experiments_sum_to_the_problems_log_likelihood(turnover, chunks):
    for x in _points(turnover):
        value, gradient = turnover.log_likelihood_and_gradient(x)
        parts = [turnover.experiments_log_likelihood(c, gradient=True)(x) for c in chunks]
        assert sum(float(p[0]) for p in parts) == pytest.approx(value, rel=1e-12)
        np.testing.assert_allclose(sum(p[1] for p in parts), gradient, rtol=1e-9, atol=1e-12)
        values = [float(turnover.experiments_log_likelihood(c, gradient=False)(x)) for c in chunks]
        assert sum(values) == pytest.approx(value, rel=1e-12)


def test_invalid_experiments_are_named(turnover):
    for bad in ([], [2, 1], [0, 4], [1, 1]):
        with pytest.raises(ValueError, match=r"experiments: expected increasing indices in 0 .. 3"):
            turnover.experiments_log_likelihood(bad)


@pytest.mark.slow  # worker processes; lighter sibling: test_executors.py (pytest -m slow)
def test_the_distributed_log_likelihood_on_dask_is_the_local_one_bit_for_bit(turnover, dask_client):
    local = turnover.distributed_log_likelihood(n_chunks=3)
    remote = turnover.distributed_log_likelihood(dask_client, n_chunks=3)
    try:
        for x in _points(turnover):
            a, ga = local.value_and_gradient(x)
            b, gb = remote.value_and_gradient(x)
            assert a == b and np.array_equal(ga, gb)
            assert remote.value(x) == local.value(x)
            value, gradient = turnover.log_likelihood_and_gradient(x)
            assert a == pytest.approx(value, rel=1e-12)
            np.testing.assert_allclose(ga, gradient, rtol=1e-9, atol=1e-12)
    finally:
        remote.close()


def test_the_source_names_the_problems_files_and_refuses_other_ones(turnover_yaml, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(turnover_yaml.parent, folder)
    problem = PetabProblem.from_yaml(folder / turnover_yaml.name, **OPTIONS)
    source = problem.likelihood_source()
    assert isinstance(source, PetabLikelihoodSource)
    assert {name for name, _ in source.files} >= {turnover_yaml.name, "model.xml"}
    assert source.n_experiments == 4 and source.n_parameters == len(problem.parameters)
    assert (
        source.key
        == PetabProblem.from_yaml(folder / turnover_yaml.name, **OPTIONS).likelihood_source().key
    )
    (folder / "model.xml").write_text((folder / "model.xml").read_text() + "\n")
    with pytest.raises(ValueError, match=r"model\.xml.*other content"):
        source.build()
    (folder / "model.xml").unlink()
    with pytest.raises(FileNotFoundError, match=r"no file .*model\.xml"):
        source.build()


def test_a_problem_not_read_from_a_file_is_refused(turnover):
    copy = PetabProblem(turnover.petab_problem, "in_memory", turnover.options)
    with pytest.raises(ValueError, match=r"in_memory: .*needs the problem's YAML file"):
        copy.likelihood_source()


@pytest.mark.slow  # sampling run / worker processes: python -m pytest -m slow
def test_the_model_with_the_distributed_log_likelihood_has_the_same_log_density(turnover):
    llh = turnover.distributed_log_likelihood(n_chunks=2, on_failure="reject")
    reference = turnover.build_model()
    distributed = turnover.build_model(log_likelihood=llh)
    assert not distributed.observed_RVs and len(distributed.potentials) == 1
    point = reference.initial_point()
    a = reference.compile_logp()(point)
    b = distributed.compile_logp()(point)
    assert b == pytest.approx(a, rel=1e-10)
    ga = reference.compile_dlogp()(point)
    gb = distributed.compile_dlogp()(point)
    np.testing.assert_allclose(gb, ga, rtol=1e-8, atol=1e-10)


def test_the_model_refuses_what_the_distributed_log_likelihood_cannot_do(turnover):
    raising = turnover.distributed_log_likelihood(n_chunks=2)
    with pytest.raises(ValueError, match="on_failure='reject'"):
        turnover.build_model(log_likelihood=raising)
    rejecting = turnover.distributed_log_likelihood(n_chunks=2, on_failure="reject")
    with pytest.raises(TypeError, match=r"options \['method'\]"):
        turnover.build_model(log_likelihood=rejecting, method="bdf")
