"""A log-likelihood over many experiments, evaluated by the workers of a cluster.

:class:`DistributedLogLikelihood` evaluates a log-likelihood that is a sum over experiments
(a PEtab problem's conditions, or any :class:`~pymc_odesens.inference.resident_likelihood.
LikelihoodSource`) on the workers of an executor (:mod:`pymc_odesens.inference.executor_choice`;
a Dask client for a cluster). The experiments are cut once into chunks
(:mod:`pymc_odesens.inference.load_balance`); each worker keeps the problem and the compiled
functions of its chunks resident (:mod:`pymc_odesens.inference.resident_likelihood`), so
that one evaluation ships only the parameter vector and the chunk numbers to each worker
thread and returns each chunk's log-likelihood and gradient. The sum is taken here, over
the chunks in their order.

Guarantees:

- the value and gradient depend on the chunks only: bit for bit the same for any executor
  (this process, local processes, a Dask cluster of any size) with the same ``n_chunks``,
  and when a worker is lost on the way; with ``n_chunks=1`` they are those of the
  problem's own log-likelihood function;
- a worker lost during an evaluation: its task runs again on another worker (Dask's
  scheduler does that), which builds what it needs, and the evaluation returns the same
  result; the lost worker's chunks are given to the others for the next evaluations. A
  task that kills its workers again and again, or a cluster left without workers for
  ``worker_timeout`` seconds, raises :class:`~pymc_odesens.inference.executors.
  WorkerLostError` naming the workers, and every later call raises it again (a sampler
  that turns errors into divergences, as nutpie does, cannot go on with wrong numbers);
  a cluster that cannot be reached raises :class:`~pymc_odesens.inference.executors.
  ClusterUnavailableError`.
- load balance: each worker times each chunk; after the 2nd, 4th, 8th, ... evaluation
  chunks move from the most to the least loaded worker thread when that shortens an
  evaluation by at least 10 % (Torsten's dynamic load balance: measured cost, not a guess).

Inside a PyMC model the likelihood is :meth:`DistributedLogLikelihood.tensor` (an Op with
a numba implementation: nutpie and PyTensor's NUMBA mode call it through one object-mode
callback, :mod:`pymc_odesens.ops.distributed_numba`).
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass

import numpy as np

from pymc_odesens.inference.executor_choice import work_executor
from pymc_odesens.inference.executors import (
    ClusterUnavailableError,
    InProcessExecutor,
    WorkerLostError,
)
from pymc_odesens.inference.load_balance import (
    even_assignment,
    experiment_chunks,
    makespan,
    rebalanced,
)
from pymc_odesens.inference.resident_likelihood import (
    LikelihoodSource,
    PartitionedSource,
    evaluate_chunks,
)
from pymc_odesens.ops.failures import record_failure

__all__ = ["DEFAULT_MAX_CHUNKS", "BalanceReport", "DistributedLogLikelihood"]

DEFAULT_MAX_CHUNKS = 64
"""``n_chunks`` by default: one chunk per experiment, at most this many."""

_REBALANCE_GAIN = 0.9  # adopt a new assignment when it takes at most 90 % of the time


@dataclass(frozen=True)
class BalanceReport:
    """Where the chunks are and what they cost (:attr:`DistributedLogLikelihood.balance`).

    Attributes
    ----------
    slots : tuple of str
        The worker threads (a Dask worker's address once per thread).
    owner : numpy.ndarray of int, (C,)
        Each chunk's slot.
    costs : numpy.ndarray, (C,)
        Each chunk's measured seconds per evaluation with gradient (NaN: not measured).
    loads : numpy.ndarray, (len(slots),)
        Each slot's summed cost.
    evaluations : int
    rebalances : int
        Assignments adopted after measuring.
    relocations : int
        Worker tasks that ran on another worker than planned (a lost worker's).
    """

    slots: tuple
    owner: np.ndarray
    costs: np.ndarray
    loads: np.ndarray
    evaluations: int
    rebalances: int
    relocations: int

    @property
    def imbalance(self) -> float:
        """Largest over mean load (1: perfect balance; NaN before measuring)."""
        mean = float(np.mean(self.loads)) if len(self.loads) else math.nan
        return float(np.max(self.loads)) / mean if mean > 0 else math.nan


class DistributedLogLikelihood:
    """A log-likelihood summed over experiments, evaluated by an executor's workers.

    See the module's docstring for what is guaranteed.

    Parameters
    ----------
    source : LikelihoodSource
        The problem, as a worker rebuilds it (:meth:`pymc_odesens.petab.PetabProblem.
        likelihood_source` for PEtab).
    executor : None, concurrent.futures.Executor or dask.distributed.Client
        ``None``: the chunks are evaluated in this process (the reference: the same bits as
        a cluster with the same chunks).
    n_chunks : int, optional
        Into how many chunks the experiments are cut (default: one per experiment, at most
        :data:`DEFAULT_MAX_CHUNKS`). The unit of load balance and of the sum: results are
        bit for bit the same for equal ``n_chunks``. Use a few chunks per worker thread.
    on_failure : {"raise", "reject"}
        A solver failure in a chunk: raise it (``OdeSolverError`` and subclasses), or
        ``-inf`` with a zero gradient, counted as ``ode_solution`` counts them
        (:func:`pymc_odesens.failure_counts`); ``"reject"`` is what a PyMC model needs.
    rebalance : bool
        Move chunks by their measured cost (see the module's docstring).
    worker_timeout : float
        Seconds to wait while a Dask cluster has no worker, before
        :class:`~pymc_odesens.inference.executors.WorkerLostError`.

    Raises
    ------
    TypeError
        ``source`` is not a :class:`~pymc_odesens.inference.resident_likelihood.
        LikelihoodSource`, or ``executor`` of an unknown type.
    ValueError
        ``n_chunks`` outside 1 to the number of experiments, an unknown ``on_failure``.
    """

    def __init__(
        self,
        source: LikelihoodSource,
        executor=None,
        *,
        n_chunks: int | None = None,
        on_failure: str = "raise",
        rebalance: bool = True,
        worker_timeout: float = 60.0,
    ) -> None:
        if not isinstance(source, LikelihoodSource):
            raise TypeError(
                "source: expected a LikelihoodSource (key, name, n_experiments, n_parameters, "
                f"build(), experiment_labels()), got {type(source).__name__}"
            )
        if on_failure not in ("raise", "reject"):
            raise ValueError(f"on_failure: expected 'raise' or 'reject', got {on_failure!r}")
        self.source = source
        if n_chunks is None:
            n_chunks = min(source.n_experiments, DEFAULT_MAX_CHUNKS)
        self.chunks = experiment_chunks(source.n_experiments, n_chunks)
        self.on_failure = on_failure
        self.rebalance = bool(rebalance)
        self.worker_timeout = worker_timeout
        self._executor_argument = executor
        self._lock = threading.Lock()
        self._connect(executor)
        n = len(self.chunks)
        self._costs = {True: np.full(n, math.nan), False: np.full(n, math.nan)}
        self._measured = {True: np.zeros(n, bool), False: np.zeros(n, bool)}
        self._next_rebalance = 2
        self.evaluations = 0
        self.gradient_evaluations = 0
        self.rebalances = 0
        self.relocations = 0
        self._error: BaseException | None = None

    # the executor ----------------------------------------------------------------------
    def _connect(self, executor) -> None:
        """(Re)make the executor for this process."""
        self._executor = work_executor(
            executor,
            n_workers=1 if executor is None else None,
            worker_timeout=self.worker_timeout,
        )
        self._owns_executor = executor is None or self._executor is not executor
        self._pid = os.getpid()
        self._shared = None
        self._slots: tuple[str, ...] = ()
        self._owner: np.ndarray | None = None
        self._ran_on: dict[int, str] = {}
        self._refresh = True

    @property
    def executor(self):
        """The :class:`~pymc_odesens.inference.executors.WorkExecutor` in use."""
        return self._executor

    @property
    def n_chunks(self) -> int:
        return len(self.chunks)

    def _reconnect_after_fork(self) -> None:
        """A process forked from ours (``pm.sample(cores=...)``) has a copy of our client,
        whose connection lives in the parent: connect again, by the scheduler's address."""
        address = getattr(self._executor, "address", None)
        if address is not None:
            import distributed

            self._connect(distributed.Client(address, set_as_default=False))
            self._owns_executor = True
            self._own_client = self._executor.client
        elif isinstance(self._executor, InProcessExecutor):
            self._connect(None)
        else:
            raise RuntimeError(
                f"{self.source.name}: this distributed log-likelihood was made in process "
                f"{self._pid} with {self._executor.description}, which a forked process "
                "cannot use; use a Dask client (it connects again by address) or sample "
                "with cores=1"
            )

    # the assignment ---------------------------------------------------------------------
    def _assign(self) -> None:
        """Ask for the workers and give every chunk a slot (under the lock)."""
        slots = self._executor.workers()
        if not slots:
            raise WorkerLostError(f"{self._executor.description} has no worker")
        n_chunks = len(self.chunks)
        if self._owner is None:
            owner = even_assignment(n_chunks, len(slots))
        else:
            # keep each chunk with its worker (its function is compiled there) where that
            # worker is still there; the others are given out by cost
            free: dict[str, list[int]] = {}
            for s, address in enumerate(slots):
                free.setdefault(address, []).append(s)
            owner = np.full(n_chunks, -1, dtype=np.int64)
            for c in range(n_chunks):
                address = self._ran_on.get(c, self._slots[self._owner[c]])
                candidates = free.get(address)
                if candidates:
                    # spread a worker's chunks over its threads
                    owner[c] = candidates[c % len(candidates)]
            costs = self._cost_estimate(True)
            owner = rebalanced(costs, owner, len(slots))
        self._slots = tuple(slots)
        self._owner = owner
        self._ran_on: dict[int, str] = {}
        self._refresh = False

    def _cost_estimate(self, gradient: bool) -> np.ndarray:
        """Measured costs; unmeasured chunks at the mean of the measured (or 1)."""
        costs = self._costs[gradient].copy()
        known = np.isfinite(costs)
        costs[~known] = float(np.mean(costs[known])) if known.any() else 1.0
        return costs

    def _maybe_rebalance(self, gradient: bool) -> None:
        """After the 2nd, 4th, 8th, ... evaluation (under the lock)."""
        if not self.rebalance or self.evaluations < self._next_rebalance:
            return
        if not self._measured[gradient].all():
            return
        self._next_rebalance *= 2
        costs = self._costs[gradient]
        proposal = rebalanced(costs, self._owner, len(self._slots))
        n_slots = len(self._slots)
        if makespan(costs, proposal, n_slots) <= _REBALANCE_GAIN * makespan(
            costs, self._owner, n_slots
        ):
            self._owner = proposal
            self.rebalances += 1

    @property
    def balance(self) -> BalanceReport:
        """The current assignment and the measured costs (with gradient)."""
        with self._lock:
            owner = (
                self._owner.copy()
                if self._owner is not None
                else np.zeros(len(self.chunks), np.int64)
            )
            slots = self._slots or ("(not yet assigned)",)
            costs = self._costs[True].copy()
            loads = np.bincount(owner, weights=np.nan_to_num(costs), minlength=len(slots))
            return BalanceReport(
                slots, owner, costs, loads, self.evaluations, self.rebalances, self.relocations
            )

    # evaluation -----------------------------------------------------------------------------
    def _check_x(self, x) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.shape != (self.source.n_parameters,):
            raise ValueError(
                f"{self.source.name}: x must have shape ({self.source.n_parameters},) (the "
                f"estimated parameters), got {x.shape}"
            )
        return x

    def check(self) -> None:
        """Raise the error that ended this log-likelihood's use, if any (a lost cluster):
        after a sampler that turns errors of the log-density into divergences (nutpie)."""
        if self._error is not None:
            raise self._error

    def __call__(self, x, gradient: bool = True) -> tuple[float, np.ndarray | None]:
        """The log-likelihood at ``x`` and, with ``gradient``, its gradient.

        Returns
        -------
        value : float
            ``-inf`` when a chunk's is (a simulation that is not positive on a log scale;
            with ``on_failure="reject"`` a solver failure); the gradient is then zero.
        gradient : numpy.ndarray, (n_parameters,) or None
        """
        self.check()
        x = self._check_x(x)
        try:
            return self._evaluate(x, bool(gradient))
        except (WorkerLostError, ClusterUnavailableError) as error:
            self._error = error
            raise

    def value(self, x) -> float:
        """The log-likelihood at ``x`` (no gradient is computed)."""
        return self(x, gradient=False)[0]

    def value_and_gradient(self, x) -> tuple[float, np.ndarray]:
        """The log-likelihood at ``x`` and its gradient."""
        return self(x, gradient=True)

    def _plan(self, gradient: bool):
        with self._lock:
            if os.getpid() != self._pid:
                self._reconnect_after_fork()
            if self._shared is None:
                self._shared = self._executor.share(PartitionedSource(self.source, self.chunks))
            if self._refresh or self._owner is None:
                self._assign()
            number = self.evaluations
            self.evaluations += 1
            self.gradient_evaluations += gradient
            return number, self._shared, self._slots, self._owner.copy()

    def _evaluate(self, x: np.ndarray, gradient: bool) -> tuple[float, np.ndarray | None]:
        number, shared, slots, owner = self._plan(gradient)
        reject = self.on_failure == "reject"
        works = []
        for s, address in enumerate(slots):
            chunks = tuple(int(c) for c in np.flatnonzero(owner == s))
            if chunks:
                work = self._executor.submit(
                    evaluate_chunks,
                    shared,
                    chunks,
                    x,
                    gradient,
                    reject,
                    name=f"{self.source.name}-loglik-{number}-{s}",
                    worker=address,
                )
                works.append((address, work))
        results = self._executor.gather([w for _, w in works])
        n_chunks, n_x = len(self.chunks), len(x)
        values = np.full(n_chunks, math.nan)
        gradients = np.zeros((n_chunks, n_x)) if gradient else None
        failures = []
        with self._lock:
            costs, measured = self._costs[gradient], self._measured[gradient]
            any_moved = False
            for (planned, _), slot in zip(works, results):
                # a unit placed on a worker that ran elsewhere: its worker was lost
                moved = self._executor.affinity and slot.worker != planned
                if moved:
                    any_moved = True
                    self.relocations += 1
                for r in slot.results:
                    values[r.chunk] = r.value
                    if gradient:
                        gradients[r.chunk] = r.gradient
                    if r.failure is not None:
                        failures.append((r.chunk, slot.worker, r.failure))
                    if moved:
                        self._ran_on[r.chunk] = slot.worker
                    if not r.first or not measured[r.chunk]:
                        old = costs[r.chunk]
                        fresh = not measured[r.chunk] or math.isnan(old)
                        costs[r.chunk] = r.seconds if fresh else 0.5 * (old + r.seconds)
                        measured[r.chunk] |= not r.first
            if any_moved:
                self._refresh = True
            else:
                self._maybe_rebalance(gradient)
        missing = np.flatnonzero(np.isnan(values))
        if missing.size:  # never: every chunk has an owner; a wrong number is worse
            raise RuntimeError(f"{self.source.name}: chunks {missing.tolist()} were not evaluated")
        for chunk, worker, error in failures:
            labels = self.source.experiment_labels()
            where = ", ".join(labels[e] for e in self.chunks[chunk][:3])
            more = len(self.chunks[chunk]) - 3
            where += f" and {more} more" if more > 0 else ""
            record_failure(error, f"{self.source.name} (experiments {where}; worker {worker})")
        total = 0.0
        for v in values:  # in chunk order: the same bits wherever each chunk ran
            total += v
        if gradient:
            grad = np.zeros(n_x)
            for row in gradients:
                grad += row
        if math.isinf(total) and total < 0:
            return -math.inf, (np.zeros(n_x) if gradient else None)
        return total, (grad if gradient else None)

    # PyTensor ------------------------------------------------------------------------------
    def tensor(self, x):
        """The log-likelihood as a PyTensor scalar of ``x`` (a vector of
        ``n_parameters``), differentiable; in NUMBA mode and under nutpie through
        :mod:`pymc_odesens.ops.distributed_numba`. A graph that needs no gradient
        evaluates the value alone."""
        from pymc_odesens.ops.distributed_likelihood_op import DistributedLogLikelihoodOp

        return DistributedLogLikelihoodOp(self, gradient=True)(x)[0]

    # lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the workers' resident copy of the problem's description and shut down
        what this object made (never a client passed in)."""
        with self._lock:
            self._shared = None
            if self._owns_executor:
                self._executor.close()
            client = getattr(self, "_own_client", None)
            if client is not None:
                client.close()
                self._own_client = None

    def __enter__(self) -> DistributedLogLikelihood:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self) -> dict:
        """Pickled (``pm.sample(cores=...)`` with spawn or forkserver, ``sample_smc``): the
        source, the chunks and what was measured; a Dask client by its scheduler's address
        (the copy connects again)."""
        address = getattr(self._executor, "address", None)
        if address is None and not isinstance(self._executor, InProcessExecutor):
            raise TypeError(
                f"{self.source.name}: a distributed log-likelihood on "
                f"{self._executor.description} cannot be sent to another process; use a Dask "
                "client (its copy connects again by address) or sample with cores=1"
            )
        with self._lock:
            return {
                "source": self.source,
                "n_chunks": len(self.chunks),
                "on_failure": self.on_failure,
                "rebalance": self.rebalance,
                "worker_timeout": self.worker_timeout,
                "address": address,
                "costs": {k: v.copy() for k, v in self._costs.items()},
                "measured": {k: v.copy() for k, v in self._measured.items()},
            }

    def __setstate__(self, state: dict) -> None:
        executor = None
        if state["address"] is not None:
            import distributed

            executor = distributed.Client(state["address"], set_as_default=False)
        self.__init__(
            state["source"],
            executor,
            n_chunks=state["n_chunks"],
            on_failure=state["on_failure"],
            rebalance=state["rebalance"],
            worker_timeout=state["worker_timeout"],
        )
        self._owns_executor = True
        self._own_client = executor
        self._costs = state["costs"]
        self._measured = state["measured"]

    def __repr__(self) -> str:
        return (
            f"DistributedLogLikelihood({self.source.name!r}: {self.source.n_experiments} "
            f"experiments in {len(self.chunks)} chunks on {self._executor.description}, "
            f"{self.evaluations} evaluations)"
        )
