"""numba implementations of the ODE Ops: PyTensor's NUMBA mode calls the compiled solvers directly.

With these registrations a model that uses :func:`pymc_odesens.ode_solution`
compiles to one numba function (what ``pm.sample(nuts_sampler="nutpie")``
needs): each Op becomes a jitted loop over the experiments that calls the
generated kernels (as function pointers) and the integrators, which are
compiled once for all models and called through C entry points
(:mod:`pymc_odesens.ops.compiled_entries`), so that a graph does not
generate the solvers' machine code again. Only the per-model wrapper is
compiled when a graph is (a few seconds; measured 20 to 50 s per graph when
the wrappers linked the solvers directly); it is not cached across processes
(it closes over the kernels).

A failed solve calls back into Python (a ctypes callback, only on failure)
to count and announce it exactly as in the Python implementation; with
``on_failure="raise"`` the compiled function then raises a RuntimeError
(the warning carries the solver's message).
"""

from __future__ import annotations

import ctypes
import threading

import numba
import numpy as np
from pytensor.link.numba.dispatch import numba_funcify

from pymc_odesens.codegen import (
    compile_adjoint_kernels,
    compile_event_kernels,
    compile_event_sensitivity_kernels,
    compile_kernels,
)
from pymc_odesens.codegen.kernels import compile_sensitivity_kernel
from pymc_odesens.ops.experiments import OdeSpec
from pymc_odesens.ops.failures import record_failure
from pymc_odesens.ops.numba_cache import stable_key
from pymc_odesens.ops.ode_ops import (
    OdeAdjointOp,
    OdeAdjointVJPOp,
    OdeDiscreteAdjointOp,
    OdeDiscreteAdjointVJPOp,
    OdeForwardOp,
    OdeStatesOp,
)
from pymc_odesens.sensitivity.adjoint_controls import resolve_adjoint_controls
from pymc_odesens.sensitivity.event_adjoint import frozen_time
from pymc_odesens.sensitivity.forward import component_names
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.controls import resolve_controls
from pymc_odesens.solvers.errors import OdeSolverError
from pymc_odesens.solvers.integrate import newton_jacobian
from pymc_odesens.solvers.multistep_layout import BDF, OP_WIDTH, snapshot_width

__all__ = ["PHASE_SOLVE", "PHASE_REINTEGRATION", "PHASE_BACKWARD", "PHASE_DISCRETE_REPLAY"]

PHASE_SOLVE = 0
PHASE_REINTEGRATION = 1
PHASE_BACKWARD = 2
PHASE_DISCRETE_REPLAY = 3
_PHASE_NAMES = {
    PHASE_REINTEGRATION: "adjoint re-integration",
    PHASE_BACKWARD: "adjoint backward solve",
    PHASE_DISCRETE_REPLAY: "discrete adjoint replay",
}

_specs: dict[int, OdeSpec] = {}
_specs_lock = threading.Lock()


def _register(spec: OdeSpec) -> int:
    key = stable_key(spec)  # the same in every process: compiled graphs are cached
    with _specs_lock:
        _specs[key] = spec
    return key


def _on_failure(key, experiment, code, t, h, component, extra, phase):
    spec = _specs[key]
    system = spec.system
    if phase == PHASE_BACKWARD:
        names = [f"lambda_{s}" for s in system.states] + [f"mu_{q}" for q in system.params]
    elif phase == PHASE_SOLVE and spec.route == "forward":
        n_y0 = system.n_states if spec.wrt_y0 else 0
        names = component_names(system, system.n_params, n_y0)
    else:
        names = list(system.states)
    label = _PHASE_NAMES.get(phase, spec.method)
    try:
        st.raise_for_status(
            int(code),
            np.array([t, h, component, extra]),
            label,
            names,
            tuple(e.name for e in system.events),
        )
    except OdeSolverError as error:
        record_failure(error, spec.label(int(experiment)), _PHASE_NAMES.get(phase))


_CALLBACK_TYPE = ctypes.CFUNCTYPE(
    None,
    ctypes.c_int64,  # spec key
    ctypes.c_int64,  # experiment
    ctypes.c_int64,  # status code
    ctypes.c_double,  # t
    ctypes.c_double,  # step size
    ctypes.c_int64,  # component
    ctypes.c_double,  # extra
    ctypes.c_int64,  # phase
)
_failure_callback = _CALLBACK_TYPE(_on_failure)


def _closure_constants(spec: OdeSpec) -> tuple[float, bool, bool, int, object]:
    """What every compiled core captures of ``spec``: ``(t0, y0 from the system,
    raise on failure, the spec's key for the failure callback, the callback)``."""
    return (
        spec.t0,
        spec.y0_from_system,
        spec.on_failure == "raise",
        _register(spec),
        _failure_callback,
    )


def _common(spec: OdeSpec):
    system = spec.system
    kernels = compile_kernels(system)
    times = np.ascontiguousarray(
        np.broadcast_to(spec.times, (spec.n_experiments, spec.n_times)), dtype=np.float64
    )
    init_state = kernels.initial_state if spec.y0_from_system else kernels.rhs
    init_jac = kernels.initial_state_jac if spec.y0_from_system else kernels.rhs
    return kernels, times, init_state, init_jac


def _event_tables(spec: OdeSpec, jump, time_sensitivity, fallback):
    """Kernels and tables of the system's events for :func:`integrate_hybrid` (or empty ones).

    Returns ``(times_kernel, slot_event, slot_time, kernels, tables)``: ``kernels`` the six
    event kernels of :func:`integrate_hybrid` (``conditions, rates, triggers, priorities,
    jump, time_sensitivity``), ``tables`` its ``directions, table, cause_table``.
    """
    from pymc_odesens.codegen.event_tables import EVENT_TABLE_WIDTH

    events = compile_event_kernels(spec.system)
    if events is None:
        none = np.zeros(0, dtype=np.int64)
        tables = (none, np.zeros((0, EVENT_TABLE_WIDTH), np.int64), np.zeros((1, 2), np.int64))
        return fallback, none, none, (fallback,) * 6, tables
    kernels = (
        events.conditions,
        events.rates,
        events.triggers,
        events.priorities,
        jump,
        time_sensitivity,
    )
    tables = (events.directions, events.table, events.cause_table)
    return events.times, events.slot_event, events.slot_time, kernels, tables


@numba.njit(cache=True)
def _params_or_dummy(params_row):
    return params_row if params_row.size else np.zeros(1)


@numba.njit
def _resized_rows(a, rows, fill):
    """Copy of the (E, R) array ``a`` with ``rows`` columns, new ones set to ``fill``.

    Explicit loops, not slice assignments: numba compiles them fast.
    """
    out = np.empty((a.shape[0], rows), dtype=a.dtype)
    keep = min(rows, a.shape[1])
    for e in range(a.shape[0]):
        for b in range(keep):
            out[e, b] = a[e, b]
        for b in range(keep, rows):
            out[e, b] = fill
    return out


@numba.njit
def _resized_rows3(a, rows):
    """Copy of the (E, R, W) array ``a`` with ``rows`` rows per experiment, new ones zero."""
    out = np.zeros((a.shape[0], rows, a.shape[2]), dtype=a.dtype)
    for e in range(a.shape[0]):
        for b in range(min(rows, a.shape[1])):
            for c in range(a.shape[2]):
                out[e, b, c] = a[e, b, c]
    return out


@numba.njit
def _add_initial_state_path(init_jac, t0, params, y0_bar, grad_p, jac0, unused):
    """``grad_p += (dy0/dp)^T y0_bar`` for an initial state ``y0(p)`` (``jac0``: work, P x N)."""
    p, n = grad_p.size, jac0.size // max(grad_p.size, 1)
    if p == 0:
        return
    init_jac(t0, unused.ctypes, params.ctypes, unused.ctypes, jac0.ctypes)
    for k in range(p):
        acc = 0.0
        for i in range(n):
            acc += jac0[k * n + i] * y0_bar[i]
        grad_p[k] += acc


def _wrap(core, y0_from_system):
    """The Op's numba function: ``(params)`` or ``(y0, params)``."""
    if y0_from_system:

        @numba.njit
        def with_params(params):
            return core(np.zeros((params.shape[0], 0)), params)

        return with_params

    @numba.njit
    def with_y0(y0, params):
        return core(y0, params)

    return with_y0


def _hybrid_integration(spec, rhs, jac, newton, controls, n_z, n_err, jump, time_sensitivity):
    """Jitted ``integrate(z0, params, times, z_out, stats, info) -> status`` through the
    hybrid driver: the event instants and the runs between them."""
    from pymc_odesens.ops.compiled_entries import (
        explicit_schedule_entry as explicit_schedule,
    )
    from pymc_odesens.ops.compiled_entries import (
        integrate_hybrid_entry as integrate_hybrid,
    )
    from pymc_odesens.solvers.hybrid import METHOD_CODES

    n = spec.system.n_states
    times_kernel, slot_event, slot_time, event_kernels, event_tables = _event_tables(
        spec, jump, time_sensitivity, rhs
    )
    conditions, rates, triggers, priorities, jump, time_sensitivity = event_kernels
    directions, table, cause_table = event_tables
    n_slots = slot_event.size
    rtol = np.full(n_z, controls.relative_tolerance)
    atol = np.tile(controls.absolute_tolerance, n_z // n)
    code_method = METHOD_CODES[spec.method]
    steps = controls.max_num_steps
    t0 = spec.t0

    @numba.njit
    def integrate(z0, pe, times_e, z_out, stats, info):
        # closure arrays are read-only constants to numba; the integrators take writable ones
        rtol_w, atol_w, newton_w = rtol.copy(), atol.copy(), newton.copy()
        directions_w, table_w, cause_w = directions.copy(), table.copy(), cause_table.copy()
        slot_event_w, slot_time_w = slot_event.copy(), slot_time.copy()
        stop_times = np.zeros(n_slots)
        stop_owner = np.zeros(n_slots, dtype=np.int64)
        stop_slot = np.zeros(n_slots, dtype=np.int64)
        no_record_t = np.zeros(0)
        no_rows = np.zeros((0, 0))
        no_log = np.zeros((0, OP_WIDTH))
        no_log_count = np.zeros(2, dtype=np.int64)
        count = np.zeros(1, dtype=np.int64)
        ev_count = np.zeros(1, dtype=np.int64)
        bad = explicit_schedule(
            times_kernel, slot_event_w, slot_time_w, t0, pe, stop_times, stop_owner, stop_slot
        )
        if bad >= 0:
            info[0], info[1], info[2], info[3] = stop_times[0], 0.0, -1.0, slot_time_w[bad]
            return st.BAD_EVENT_TIME
        capacity = 16 + 4 * n_slots
        while True:
            ev_t = np.zeros(capacity)
            ev_index = np.zeros(capacity, dtype=np.int64)
            ev_slot = np.zeros(capacity, dtype=np.int64)
            code = integrate_hybrid(
                code_method,
                rhs,
                jac,
                newton_w,
                conditions,
                rates,
                triggers,
                priorities,
                jump,
                time_sensitivity,
                directions_w,
                table_w,
                cause_w,
                stop_times,
                stop_owner,
                stop_slot,
                t0,
                z0.copy(),
                pe,
                times_e,
                rtol_w,
                atol_w,
                steps,
                n,
                n_z,
                n_err,
                0,
                no_record_t,
                no_rows,
                no_rows,
                count,
                no_log,
                no_rows,
                no_log_count,
                ev_t,
                ev_index,
                ev_slot,
                np.zeros((capacity, 0)),
                ev_count,
                z_out,
                stats,
                info,
            )
            if code != st.RECORD_FULL:
                return code
            capacity *= 4

    return integrate


def _plain_integration(spec, rhs, jac, newton, controls, n_z, n_err):
    """Jitted ``integrate(z0, params, times, z_out, stats, info) -> status`` for a system
    without events: the integrator alone (``run_multistep`` for bdf/adams,
    ``integrate_explicit_rk`` for rk45/ckrk), so that a model without events never
    compiles the hybrid driver and its event machinery (minutes on a new installation)."""
    from pymc_odesens.solvers.event_location import EVENT_OUT_SIZE

    n = spec.system.n_states
    rtol = np.full(n_z, controls.relative_tolerance)
    atol = np.tile(controls.absolute_tolerance, n_z // n)
    steps = controls.max_num_steps
    t0 = spec.t0
    if spec.method in ("bdf", "adams"):
        from pymc_odesens.ops.compiled_entries import run_multistep_entry as run_multistep
        from pymc_odesens.solvers.multistep_layout import ADAMS

        family = BDF if spec.method == "bdf" else ADAMS

        @numba.njit
        def integrate(z0, pe, times_e, z_out, stats, info):
            no_rows = np.zeros((0, 0))
            return run_multistep(
                family,
                rhs,
                jac,
                newton.copy(),
                t0,
                z0.copy(),
                pe,
                times_e,
                rtol.copy(),
                atol.copy(),
                steps,
                n,
                n_z,
                n_err,
                0,
                np.zeros(0),
                no_rows,
                no_rows,
                np.zeros(1, dtype=np.int64),
                np.zeros((0, OP_WIDTH)),
                no_rows,
                np.zeros(2, dtype=np.int64),
                rhs,
                np.zeros(0, dtype=np.int64),
                np.zeros(0),
                np.inf,
                np.zeros(EVENT_OUT_SIZE),
                np.empty(z0.size),
                z_out,
                stats,
                info,
            )

        return integrate

    from pymc_odesens.ops.compiled_entries import (
        integrate_explicit_rk_entry as integrate_explicit_rk,
    )
    from pymc_odesens.solvers.runge_kutta import RK_METHOD_IDS

    method = RK_METHOD_IDS[spec.method]

    @numba.njit
    def integrate(z0, pe, times_e, z_out, stats, info):
        no_rows = np.zeros((0, 0))
        return integrate_explicit_rk(
            rhs,
            t0,
            z0.copy(),
            pe,
            times_e,
            rtol.copy(),
            atol.copy(),
            steps,
            n,
            n_err,
            method,
            0,
            np.zeros(0),
            no_rows,
            no_rows,
            np.zeros(1, dtype=np.int64),
            no_rows,
            rhs,
            np.zeros(0, dtype=np.int64),
            np.zeros(0),
            np.inf,
            np.zeros(EVENT_OUT_SIZE),
            np.empty(z0.size),
            z_out,
            stats,
            info,
        )

    return integrate


def _solve_core(spec: OdeSpec, sensitivities: bool):
    """Jitted ``core(y0, params)`` for the states (and, if asked, forward sensitivities)."""
    system = spec.system
    n, p, n_e, n_t = system.n_states, system.n_params, spec.n_experiments, spec.n_times
    kernels, times, init_state, init_jac = _common(spec)
    controls = resolve_controls(spec.method, n, **spec.controls)
    n_y0_cols = n if (sensitivities and spec.wrt_y0) else 0
    n_blocks = (p + n_y0_cols) if sensitivities else 0
    n_z = n * (1 + n_blocks)
    wrt = "both" if spec.wrt_y0 else "params"
    rhs = compile_sensitivity_kernel(system, wrt) if sensitivities else kernels.rhs
    jac, newton = newton_jacobian(kernels, spec.method, controls.linear_solver)
    n_err = n_z  # Stan/CVODES: sensitivities take part in the error test
    if not system.events:
        integrate = _plain_integration(spec, rhs, jac, newton, controls, n_z, n_err)
    else:
        if sensitivities:
            jump, time_sensitivity = compile_event_sensitivity_kernels(system, wrt)
        else:
            plain = compile_event_kernels(system)
            jump, time_sensitivity = plain.jump, plain.time_sensitivity
        integrate = _hybrid_integration(
            spec, rhs, jac, newton, controls, n_z, n_err, jump, time_sensitivity
        )
    t0, from_system, raise_on_failure, key, callback = _closure_constants(spec)
    n_p_out = p if sensitivities else 0

    @numba.njit
    def core(y0, params):
        y = np.empty((n_e, n_t, n))
        s_p = np.zeros((n_e, n_t, n, n_p_out))
        s_y0 = np.zeros((n_e, n_t, n, n_y0_cols))
        failed = np.zeros(n_e, dtype=np.int8)
        z0 = np.zeros(n_z)
        z_out = np.empty((n_t, n_z))
        stats = np.zeros(len(st.STAT_NAMES), dtype=np.int64)
        info = np.zeros(st.INFO_SIZE)
        unused = np.zeros(1)
        jac0 = np.zeros(max(p, 1) * n)
        for e in range(n_e):
            pe = _params_or_dummy(np.ascontiguousarray(params[e]))
            times_e = times[e].copy()
            z0[:] = 0.0
            if from_system:
                init_state(t0, unused.ctypes, pe.ctypes, unused.ctypes, z0.ctypes)
                if sensitivities and p > 0:
                    init_jac(t0, unused.ctypes, pe.ctypes, unused.ctypes, jac0.ctypes)
                    for k in range(p):
                        for i in range(n):
                            z0[n * (1 + k) + i] = jac0[k * n + i]
            else:
                for i in range(n):
                    z0[i] = y0[e, i]
            for j in range(n_y0_cols):
                z0[n * (1 + p + j) + j] = 1.0
            code = integrate(z0, pe, times_e, z_out, stats, info)
            if code != 0:
                callback(key, e, code, info[0], info[1], np.int64(info[2]), info[3], 0)
                if raise_on_failure:
                    raise RuntimeError("pymc_odesens: ODE solve failed (see the warning)")
                failed[e] = 1
                for t in range(n_t):
                    for i in range(n):
                        y[e, t, i] = z0[i]
                continue
            for t in range(n_t):
                for i in range(n):
                    y[e, t, i] = z_out[t, i]
                for k in range(n_p_out):
                    for i in range(n):
                        s_p[e, t, i, k] = z_out[t, n * (1 + k) + i]
                for j in range(n_y0_cols):
                    for i in range(n):
                        s_y0[e, t, i, j] = z_out[t, n * (1 + p + j) + i]
        return y, s_p, s_y0, failed

    return core


@numba_funcify.register(OdeStatesOp)
def _funcify_states(op, node=None, **kwargs):
    core = _solve_core(op.spec, sensitivities=False)

    @numba.njit
    def states(y0, params):
        y, s_p, s_y0, failed = core(y0, params)
        return y, failed

    return _wrap(states, op.spec.y0_from_system)


@numba_funcify.register(OdeForwardOp)
def _funcify_forward(op, node=None, **kwargs):
    core = _solve_core(op.spec, sensitivities=True)
    if op.spec.wrt_y0:
        return _wrap(core, op.spec.y0_from_system)

    @numba.njit
    def without_y0_columns(y0, params):
        y, s_p, s_y0, failed = core(y0, params)
        return y, s_p, failed

    return _wrap(without_y0_columns, op.spec.y0_from_system)


def _adjoint_setup(spec: OdeSpec):
    from pymc_odesens.solvers.multistep_layout import ADAMS, BDF

    controls = resolve_adjoint_controls(spec.system.n_states, **spec.controls)
    family = {"bdf": BDF, "adams": ADAMS}
    return controls, family[controls.forward_method], family[controls.backward_method]


@numba_funcify.register(OdeAdjointOp)
@numba_funcify.register(OdeDiscreteAdjointOp)
def _funcify_adjoint_forward(op, node=None, **kwargs):
    """The forward phase of both adjoints; the discrete one also returns its step logs."""
    from pymc_odesens.ops.compiled_entries import (
        explicit_schedule_entry as explicit_schedule,
    )
    from pymc_odesens.ops.compiled_entries import (
        integrate_hybrid_entry as integrate_hybrid,
    )
    from pymc_odesens.solvers.hybrid import METHOD_CODES

    spec = op.spec
    system = spec.system
    n, _p, n_e, n_t = system.n_states, system.n_params, spec.n_experiments, spec.n_times
    kernels, times, init_state, _ = _common(spec)
    controls, _, _ = _adjoint_setup(spec)
    rhs = kernels.rhs
    jac, newton = newton_jacobian(kernels, controls.forward_method, controls.linear_solver)
    plain = compile_event_kernels(system)
    times_kernel, slot_event, slot_time, event_kernels, event_tables = _event_tables(
        spec,
        rhs if plain is None else plain.jump,
        rhs if plain is None else plain.time_sensitivity,
        rhs,
    )
    conditions, rates, triggers, priorities, jump, time_sensitivity = event_kernels
    directions, table, cause_table = event_tables
    n_slots = slot_event.size
    code_method = METHOD_CODES[controls.forward_method]
    rtol = np.full(n, controls.relative_tolerance_forward)
    atol = controls.absolute_tolerance_forward
    steps = controls.max_num_steps
    every = controls.num_steps_between_checkpoints
    t0, from_system, raise_on_failure, key, callback = _closure_constants(spec)
    discrete = isinstance(op, OdeDiscreteAdjointOp)
    snap_width = snapshot_width(BDF, n)

    @numba.njit
    def core(y0, params):
        y = np.empty((n_e, n_t, n))
        failed = np.zeros(n_e, dtype=np.int8)
        counts = np.zeros((n_e, 2), dtype=np.int64)  # checkpoints, forward steps
        ev_counts = np.zeros(n_e, dtype=np.int64)
        log_counts = np.zeros((n_e, 2), dtype=np.int64)
        capacity = 64
        ev_capacity = 16 + 4 * n_slots
        # the discrete adjoint's step logs and history snapshots (one per checkpoint)
        log_capacity = 1024 if discrete else 0
        logs = np.zeros((n_e, log_capacity, OP_WIDTH))
        snaps = np.zeros((n_e, capacity if discrete else 0, snap_width))
        op_count = np.zeros(2, dtype=np.int64)
        ckpt_t = np.full((n_e, capacity), np.nan)
        ckpt_y = np.zeros((n_e, capacity, n))
        ev_t = np.full((n_e, ev_capacity), np.nan)
        ev_index = np.zeros((n_e, ev_capacity), dtype=np.int64)
        ev_slot = np.zeros((n_e, ev_capacity), dtype=np.int64)
        ev_y = np.zeros((n_e, ev_capacity, n))
        y_start = np.zeros(n)
        stats = np.zeros(len(st.STAT_NAMES), dtype=np.int64)
        info = np.zeros(st.INFO_SIZE)
        count = np.zeros(1, dtype=np.int64)
        ev_count = np.zeros(1, dtype=np.int64)
        unused = np.zeros(1)
        no_rows = np.zeros((0, 0))
        out = np.empty((n_t, n))
        rtol_w, atol_w, newton_w = rtol.copy(), atol.copy(), newton.copy()
        directions_w, table_w, cause_w = directions.copy(), table.copy(), cause_table.copy()
        slot_event_w, slot_time_w = slot_event.copy(), slot_time.copy()
        stop_times = np.zeros(n_slots)
        stop_owner = np.zeros(n_slots, dtype=np.int64)
        stop_slot = np.zeros(n_slots, dtype=np.int64)
        for e in range(n_e):
            pe = _params_or_dummy(np.ascontiguousarray(params[e]))
            times_e = times[e].copy()
            if from_system:
                init_state(t0, unused.ctypes, pe.ctypes, unused.ctypes, y_start.ctypes)
            else:
                for i in range(n):
                    y_start[i] = y0[e, i]
            bad = explicit_schedule(
                times_kernel, slot_event_w, slot_time_w, t0, pe, stop_times, stop_owner, stop_slot
            )
            if bad >= 0:
                code = st.BAD_EVENT_TIME
                info[0], info[1], info[2], info[3] = stop_times[0], 0.0, -1.0, slot_time_w[bad]
            else:
                while True:
                    stats[:] = 0
                    code = integrate_hybrid(
                        code_method,
                        rhs,
                        jac,
                        newton_w,
                        conditions,
                        rates,
                        triggers,
                        priorities,
                        jump,
                        time_sensitivity,
                        directions_w,
                        table_w,
                        cause_w,
                        stop_times,
                        stop_owner,
                        stop_slot,
                        t0,
                        y_start.copy(),
                        pe,
                        times_e,
                        rtol_w,
                        atol_w,
                        steps,
                        n,
                        n,
                        n,
                        every,
                        ckpt_t[e],
                        ckpt_y[e],
                        no_rows,
                        count,
                        logs[e],
                        snaps[e],
                        op_count,
                        ev_t[e],
                        ev_index[e],
                        ev_slot[e],
                        ev_y[e],
                        ev_count,
                        out,
                        stats,
                        info,
                    )
                    if code != st.RECORD_FULL:
                        break
                    if ev_count[0] >= ev_capacity:
                        ev_capacity *= 4
                        ev_t = _resized_rows(ev_t, ev_capacity, np.nan)
                        ev_index = _resized_rows(ev_index, ev_capacity, 0)
                        ev_slot = _resized_rows(ev_slot, ev_capacity, 0)
                        ev_y = _resized_rows3(ev_y, ev_capacity)
                    elif discrete and op_count[0] >= log_capacity - 1:
                        log_capacity *= 4
                        logs = _resized_rows3(logs, log_capacity)
                    else:
                        capacity *= 4
                        if discrete:
                            snaps = _resized_rows3(snaps, capacity)
                        ckpt_t = _resized_rows(ckpt_t, capacity, np.nan)
                        ckpt_y = _resized_rows3(ckpt_y, capacity)
            if code != 0:
                callback(key, e, code, info[0], info[1], np.int64(info[2]), info[3], 0)
                if raise_on_failure:
                    raise RuntimeError("pymc_odesens: ODE solve failed (see the warning)")
                failed[e] = 1
                for t in range(n_t):
                    for i in range(n):
                        y[e, t, i] = y_start[i]
                continue
            counts[e, 0] = count[0]
            counts[e, 1] = stats[st.N_STEPS]
            ev_counts[e] = ev_count[0]
            log_counts[e, 0] = op_count[0]
            log_counts[e, 1] = op_count[1]
            for t in range(n_t):
                for i in range(n):
                    y[e, t, i] = out[t, i]
        ev_width = max(1, ev_counts.max())
        ckpt_t_out = _resized_rows(ckpt_t, max(1, counts[:, 0].max()), np.nan)
        ckpt_y_out = _resized_rows3(ckpt_y, max(1, counts[:, 0].max()))
        ev_t_out = _resized_rows(ev_t, ev_width, np.nan)
        ev_y_out = _resized_rows3(ev_y, ev_width)
        ev_id = np.zeros((n_e, ev_width, 2), dtype=np.int64)
        for a in range(n_e):
            for b in range(ev_width):
                ev_id[a, b, 0] = ev_index[a, b]
                ev_id[a, b, 1] = ev_slot[a, b]
        logs_out = _resized_rows3(logs, max(1, log_counts[:, 0].max()))
        snaps_out = _resized_rows3(snaps, max(1, log_counts[:, 1].max()))
        record = (ckpt_t_out, ckpt_y_out, counts, ev_t_out, ev_id, ev_y_out, ev_counts)
        return y, record, (logs_out, snaps_out, log_counts), failed

    if discrete:

        @numba.njit
        def with_logs(y0, params):
            y, record, logged, failed = core(y0, params)
            return (y, *record, *logged, failed)

        return _wrap(with_logs, spec.y0_from_system)

    @numba.njit
    def without_logs(y0, params):
        y, record, _, failed = core(y0, params)
        return (y, *record, failed)

    return _wrap(without_logs, spec.y0_from_system)


@numba_funcify.register(OdeAdjointVJPOp)
def _funcify_adjoint_vjp(op, node=None, **kwargs):
    from pymc_odesens.codegen.recorded_trajectory import new_trajectory_buffer
    from pymc_odesens.ops.compiled_entries import backward_pass_entry as backward_pass
    from pymc_odesens.sensitivity.adjoint_backward import BACKWARD_INFO_SIZE
    from pymc_odesens.sensitivity.adjoint_backward import (
        PHASE_REINTEGRATION as BACKWARD_PHASE_REINTEGRATION,
    )

    spec = op.spec
    system = spec.system
    n, p, n_e = system.n_states, system.n_params, spec.n_experiments
    kernels, times, _, init_jac = _common(spec)
    controls, family_f, family_b = _adjoint_setup(spec)
    adjoint_rhs, adjoint_jac = compile_adjoint_kernels(system)
    rhs = kernels.rhs
    jac, newton = newton_jacobian(kernels, controls.forward_method, controls.linear_solver)
    _, newton_adjoint = newton_jacobian(
        kernels, controls.backward_method, controls.linear_solver, transposed=True
    )
    events = compile_event_kernels(system)
    adjoint_jump = adjoint_rhs if events is None else events.adjoint_jump
    time_gradient = adjoint_rhs if events is None else events.time_gradient
    rtol_f = np.full(n, controls.relative_tolerance_forward)
    atol_f = controls.absolute_tolerance_forward
    rtol_b = np.concatenate(
        (
            np.full(n, controls.relative_tolerance_backward),
            np.full(p, controls.relative_tolerance_quadrature),
        )
    )
    atol_b = np.concatenate(
        (controls.absolute_tolerance_backward, np.full(p, controls.absolute_tolerance_quadrature))
    )
    steps = controls.max_num_steps
    kind = controls.interpolation_polynomial
    between = controls.num_steps_between_checkpoints
    t0, from_system, raise_on_failure, key, callback = _closure_constants(spec)

    @numba.njit
    def core(params, ckpt_t, ckpt_y, counts, ev_t, ev_id, ev_y, ev_counts, failed, cotangent):
        grad_y0 = np.zeros((n_e, n))
        grad_p = np.zeros((n_e, p))
        backward_failed = np.zeros(n_e, dtype=np.int8)
        z = np.zeros(n + p)
        stats_f = np.zeros(len(st.STAT_NAMES), dtype=np.int64)
        stats_b = np.zeros(len(st.STAT_NAMES), dtype=np.int64)
        info = np.zeros(BACKWARD_INFO_SIZE)
        unused = np.zeros(1)
        jac0 = np.zeros(max(p, 1) * n)
        rtol_fw, atol_fw, rtol_bw, atol_bw = (
            rtol_f.copy(),
            atol_f.copy(),
            rtol_b.copy(),
            atol_b.copy(),
        )
        newton_w, newton_adjoint_w = newton.copy(), newton_adjoint.copy()
        for e in range(n_e):
            if failed[e]:
                continue
            pe = _params_or_dummy(np.ascontiguousarray(params[e]))
            times_e = times[e].copy()
            cot = np.ascontiguousarray(cotangent[e])
            n_ckpt = counts[e, 0]
            # a re-integrated stretch takes about the forward steps between checkpoints
            # (or of the whole run when that is shorter); the record grows if needed
            capacity = 2 * min(between, counts[e, 1]) + 64
            c_t = np.ascontiguousarray(ckpt_t[e, :n_ckpt])
            c_y = np.ascontiguousarray(ckpt_y[e, :n_ckpt])
            n_ev = ev_counts[e]
            e_t = np.ascontiguousarray(ev_t[e, :n_ev])
            e_index = np.ascontiguousarray(ev_id[e, :n_ev, 0])
            e_slot = np.ascontiguousarray(ev_id[e, :n_ev, 1])
            e_y = np.ascontiguousarray(ev_y[e, :n_ev])
            t_frozen = frozen_time(e_t, e_index)
            while True:
                buf = new_trajectory_buffer(np.ascontiguousarray(params[e]), n, capacity, kind)
                code = backward_pass(
                    family_f,
                    family_b,
                    rhs,
                    jac,
                    newton_w,
                    adjoint_rhs,
                    adjoint_jac,
                    newton_adjoint_w,
                    t0,
                    pe,
                    times_e,
                    cot,
                    c_t,
                    c_y,
                    n_ckpt,
                    rtol_fw,
                    atol_fw,
                    rtol_bw,
                    atol_bw,
                    steps,
                    buf,
                    adjoint_jump,
                    time_gradient,
                    e_t,
                    e_index,
                    e_slot,
                    e_y,
                    t_frozen,
                    z,
                    stats_f,
                    stats_b,
                    info,
                )
                if code != st.RECORD_FULL:
                    break
                capacity *= 2
            if code != 0:
                phase = PHASE_REINTEGRATION
                if info[4] != BACKWARD_PHASE_REINTEGRATION:
                    phase = PHASE_BACKWARD
                callback(key, e, code, info[0], info[1], np.int64(info[2]), info[3], phase)
                if raise_on_failure:
                    raise RuntimeError("pymc_odesens: adjoint solve failed (see the warning)")
                backward_failed[e] = 1
                continue
            for i in range(n):
                grad_y0[e, i] = z[i]
            for k in range(p):
                grad_p[e, k] = z[n + k]
            if from_system:
                _add_initial_state_path(init_jac, t0, pe, z, grad_p[e], jac0, unused)
        return grad_y0, grad_p, backward_failed

    if from_system:

        @numba.njit
        def vjp_params(
            params, ckpt_t, ckpt_y, counts, ev_t, ev_id, ev_y, ev_counts, failed, cotangent
        ):
            return core(
                params, ckpt_t, ckpt_y, counts, ev_t, ev_id, ev_y, ev_counts, failed, cotangent
            )

        return vjp_params

    @numba.njit
    def vjp(y0, params, ckpt_t, ckpt_y, counts, ev_t, ev_id, ev_y, ev_counts, failed, cotangent):
        return core(params, ckpt_t, ckpt_y, counts, ev_t, ev_id, ev_y, ev_counts, failed, cotangent)

    return vjp


@numba_funcify.register(OdeDiscreteAdjointVJPOp)
def _funcify_discrete_adjoint_vjp(op, node=None, **kwargs):
    from pymc_odesens.ops.compiled_entries import discrete_adjoint_entry as discrete_adjoint

    spec = op.spec
    system = spec.system
    n, p, n_e = system.n_states, system.n_params, spec.n_experiments
    kernels, times, _, init_jac = _common(spec)
    controls = resolve_adjoint_controls(n, **spec.controls)
    rhs, vjp_y, vjp_p = kernels.rhs, kernels.vjp_y, kernels.vjp_p
    jac, newton = newton_jacobian(kernels, "bdf", controls.linear_solver)
    events = compile_event_kernels(system)
    adjoint_jump = rhs if events is None else events.adjoint_jump
    time_gradient = rhs if events is None else events.time_gradient
    rtol = np.full(n, controls.relative_tolerance_forward)
    atol = controls.absolute_tolerance_forward
    t0, from_system, raise_on_failure, key, callback = _closure_constants(spec)

    @numba.njit
    def core(params, ev_t, ev_id, ev_y, ev_counts, logs, snaps, counts, failed, cotangent):
        grad_y0 = np.zeros((n_e, n))
        grad_p = np.zeros((n_e, p))
        backward_failed = np.zeros(n_e, dtype=np.int8)
        y0_bar = np.zeros(n)
        p_bar = np.zeros(p)
        stats = np.zeros(len(st.STAT_NAMES), dtype=np.int64)
        info = np.zeros(st.INFO_SIZE)
        unused = np.zeros(1)
        jac0 = np.zeros(max(p, 1) * n)
        rtol_w, atol_w, newton_w = rtol.copy(), atol.copy(), newton.copy()
        for e in range(n_e):
            if failed[e]:
                continue
            pe = _params_or_dummy(np.ascontiguousarray(params[e]))
            code = discrete_adjoint(
                rhs,
                jac,
                newton_w,
                vjp_y,
                vjp_p,
                pe,
                times[e].copy(),
                np.ascontiguousarray(cotangent[e]),
                np.ascontiguousarray(logs[e, : counts[e, 0]]),
                np.ascontiguousarray(snaps[e, : counts[e, 1]]),
                counts[e, 0],
                counts[e, 1],
                rtol_w,
                atol_w,
                adjoint_jump,
                time_gradient,
                np.ascontiguousarray(ev_t[e, : ev_counts[e]]),
                np.ascontiguousarray(ev_id[e, : ev_counts[e], 0]),
                np.ascontiguousarray(ev_id[e, : ev_counts[e], 1]),
                np.ascontiguousarray(ev_y[e, : ev_counts[e]]),
                y0_bar,
                p_bar,
                stats,
                info,
            )
            if code != 0:
                callback(
                    key,
                    e,
                    code,
                    info[0],
                    info[1],
                    np.int64(info[2]),
                    info[3],
                    PHASE_DISCRETE_REPLAY,
                )
                if raise_on_failure:
                    raise RuntimeError("pymc_odesens: adjoint solve failed (see the warning)")
                backward_failed[e] = 1
                continue
            for i in range(n):
                grad_y0[e, i] = y0_bar[i]
            for k in range(p):
                grad_p[e, k] = p_bar[k]
            if from_system:
                _add_initial_state_path(init_jac, t0, pe, y0_bar, grad_p[e], jac0, unused)
        return grad_y0, grad_p, backward_failed

    # inputs: [y0,] params, then the record (checkpoints: unused here), event log, step
    # logs, failed and the cotangent
    if from_system:

        @numba.njit
        def vjp_params(params, c_t, c_y, c_n, ev_t, ev_id, ev_y, ev_n, logs, snaps, n, f, cot):
            return core(params, ev_t, ev_id, ev_y, ev_n, logs, snaps, n, f, cot)

        return vjp_params

    @numba.njit
    def vjp(y0, params, c_t, c_y, c_n, ev_t, ev_id, ev_y, ev_n, logs, snaps, n, f, cot):
        return core(params, ev_t, ev_id, ev_y, ev_n, logs, snaps, n, f, cot)

    return vjp
