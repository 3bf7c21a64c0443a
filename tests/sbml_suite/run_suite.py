"""The full SBML Test Suite run (kept out of the default test run): one command.

    PYMC_ODESENS_CACHE_DIR=/tmp/sbml_suite_cache \\
        python -m tests.sbml_suite.run_suite --workers 2 \\
        --output benchmarks/results/sbml_suite.json

runs every case of ``cases/semantic`` (or the ``--cases`` given: ids, ranges like
``1-100``, or ``sample`` for the CI sample of :mod:`tests.sbml_suite.sample`) in
``--workers`` processes that share the kernel cache directory (a case that takes longer than
``--case-timeout`` seconds is stopped and recorded as a timeout), prints the counts, and
writes each case's outcome, the counts per outcome and per tag, and the wall time to
``--output``.

On a Dask cluster instead of local processes (``pip install "pymc_odesens[distributed]"``)::

    python -m tests.sbml_suite.run_suite --dask-workers 2 ...        # a LocalCluster
    python -m tests.sbml_suite.run_suite --scheduler tcp://host:8786 ...

Each case is one work unit that ships its id and the suite folder's path (the workers need
the suite at that path and this checkout importable: ``tests.sbml_suite``); the worker
reads and solves the case, loading the kernels from its own cache. The outcomes and errors
are those of a local run; ``--case-timeout`` applies to local processes only (a Dask task
cannot be stopped from outside).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import multiprocessing
import multiprocessing.connection
import os
import platform
import sys
import time
from pathlib import Path

from tests.sbml_suite.suite import CaseResult, case_info, run_case, suite_directory

__all__ = ["dask_client", "run_cases", "summarise", "main"]

DEFAULT_CASE_TIMEOUT = 600.0
"""Seconds a case may take in a local worker process (``--case-timeout``)."""


def _parse_cases(texts: list[str], directory: Path) -> list[str]:
    every = sorted(p.name for p in directory.iterdir() if p.name.isdigit())
    if not texts:
        return every
    chosen: list[str] = []
    for text in texts:
        if text == "sample":
            from tests.sbml_suite.sample import SAMPLE_CASES

            chosen += SAMPLE_CASES
        elif "-" in text:
            low, high = (int(x) for x in text.split("-"))
            chosen += [c for c in every if low <= int(c) <= high]
        else:
            chosen.append(f"{int(text):05d}")
    return list(dict.fromkeys(chosen))


def _worker(connection) -> None:
    """A worker process: run the cases it is sent until it is sent None."""
    while True:
        case = connection.recv()
        if case is None:
            return
        connection.send(run_case(case).as_dict())


class _Worker:
    def __init__(self, context) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_worker, args=(child,), daemon=True)
        self.process.start()
        self.case: str | None = None
        self.started = 0.0

    def stop(self) -> None:
        if self.case is None and self.process.is_alive():
            self.connection.send(None)
            self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def _case_unit(case: str, directory: str) -> dict:
    """One work unit: case ``case`` of the suite folder ``directory``, run by a worker."""
    return run_case(case, Path(directory)).as_dict()


def _run_on_executor(cases: list[str], executor, progress: bool) -> list[CaseResult]:
    from pymc_odesens.inference import work_executor

    directory = str(suite_directory())
    with work_executor(executor) as runner:
        works = [runner.submit(_case_unit, c, directory, name=f"sbml-case-{c}") for c in cases]
        results = [CaseResult(**r) for r in runner.gather(works)]
    if progress:
        for result in results:
            _report(result)
    return results


def run_cases(
    cases: list[str],
    workers: int = 2,
    progress: bool = False,
    case_timeout: float | None = None,
    executor=None,
) -> list[CaseResult]:
    """Run ``cases`` in ``workers`` processes (spawned; they share the kernel cache), or as
    work units of ``executor``.

    A case that takes longer than ``case_timeout`` seconds has its worker stopped (and
    replaced) and is recorded with the outcome ``"timeout"``.

    Parameters
    ----------
    executor : None, concurrent.futures.Executor or dask.distributed.Client
        Not None: each case is one work unit (its id and the suite folder's path) of
        :func:`pymc_odesens.inference.work_executor`, and ``workers`` is not used; the
        results are those of a local run (outcome, message, ``worst``), in ``cases``' order.

    Raises
    ------
    ValueError
        ``case_timeout`` with an ``executor`` (a unit of an executor cannot be stopped).
    """
    if executor is not None:
        if case_timeout is not None:
            raise ValueError(
                f"case_timeout: expected None with an executor (got {case_timeout!r}): "
                "a work unit of an executor cannot be stopped from outside"
            )
        return _run_on_executor(cases, executor, progress)
    if workers <= 1 and case_timeout is None:
        results = []
        for case in cases:
            results.append(run_case(case))
            if progress:
                _report(results[-1])
        return results
    context = multiprocessing.get_context("spawn")
    pending = list(cases)
    done: dict[str, CaseResult] = {}
    pool = [_Worker(context) for _ in range(max(workers, 1))]
    try:
        while pending or any(w.case is not None for w in pool):
            for worker in pool:
                if worker.case is None and pending:
                    worker.case, worker.started = pending.pop(0), time.perf_counter()
                    worker.connection.send(worker.case)
            busy = [w for w in pool if w.case is not None]
            ready = multiprocessing.connection.wait([w.connection for w in busy], timeout=1.0)
            for worker in busy:
                if worker.connection in ready:
                    result = CaseResult(**worker.connection.recv())
                elif (
                    case_timeout is not None and time.perf_counter() - worker.started > case_timeout
                ):
                    result = CaseResult(
                        worker.case,
                        "timeout",
                        f"stopped after {case_timeout:.0f} s",
                        seconds=time.perf_counter() - worker.started,
                        tags=list(case_info(worker.case).tags),
                    )
                    worker.process.kill()
                    worker.process.join()
                    pool[pool.index(worker)] = _Worker(context)
                else:
                    continue
                done[result.case] = result
                worker.case = None
                if progress:
                    _report(result)
    finally:
        for worker in pool:
            worker.stop()
    return [done[c] for c in cases]


def _report(result: CaseResult) -> None:
    line = f"{result.case} {result.outcome:8s} {result.seconds:6.2f} s"
    if result.outcome != "pass":
        line += f"  {result.message[:160]}"
    print(line, flush=True)


def summarise(results: list[CaseResult], directory: Path) -> dict:
    """Counts per outcome, per outcome among the goal cases, and per tag."""
    outcomes = collections.Counter(r.outcome for r in results)
    goal = collections.Counter()
    per_tag: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        info = case_info(r.case, directory)
        if info.in_goal:
            goal[r.outcome] += 1
        for tag in r.tags:
            per_tag[tag][r.outcome] += 1
    return {
        "outcomes": dict(outcomes),
        "goal_outcomes": dict(goal),
        "per_tag": {tag: dict(c) for tag, c in sorted(per_tag.items())},
    }


@contextlib.contextmanager
def dask_client(scheduler: str | None, n_workers: int | None):
    """None (neither given), a Client of the Dask scheduler at ``scheduler``, or of a
    LocalCluster of ``n_workers`` worker processes with one thread each (closed on exit)."""
    if scheduler is None and n_workers is None:
        yield None
        return
    from dask.distributed import Client, LocalCluster

    if scheduler is not None:
        with Client(scheduler) as client:
            yield client
        return
    with (
        LocalCluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        yield client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="*", default=[], help="ids, ranges a-b, or 'sample'")
    parser.add_argument("--workers", type=int, default=2, help="local processes (2)")
    cluster = parser.add_mutually_exclusive_group()
    cluster.add_argument(
        "--scheduler", default=None, metavar="ADDRESS", help="run on this Dask scheduler"
    )
    cluster.add_argument(
        "--dask-workers",
        type=int,
        default=None,
        metavar="N",
        help="run on a Dask LocalCluster of N worker processes (1 thread each)",
    )
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument(
        "--case-timeout",
        type=float,
        default=None,
        help=f"seconds per case in local processes ({DEFAULT_CASE_TIMEOUT:.0f})",
    )
    args = parser.parse_args(argv)
    on_dask = args.scheduler is not None or args.dask_workers is not None
    if on_dask and args.case_timeout is not None:
        parser.error("--case-timeout: applies to local processes only, not with a Dask cluster")
    if not on_dask and args.case_timeout is None:
        args.case_timeout = DEFAULT_CASE_TIMEOUT
    directory = suite_directory()
    cases = _parse_cases(args.cases, directory)
    started = time.perf_counter()
    with dask_client(args.scheduler, args.dask_workers) as client:
        workers = args.workers if client is None else sum(client.nthreads().values())
        results = run_cases(
            cases,
            args.workers,
            progress=not args.quiet,
            case_timeout=args.case_timeout,
            executor=client,
        )
    wall = time.perf_counter() - started
    summary = summarise(results, directory)
    print(
        json.dumps({"cases": len(results), "wall_seconds": round(wall, 1), **summary["outcomes"]})
    )
    print("goal cases:", summary["goal_outcomes"])
    if args.output is not None:
        record = {
            "command": "python -m tests.sbml_suite.run_suite " + " ".join(argv or sys.argv[1:]),
            "suite": "SBML Test Suite cases/semantic (commit 7ab011efe471)",
            "cases": len(results),
            "wall_seconds": round(wall, 1),
            "case_seconds_total": round(sum(r.seconds for r in results), 1),
            "workers": workers,
            "executor": "local processes" if not on_dask else (args.scheduler or "LocalCluster"),
            "load_average": os.getloadavg(),
            "machine": platform.platform(),
            **summary,
            "results": {
                r.case: {"outcome": r.outcome, "seconds": round(r.seconds, 3), "message": r.message}
                for r in results
            },
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
