"""A log-likelihood over experiments evaluated by an executor's workers.

Values and gradients against the closed form; the same bits in this process, on a thread
pool and on a Dask cluster; the same bits when a worker is killed in the middle of an
evaluation; chunks moved by measured cost; solver failures rejected or raised; a lost
cluster named; the log-likelihood inside PyMC models sampled by NUTS, nutpie and SMC.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pymc as pm
import pytest

from pymc_odesens import failure_counts, reset_failure_counts
from pymc_odesens.inference import (
    ClusterUnavailableError,
    DistributedLogLikelihood,
    WorkerLostError,
)
from pymc_odesens.ops.experiments import experiment_threads
from pymc_odesens.solvers.errors import MaxNumStepsError
from tests.inference.likelihood_sources import (
    OdeBatchSource,
    QuadraticSource,
    quadratic_centres,
    quadratic_truth,
)

X = np.array([0.3, -0.2, 1.1])
XS = [X, X + 0.5, -X]


def _evaluations(llh: DistributedLogLikelihood) -> list:
    return [llh.value_and_gradient(x) for x in XS] + [llh.value(x) for x in XS]


def _identical(a: list, b: list) -> bool:
    for u, v in zip(a, b):
        if isinstance(u, tuple):
            if u[0] != v[0] or not np.array_equal(u[1], v[1]):
                return False
        elif u != v:
            return False
    return len(a) == len(b)


@pytest.fixture(scope="module")
def source():
    return QuadraticSource(8, 3)


@pytest.fixture(scope="module")
def reference(source):
    return _evaluations(DistributedLogLikelihood(source, n_chunks=4))


def test_values_and_gradients_are_the_closed_form(source, reference):
    for x, (value, gradient) in zip(XS, reference[:3]):
        truth, truth_gradient = quadratic_truth(x, source.n_experiments)
        assert value == pytest.approx(truth, rel=1e-13)
        np.testing.assert_allclose(gradient, truth_gradient, rtol=1e-12)
    for x, value in zip(XS, reference[3:]):
        assert value == pytest.approx(quadratic_truth(x, source.n_experiments)[0], rel=1e-13)


@pytest.mark.parametrize("n_chunks", [1, 3, 8])
def test_other_chunks_change_only_the_rounding(source, reference, n_chunks):
    other = _evaluations(DistributedLogLikelihood(source, n_chunks=n_chunks))
    for (a, ga), (b, gb) in zip(reference[:3], other[:3]):
        assert a == pytest.approx(b, rel=1e-13)
        np.testing.assert_allclose(ga, gb, rtol=1e-12)


def test_a_thread_pool_gives_the_same_bits(source, reference):
    with ThreadPoolExecutor(2) as pool:
        assert _identical(
            _evaluations(DistributedLogLikelihood(source, pool, n_chunks=4)), reference
        )


def test_dask_gives_the_same_bits(dask_client, source, reference):
    llh = DistributedLogLikelihood(source, dask_client, n_chunks=4)
    assert _identical(_evaluations(llh), reference)
    balance = llh.balance
    assert sorted(set(balance.slots)) == sorted(dask_client.nthreads())
    assert set(balance.owner.tolist()) == {0, 1}  # both workers evaluate
    assert balance.evaluations == 6 and balance.relocations == 0


def test_a_decay_batch_from_ode_solution_on_dask(dask_client):
    source = OdeBatchSource(6)
    x = np.array([np.log(0.7)])
    whole = source.build().part(tuple(range(6)), True)(x)
    local = DistributedLogLikelihood(source, n_chunks=1).value_and_gradient(x)
    assert local[0] == whole[0] and np.array_equal(local[1], whole[1])
    chunked = DistributedLogLikelihood(source, n_chunks=3)
    on_dask = DistributedLogLikelihood(source, dask_client, n_chunks=3)
    for at in (x, np.array([0.1])):
        a, ga = chunked.value_and_gradient(at)
        b, gb = on_dask.value_and_gradient(at)
        assert a == b and np.array_equal(ga, gb)
    value, gradient = chunked.value_and_gradient(x)
    assert value == pytest.approx(whole[0], rel=1e-13)
    np.testing.assert_allclose(gradient, whole[1], rtol=1e-12)
    # each worker solves its chunk's experiments in its own threads (1 here), not in one
    # thread per core of the node: workers sharing a node must not oversubscribe it
    assert set(dask_client.run(experiment_threads).values()) == {1}


@pytest.mark.slow  # worker processes; lighter sibling: test_executors.py (pytest -m slow)
def test_a_worker_killed_during_an_evaluation(dask_client, source, tmp_path):
    slow = QuadraticSource(4, 3, seconds_per_experiment=(0.5,) * 4, marker_dir=str(tmp_path))
    expected = DistributedLogLikelihood(slow, n_chunks=4).value_and_gradient(X)
    for marker in tmp_path.glob("*.started"):
        marker.unlink()
    llh = DistributedLogLikelihood(slow, dask_client, n_chunks=4)
    llh.value_and_gradient(X)  # both workers build their chunks
    for marker in tmp_path.glob("*.started"):
        marker.unlink()
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("r", llh.value_and_gradient(X)))
    thread.start()
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("*.started")) and time.monotonic() < deadline:
        time.sleep(0.02)
    victim = int(next(tmp_path.glob("*.started")).read_text())
    os.kill(victim, signal.SIGKILL)
    thread.join(timeout=300)
    value, gradient = outcome["r"]
    assert value == expected[0] and np.array_equal(gradient, expected[1])
    assert llh.relocations >= 1
    # the next evaluations run on the workers there are now, with the same bits
    again = llh.value_and_gradient(X)
    assert again[0] == expected[0] and np.array_equal(again[1], expected[1])
    assert victim not in dask_client.run(os.getpid).values()


def test_chunks_move_by_measured_cost(source):
    # the first half of the experiments is slow: an even split puts them on one thread
    slow = QuadraticSource(8, 3, seconds_per_experiment=(0.06,) * 4 + (0.0,) * 4)
    expected = DistributedLogLikelihood(slow, n_chunks=8).value_and_gradient(X)
    with ThreadPoolExecutor(2) as pool:
        llh = DistributedLogLikelihood(slow, pool, n_chunks=8)
        before = None
        for _ in range(5):
            value, gradient = llh.value_and_gradient(X)
            assert value == expected[0] and np.array_equal(gradient, expected[1])
            if before is None:  # costs of the first evaluation, before any move
                before = llh.balance
        after = llh.balance
    assert before.imbalance > 1.8  # all the slow chunks on one thread
    assert llh.rebalances >= 1
    assert after.imbalance < 1.3
    assert np.array_equal(np.bincount(after.owner[:4], minlength=2), [2, 2])


def test_solver_failures_are_rejected_or_raised(dask_client):
    failing = QuadraticSource(4, 3, fail_above=5.0)
    at = np.array([6.0, 0.0, 0.0])
    reset_failure_counts()
    with pytest.warns(UserWarning, match=r"quadratic \(experiments condition_0.*MaxNumStepsError"):
        value, gradient = DistributedLogLikelihood(
            failing, n_chunks=2, on_failure="reject"
        ).value_and_gradient(at)
    assert value == -np.inf and np.array_equal(gradient, np.zeros(3))
    assert failure_counts() == {"MaxNumStepsError": 2}
    reset_failure_counts()
    with pytest.raises(MaxNumStepsError, match=r"x\[0\] = 6.0 > 5.0"):
        DistributedLogLikelihood(failing, n_chunks=2).value(at)
    with pytest.raises(MaxNumStepsError, match=r"x\[0\] = 6.0 > 5.0"):
        DistributedLogLikelihood(failing, dask_client, n_chunks=2).value(at)


def test_arguments_are_checked(source):
    with pytest.raises(TypeError, match="source: expected a LikelihoodSource"):
        DistributedLogLikelihood(object())
    with pytest.raises(ValueError, match="on_failure: expected 'raise' or 'reject'"):
        DistributedLogLikelihood(source, on_failure="ignore")
    with pytest.raises(ValueError, match=r"n_chunks: expected 1 to 8"):
        DistributedLogLikelihood(source, n_chunks=9)
    with pytest.raises(ValueError, match=r"quadratic: x must have shape \(3,\)"):
        DistributedLogLikelihood(source).value(np.zeros(4))


def test_a_cluster_gone_is_named_and_stays_an_error(source):
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
    )
    client = distributed.Client(cluster, set_as_default=False)
    llh = DistributedLogLikelihood(source, client, n_chunks=2)
    address = llh.executor.address
    cluster.close()
    client.close()
    with pytest.raises(ClusterUnavailableError, match=rf"cluster at {address}") as first:
        llh.value(X)
    with pytest.raises(ClusterUnavailableError) as second:
        llh.value_and_gradient(X)
    assert second.value is first.value
    with pytest.raises(ClusterUnavailableError):
        llh.check()


def test_pickled_copies_give_the_same_bits(dask_client, source, reference):
    local = pickle.loads(pickle.dumps(DistributedLogLikelihood(source, n_chunks=4)))
    assert _identical(_evaluations(local), reference)
    remote = pickle.loads(pickle.dumps(DistributedLogLikelihood(source, dask_client, n_chunks=4)))
    try:
        assert remote.executor.address == dask_client.scheduler.address
        assert _identical(_evaluations(remote), reference)
    finally:
        remote.close()
    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(TypeError, match="cannot be sent to another process"):
            pickle.dumps(DistributedLogLikelihood(source, pool))


# inside PyMC models ---------------------------------------------------------------------------


def _posterior(source: QuadraticSource) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of the posterior with N(0, 10^2) priors (Gaussian)."""
    centres, weights = quadratic_centres(source.n_experiments, source.n_parameters)
    precision = weights.sum() + 0.01
    return (weights @ centres) / precision, np.full(source.n_parameters, precision**-0.5)


def _model(llh: DistributedLogLikelihood) -> pm.Model:
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 10.0, shape=llh.source.n_parameters)
        pm.Potential("log_likelihood", llh.tensor(x))
    return model


def _check_posterior(draws: np.ndarray, source) -> None:
    mean, sd = _posterior(source)
    error = np.abs(draws.reshape(-1, source.n_parameters).mean(axis=0) - mean)
    assert np.all(error < 5 * sd / np.sqrt(100)), (error, sd)


@pytest.fixture(scope="module")
def small_source():
    return QuadraticSource(4, 2)


def test_nuts_samples_the_posterior(small_source):
    import pymc_odesens

    llh = DistributedLogLikelihood(small_source, n_chunks=2, on_failure="reject")
    with _model(llh):
        trace = pymc_odesens.sample(
            300, tune=300, chains=1, cores=1, random_seed=1, progressbar=False
        )
    _check_posterior(trace.posterior["x"].values, small_source)


def test_nutpie_samples_the_posterior_through_the_numba_callback(small_source):
    import pymc_odesens

    llh = DistributedLogLikelihood(small_source, n_chunks=2, on_failure="reject")
    with _model(llh):
        trace = pymc_odesens.sample(
            300, tune=300, chains=2, nuts_sampler="nutpie", random_seed=2, progressbar=False
        )
    _check_posterior(trace.posterior["x"].values, small_source)
    assert llh.evaluations > 600


def test_smc_samples_the_posterior_with_values_alone(small_source):
    llh = DistributedLogLikelihood(small_source, n_chunks=2, on_failure="reject")
    with _model(llh):
        trace = pm.sample_smc(300, chains=1, cores=1, random_seed=3, progressbar=False)
    _check_posterior(trace.posterior["x"].values, small_source)
    assert llh.evaluations > 0
    assert llh.gradient_evaluations == 0  # SMC's likelihood needs no gradient


def test_pymc_odesens_sample_raises_the_error_that_ended_the_likelihood():
    """nutpie turns an error of the log-density into a divergence (or a failed start); the
    error that ended the distributed log-likelihood is what pymc_odesens.sample raises."""
    import pymc_odesens

    llh = DistributedLogLikelihood(QuadraticSource(4, 2, lost=True), on_failure="reject")
    with _model(llh):
        with pytest.raises(WorkerLostError, match=r"tcp://10.1.2.3:8786"):
            pymc_odesens.sample(
                20, tune=20, chains=1, nuts_sampler="nutpie", random_seed=2, progressbar=False
            )
