"""The executor for what the user passed as ``executor=``: :func:`work_executor`.

A ``dask.distributed.Client`` is recognised without importing Dask (whoever made a Client
has imported it), and only then is :mod:`pymc_odesens.inference.dask_executor` (which
imports ``distributed``) loaded. The interface and the local implementations are in
:mod:`pymc_odesens.inference.executors`.
"""

from __future__ import annotations

import sys
from concurrent.futures import Executor

from pymc_odesens.inference.executors import (
    InProcessExecutor,
    PoolExecutor,
    WorkExecutor,
)

__all__ = ["check_executor", "work_executor"]


def _dask_client(executor) -> object | None:
    """``executor`` if it is a ``dask.distributed.Client`` (checked without importing dask:
    whoever made a Client has imported it)."""
    distributed = sys.modules.get("distributed")
    if distributed is not None and isinstance(executor, distributed.Client):
        return executor
    return None


def check_executor(executor) -> None:
    """Raise the :class:`TypeError` of :func:`work_executor` for an ``executor=`` of no
    known type, before an entry point does costly work (nothing is started).

    Raises
    ------
    TypeError
        ``executor`` is not None, a ``concurrent.futures.Executor``, a
        ``dask.distributed.Client`` or a :class:`WorkExecutor` (its type named).
    """
    if executor is None or isinstance(executor, WorkExecutor | Executor):
        return
    if _dask_client(executor) is not None:
        return
    raise TypeError(
        "executor: expected None, a concurrent.futures.Executor or a dask.distributed.Client, "
        f"got {type(executor).__module__}.{type(executor).__name__}"
    )


def work_executor(
    executor=None,
    *,
    n_workers: int | None = None,
    retries: int = 2,
    worker_timeout: float = 60.0,
) -> WorkExecutor:
    """The :class:`WorkExecutor` for what the user passed as ``executor=``.

    Parameters
    ----------
    executor : None, concurrent.futures.Executor, dask.distributed.Client or WorkExecutor
        ``None``: this process when ``n_workers`` is 1, else local worker processes
        (spawned, owned: shut down by :meth:`WorkExecutor.close`). A ``WorkExecutor`` is
        returned as it is.
    n_workers : int, optional
        The number of local processes for ``executor=None`` (default: the CPU count), or
        the worker count of an executor that does not tell it.
    retries : int
        Local process pools: how many times a unit whose process died is submitted again.
        Dask: its scheduler runs a unit again on another worker when its worker dies,
        until the unit was on ``distributed.scheduler.allowed-failures`` (3) workers that
        died.
    worker_timeout : float
        Dask: seconds a unit may wait while the cluster has no worker at all (its workers
        died or left) before :class:`WorkerLostError` names the workers that were lost.

    Raises
    ------
    TypeError
        ``executor`` is none of these (its type named).
    ValueError
        ``n_workers`` is not a positive integer, ``retries`` negative or ``worker_timeout``
        not positive.
    """
    check_executor(executor)
    if isinstance(executor, WorkExecutor):
        return executor
    if n_workers is not None and (
        isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1
    ):
        raise ValueError(f"n_workers: expected a positive integer, got {n_workers!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries: expected a non-negative integer, got {retries!r}")
    if not (isinstance(worker_timeout, int | float) and worker_timeout > 0):
        raise ValueError(f"worker_timeout: expected a positive number, got {worker_timeout!r}")
    client = _dask_client(executor)
    if client is not None:
        from pymc_odesens.inference.dask_executor import DaskExecutor

        return DaskExecutor(client, worker_timeout=worker_timeout)
    if executor is None:
        if n_workers == 1:
            return InProcessExecutor()
        return PoolExecutor(None, n_workers=n_workers, retries=retries)
    return PoolExecutor(executor, n_workers=n_workers, retries=retries)
