"""numba implementation of :class:`~pymc_odesens.ops.ode_ops.OdePbsOp` (NUMBA mode, nutpie).

The same two compiled steps as :func:`pymc_odesens.sensitivity.pbs.pbs_sensitivities`,
called from the graph's numba function through C entry points
(:mod:`pymc_odesens.ops.compiled_entries`): the state solve records every accepted
step (``rk45``/``ckrk`` through the explicit Runge-Kutta core, which also records
``rk45``'s continuous extension; ``bdf``/``adams`` through the hybrid driver, without
events), then the march carries ``S`` over the records. The recording arrays grow
fourfold when full, as in the Python implementation.

Failures are handled as by the other compiled Ops
(:mod:`pymc_odesens.ops.numba_dispatch`): a failed state solve, or a march whose
``S`` is not finite, calls back into Python to count and announce it
(:class:`~pymc_odesens.sensitivity.NonFiniteSensitivityError` for the latter).
"""

from __future__ import annotations

import ctypes

import numba
import numpy as np
from pytensor.link.numba.dispatch import numba_funcify

from pymc_odesens.codegen.sensitivity_source import sensitivity_blocks
from pymc_odesens.ops.failures import record_failure
from pymc_odesens.ops.numba_dispatch import (
    _closure_constants,
    _common,
    _params_or_dummy,
    _specs,
    _wrap,
)
from pymc_odesens.ops.ode_ops import OdePbsOp
from pymc_odesens.sensitivity.pbs_errors import non_finite_sensitivity_error
from pymc_odesens.sensitivity.pbs_options import DORMAND_PRINCE_DENSE, PBS_ALGORITHMS
from pymc_odesens.sensitivity.pbs_report import BRANCH_NAMES
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.controls import resolve_controls
from pymc_odesens.solvers.event_location import EVENT_OUT_SIZE
from pymc_odesens.solvers.integrate import newton_jacobian
from pymc_odesens.solvers.multistep_layout import OP_WIDTH

__all__: list[str] = []


def _on_march_failure(key, experiment, t, jacobian_not_finite):
    spec = _specs[key]
    error = non_finite_sensitivity_error(spec.route, t, bool(jacobian_not_finite))
    record_failure(error, spec.label(int(experiment)))


_MARCH_CALLBACK_TYPE = ctypes.CFUNCTYPE(
    None,
    ctypes.c_int64,  # spec key
    ctypes.c_int64,  # experiment
    ctypes.c_double,  # first output time with a non-finite S
    ctypes.c_int64,  # 1: the march stopped at a non-finite Jacobian
)
_march_failure_callback = _MARCH_CALLBACK_TYPE(_on_march_failure)


@numba.njit(cache=True)
def _first_non_finite(s_out):
    """Index of the first output time whose ``S`` is not finite, or -1."""
    for t in range(s_out.shape[0]):
        for x in s_out[t].ravel():
            if not np.isfinite(x):
                return t
    return -1


def _pbs_core(spec):
    """Jitted ``core(y0, params)``: ``(y, S, S_y0, branches, failed)`` of ``spec.route``."""
    from pymc_odesens.codegen.event_tables import EVENT_TABLE_WIDTH
    from pymc_odesens.ops.compiled_entries import (
        integrate_explicit_rk_entry as integrate_explicit_rk,
    )
    from pymc_odesens.ops.compiled_entries import (
        integrate_hybrid_entry as integrate_hybrid,
    )
    from pymc_odesens.ops.compiled_entries import (
        march_sensitivities_entry as march_sensitivities,
    )
    from pymc_odesens.sensitivity.pbs import INITIAL_CAPACITY
    from pymc_odesens.sensitivity.pbs_march import COUNTER_NAMES
    from pymc_odesens.solvers.hybrid import METHOD_CODES

    system = spec.system
    n, p, n_e, n_t = system.n_states, system.n_params, spec.n_experiments, spec.n_times
    kernels, times, init_state, init_jac = _common(spec)
    controls = resolve_controls(spec.method, n, **spec.controls)
    options = spec.pbs_options
    n_forced, n_y0_cols = sensitivity_blocks(system, "both" if spec.wrt_y0 else "params")
    n_cols = n_forced + n_y0_cols
    algorithm = PBS_ALGORITHMS[spec.route]
    kind = options.interpolation_code(spec.method)
    dense_rows = 1 if kind == DORMAND_PRINCE_DENSE else 0
    march_controls = options.compiled_controls()
    norm_code = options.norm_code
    test_both = 1 if options.steady_state_test == "jacobians" else 0
    trapezoid = 1 if options.exp_step_for(spec.route) == "trapezoid" else 0
    explicit_rk = spec.method in ("rk45", "ckrk")
    code_method = METHOD_CODES[spec.method]  # rk45 and ckrk: their Runge-Kutta method ids
    rtol = np.full(n, controls.relative_tolerance)
    atol = controls.absolute_tolerance
    steps = controls.max_num_steps
    rhs, jac_y, jac_p = kernels.rhs, kernels.jac_y, kernels.jac_p  # the march's dense J_y
    jac_newton, newton = newton_jacobian(kernels, spec.method, controls.linear_solver)
    n_branches, n_counters = len(BRANCH_NAMES), len(COUNTER_NAMES)
    t0, from_system, raise_on_failure, key, callback = _closure_constants(spec)
    march_callback = _march_failure_callback

    @numba.njit
    def core(y0, params):
        y = np.empty((n_e, n_t, n))
        s_p = np.zeros((n_e, n_t, n, p))
        s_y0 = np.zeros((n_e, n_t, n, n_y0_cols))
        branches = np.zeros((n_e, n_branches), dtype=np.int64)
        failed = np.zeros(n_e, dtype=np.int8)
        y_start = np.zeros(n)
        s0 = np.zeros((n_cols, n))
        s_out = np.empty((n_t, n_cols, n))
        y_out = np.empty((n_t, n))
        stats = np.zeros(len(st.STAT_NAMES), dtype=np.int64)
        info = np.zeros(st.INFO_SIZE)
        counters = np.zeros(n_counters, dtype=np.int64)
        unused = np.zeros(1)
        jac0 = np.zeros(max(p, 1) * n)
        # closure arrays are read-only constants to numba; the cores take writable ones
        rtol_w, atol_w, march_controls_w = rtol.copy(), atol.copy(), march_controls.copy()
        newton_w = newton.copy()
        no_int = np.zeros(0, dtype=np.int64)
        no_float = np.zeros(0)
        no_rows = np.zeros((0, 0))
        no_table = np.zeros((0, EVENT_TABLE_WIDTH), dtype=np.int64)
        no_cause = np.zeros((1, 2), dtype=np.int64)
        no_log = np.zeros((0, OP_WIDTH))
        no_log_count = np.zeros(2, dtype=np.int64)
        ev_count = np.zeros(1, dtype=np.int64)
        event_out = np.zeros(EVENT_OUT_SIZE)
        rec_count = np.zeros(1, dtype=np.int64)
        capacity = INITIAL_CAPACITY
        rec_t = np.empty(0)
        rec_y = np.empty((0, n))
        rec_f = np.empty((0, n))
        rec_dense = np.empty((0, n))
        for e in range(n_e):
            pe = _params_or_dummy(np.ascontiguousarray(params[e]))
            times_e = times[e].copy()
            s0[:, :] = 0.0
            if from_system:
                init_state(t0, unused.ctypes, pe.ctypes, unused.ctypes, y_start.ctypes)
                if n_forced > 0:
                    init_jac(t0, unused.ctypes, pe.ctypes, unused.ctypes, jac0.ctypes)
                    for k in range(n_forced):
                        for i in range(n):
                            s0[k, i] = jac0[k * n + i]
            else:
                for i in range(n):
                    y_start[i] = y0[e, i]
            for j in range(n_y0_cols):
                s0[n_forced + j, j] = 1.0
            while True:
                if rec_t.size < capacity:  # first use, or grown fourfold after a full record
                    rec_t = np.empty(capacity)
                    rec_y = np.empty((capacity, n))
                    rec_f = np.empty((capacity, n))
                    rec_dense = np.empty((capacity * dense_rows, n))
                rec_count[0] = 0
                if explicit_rk:
                    code = integrate_explicit_rk(
                        rhs,
                        t0,
                        y_start.copy(),
                        pe,
                        times_e,
                        rtol_w,
                        atol_w,
                        steps,
                        n,
                        n,
                        code_method,
                        1,
                        rec_t,
                        rec_y,
                        rec_f,
                        rec_count,
                        rec_dense,
                        rhs,
                        no_int,
                        no_float,
                        np.inf,
                        event_out,
                        no_float,
                        y_out,
                        stats,
                        info,
                    )
                else:
                    code = integrate_hybrid(
                        code_method,
                        rhs,
                        jac_newton,
                        newton_w,
                        rhs,  # the six event kernels (never called: no events)
                        rhs,
                        rhs,
                        rhs,
                        rhs,
                        rhs,
                        no_int,  # directions
                        no_table,
                        no_cause,
                        no_float,  # stop_times, stop_owner, stop_slot
                        no_int,
                        no_int,
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
                        1,
                        rec_t,
                        rec_y,
                        rec_f,
                        rec_count,
                        no_log,
                        no_rows,
                        no_log_count,
                        no_float,
                        no_int,
                        no_int,
                        no_rows,
                        ev_count,
                        y_out,
                        stats,
                        info,
                    )
                if code != st.RECORD_FULL:
                    break
                capacity *= 4
            bad = -1
            if code == 0:
                n_rec = rec_count[0]
                n_steps = max(n_rec - 1, 0)
                branch = np.zeros(n_steps, dtype=np.int64)
                substeps = np.zeros(n_steps, dtype=np.int64)
                counters[:] = 0
                status = march_sensitivities(
                    algorithm,
                    rhs,
                    jac_y,
                    jac_p,
                    pe,
                    n_forced,
                    rec_t,
                    rec_y,
                    rec_f,
                    rec_dense,
                    n_rec,
                    kind,
                    times_e,
                    s0,
                    march_controls_w,
                    norm_code,
                    test_both,
                    trapezoid,
                    s_out,
                    branch,
                    substeps,
                    counters,
                )
                bad = _first_non_finite(s_out)
                if bad >= 0:
                    march_callback(key, e, times_e[bad], status)
            else:
                callback(key, e, code, info[0], info[1], np.int64(info[2]), info[3], 0)
            if code != 0 or bad >= 0:
                if raise_on_failure:
                    raise RuntimeError("pymc_odesens: ODE solve failed (see the warning)")
                failed[e] = 1
                for t in range(n_t):
                    for i in range(n):
                        y[e, t, i] = y_start[i]
                continue
            for b in branch:
                branches[e, b] += 1
            for t in range(n_t):
                for i in range(n):
                    y[e, t, i] = y_out[t, i]
                for k in range(p):
                    for i in range(n):
                        s_p[e, t, i, k] = s_out[t, k, i]
                for j in range(n_y0_cols):
                    for i in range(n):
                        s_y0[e, t, i, j] = s_out[t, n_forced + j, i]
        return y, s_p, s_y0, branches, failed

    return core


@numba_funcify.register(OdePbsOp)
def _funcify_pbs(op, node=None, **kwargs):
    core = _pbs_core(op.spec)
    if op.spec.wrt_y0:
        return _wrap(core, op.spec.y0_from_system)

    @numba.njit
    def without_y0_columns(y0, params):
        y, s_p, s_y0, branches, failed = core(y0, params)
        return y, s_p, branches, failed

    return _wrap(without_y0_columns, op.spec.y0_from_system)
