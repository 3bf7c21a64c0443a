"""The worker's side of a distributed log-likelihood: problems kept resident, chunks evaluated.

A *likelihood source* (:class:`LikelihoodSource`) describes a log-likelihood that is a sum
over experiments, picklably and without compiled code: for PEtab, the problem's YAML file,
solver options and the kernels' cache key
(:class:`pymc_odesens.petab.PetabLikelihoodSource`). A worker builds it once
(:meth:`LikelihoodSource.build`, the kernels from the worker's disk cache) and keeps the
result, a :class:`ResidentLikelihood`, in a per-process cache keyed by
:attr:`LikelihoodSource.key`; the functions of its chunks are compiled on first use and
kept as well. An evaluation then ships only the parameter vector and the chunk numbers
(:func:`evaluate_chunks`), and returns each chunk's log-likelihood and gradient and the
time it took.

With ``reject_failures`` a solver failure (:class:`~pymc_odesens.OdeSolverError`) in a
chunk makes that chunk's log-likelihood ``-inf`` with a zero gradient and its message is
returned (the sampler rejects the proposal, as ``ode_solution``'s ``on_failure="reject"``
does); otherwise it propagates to the caller. Any other exception propagates.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from pymc_odesens.ops.experiments import set_experiment_threads
from pymc_odesens.solvers.errors import OdeSolverError

__all__ = [
    "ChunkResult",
    "LikelihoodSource",
    "PartitionedSource",
    "ResidentLikelihood",
    "SlotResult",
    "evaluate_chunks",
    "resident",
]


class ResidentLikelihood(Protocol):
    """What a worker keeps of a problem (see the module's docstring)."""

    def part(self, experiments: tuple[int, ...], gradient: bool) -> Callable:
        """A function of the parameter vector ``x`` returning ``(value, gradient)`` of the
        log-likelihood of ``experiments`` alone (``gradient`` None when not asked for); it
        may be called from several threads at once."""


@runtime_checkable
class LikelihoodSource(Protocol):
    """A log-likelihood that is a sum over experiments, as a worker can rebuild it.

    Attributes
    ----------
    key : str
        Names the problem: equal keys, equal log-likelihoods (the workers' cache key).
    name : str
        For messages and task names.
    n_experiments : int
    n_parameters : int
        The length of the parameter vector ``x``.
    """

    key: str
    name: str
    n_experiments: int
    n_parameters: int

    def build(self) -> ResidentLikelihood:
        """The problem, made on a worker (once per worker process and key)."""

    def experiment_labels(self) -> list[str]:
        """A name for each experiment (its conditions), for messages."""


@dataclass(frozen=True)
class PartitionedSource:
    """A source and its chunks: what is sent to each worker once
    (:meth:`~pymc_odesens.inference.executors.WorkExecutor.share`)."""

    source: LikelihoodSource
    chunks: tuple


@dataclass(frozen=True)
class ChunkResult:
    """One chunk's part of one evaluation.

    Attributes
    ----------
    chunk : int
    value : float
        The chunk's log-likelihood (``-inf``: rejected).
    gradient : numpy.ndarray or None
    seconds : float
        Wall time of the chunk's evaluation on the worker (without compiling it).
    first : bool
        The first evaluation of the chunk's function in that process (its time may
        include lazy initialisation: not a cost measurement).
    failure : OdeSolverError or None
        The solver failure that rejected the chunk (``reject_failures``), as raised on the
        worker (counted by its type where the results are gathered).
    """

    chunk: int
    value: float
    gradient: np.ndarray | None
    seconds: float
    first: bool
    failure: OdeSolverError | None = None


@dataclass(frozen=True)
class SlotResult:
    """What one worker task returns: its chunks' results, where it ran, what it built."""

    worker: str
    results: tuple
    build_seconds: float


class _Resident:
    """A built problem and the compiled functions of its chunks (one process)."""

    def __init__(self, problem: ResidentLikelihood) -> None:
        self.problem = problem
        self.parts: dict[tuple, Callable] = {}
        self.lock = threading.Lock()


_RESIDENT: dict[str, _Resident] = {}
_RESIDENT_LOCK = threading.Lock()


def resident(source: LikelihoodSource) -> ResidentLikelihood:
    """This process's resident build of ``source`` (built on first use)."""
    return _resident(source)[0].problem


def _resident(source: LikelihoodSource) -> tuple[_Resident, float]:
    began = time.perf_counter()
    with _RESIDENT_LOCK:
        entry = _RESIDENT.get(source.key)
        if entry is None:
            _threads_of_this_worker()
            entry = _RESIDENT[source.key] = _Resident(source.build())
    return entry, time.perf_counter() - began


def _part(entry: _Resident, shared: PartitionedSource, chunk: int, gradient: bool):
    """The compiled function of ``chunk`` (and whether it was just made), kept by its
    experiments: the same for any chunking that has them as one chunk."""
    experiments = shared.chunks[chunk]
    key = (experiments, gradient)
    function = entry.parts.get(key)
    if function is not None:
        return function, False
    with entry.lock:
        function = entry.parts.get(key)
        if function is None:
            function = entry.parts[key] = entry.problem.part(experiments, gradient)
            return function, True
    return function, False


def _threads_of_this_worker() -> None:
    """In a Dask worker, solve a chunk's experiments in as many threads as the worker has
    (not ``os.cpu_count()``: workers that share a node would oversubscribe its cores)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return
    try:
        worker = distributed.get_worker()
    except ValueError:  # not in a Dask worker
        return
    set_experiment_threads(max(1, int(worker.state.nthreads)))


def _worker_name() -> str:
    """The Dask worker's address, else this process."""
    distributed = sys.modules.get("distributed")
    if distributed is not None:
        try:
            return distributed.get_worker().address
        except ValueError:  # not in a Dask worker
            pass
    import os

    return f"process {os.getpid()}"


def evaluate_chunks(
    shared: PartitionedSource,
    chunks: tuple[int, ...],
    x: np.ndarray,
    gradient: bool,
    reject_failures: bool,
) -> SlotResult:
    """Evaluate ``chunks`` of ``shared`` at ``x`` (the work unit of one worker thread).

    Returns
    -------
    SlotResult
    """
    began = time.perf_counter()
    # a copy of our own: an array received from the network may be unaligned or read-only
    x = np.array(x, dtype=np.float64, copy=True)
    entry, _ = _resident(shared.source)
    results = []
    for chunk in chunks:
        function, first = _part(entry, shared, chunk, gradient)
        start = time.perf_counter()
        try:
            value, grad = function(x)
            failure = None
        except OdeSolverError as error:
            if not reject_failures:
                raise
            value = -math.inf
            grad = np.zeros(len(x)) if gradient else None
            failure = error.with_traceback(None)
        seconds = time.perf_counter() - start
        results.append(ChunkResult(chunk, float(value), grad, seconds, first, failure))
    total = time.perf_counter() - began
    spent = sum(r.seconds for r in results)
    return SlotResult(_worker_name(), tuple(results), total - spent)
