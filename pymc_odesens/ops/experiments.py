"""Solving a batch of experiments (states, sensitivities, adjoint passes) in parallel threads.

The numerics of the Ops live here, outside them: each function takes numpy
arrays with a leading experiment axis E and returns numpy arrays. The
compiled solvers release the GIL, so experiments run concurrently.

A failed solve either raises (``on_failure="raise"``) or is recorded
(:mod:`pymc_odesens.ops.failures`) and marked in the ``failed`` flags, with
finite placeholder values (the initial state repeated, zero sensitivities and
gradients) so that no NaN reaches a sampler. A gradient pass that fails after a
successful solve is marked in its own flags (``backward_failed``), which reject
the proposal as well (:mod:`pymc_odesens.ops.rejection`).
"""

from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from pymc_odesens.codegen import compile_kernels
from pymc_odesens.model import OdeSystem
from pymc_odesens.ops.failures import record_failure
from pymc_odesens.sensitivity import AdjointCheckpoints, adjoint_forward
from pymc_odesens.sensitivity.adjoint_controls import resolve_adjoint_controls
from pymc_odesens.sensitivity.forward import forward_sensitivities
from pymc_odesens.sensitivity.pbs_options import PbsOptions
from pymc_odesens.sensitivity.pbs_report import BRANCH_NAMES
from pymc_odesens.solvers import OdeSolverError, solve
from pymc_odesens.solvers.controls import resolve_controls
from pymc_odesens.solvers.integrate import EventRecord
from pymc_odesens.solvers.solve import OdeProblem, prepare_problem, validate_vector

__all__ = [
    "OdeSpec",
    "solve_states",
    "solve_forward",
    "solve_pbs",
    "solve_adjoint_forward",
    "adjoint_vjp",
    "solve_discrete_adjoint_forward",
    "discrete_adjoint_vjp",
    "experiment_threads",
    "set_experiment_threads",
]

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()
_threads: int | None = None  # set_experiment_threads' value; None: the default
THREADS_VARIABLE = "PYMC_ODESENS_EXPERIMENT_THREADS"


def experiment_threads() -> int:
    """How many threads solve the experiments of one batch in this process.

    The value given to :func:`set_experiment_threads`, else the environment variable
    ``PYMC_ODESENS_EXPERIMENT_THREADS``, else ``os.cpu_count()``.
    """
    if _threads is not None:
        return _threads
    text = os.environ.get(THREADS_VARIABLE, "").strip()
    if text:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(
                f"${THREADS_VARIABLE}: expected a positive integer (threads that solve a "
                f"batch's experiments), got {text!r}"
            )
        return value
    return max(1, os.cpu_count() or 1)


def set_experiment_threads(threads: int | None) -> None:
    """Set how many threads solve the experiments of one batch in this process.

    Parameters
    ----------
    threads : int or None
        A positive number of threads; None restores the default
        (``$PYMC_ODESENS_EXPERIMENT_THREADS``, else ``os.cpu_count()``). Several processes
        on one machine (Dask workers, chains in processes) each use this many: a Dask
        worker that holds a distributed log-likelihood's experiments sets it to its own
        thread count, so that workers sharing a node do not oversubscribe its cores.
        Batches already running finish on the pool they started with.
    """
    global _executor, _threads
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise ValueError(f"threads: expected a positive integer or None, got {threads!r}")
    with _executor_lock:
        _threads = threads
        old, _executor = _executor, None
    if old is not None:
        old.shutdown(wait=False)


def _map(function, count: int) -> list:
    """``[function(e) for e in range(count)]``, in threads when there are several.

    One pool for the process, made on first use; several threads may call this at once
    (their experiments share the pool's workers; each result lands in its own slot).
    """
    global _executor
    if count == 1 or experiment_threads() == 1:
        return [function(i) for i in range(count)]
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(
                max_workers=experiment_threads(), thread_name_prefix="pymc_odesens"
            )
        executor = _executor
    return list(executor.map(function, range(count)))


def _forget_executor_in_child() -> None:
    """A forked process (``pm.sample(cores=...)``) must not reuse the parent's pool.

    Its worker threads do not exist in the child, so work submitted to the
    inherited pool would wait forever; the child makes its own on first use. The
    module's locks are replaced too: another thread may have held one at the fork.
    """
    global _executor, _executor_lock, _RESOLVED_LOCK
    _executor = None
    _executor_lock = threading.Lock()
    _RESOLVED_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_executor_in_child)


@dataclass(frozen=True, eq=False)
class OdeSpec:
    """Everything about a batch of solves that is fixed when the graph is built.

    Attributes
    ----------
    system : OdeSystem
    times : numpy.ndarray, shape (T,) or (E, T)
        Output times, shared or one row per experiment.
    t0 : float
    method : str
    route : {"forward", "adjoint", "none", "pbs", "pbsr", "exp"}
    controls : dict
        Solver controls (Stan's names) for the route.
    n_experiments : int
    y0_from_system : bool
        The initial state is the system's ``y0(p)`` (no ``y0`` input).
    wrt_y0 : bool
        Gradients with respect to ``y0`` are needed.
    on_failure : {"reject", "raise"}
    pbs_options : PbsOptions or None
        Options of the Peano-Baker routes (``route`` "pbs", "pbsr" or "exp").
    """

    system: OdeSystem
    times: np.ndarray
    t0: float
    method: str
    route: str
    controls: dict
    n_experiments: int
    y0_from_system: bool
    wrt_y0: bool
    on_failure: str
    pbs_options: PbsOptions | None = None

    def times_of(self, experiment: int) -> np.ndarray:
        """Output times of one experiment."""
        return self.times if self.times.ndim == 1 else self.times[experiment]

    @property
    def n_times(self) -> int:
        return self.times.shape[-1]

    def label(self, experiment: int) -> str:
        who = f"experiment {experiment} of " if self.n_experiments > 1 else ""
        return f"{who}system {self.system.name!r}"


_RESOLVED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_RESOLVED_LOCK = threading.Lock()


def _problem(spec: OdeSpec, y0, params, experiment: int) -> OdeProblem:
    """:func:`prepare_problem` for one experiment of a log-density evaluation, without
    checking again what the graph fixed: the times (validated when it was built), the
    controls and the kernels are resolved once per spec; ``y0`` and ``params`` are
    checked (finite, else :class:`NonFiniteInputError`) as by ``prepare_problem``."""
    system = spec.system
    with _RESOLVED_LOCK:
        resolved = _RESOLVED.get(spec)
        if resolved is None:
            controls = resolve_controls(
                spec.method,
                system.n_states,
                spec.controls.get("relative_tolerance"),
                spec.controls.get("absolute_tolerance"),
                spec.controls.get("max_num_steps"),
            )
            resolved = _RESOLVED[spec] = (controls, compile_kernels(system))
    controls, kernels = resolved
    p = validate_vector("params", params[experiment], system.n_params, "one value per parameter")
    if spec.y0_from_system:
        y0_e = kernels.evaluate("initial_state", spec.t0, np.zeros(system.n_states), p)
    else:
        y0_e = y0[experiment]
    y0_e = validate_vector("y0", y0_e, system.n_states, "one value per state")
    times = spec.times_of(experiment)
    return OdeProblem(system, kernels, y0_e, p, spec.t0, times, controls, spec.y0_from_system)


def _y0_row(spec: OdeSpec, y0, experiment: int):
    return None if spec.y0_from_system else y0[experiment]


def _placeholder_state(spec: OdeSpec, y0, experiment: int) -> np.ndarray:
    if spec.y0_from_system:
        return np.zeros(spec.system.n_states)
    return np.asarray(y0[experiment], dtype=float)


def _handle(
    spec: OdeSpec, error: OdeSolverError, experiment: int, phase: str | None = None
) -> None:
    if spec.on_failure == "raise":
        raise error
    record_failure(error, spec.label(experiment), phase)


def gradient_phase(error: OdeSolverError) -> str:
    """The phase of a gradient pass an error came from, from its solver label
    (``"adjoint backward solve (bdf)"`` -> ``"adjoint backward solve"``)."""
    return error.method.split(" (")[0]


def solve_states(spec: OdeSpec, y0, params) -> tuple[np.ndarray, np.ndarray]:
    """States only: ``y`` (E, T, N) and ``failed`` (E,) int8."""
    n_e, n = spec.n_experiments, spec.system.n_states
    y = np.empty((n_e, spec.n_times, n))
    failed = np.zeros(n_e, dtype=np.int8)

    def run(e):
        try:
            y[e] = solve(
                spec.system,
                _y0_row(spec, y0, e),
                spec.times_of(e),
                params[e],
                t0=spec.t0,
                method=spec.method,
                **spec.controls,
            ).y
        except OdeSolverError as error:
            _handle(spec, error, e)
            y[e] = _placeholder_state(spec, y0, e)
            failed[e] = 1

    _map(run, n_e)
    return y, failed


def _sensitivities_each(spec: OdeSpec, y0, params, compute):
    """``compute(problem, wrt) -> (y, S, S_y0, extra)`` for every experiment.

    Returns ``y`` (E, T, N), ``S`` (E, T, N, P), ``S_y0`` (E, T, N, N) or None when
    ``spec.wrt_y0`` is False, ``failed`` (E,) int8 and the ``extra`` of each experiment
    (None where its solve failed).
    """
    system = spec.system
    n_e, n, p = spec.n_experiments, system.n_states, system.n_params
    n_t = spec.n_times
    y = np.empty((n_e, n_t, n))
    s_p = np.zeros((n_e, n_t, n, p))
    s_y0 = np.zeros((n_e, n_t, n, n)) if spec.wrt_y0 else None
    failed = np.zeros(n_e, dtype=np.int8)
    extras: list = [None] * n_e
    wrt = "both" if spec.wrt_y0 else "params"

    def run(e):
        try:
            y_e, s_p_e, s_y0_e, extras[e] = compute(_problem(spec, y0, params, e), wrt)
        except OdeSolverError as error:
            _handle(spec, error, e)
            y[e] = _placeholder_state(spec, y0, e)
            failed[e] = 1
            return
        y[e] = y_e
        s_p[e] = s_p_e
        if s_y0 is not None:
            s_y0[e] = s_y0_e

    _map(run, n_e)
    return y, s_p, s_y0, failed, extras


def solve_forward(spec: OdeSpec, y0, params):
    """States and forward sensitivities.

    Returns ``y`` (E, T, N), ``S`` (E, T, N, P), ``S_y0`` (E, T, N, N) or
    None when ``spec.wrt_y0`` is False, and ``failed`` (E,) int8.
    """

    def compute(problem, wrt):
        # what solve_sensitivity does, without its checks of arguments the graph fixed
        # and without building a result object (this runs at every log-density evaluation)
        y_e, s_p_e, s_y0_e, *_ = forward_sensitivities(problem, wrt, True)
        return y_e, s_p_e, s_y0_e, None

    y, s_p, s_y0, failed, _ = _sensitivities_each(spec, y0, params, compute)
    return y, s_p, s_y0, failed


def solve_pbs(spec: OdeSpec, y0, params):
    """States and Peano-Baker sensitivities (``spec.route``: "pbs", "pbsr" or "exp").

    Returns ``y`` (E, T, N), ``S`` (E, T, N, P), ``S_y0`` (E, T, N, N) or None
    when ``spec.wrt_y0`` is False, the number of solver steps per branch
    (E, len(BRANCH_NAMES)) int64 and ``failed`` (E,) int8. A non-finite ``S`` is
    a failure (:class:`~pymc_odesens.sensitivity.NonFiniteSensitivityError`).
    """
    from pymc_odesens.sensitivity.pbs import pbs_sensitivities

    def compute(problem, wrt):
        y_e, s_p_e, s_y0_e, _, report = pbs_sensitivities(
            problem, wrt, spec.route, spec.pbs_options, non_finite="raise"
        )
        return y_e, s_p_e, s_y0_e, np.bincount(report.branch, minlength=len(BRANCH_NAMES))

    y, s_p, s_y0, failed, counts = _sensitivities_each(spec, y0, params, compute)
    branches = np.zeros((spec.n_experiments, len(BRANCH_NAMES)), dtype=np.int64)
    for e, count in enumerate(counts):
        if count is not None:
            branches[e] = count
    return y, s_p, s_y0, branches, failed


def _adjoint_forward_each(spec: OdeSpec, y0, params) -> tuple[np.ndarray, list, np.ndarray]:
    """``adjoint_forward`` for every experiment: ``y`` (E, T, N), the handles (None where
    the solve failed) and ``failed`` (E,) int8."""
    n_e, n = spec.n_experiments, spec.system.n_states
    y = np.empty((n_e, spec.n_times, n))
    handles: list = [None] * n_e
    failed = np.zeros(n_e, dtype=np.int8)

    def run(e):
        try:
            handles[e] = adjoint_forward(
                spec.system,
                _y0_row(spec, y0, e),
                spec.times_of(e),
                params[e],
                t0=spec.t0,
                **spec.controls,
            )
            y[e] = handles[e].y
        except OdeSolverError as error:
            _handle(spec, error, e)
            y[e] = _placeholder_state(spec, y0, e)
            failed[e] = 1

    _map(run, n_e)
    return y, handles, failed


def _backward_each(spec: OdeSpec, y0, params, failed, cotangent, checkpoints_of):
    """``checkpoints_of(e, problem, controls).backward(cotangent[e])`` for every experiment
    whose forward solve succeeded: ``(dL/dy0 (E, N), dL/dp (E, P), backward_failed (E,))``;
    zero gradients where the solve or the backward pass failed (flagged)."""
    system = spec.system
    n_e = spec.n_experiments
    grad_y0 = np.zeros((n_e, system.n_states))
    grad_p = np.zeros((n_e, system.n_params))
    backward_failed = np.zeros(n_e, dtype=np.int8)
    controls = resolve_adjoint_controls(system.n_states, **spec.controls)

    def run(e):
        if failed[e]:
            return  # the proposal is rejected; zero gradient
        problem = prepare_problem(
            system,
            _y0_row(spec, y0, e),
            spec.times_of(e),
            params[e],
            spec.t0,
            controls.forward_method,
            controls.relative_tolerance_forward,
            controls.absolute_tolerance_forward,
            controls.max_num_steps,
        )
        try:
            gradient = checkpoints_of(e, problem, controls).backward(cotangent[e])
        except OdeSolverError as error:
            _handle(spec, error, e, gradient_phase(error))
            backward_failed[e] = 1
            return
        grad_y0[e] = gradient.y0
        grad_p[e] = gradient.params

    _map(run, n_e)
    return grad_y0, grad_p, backward_failed


def _record_arrays(spec: OdeSpec, handles: list) -> tuple:
    """The checkpoints and event logs of the forward phases, padded into arrays.

    ``counts`` (E, 2) holds the number of checkpoints and of forward steps (which
    bounds the re-integration buffer of the backward pass).
    """
    n_e, n = spec.n_experiments, spec.system.n_states
    counts = np.array(
        [(0, 0) if h is None else (h.checkpoint_times.size, h.stats["n_steps"]) for h in handles],
        np.int64,
    ).reshape(n_e, 2)
    width = max(1, int(counts[:, 0].max()))
    ckpt_t = np.full((n_e, width), np.nan)
    ckpt_y = np.zeros((n_e, width, n))
    for e, h in enumerate(handles):
        if h is not None:
            ckpt_t[e, : counts[e, 0]] = h.checkpoint_times
            ckpt_y[e, : counts[e, 0]] = h.checkpoint_states
    logs = [None if h is None else h.event_record for h in handles]
    ev_counts = np.array([0 if log is None else log.times.size for log in logs], np.int64)
    k = max(1, int(ev_counts.max()))
    ev_t = np.full((n_e, k), np.nan)
    ev_id = np.zeros((n_e, k, 2), dtype=np.int64)
    ev_y = np.zeros((n_e, k, n))
    for e, log in enumerate(logs):
        if log is not None:
            m = ev_counts[e]
            ev_t[e, :m] = log.times
            ev_id[e, :m, 0] = log.index
            ev_id[e, :m, 1] = log.slot
            ev_y[e, :m] = log.states
    return ckpt_t, ckpt_y, counts, ev_t, ev_id, ev_y, ev_counts


def _checkpoints_from_arrays(spec: OdeSpec, arrays, e: int, problem, controls):
    """The :class:`AdjointCheckpoints` of experiment ``e`` from :func:`_record_arrays`."""
    ckpt_t, ckpt_y, counts, ev_t, ev_id, ev_y, ev_counts = arrays
    system = spec.system
    return AdjointCheckpoints(
        t=problem.times,
        y=None,
        checkpoint_times=np.ascontiguousarray(ckpt_t[e, : counts[e, 0]]),
        checkpoint_states=np.ascontiguousarray(ckpt_y[e, : counts[e, 0]]),
        controls=controls,
        # the forward pass's steps size the re-integration buffer (not the control
        # num_steps_between_checkpoints, which may be 10**9 for "no checkpoints")
        stats={"n_steps": int(counts[e, 1])},
        problem=problem,
        event_record=None
        if not system.events
        else EventRecord(
            times=np.ascontiguousarray(ev_t[e, : ev_counts[e]]),
            index=np.ascontiguousarray(ev_id[e, : ev_counts[e], 0]),
            slot=np.ascontiguousarray(ev_id[e, : ev_counts[e], 1]),
            states=np.ascontiguousarray(ev_y[e, : ev_counts[e]]),
        ),
    )


def solve_adjoint_forward(spec: OdeSpec, y0, params):
    """Forward phase of the adjoint.

    Returns ``y`` (E, T, N), the checkpoint times (E, C) and states (E, C, N)
    (padded: C is the largest count), the counts of checkpoints and forward steps
    (E, 2), the event log (times
    (E, K), event index and time position (E, K, 2), states before the events
    (E, K, N), counts (E,); K is at least 1) and ``failed`` (E,) int8.
    """
    y, handles, failed = _adjoint_forward_each(spec, y0, params)
    return (y, *_record_arrays(spec, handles), failed)


def adjoint_vjp(
    spec: OdeSpec, y0, params, forward_outputs, failed, cotangent
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward phase: ``(dL/dy0 (E, N), dL/dp (E, P), backward_failed (E,))`` for
    ``cotangent`` (E, T, N).

    ``forward_outputs`` are the checkpoint and event arrays of
    :func:`solve_adjoint_forward` (everything between ``y`` and ``failed``);
    experiments whose forward solve or backward pass failed get zero gradients.
    """

    def checkpoints_of(e, problem, controls):
        return _checkpoints_from_arrays(spec, forward_outputs, e, problem, controls)

    return _backward_each(spec, y0, params, failed, cotangent, checkpoints_of)


def solve_discrete_adjoint_forward(spec: OdeSpec, y0, params):
    """Forward phase of the discrete adjoint (``adjoint_method="discrete"``).

    Returns the outputs of :func:`solve_adjoint_forward` with, before ``failed``,
    the step logs (E, L, 4) and history snapshots (E, S, W) (padded to the largest
    counts, at least 1) and their counts (E, 2).
    """
    from pymc_odesens.solvers.multistep_layout import BDF, OP_WIDTH, snapshot_width

    n_e, n = spec.n_experiments, spec.system.n_states
    y, handles, failed = _adjoint_forward_each(spec, y0, params)
    counts = np.zeros((n_e, 2), dtype=np.int64)
    for e, h in enumerate(handles):
        if h is not None:
            counts[e] = h.step_log.shape[0], h.snapshots.shape[0]
    logs = np.zeros((n_e, max(1, int(counts[:, 0].max())), OP_WIDTH))
    snapshots = np.zeros((n_e, max(1, int(counts[:, 1].max())), snapshot_width(BDF, n)))
    for e, h in enumerate(handles):
        if h is not None:
            logs[e, : counts[e, 0]] = h.step_log
            snapshots[e, : counts[e, 1]] = h.snapshots
    return (y, *_record_arrays(spec, handles), logs, snapshots, counts, failed)


def discrete_adjoint_vjp(
    spec: OdeSpec, y0, params, forward_outputs, failed, cotangent
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward phase of the discrete adjoint, from the arrays of
    :func:`solve_discrete_adjoint_forward` (between ``y`` and ``failed``)."""
    arrays, (logs, snapshots, counts) = forward_outputs[:-3], forward_outputs[-3:]

    def checkpoints_of(e, problem, controls):
        checkpoints = _checkpoints_from_arrays(spec, arrays, e, problem, controls)
        checkpoints.step_log = np.ascontiguousarray(logs[e, : counts[e, 0]])
        checkpoints.snapshots = np.ascontiguousarray(snapshots[e, : counts[e, 1]])
        return checkpoints

    return _backward_each(spec, y0, params, failed, cotangent, checkpoints_of)
