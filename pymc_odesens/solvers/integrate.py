"""One entry point over the four compiled integrators (arrays in, arrays out)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.compiled_entry import compiled_entry
from pymc_odesens.solvers.controls import SolverControls
from pymc_odesens.solvers.event_location import EVENT_OUT_SIZE
from pymc_odesens.solvers.newton_matrix import dense_structure, newton_structure

__all__ = [
    "EventLog",
    "EventRecord",
    "NO_RECORDING",
    "NO_NEWTON",
    "evaluate_kernel",
    "explicit_event_schedule",
    "hybrid_event_arguments",
    "integrate",
    "integrate_events",
    "newton_jacobian",
    "no_events",
]

NO_RECORDING = (
    np.zeros(0),
    np.zeros((0, 0)),
    np.zeros((0, 0)),
    np.zeros(1, dtype=np.int64),
)
"""Empty recording arrays (``rec_t, rec_y, rec_f, rec_count``) for runs that record nothing."""


NO_NEWTON = dense_structure(0, np.zeros(0, np.int64), np.zeros(0, np.int64))
"""The Newton structure of runs that factorise nothing (explicit methods)."""


def newton_jacobian(kernels, method: str, linear_solver: str, *, transposed: bool = False):
    """``(jac, newton)``: the Jacobian kernel and Newton structure of a run with ``method``.

    For ``bdf`` and ``adams``: ``kernels.jac_y_values`` and the structure of ``I - c J_y``
    chosen by ``linear_solver`` (:func:`pymc_odesens.solvers.newton_matrix.newton_structure`;
    ``transposed`` for ``I - c J_y^T``). Explicit methods factorise nothing: ``kernels.rhs``
    (never called as a Jacobian) and :data:`NO_NEWTON`.
    """
    if method in ("rk45", "ckrk"):
        return kernels.rhs, NO_NEWTON
    return kernels.jac_y_values, newton_structure(kernels, linear_solver, transposed=transposed)


def no_events() -> tuple:
    """Event arguments of a multistep run without events (after its ``events`` kernel):
    ``directions, g_zero, t_stop, event_out, z_event``."""
    return (
        np.zeros(0, dtype=np.int64),
        np.zeros(0),
        np.inf,
        np.zeros(EVENT_OUT_SIZE),
        np.zeros(0),
    )


def integrate(
    method: str,
    rhs,
    jac_y,
    t0: float,
    y0: np.ndarray,
    params: np.ndarray,
    times: np.ndarray,
    controls: SolverControls,
    *,
    n_state: int,
    n_err: int,
    atol: np.ndarray,
    newton: np.ndarray = NO_NEWTON,
    state_names=None,
    recording: tuple | None = None,
) -> tuple[np.ndarray | None, np.ndarray]:
    """Run one compiled integrator; raise the matching OdeSolverError on failure.

    Parameters
    ----------
    method : str
        ``rk45``, ``ckrk``, ``bdf`` or ``adams``.
    rhs, jac_y : Kernel
        Right-hand side of the integrated vector (the plain system, or an
        augmented system made of ``len(y0) // n_state`` blocks) and the non-zeros
        of ``J_y`` of the first block in the order of ``newton`` (see
        :func:`newton_jacobian`); implicit methods factorise ``I - c J_y`` once and
        apply it to every block.
    t0, y0, params, times : initial time, initial vector, parameters, output times.
    controls : SolverControls
    n_state : int
        Size N of one block.
    n_err : int
        Number of leading components in the error test.
    atol : numpy.ndarray
        Absolute tolerance per integrated component.
    newton : numpy.ndarray of int64
        Structure of the Newton matrices (:mod:`pymc_odesens.solvers.newton_matrix`);
        needed by ``bdf`` and ``adams``.
    recording : tuple, optional
        ``(record_every, rec_t, rec_y, rec_f, rec_count, rec_dense)``: record
        the trajectory every ``record_every`` accepted steps into these arrays
        (see :mod:`pymc_odesens.solvers.runge_kutta` and
        :mod:`pymc_odesens.solvers.multistep`; ``rec_dense`` is used by
        ``rk45`` only, give it 0 rows to skip it).

    Returns
    -------
    y_out : numpy.ndarray, shape (T, len(y0)), or None
        None when the recording arrays filled up (enlarge them and call again).
    stats : numpy.ndarray of int64 (see :data:`status.STAT_NAMES`)
    """
    # Each integrator module compiles (or loads from numba's cache) on first import.
    y0 = np.ascontiguousarray(y0, dtype=np.float64)
    params = np.ascontiguousarray(params, dtype=np.float64)
    if params.size == 0:
        params = np.zeros(1)  # a valid pointer for kernels that never read p
    y_out = np.empty((times.size, y0.size))
    stats = st.new_stats()
    info = np.zeros(st.INFO_SIZE)
    rtol = np.full(y0.size, controls.relative_tolerance)
    steps = controls.max_num_steps
    if recording is None:
        record_every, rec_dense = 0, NO_RECORDING[2]
        no_record = NO_RECORDING
    else:
        record_every, *no_record, rec_dense = recording
    if method in ("rk45", "ckrk"):
        from pymc_odesens.solvers.runge_kutta import RK_METHOD_IDS, integrate_explicit_rk

        code = compiled_entry(integrate_explicit_rk)(
            rhs,
            t0,
            y0,
            params,
            times,
            rtol,
            atol,
            steps,
            n_state,
            n_err,
            RK_METHOD_IDS[method],
            record_every,
            *no_record,
            rec_dense,
            rhs,
            *no_events(),
            y_out,
            stats,
            info,
        )
    else:
        from pymc_odesens.solvers.multistep import ADAMS, BDF, NO_STEP_LOG, run_multistep

        family = BDF if method == "bdf" else ADAMS
        code = compiled_entry(run_multistep)(
            family,
            rhs,
            jac_y,
            newton,
            t0,
            y0,
            params,
            times,
            rtol,
            atol,
            steps,
            n_state,
            y0.size,  # every component goes through the LU blocks
            n_err,
            record_every,
            *no_record,
            *NO_STEP_LOG,
            rhs,
            *no_events(),
            y_out,
            stats,
            info,
        )
    if code == st.RECORD_FULL and recording is not None:
        return None, stats
    st.raise_for_status(code, info, method, state_names)
    return y_out, stats


@dataclass(frozen=True)
class EventLog:
    """The events of one solve, in the order they executed.

    Attributes
    ----------
    times : numpy.ndarray, shape (K,)
    index : numpy.ndarray of int, shape (K,)
        Event index (position in ``system.events``).
    before : numpy.ndarray, shape (K, M)
        The leading M components of the integrated vector just before each event (after
        the events that executed before it at the same time).
    names : list of str
        Event names, one per event that executed.
    """

    times: np.ndarray
    index: np.ndarray
    before: np.ndarray
    names: list


@dataclass(frozen=True)
class EventRecord:
    """The compiled driver's event log: one row per executed event and one closing each
    instant (see :mod:`pymc_odesens.solvers.event_instant`).

    Attributes
    ----------
    times : numpy.ndarray, shape (K,)
    index : numpy.ndarray of int64
        Event index, or ``INSTANT_END`` / ``INSTANT_END_TERMINAL`` closing an instant.
    slot : numpy.ndarray of int64
        Event rows: how many executions back (at the same time) its assigned values were
        computed; closing rows: the instant's cause code (or ``NOT_DIFFERENTIABLE``).
    states : numpy.ndarray, shape (K, M)
        The leading M components of the vector before each event; after the instant on
        closing rows.
    """

    times: np.ndarray
    index: np.ndarray
    slot: np.ndarray
    states: np.ndarray

    @classmethod
    def empty(cls, width: int) -> EventRecord:
        """A log without rows."""
        return cls(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, width)))

    def arrays(self) -> tuple:
        """``(times, index, slot, states)`` as contiguous arrays for the compiled passes."""
        return tuple(
            np.ascontiguousarray(a) for a in (self.times, self.index, self.slot, self.states)
        )

    def public(self, names, width: int | None = None) -> EventLog:
        """The executed events (closing rows dropped), ``before`` cut to ``width`` columns."""
        rows = self.index >= 0
        before = self.states[rows] if width is None else self.states[rows, :width]
        return EventLog(
            times=self.times[rows].copy(),
            index=self.index[rows].copy(),
            before=np.ascontiguousarray(before),
            names=[names[i] for i in self.index[rows]],
        )


def explicit_event_schedule(event_kernels, t0: float, params: np.ndarray) -> tuple:
    """``(times, owner, slot)`` of the scheduled times, sorted (ties: slot order).

    Raises
    ------
    pymc_odesens.EventTimeError
        If a scheduled time is not finite at ``params``.
    """
    from pymc_odesens.solvers.hybrid import explicit_schedule

    n_slots = event_kernels.slot_event.size
    stop_times = np.zeros(n_slots)
    stop_owner = np.zeros(n_slots, dtype=np.int64)
    stop_slot = np.zeros(n_slots, dtype=np.int64)
    p = np.ascontiguousarray(params if params.size else np.zeros(1), dtype=np.float64)
    bad = compiled_entry(explicit_schedule)(
        event_kernels.times,
        event_kernels.slot_event,
        event_kernels.slot_time,
        float(t0),
        p,
        stop_times,
        stop_owner,
        stop_slot,
    )
    if bad >= 0:
        st.raise_for_status(
            st.BAD_EVENT_TIME,
            np.array([stop_times[0], 0.0, -1.0, event_kernels.slot_time[bad]]),
            event_kernels.slot_names[bad],
        )
    return stop_times, stop_owner, stop_slot


def hybrid_event_arguments(
    event_kernels, jump, time_sensitivity, t0: float, params: np.ndarray, fallback
) -> tuple:
    """The event arguments of :func:`~pymc_odesens.solvers.hybrid.integrate_hybrid`.

    ``(conditions, rates, triggers, priorities, jump, time_sensitivity, directions, table,
    cause_table, stop_times, stop_owner, stop_slot)``; without events (``event_kernels``
    None) empty tables and ``fallback`` (any kernel) in place of the kernels, which are then
    never called.
    """
    from pymc_odesens.codegen.event_tables import EVENT_TABLE_WIDTH

    if event_kernels is None:
        none = np.zeros(0, dtype=np.int64)
        return (
            *(fallback,) * 6,
            none,
            np.zeros((0, EVENT_TABLE_WIDTH), dtype=np.int64),
            np.zeros((1, 2), dtype=np.int64),
            np.zeros(0),
            none,
            none,
        )
    schedule = explicit_event_schedule(event_kernels, t0, params)
    return (
        event_kernels.conditions,
        event_kernels.rates,
        event_kernels.triggers,
        event_kernels.priorities,
        jump,
        time_sensitivity,
        event_kernels.directions,
        event_kernels.table,
        event_kernels.cause_table,
        *schedule,
    )


def evaluate_kernel(
    kernel, t: float, y: np.ndarray, p: np.ndarray, size: int, v: np.ndarray | None = None
) -> np.ndarray:
    """Call a generated kernel from Python (event times and other one-off evaluations)."""
    from pymc_odesens.solvers.kernel_call import call_kernel

    out = np.zeros(max(size, 1))
    call_kernel(
        kernel,
        float(t),
        np.ascontiguousarray(y, dtype=np.float64),
        np.ascontiguousarray(p if p.size else np.zeros(1), dtype=np.float64),
        np.zeros(1) if v is None else np.ascontiguousarray(v, dtype=np.float64),
        out,
    )
    return out[:size]


def integrate_events(
    method: str,
    rhs,
    jac_y,
    jump,
    time_sensitivity,
    event_kernels,
    t0: float,
    y0: np.ndarray,
    params: np.ndarray,
    times: np.ndarray,
    controls: SolverControls,
    *,
    n_state: int,
    n_err: int,
    atol: np.ndarray,
    newton: np.ndarray = NO_NEWTON,
    state_names=None,
) -> tuple[np.ndarray, np.ndarray, EventRecord]:
    """:func:`integrate` through a system's events.

    Parameters
    ----------
    jump, time_sensitivity : numba CFunc
        The jump of the integrated vector at an event and the time sensitivity of its
        columns (the plain state's, or those of a sensitivity system).
    event_kernels : pymc_odesens.codegen.EventKernels

    Returns
    -------
    y_out, stats, EventRecord
    """
    from pymc_odesens.solvers.hybrid import METHOD_CODES, integrate_hybrid
    from pymc_odesens.solvers.multistep_layout import NO_STEP_LOG

    y0 = np.ascontiguousarray(y0, dtype=np.float64)
    params = np.ascontiguousarray(params, dtype=np.float64)
    p_kernel = params if params.size else np.zeros(1)
    event_arguments = hybrid_event_arguments(event_kernels, jump, time_sensitivity, t0, params, rhs)
    capacity = 16 + 4 * event_arguments[9].size
    rtol = np.full(y0.size, controls.relative_tolerance)
    while True:
        y_out = np.empty((times.size, y0.size))
        stats = st.new_stats()
        info = np.zeros(st.INFO_SIZE)
        ev_t = np.zeros(capacity)
        ev_index = np.zeros(capacity, dtype=np.int64)
        ev_slot = np.zeros(capacity, dtype=np.int64)
        ev_z = np.zeros((capacity, y0.size))
        ev_count = np.zeros(1, dtype=np.int64)
        code = compiled_entry(integrate_hybrid)(
            METHOD_CODES[method],
            rhs,
            jac_y,
            newton,
            *event_arguments,
            t0,
            y0,
            p_kernel,
            times,
            rtol,
            atol,
            controls.max_num_steps,
            n_state,
            y0.size,
            n_err,
            0,
            *NO_RECORDING,
            *NO_STEP_LOG,
            ev_t,
            ev_index,
            ev_slot,
            ev_z,
            ev_count,
            y_out,
            stats,
            info,
        )
        if code == st.RECORD_FULL and ev_count[0] >= capacity:
            capacity *= 4
            continue
        break
    st.raise_for_status(code, info, method, state_names, event_kernels.names)
    k = int(ev_count[0])
    record = EventRecord(
        times=ev_t[:k].copy(), index=ev_index[:k].copy(), slot=ev_slot[:k].copy(), states=ev_z[:k]
    )
    return y_out, stats, record
