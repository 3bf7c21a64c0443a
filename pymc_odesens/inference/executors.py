"""Where work units run: this process, local worker processes, any executor, or a Dask cluster.

Every parallel entry point of the package (multistart mode finding, SMC, the distributed
log-likelihood, the benchmarks' batch runners) takes ``executor=``: ``None`` (local),
any :class:`concurrent.futures.Executor`, or a ``dask.distributed.Client``.
:func:`~pymc_odesens.inference.executor_choice.work_executor` turns that into one small
interface, :class:`WorkExecutor`, so that
every entry point treats them alike:

- :meth:`WorkExecutor.submit` a *work unit* (a picklable function and its arguments: what
  a worker needs to rebuild the model, a PEtab YAML path and options or a model factory,
  never compiled code; the worker's kernels come from its own disk cache, by their key),
  optionally on a named worker (Dask keeps a problem resident there);
- :meth:`WorkExecutor.gather` the results, in submission order;
- :attr:`WorkExecutor.n_workers` and :meth:`WorkExecutor.workers`;
- a worker lost while it runs a unit: the unit runs again on another worker, and a unit
  computes the same bits wherever it runs (seeded, deterministic), so the result is that
  of a run without the loss. A unit that keeps losing its workers, or a cluster without
  workers, ends in :class:`WorkerLostError` naming the workers; a cluster that cannot be
  reached in :class:`ClusterUnavailableError`. An exception raised by the unit itself is
  its result and propagates unchanged (it is never retried: it would be raised again).

The implementations:

- ``None`` with ``n_workers=1``: :class:`InProcessExecutor` (units run here, one after
  the other, at :meth:`~WorkExecutor.gather`);
- ``None`` with more workers: :class:`PoolExecutor` over a spawned
  :class:`~concurrent.futures.ProcessPoolExecutor` that it owns (a killed worker process
  breaks such a pool: the pool is made again and the unfinished units are submitted again,
  at most ``retries`` times);
- any :class:`~concurrent.futures.Executor`: :class:`PoolExecutor` over it (a thread pool,
  a process pool, MPI's ``MPIPoolExecutor``, Dask's ``client.get_executor()``); a broken
  pool that is not ours cannot be made again: :class:`WorkerLostError`;
- a ``dask.distributed.Client``: :class:`~pymc_odesens.inference.dask_executor.DaskExecutor`
  (``dask`` is imported only then).
"""

from __future__ import annotations

import abc
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import BrokenExecutor, Executor, ProcessPoolExecutor
from concurrent.futures import Future as ConcurrentFuture
from dataclasses import dataclass, field

__all__ = [
    "ClusterUnavailableError",
    "InProcessExecutor",
    "PoolExecutor",
    "Work",
    "WorkExecutor",
    "WorkerLostError",
]


class WorkerLostError(RuntimeError):
    """A work unit could not be run: its workers died (too often), or no worker remained.

    The message names the unit and the workers.
    """


class ClusterUnavailableError(RuntimeError):
    """The executor cannot run work any more: a Dask scheduler that cannot be reached (its
    cluster was shut down, the client closed) or a pool that was shut down. The message
    names it."""


@dataclass(eq=False)
class Work:
    """One submitted work unit: ``function(*args)``, its name, where it was asked to run,
    and the executor's handle of it (a future, or None before it ran in this process)."""

    function: Callable
    args: tuple
    name: str
    worker: str | None = None
    handle: object = None
    attempts: int = 1
    result: object = field(default=None, repr=False)
    done: bool = False
    pool: object = field(default=None, repr=False)
    """The pool it was submitted to (:class:`PoolExecutor`: renewed only once when it
    breaks, whichever thread notices first)."""


class WorkExecutor(abc.ABC):
    """The interface the entry points use to run work units (see the module's docstring).

    Use one as a context manager (or call :meth:`close`): an executor that
    :func:`work_executor` made (the local process pool) is shut down, one the caller
    passed in is left open.
    """

    affinity: bool = False
    """Whether ``submit(..., worker=...)`` runs the unit on that worker (Dask) or is only a
    label (elsewhere)."""

    @property
    @abc.abstractmethod
    def n_workers(self) -> int:
        """How many units can run at once (Dask: the workers' threads)."""

    def workers(self) -> tuple[str, ...]:
        """The names of the places a unit can be sent to with ``submit(..., worker=...)``:
        Dask's worker addresses; elsewhere ``"local-0"``, ``"local-1"``, ... (a name is
        then only a label: such executors place units where they like)."""
        return tuple(f"local-{i}" for i in range(self.n_workers))

    def share(self, value):
        """A handle of ``value`` to pass to many units instead of ``value`` itself.

        Dask keeps it as the result of a task that each worker fetches once (and that the
        scheduler runs again when every copy is lost); elsewhere it is ``value``.
        """
        return value

    @abc.abstractmethod
    def submit(self, function: Callable, *args, name: str, worker: str | None = None) -> Work:
        """Start ``function(*args)`` (a picklable function and arguments).

        Parameters
        ----------
        function : callable
        *args
        name : str
            The unit's name (in error messages; Dask's task key starts with it).
        worker : str, optional
            One of :meth:`workers`: run it there if that worker is alive, elsewhere if it
            is gone (Dask); other executors ignore it.
        """

    @abc.abstractmethod
    def gather(self, works: Sequence[Work]) -> list:
        """The results of ``works``, in their order.

        Raises
        ------
        WorkerLostError, ClusterUnavailableError
            See the module's docstring.
        Exception
            What a unit's function raised (the first, in ``works``' order).
        """

    def map(self, function: Callable, units: Sequence, *, name: str) -> list:
        """``[function(unit) for unit in units]``, run by the workers, in ``units``' order;
        the ``i``-th unit is named ``f"{name}-{i}"``."""
        return self.gather(
            [self.submit(function, u, name=f"{name}-{i}") for i, u in enumerate(units)]
        )

    def worker_of(self, work: Work) -> str | None:
        """The worker that ran ``work`` (after :meth:`gather`), when known."""
        return work.worker

    def close(self) -> None:  # noqa: B027  (most executors have nothing to shut down)
        """Shut down what this object made (never an executor or client passed in)."""

    def __enter__(self) -> WorkExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def description(self) -> str:
        """What runs the units, for messages and reports."""
        return f"{type(self).__name__} ({self.n_workers} workers)"


class InProcessExecutor(WorkExecutor):
    """Units run in this process, one after the other, when they are gathered."""

    @property
    def n_workers(self) -> int:
        return 1

    def workers(self) -> tuple[str, ...]:
        return ("this process",)

    def submit(self, function: Callable, *args, name: str, worker: str | None = None) -> Work:
        return Work(function, args, name, "this process")

    def gather(self, works: Sequence[Work]) -> list:
        for work in works:
            if not work.done:
                work.result = work.function(*work.args)
                work.done = True
        return [work.result for work in works]

    @property
    def description(self) -> str:
        return "this process"


def _max_workers(executor: Executor) -> int | None:
    """The worker count of the standard library's pools (their ``_max_workers``)."""
    value = getattr(executor, "_max_workers", None)
    return value if isinstance(value, int) and value > 0 else None


def _script_hint() -> str:
    """For a call from a script: the guard that spawned workers need (they import the
    script; Python refuses to start them from an unguarded top level, and the pool breaks
    before any work unit runs)."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if script is None or getattr(main, "__spec__", None) is not None:
        return ""
    return (
        f". If {os.path.basename(script)!r} makes this call at its top level, put it under "
        '`if __name__ == "__main__":` (each worker is a spawned process that imports the '
        "script; Python refuses to start workers from an unguarded top level, and their "
        "errors are printed above)"
    )


class PoolExecutor(WorkExecutor):
    """Units on a :class:`concurrent.futures.Executor`.

    Parameters
    ----------
    executor : concurrent.futures.Executor, optional
        None: a spawned process pool of ``n_workers`` processes, owned (shut down by
        :meth:`close`, made again when a killed process breaks it).
    n_workers : int, optional
        The worker count (default: the pool's own where the standard library says it,
        else 1).
    retries : int
        How many times a unit may be submitted again after its pool broke (owned pools).
    """

    def __init__(
        self, executor: Executor | None = None, *, n_workers: int | None = None, retries: int = 2
    ) -> None:
        self._owned = executor is None
        if self._owned:
            if n_workers is None:
                n_workers = os.cpu_count() or 1
            self._pool = self._new_pool(n_workers)
        else:
            self._pool = executor
        self._lock = threading.Lock()  # runs that share this executor gather from threads
        known = _max_workers(self._pool)
        self._n_workers = int(n_workers if n_workers is not None else (known or 1))
        self.retries = int(retries)

    def _new_pool(self, n_workers: int) -> Executor:
        # spawn: a fork of a process whose threads hold locks (numba, PyTensor) can deadlock
        return ProcessPoolExecutor(
            max_workers=n_workers, mp_context=multiprocessing.get_context("spawn")
        )

    @property
    def n_workers(self) -> int:
        return self._n_workers

    def submit(self, function: Callable, *args, name: str, worker: str | None = None) -> Work:
        work = Work(function, args, name, worker)
        work.handle = self._submit(work)
        return work

    def _submit(self, work: Work) -> ConcurrentFuture:
        try:
            work.pool = self._pool
            return work.pool.submit(work.function, *work.args)
        except BrokenExecutor:
            if not self._owned:
                raise self._lost([work]) from None
            work.pool = self._renew(work.pool)
            return work.pool.submit(work.function, *work.args)
        except RuntimeError as error:  # "cannot schedule new futures after shutdown"
            raise ClusterUnavailableError(
                f"{self.description}: cannot run work unit {work.name!r}: {error}"
            ) from error

    def _renew(self, broken: Executor) -> Executor:
        """A working pool in place of ``broken`` (made once, by the first thread that asks;
        the others get the new one)."""
        with self._lock:
            if self._pool is broken:
                broken.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool(self._n_workers)
            return self._pool

    def _lost(self, works: Sequence[Work]) -> WorkerLostError:
        names = ", ".join(repr(w.name) for w in works[:5]) + (" ..." if len(works) > 5 else "")
        if self._owned:
            return WorkerLostError(
                f"{self.description}: a worker process died while running work unit(s) "
                f"{names}, each submitted {self.retries + 1} times (retries={self.retries}); "
                "a unit that kills its process every time (memory, a crash in compiled code) "
                "is not run again" + _script_hint()
            )
        return WorkerLostError(
            f"{self.description}: the executor passed in broke (a worker process died) "
            f"while running work unit(s) {names}; it is not this package's to make again: "
            "pass executor=None (local processes, made again when one dies) or a Dask client"
        )

    def gather(self, works: Sequence[Work]) -> list:
        pending = [w for w in works if not w.done]
        while pending:
            broken = []
            for work in pending:
                try:
                    work.result = work.handle.result()
                    work.done = True
                except BrokenExecutor:
                    broken.append(work)
            if not broken:
                break
            if not self._owned or any(w.attempts > self.retries for w in broken):
                raise self._lost(broken)
            for work in broken:
                work.attempts += 1
                work.pool = self._renew(work.pool)
                work.handle = work.pool.submit(work.function, *work.args)
            pending = broken
        return [w.result for w in works]

    def close(self) -> None:
        if self._owned:
            self._pool.shutdown(wait=True, cancel_futures=True)

    @property
    def description(self) -> str:
        kind = "local worker processes" if self._owned else type(self._pool).__name__
        return f"{kind} ({self._n_workers} workers)"
