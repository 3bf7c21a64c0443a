"""Work units on a Dask cluster: :class:`DaskExecutor` over a ``dask.distributed.Client``.

Made by :func:`~pymc_odesens.inference.executors.work_executor` when ``executor=`` is a
Client (``pip install "pymc_odesens[distributed]"``); this module is the only one that
imports ``distributed``, and only then.

Why ``client.submit`` / ``client.gather`` and not the ``concurrent.futures`` view that
``client.get_executor()`` gives (which also works, as any executor):

- worker affinity: a unit may be sent to the worker that keeps a problem resident
  (``workers=[address]``) and still run elsewhere when that worker is gone
  (``allow_other_workers=True``): what the distributed log-likelihood needs;
- a problem's description is shared as a task of its own: each worker fetches it once,
  the units carry a reference to it, and the scheduler makes it again if every worker
  that held it is lost (``scatter``'s data would be lost for good);
- one ``gather`` for all results (one round trip), in submission order;
- each unit's own task key (``<name>-<random>``: ``pure=False`` in effect, a unit is never
  taken for another with the same arguments; the dashboard shows the names);
- retries: not Dask's ``retries=`` (which runs a task again after it *raised*, and a unit
  that raised will raise again), but the scheduler's own rescheduling of a unit whose
  worker died, up to ``distributed.scheduler.allowed-failures`` workers (Dask's
  ``KilledWorker`` then becomes :class:`~pymc_odesens.inference.executors.WorkerLostError`,
  naming the unit and the last worker), and a watchdog for a cluster left without workers.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence

import distributed

from pymc_odesens.inference.executors import (
    ClusterUnavailableError,
    Work,
    WorkerLostError,
    WorkExecutor,
)

__all__ = ["DaskExecutor"]

_POLL_SECONDS = 0.5


def _names(works: Sequence[Work]) -> str:
    shown = ", ".join(repr(w.name) for w in works[:5])
    return shown + (f" and {len(works) - 5} more" if len(works) > 5 else "")


class _Countdown:
    """Set when ``n`` futures are done (their done-callbacks run in Dask's threads)."""

    def __init__(self, n: int) -> None:
        self._left = n
        self._lock = threading.Lock()
        self._event = threading.Event()
        if n == 0:
            self._event.set()

    def count(self, _future) -> None:
        with self._lock:
            self._left -= 1
            if self._left <= 0:
                self._event.set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)


def _shared_value(value):
    return value


class DaskExecutor(WorkExecutor):
    """Work units as tasks of a Dask cluster (see the module's docstring).

    Parameters
    ----------
    client : dask.distributed.Client
        Left open by :meth:`close`: it is the caller's.
    worker_timeout : float
        Seconds a unit may wait while the cluster has no worker before
        :class:`~pymc_odesens.inference.executors.WorkerLostError`.
    """

    affinity = True

    def __init__(self, client: distributed.Client, *, worker_timeout: float = 60.0) -> None:
        self.client = client
        self.worker_timeout = float(worker_timeout)
        self.address = self._scheduler_address()
        self._seen_workers: set[str] = set()

    def _scheduler_address(self) -> str:
        scheduler = getattr(self.client, "scheduler", None)
        return str(getattr(scheduler, "address", None) or "an unknown scheduler")

    def _gone(self, error: BaseException | None = None) -> ClusterUnavailableError:
        why = f": {type(error).__name__}: {error}" if error is not None else ""
        return ClusterUnavailableError(
            f"the Dask cluster at {self.address} cannot be reached (client status "
            f"{self.client.status!r}){why}; is it shut down, or the client closed?"
        )

    def _nthreads(self) -> dict[str, int]:
        """Each worker's thread count, asked of the scheduler."""
        if self.client.status in ("closing", "closed"):
            raise self._gone()
        try:
            threads = dict(self.client.nthreads())
        except (OSError, distributed.client.ClosedClientError) as error:
            raise self._gone(error) from error
        self._seen_workers.update(threads)
        return threads

    @property
    def n_workers(self) -> int:
        return sum(self._nthreads().values())

    def workers(self) -> tuple[str, ...]:
        """One entry per worker thread: a worker with ``k`` threads is named ``k`` times."""
        return tuple(a for a, k in sorted(self._nthreads().items()) for _ in range(k))

    def share(self, value):
        """A task that returns ``value``: the units that take it fetch it from a worker
        that holds it (and keep a copy); when every holder is lost, the scheduler runs
        the task again (scattered data would be lost for good)."""
        try:
            return self.client.submit(
                _shared_value, value, key=f"shared-{uuid.uuid4().hex}", pure=False
            )
        except (OSError, distributed.client.ClosedClientError) as error:
            raise self._gone(error) from error

    def submit(self, function: Callable, *args, name: str, worker: str | None = None) -> Work:
        work = Work(function, args, name, worker)
        options = {"workers": [worker], "allow_other_workers": True} if worker else {}
        try:
            work.handle = self.client.submit(
                function, *args, key=f"{name}-{uuid.uuid4().hex}", pure=False, **options
            )
        except (OSError, distributed.client.ClosedClientError) as error:
            raise self._gone(error) from error
        return work

    def _await_workers(self, works: Sequence[Work]) -> None:
        """Return when the cluster has a worker; raise when it has had none for
        ``worker_timeout`` seconds (or cannot be reached)."""
        began = time.monotonic()
        while not self._nthreads():
            if time.monotonic() - began > self.worker_timeout:
                lost = ", ".join(sorted(self._seen_workers)) or "none seen"
                what = f"work unit(s) {_names(works)}" if works else "no work"
                raise WorkerLostError(
                    f"the Dask cluster at {self.address} has had no worker for "
                    f"{self.worker_timeout:g} s (worker_timeout): the workers {lost} were "
                    f"lost and none took their place; {what} could not run"
                )
            time.sleep(_POLL_SECONDS)

    def gather(self, works: Sequence[Work]) -> list:
        futures = [w.handle for w in works]
        finished = _Countdown(len(futures))
        for future in futures:
            future.add_done_callback(finished.count)
        no_worker_since = None
        while not finished.wait(_POLL_SECONDS):
            if self.client.status not in ("running", "connecting"):
                raise self._gone()
            if self._nthreads():
                no_worker_since = None
            elif no_worker_since is None:
                no_worker_since = time.monotonic()
            elif time.monotonic() - no_worker_since > self.worker_timeout:
                unfinished = [w for w, f in zip(works, futures) if not f.done()]
                self.client.cancel([w.handle for w in unfinished])
                self._await_workers(unfinished)  # raises: none for worker_timeout already
        try:
            results = self.client.gather(futures)
        except distributed.scheduler.KilledWorker as error:
            self.client.cancel(futures)
            by_key = {f.key: w for w, f in zip(works, futures)}
            work = by_key.get(error.task)
            name = repr(work.name) if work is not None else repr(error.task)
            raise WorkerLostError(
                f"work unit {name} was running on {error.allowed_failures + 1} workers of the "
                f"Dask cluster at {self.address} that died, the last "
                f"{error.last_worker.address}; it is not run again (the limit is "
                "distributed.scheduler.allowed-failures): a unit that kills every worker it "
                "runs on (memory, a crash in compiled code) would kill the next one too"
            ) from error
        except distributed.client.FutureCancelledError as error:
            raise self._gone(error) from error
        except (OSError, distributed.client.ClosedClientError) as error:
            raise self._gone(error) from error
        except BaseException:
            self.client.cancel(futures)
            raise
        for work, result in zip(works, results):
            work.result = result
            work.done = True
        return list(results)

    def worker_of(self, work: Work) -> str | None:
        holders = self.client.who_has([work.handle]).get(work.handle.key, ())
        return holders[0] if holders else None

    @property
    def description(self) -> str:
        return f"the Dask cluster at {self.address}"
