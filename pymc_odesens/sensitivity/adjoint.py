"""Adjoint gradients with checkpointing, controlled as Stan's ``ode_adjoint_tol_ctl``.

For a scalar ``L`` of the solution at the output times, with cotangent
``g_i = dL/dy(t_i)``, the adjoint ``lambda`` solves ``lambda' = -J_y^T lambda``
backwards from the last output time with jumps ``lambda += g_i`` at each
``t_i``, and

    dL/dp  = int_{t0}^{t_T} lambda^T (df/dp) dt  +  (dy0/dp) lambda(t0)
    dL/dy0 = lambda(t0)

The cost is one forward N-dimensional solve, one re-integration of it between
checkpoints, and one backward solve of N + P components whose P quadratures
need no linear algebra: independent of P in the Newton work, unlike forward
sensitivities.

Use :func:`adjoint_gradient` for one gradient, or the two phases
:func:`adjoint_forward` (solve once, keep checkpoints) and
:meth:`AdjointCheckpoints.backward` (any number of cotangents) when the
cotangent depends on the solution, as in a log-likelihood.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pymc_odesens.codegen import compile_adjoint_kernels, compile_event_kernels
from pymc_odesens.model import OdeSystem
from pymc_odesens.model.system import require_states
from pymc_odesens.sensitivity.adjoint_controls import AdjointControls, resolve_adjoint_controls
from pymc_odesens.sensitivity.event_adjoint import frozen_time
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.compiled_entry import compiled_entry
from pymc_odesens.solvers.integrate import EventLog, EventRecord, hybrid_event_arguments
from pymc_odesens.solvers.solve import OdeProblem, prepare_problem

__all__ = ["AdjointCheckpoints", "AdjointGradient", "adjoint_forward", "adjoint_gradient"]

_INITIAL_CHECKPOINT_CAPACITY = 64


@dataclass
class AdjointGradient:
    """Result of an adjoint backward pass.

    Attributes
    ----------
    params : numpy.ndarray, shape (P,)
        ``dL/dp`` (including the path through ``y0(p)`` when the system
        declares its initial state as a function of the parameters).
    y0 : numpy.ndarray, shape (N,)
        ``dL/dy0`` (= ``lambda(t0)``).
    y : numpy.ndarray, shape (T, N)
        The forward solution at the output times.
    stats : dict
        ``forward``, ``reintegration`` and ``backward`` solver statistics and
        ``n_checkpoints``.
    """

    params: np.ndarray
    y0: np.ndarray
    y: np.ndarray
    stats: dict


@dataclass
class AdjointCheckpoints:
    """Forward pass of an adjoint gradient: the solution at the output times and checkpoints.

    Attributes
    ----------
    t : numpy.ndarray, shape (T,)
    y : numpy.ndarray, shape (T, N)
    checkpoint_times : numpy.ndarray, shape (C,)
    checkpoint_states : numpy.ndarray, shape (C, N)
        The forward state every ``num_steps_between_checkpoints`` steps
        (the first at ``t0``, and one just after every event). Memory is
        bounded by these, not by the steps.
    controls : AdjointControls
    stats : dict
        Statistics of the forward solve.
    events : EventLog or None
        For systems with events: the events that executed, with the state
        just before each.
    event_record : EventRecord or None
        The driver's log of the event instants (the backward pass undoes them).
    step_log, snapshots : numpy.ndarray or None
        With ``adjoint_method="discrete"``: the forward run's log of operations
        on its history (four numbers per operation) and the history at every
        checkpoint (see :mod:`pymc_odesens.sensitivity.discrete_adjoint`).
    """

    t: np.ndarray
    y: np.ndarray
    checkpoint_times: np.ndarray
    checkpoint_states: np.ndarray
    controls: AdjointControls
    stats: dict
    problem: OdeProblem = field(repr=False)
    events: EventLog | None = None
    event_record: EventRecord | None = None
    step_log: np.ndarray | None = field(default=None, repr=False)
    snapshots: np.ndarray | None = field(default=None, repr=False)
    _buffer_capacity: int = field(default=0, repr=False)

    def backward(self, cotangent) -> AdjointGradient:
        """Gradient of ``L`` given ``cotangent[i] = dL/dy(t_i)``, shape (T, N).

        Raises
        ------
        ValueError
            If ``cotangent`` has the wrong shape or is not finite.
        pymc_odesens.OdeSolverError
            If the re-integration or the backward solve fails.
        """
        if self.controls.adjoint_method == "discrete":
            return self._discrete_backward(cotangent)
        problem = self.problem
        system = problem.system
        # compiled on first use, not at import
        from pymc_odesens.codegen.recorded_trajectory import new_trajectory_buffer
        from pymc_odesens.sensitivity.adjoint_backward import (
            BACKWARD_INFO_SIZE,
            PHASE_REINTEGRATION,
            backward_pass,
        )
        from pymc_odesens.solvers.multistep_layout import ADAMS, BDF

        family = {"bdf": BDF, "adams": ADAMS}

        n, p = system.n_states, system.n_params
        cot = _validate_cotangent(cotangent, self.t.size, n)
        controls = self.controls
        adjoint_rhs, adjoint_jac = compile_adjoint_kernels(system)
        kernels = problem.kernels
        jac, newton = problem.newton_jacobian(controls.forward_method)
        _, newton_adjoint = problem.newton_jacobian(controls.backward_method, transposed=True)
        event_kernels = compile_event_kernels(system)
        event_jump, time_gradient = self._event_kernels(event_kernels, adjoint_rhs)
        event_log = self._event_arrays()
        t_frozen = float(frozen_time(event_log[0], event_log[1]))
        params = problem.params if p else np.zeros(1)
        rtol_f = np.full(n, controls.relative_tolerance_forward)
        rtol_b = np.concatenate(
            (
                np.full(n, controls.relative_tolerance_backward),
                np.full(p, controls.relative_tolerance_quadrature),
            )
        )
        atol_b = np.concatenate(
            (
                controls.absolute_tolerance_backward,
                np.full(p, controls.absolute_tolerance_quadrature),
            )
        )
        # a re-integrated stretch takes about the steps the forward pass took between its
        # checkpoints (more after its restart at order 1; the record grows if needed):
        # size it by K, or by the whole run when that is shorter (K = 1e6 must not
        # allocate room for 2e6 steps)
        steps = self.stats.get("n_steps", controls.num_steps_between_checkpoints)
        capacity = self._buffer_capacity or (
            2 * min(controls.num_steps_between_checkpoints, steps) + 64
        )
        while True:
            buf = new_trajectory_buffer(
                problem.params, n, capacity, controls.interpolation_polynomial
            )
            z = np.zeros(n + p)
            stats_f = st.new_stats()
            stats_b = st.new_stats()
            info = np.zeros(BACKWARD_INFO_SIZE)
            code = compiled_entry(backward_pass)(
                family[controls.forward_method],
                family[controls.backward_method],
                kernels.rhs,
                jac,
                newton,
                adjoint_rhs,
                adjoint_jac,
                newton_adjoint,
                problem.t0,
                params,
                self.t,
                cot,
                self.checkpoint_times,
                self.checkpoint_states,
                self.checkpoint_times.size,
                rtol_f,
                controls.absolute_tolerance_forward,
                rtol_b,
                atol_b,
                controls.max_num_steps,
                buf,
                event_jump,
                time_gradient,
                *event_log,
                t_frozen,
                z,
                stats_f,
                stats_b,
                info,
            )
            if code != st.RECORD_FULL:
                break
            capacity *= 2  # a re-integrated stretch took more steps than expected
        self._buffer_capacity = capacity
        if code != st.SUCCESS:
            if int(info[4]) == PHASE_REINTEGRATION:
                label = f"adjoint re-integration ({controls.forward_method})"
                names = system.states
            else:
                label = f"adjoint backward solve ({controls.backward_method})"
                names = [f"lambda_{s}" for s in system.states] + [f"mu_{q}" for q in system.params]
            st.raise_for_status(code, info[: st.INFO_SIZE], label, names, self._event_names())
        lam = z[:n].copy()
        grad_p = z[n:].copy()
        if problem.y0_from_params and p:
            jac0 = kernels.evaluate("initial_state_jac", problem.t0, problem.y0, problem.params)
            grad_p += jac0 @ lam
        stats = {
            "forward": dict(self.stats),
            "reintegration": st.stats_dict(stats_f),
            "backward": st.stats_dict(stats_b),
            "n_checkpoints": int(self.checkpoint_times.size),
        }
        return AdjointGradient(params=grad_p, y0=lam, y=self.y, stats=stats)

    def _event_arrays(self) -> tuple:
        """``(times, index, slot, states)`` of the event record (empty without events)."""
        record = self.event_record
        if record is None:
            record = EventRecord.empty(self.problem.system.n_states)
        return record.arrays()

    @staticmethod
    def _event_kernels(event_kernels, fallback) -> tuple:
        """``(adjoint_jump, time_gradient)`` of the events (``fallback`` without events)."""
        if event_kernels is None:
            return fallback, fallback
        return event_kernels.adjoint_jump, event_kernels.time_gradient

    def _event_names(self):
        return tuple(e.name for e in self.problem.system.events)

    def _discrete_backward(self, cotangent) -> AdjointGradient:
        from pymc_odesens.sensitivity.discrete_adjoint import discrete_adjoint_backward

        problem = self.problem
        system = problem.system
        n, p = system.n_states, system.n_params
        cot = _validate_cotangent(cotangent, self.t.size, n)
        controls = self.controls
        kernels = problem.kernels
        params = problem.params if p else np.zeros(1)
        event_kernels = compile_event_kernels(system)
        event_log = self._event_arrays()
        event_jump, time_gradient = self._event_kernels(event_kernels, kernels.rhs)
        y0_bar = np.zeros(n)
        p_bar = np.zeros(p)
        stats_r = st.new_stats()
        info = np.zeros(st.INFO_SIZE)
        jac, newton = problem.newton_jacobian("bdf")
        code = compiled_entry(discrete_adjoint_backward)(
            kernels.rhs,
            jac,
            newton,
            kernels.vjp_y,
            kernels.vjp_p,
            params,
            self.t,
            cot,
            self.step_log,
            self.snapshots,
            self.step_log.shape[0],
            self.snapshots.shape[0],
            np.full(n, controls.relative_tolerance_forward),
            controls.absolute_tolerance_forward,
            event_jump,
            time_gradient,
            *event_log,
            y0_bar,
            p_bar,
            stats_r,
            info,
        )
        st.raise_for_status(
            code, info, "discrete adjoint replay (bdf)", system.states, self._event_names()
        )
        if problem.y0_from_params and p:
            jac0 = kernels.evaluate("initial_state_jac", problem.t0, problem.y0, problem.params)
            p_bar += jac0 @ y0_bar
        stats = {
            "forward": dict(self.stats),
            "replay": st.stats_dict(stats_r),
            "n_checkpoints": int(self.snapshots.shape[0]),
            "n_logged_operations": int(self.step_log.shape[0]),
        }
        return AdjointGradient(params=p_bar, y0=y0_bar, y=self.y, stats=stats)


def _validate_cotangent(cotangent, n_times: int, n_states: int) -> np.ndarray:
    try:
        cot = np.asarray(cotangent, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"cotangent must be an array of shape ({n_times}, {n_states}) (dL/dy at each output "
            f"time), got {cotangent!r}"
        ) from None
    if cot.shape != (n_times, n_states):
        raise ValueError(
            f"cotangent must have shape ({n_times}, {n_states}) (dL/dy at each output time); "
            f"got shape {cot.shape}"
        )
    if not np.all(np.isfinite(cot)):
        raise ValueError("cotangent must be finite")
    return np.ascontiguousarray(cot)


def adjoint_forward(
    system: OdeSystem, y0, times, params, *, t0: float = 0.0, **controls
) -> AdjointCheckpoints:
    """Forward phase of an adjoint gradient: solve and keep checkpoints.

    Parameters are those of :func:`adjoint_gradient` without the cotangent.

    Returns
    -------
    AdjointCheckpoints
        ``.y`` holds the solution at ``times``; call ``.backward(cotangent)``
        for gradients.
    """
    if not isinstance(system, OdeSystem):
        raise TypeError(f"system must be an OdeSystem, got {type(system).__name__}")
    require_states(
        system,
        "adjoint_forward",
        "there is no solution to differentiate by the adjoint method (solve and "
        "solve_sensitivity give its empty solution and sensitivities)",
    )
    # imported here: the hybrid driver compiles (or loads) on the first adjoint solve
    from pymc_odesens.solvers.hybrid import METHOD_CODES, integrate_hybrid
    from pymc_odesens.solvers.multistep_layout import BDF, OP_WIDTH, snapshot_width

    ctl = resolve_adjoint_controls(system.n_states, **controls)
    problem = prepare_problem(
        system,
        y0,
        times,
        params,
        t0,
        ctl.forward_method,
        ctl.relative_tolerance_forward,
        ctl.absolute_tolerance_forward,
        ctl.max_num_steps,
        ctl.linear_solver,
    )
    n = system.n_states
    jac, newton = problem.newton_jacobian()
    params_arr = problem.params if system.n_params else np.zeros(1)
    rtol = np.full(n, ctl.relative_tolerance_forward)
    event_kernels = compile_event_kernels(system)
    discrete = ctl.adjoint_method == "discrete"
    event_arguments = hybrid_event_arguments(
        event_kernels,
        None if event_kernels is None else event_kernels.jump,
        None if event_kernels is None else event_kernels.time_sensitivity,
        problem.t0,
        problem.params,
        problem.kernels.rhs,
    )
    capacity = _INITIAL_CHECKPOINT_CAPACITY
    event_capacity = 16 + 4 * event_arguments[9].size
    log_capacity = 1024 if discrete else 0
    width = snapshot_width(BDF, n)
    while True:
        ckpt_t = np.zeros(capacity)
        ckpt_y = np.zeros((capacity, n))
        count = np.zeros(1, dtype=np.int64)
        # the discrete adjoint's step log, and a snapshot of the history at each checkpoint
        op_log = np.zeros((log_capacity, OP_WIDTH))
        snapshots = np.zeros((capacity if discrete else 0, width))
        op_count = np.zeros(2, dtype=np.int64)
        ev_t = np.zeros(event_capacity)
        ev_index = np.zeros(event_capacity, dtype=np.int64)
        ev_slot = np.zeros(event_capacity, dtype=np.int64)
        ev_y = np.zeros((event_capacity, n))
        ev_count = np.zeros(1, dtype=np.int64)
        y_out = np.empty((problem.times.size, n))
        stats = st.new_stats()
        info = np.zeros(st.INFO_SIZE)
        code = compiled_entry(integrate_hybrid)(
            METHOD_CODES[ctl.forward_method],
            problem.kernels.rhs,
            jac,
            newton,
            *event_arguments,
            problem.t0,
            problem.y0,
            params_arr,
            problem.times,
            rtol,
            ctl.absolute_tolerance_forward,
            ctl.max_num_steps,
            n,
            n,
            n,
            ctl.num_steps_between_checkpoints,
            ckpt_t,
            ckpt_y,
            np.zeros((0, 0)),
            count,
            op_log,
            snapshots,
            op_count,
            ev_t,
            ev_index,
            ev_slot,
            ev_y,
            ev_count,
            y_out,
            stats,
            info,
        )
        if code != st.RECORD_FULL:
            break
        if ev_count[0] >= event_capacity:
            event_capacity *= 4
        elif discrete and op_count[0] >= log_capacity - 1:
            log_capacity *= 4
        else:
            capacity *= 4
    st.raise_for_status(
        code,
        info,
        f"adjoint forward solve ({ctl.forward_method})",
        system.states,
        None if event_kernels is None else event_kernels.names,
    )
    k = int(count[0])
    events = record = None
    if event_kernels is not None:
        m = int(ev_count[0])
        record = EventRecord(
            times=ev_t[:m].copy(),
            index=ev_index[:m].copy(),
            slot=ev_slot[:m].copy(),
            states=ev_y[:m].copy(),
        )
        events = record.public(event_kernels.names)
    return AdjointCheckpoints(
        t=problem.times,
        y=y_out,
        checkpoint_times=ckpt_t[:k].copy(),
        checkpoint_states=ckpt_y[:k].copy(),
        controls=ctl,
        stats=st.stats_dict(stats),
        problem=problem,
        events=events,
        event_record=record,
        step_log=op_log[: op_count[0]].copy() if discrete else None,
        snapshots=snapshots[: op_count[1]].copy() if discrete else None,
    )


def adjoint_gradient(
    system: OdeSystem, y0, times, params, cotangent, *, t0: float = 0.0, **controls
) -> AdjointGradient:
    """Vector-Jacobian product of the ODE solution by the adjoint method.

    Parameters
    ----------
    system : OdeSystem
    y0 : array_like, shape (N,), or None
        Initial state; None takes the system's ``y0(p)``.
    times : array_like, shape (T,)
        Output times, non-decreasing and >= ``t0``.
    params : array_like, shape (P,)
    cotangent : array_like, shape (T, N)
        ``dL/dy(t_i)`` for a scalar ``L``.
    t0 : float
    **controls
        Stan's ``ode_adjoint_tol_ctl`` controls, same names and meanings
        (defaults in brackets; Stan itself requires every one):

        - ``relative_tolerance_forward`` [1e-6], ``absolute_tolerance_forward``
          [1e-6, scalar or one per state]: the forward solve and the
          re-integration between checkpoints.
        - ``relative_tolerance_backward`` [1e-6], ``absolute_tolerance_backward``
          [1e-6, scalar or one per state]: the adjoint states ``lambda``.
        - ``relative_tolerance_quadrature`` [1e-6],
          ``absolute_tolerance_quadrature`` [1e-6]: the P quadratures
          ``mu`` (they take part in the backward error test).
        - ``max_num_steps`` [1e8]: steps between output times, each phase.
        - ``num_steps_between_checkpoints`` [150].
        - ``interpolation_polynomial`` [1]: forward state between recorded
          steps, 1 cubic Hermite (states and derivatives), 2 cubic polynomial
          through four recorded states.
        - ``solver_forward``, ``solver_backward`` [2, 2]: 1 ``adams``, 2 ``bdf``
          (the names are accepted too).
        - ``adjoint_method`` ["continuous"], not Stan's: ``"discrete"``
          differentiates the forward ``bdf`` run's own steps instead of solving the
          backward ODE (:mod:`pymc_odesens.sensitivity.discrete_adjoint`; needs
          ``solver_forward`` 2; ignores the backward and quadrature tolerances,
          ``solver_backward`` and ``interpolation_polynomial``). Its gradient is exact
          for the computed solution, its error against the true gradient is not
          controlled (docs/adjoint.md).
        - ``linear_solver`` ["auto"], not Stan's: ``"dense"`` or ``"sparse"``
          factorisation of the Newton matrices of every phase (see
          :func:`pymc_odesens.solve`).

    Returns
    -------
    AdjointGradient
        ``.params`` (P,), ``.y0`` (N,), ``.y`` (T, N), ``.stats``.

    Raises
    ------
    ValueError, TypeError
        Bad arguments or controls (named in the message).
    pymc_odesens.OdeSolverError
        A failure of any phase; the message names the phase.
    """
    checkpoints = adjoint_forward(system, y0, times, params, t0=t0, **controls)
    return checkpoints.backward(cotangent)
