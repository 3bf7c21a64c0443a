"""Executors: this process, local processes, any concurrent.futures executor, a Dask cluster.

The same work units give the same bits everywhere; a worker process that dies in the middle
of a run has its unit run again (the run completes with the same results); a unit that kills
every worker, a cluster without workers and a cluster that is gone are named errors.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

from pymc_odesens.inference import (
    ClusterUnavailableError,
    WorkerLostError,
    WorkExecutor,
    work_executor,
)
from pymc_odesens.inference.executors import InProcessExecutor, PoolExecutor
from tests.inference import work_units

SEEDS = list(range(6))


@pytest.fixture(scope="module")
def reference():
    with work_executor(None, n_workers=1) as executor:
        return executor.map(work_units.seeded_solve, SEEDS, name="solve")


def _same(results, reference) -> bool:
    return len(results) == len(reference) and all(
        np.array_equal(a, b) for a, b in zip(results, reference)
    )


def test_none_with_one_worker_runs_here_in_order(reference):
    executor = work_executor(None, n_workers=1)
    assert isinstance(executor, InProcessExecutor)
    assert executor.n_workers == 1
    assert [r.shape for r in reference] == [(7, 3)] * len(SEEDS)
    # different seeds, different numbers: the order is the submission order
    assert not np.array_equal(reference[0], reference[1])
    assert _same([work_units.seeded_solve(s) for s in SEEDS], reference)


def test_thread_pool_gives_the_same_bits(reference):
    with ThreadPoolExecutor(3) as pool:
        executor = work_executor(pool)
        assert isinstance(executor, PoolExecutor) and executor.n_workers == 3
        assert _same(executor.map(work_units.seeded_solve, SEEDS, name="solve"), reference)
        executor.close()  # not ours: the pool stays usable
        assert pool.submit(int, "4").result() == 4


def test_local_processes_rerun_the_unit_of_a_dead_process(reference, tmp_path):
    with work_executor(None, n_workers=2) as executor:
        assert isinstance(executor, PoolExecutor)
        works = [
            executor.submit(work_units.die_once, str(tmp_path), seed, 3, name=f"unit-{seed}")
            for seed in SEEDS
        ]
        results = executor.gather(works)
    assert (tmp_path / "died_3").exists()  # the process running unit 3 died once
    assert _same(results, reference)


def test_local_processes_give_up_on_a_unit_that_kills_every_process():
    with work_executor(None, n_workers=2, retries=1) as executor:
        with pytest.raises(WorkerLostError, match=r"'killer-0'.*submitted 2 times"):
            executor.map(work_units.always_die, [0], name="killer")


@pytest.mark.slow  # three spawned processes that import the package: python -m pytest -m slow
def test_a_script_without_the_main_guard_is_told_what_to_do(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import math\n"
        "from pymc_odesens.inference import work_executor\n"
        "with work_executor(None, n_workers=2, retries=0) as runner:\n"
        "    runner.map(math.sqrt, [1.0, 4.0], name='root')\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode != 0
    assert "WorkerLostError" in done.stderr
    assert "If 'unguarded.py' makes this call at its top level" in done.stderr
    assert 'if __name__ == "__main__":' in done.stderr


def test_a_broken_pool_passed_in_is_named():
    with ProcessPoolExecutor(1) as pool:
        executor = work_executor(pool)
        with pytest.raises(WorkerLostError, match=r"executor passed in broke.*'killer-0'"):
            executor.map(work_units.always_die, [0], name="killer")


def test_a_units_own_error_propagates_unchanged():
    with work_executor(None, n_workers=1) as executor:
        with pytest.raises(ValueError, match="unit 2 fails by design"):
            executor.map(work_units.fails, [2], name="failing")


def test_arguments_are_checked():
    with pytest.raises(TypeError, match="executor: expected None, a concurrent.futures"):
        work_executor("localhost:8786")
    with pytest.raises(ValueError, match="n_workers: expected a positive integer, got 0"):
        work_executor(None, n_workers=0)
    with pytest.raises(ValueError, match="retries"):
        work_executor(None, retries=-1)
    with pytest.raises(ValueError, match="worker_timeout"):
        work_executor(None, worker_timeout=0)
    executor = work_executor(None, n_workers=1)
    assert work_executor(executor) is executor
    assert isinstance(executor, WorkExecutor)


# Dask ----------------------------------------------------------------------------------------


def test_dask_gives_the_same_bits(dask_client, reference):
    executor = work_executor(dask_client)
    assert type(executor).__name__ == "DaskExecutor"
    assert executor.n_workers == 2
    assert len(executor.workers()) == 2
    assert _same(executor.map(work_units.seeded_solve, SEEDS, name="solve"), reference)
    executor.close()  # the client is the caller's: still open
    assert dask_client.status == "running"


def test_dask_reruns_the_unit_of_a_dead_worker(dask_client, reference, tmp_path):
    executor = work_executor(dask_client)
    works = [
        executor.submit(work_units.die_once, str(tmp_path), seed, 4, name=f"unit-{seed}")
        for seed in SEEDS
    ]
    results = executor.gather(works)
    assert (tmp_path / "died_4").exists()
    assert _same(results, reference)


def test_dask_gives_up_on_a_unit_that_kills_its_workers(dask_client):
    executor = work_executor(dask_client)
    with pytest.raises(WorkerLostError, match=r"'killer-0' was running on 2 workers.*tcp://"):
        executor.map(work_units.always_die, [0], name="killer")


def test_dask_without_workers_names_the_lost_ones():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        executor = work_executor(client, worker_timeout=1.0)
        (address,) = executor.workers()
        client.retire_workers([address], close_workers=True)
        with pytest.raises(WorkerLostError, match=rf"no worker for 1 s.*{address}.*'solve-0'"):
            executor.map(work_units.seeded_solve, [0], name="solve")


def test_dask_cluster_gone_is_named():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
    )
    client = distributed.Client(cluster, set_as_default=False)
    executor = work_executor(client)
    address = executor.address
    cluster.close()
    client.close()
    with pytest.raises(ClusterUnavailableError, match=rf"Dask cluster at {address} cannot be"):
        executor.map(work_units.seeded_solve, [0], name="solve")
