"""benchmarks/bench_petab.py and bench_petab_collection.py: a batch of PEtab problems on
an executor (a Dask cluster) gives the values of a local run."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.petab.turnover import turnover_sbml, write_turnover_problem

BENCH_DIR = Path(__file__).resolve().parents[2] / "benchmarks"


def _bench(name: str):
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    """Two small PEtab problems: the turnover problem, and one with another initial
    amount (another log-likelihood)."""
    folder = tmp_path_factory.mktemp("bench_petab")
    first = write_turnover_problem(folder / "turnover")
    second = write_turnover_problem(folder / "turnover_b", turnover_sbml(a0=1.3))
    return {"turnover": first, "turnover_b": second}


@pytest.mark.slow  # two problems measured twice (43 s); lighter sibling: test_executors.py
def test_bench_petab_on_a_dask_cluster_gives_the_local_values(problems, dask_client):
    bench_petab = _bench("bench_petab")
    options = {"repeats": 1, "cold": False, "amici": False}
    here = bench_petab.measure_problems(problems, **options)
    there = bench_petab.measure_problems(problems, executor=dask_client, **options)
    assert list(there) == list(problems)
    assert here["turnover"]["ours"]["llh"]["llh"] != here["turnover_b"]["ours"]["llh"]["llh"]
    for name in problems:
        ours, theirs = here[name]["ours"], there[name]["ours"]
        assert "error" not in ours["forward"], ours["forward"]
        assert theirs["llh"]["llh"] == ours["llh"]["llh"]
        assert theirs["forward"]["llh"] == ours["forward"]["llh"]
        assert np.array_equal(theirs["forward"]["gradient"], ours["forward"]["gradient"])
        assert np.isfinite(ours["forward"]["gradient"]).all()
        assert theirs["x_ids"] == ours["x_ids"]


@pytest.mark.slow  # a fresh process with an empty kernel cache per problem and side: 80 s
def test_bench_petab_collection_on_a_dask_cluster_gives_the_local_values(problems, dask_client):
    collection = _bench("bench_petab_collection")
    folders = {name: yaml.parent for name, yaml in problems.items()}
    here = collection.run_collection(folders, 1, 600.0)
    there = collection.run_collection(folders, 1, 600.0, executor=dask_client)
    for name in folders:
        assert "error" not in here[name], here[name]
        assert there[name]["llh"] == here[name]["llh"]
        assert there[name]["grad_max_abs"] == here[name]["grad_max_abs"]
        assert there[name]["parameters"] == here[name]["parameters"]
