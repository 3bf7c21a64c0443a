"""numba implementations of the steady-state Ops (PyTensor's NUMBA mode, nutpie).

Each Op becomes a jitted loop over the experiments that calls the compiled steady-state
routines through their C entry points (:mod:`pymc_odesens.ops.steady_state_entries`) with
the generated kernels as function pointers, as :mod:`pymc_odesens.ops.numba_dispatch`
does for the trajectories. A failure calls back into Python (only then) to build, count and
announce the same :class:`~pymc_odesens.SteadyStateError` as the Python implementation.
"""

from __future__ import annotations

import ctypes

import numba
import numpy as np
from pytensor.link.numba.dispatch import numba_funcify

from pymc_odesens.caching.compile_notice import compiling
from pymc_odesens.ops.failures import record_failure
from pymc_odesens.ops.numba_cache import stable_key
from pymc_odesens.ops.numba_dispatch import _add_initial_state_path, _params_or_dummy
from pymc_odesens.ops.steady_state_experiments import (
    INTEGRATED_PHASE,
    SteadyStateSpec,
    integrated_vjp,
)
from pymc_odesens.ops.steady_state_ops import SteadyStateOp, SteadyStateVJPOp
from pymc_odesens.sensitivity import steady_state_status as ss
from pymc_odesens.sensitivity.steady_state_errors import (
    SteadyStateError,
    SteadyStateSingularError,
)
from pymc_odesens.sensitivity.steady_state_linear import MIN_RECIPROCAL_CONDITION
from pymc_odesens.sensitivity.steady_state_problem import steady_state_error

__all__: list[str] = []

_steady_specs: dict[int, SteadyStateSpec] = {}


def _on_failure(key, experiment, status, info_address, stats_address):
    spec = _steady_specs[key]
    info = np.ctypeslib.as_array((ctypes.c_double * ss.INFO_SIZE).from_address(info_address))
    stats = np.ctypeslib.as_array((ctypes.c_int64 * len(ss.STAT_NAMES)).from_address(stats_address))
    stats_dict = {name: int(v) for name, v in zip(ss.STAT_NAMES, stats)}
    error = steady_state_error(int(status), info.copy(), stats_dict, spec.system, spec.controls)
    record_failure(error, spec.label(int(experiment)))


def _gradient_fallback(key, experiment, y0_address, p_address, w_address, gp_address, gy_address):
    """The gradient of an experiment whose bordered Jacobian is singular (or of every one
    with the control ``sensitivity="integration"``): the integrated sensitivities of
    :func:`~pymc_odesens.ops.steady_state_experiments.integrated_vjp`, written to the
    gradient rows. Returns 0, or 1 when the compiled caller must raise (the failure was
    announced as a warning)."""
    spec = _steady_specs[key]
    n, n_p = spec.system.n_states, spec.system.n_params
    experiment = int(experiment)

    def view(address, size):
        return np.ctypeslib.as_array((ctypes.c_double * size).from_address(address))

    grad_p, grad_y0 = view(gp_address, n_p) if n_p else np.zeros(0), view(gy_address, n)
    try:
        if spec.controls.sensitivity == "implicit":
            raise SteadyStateSingularError(
                f"{spec.label(experiment)}: the bordered Jacobian at the steady state is "
                "singular, so the implicit function theorem gives no gradient; the "
                "steady-state control sensitivity='auto' or 'integration' integrates the "
                "sensitivities instead"
            )
        p_kernel = view(p_address, max(n_p, 1)).copy()
        if spec.y0_from_system:
            start = spec.problem.kernels.evaluate("initial_state", spec.t0, np.zeros(n), p_kernel)
        else:
            start = view(y0_address, n).copy()
        cotangent = view(w_address, n).copy()
        integrated_vjp(spec, start, p_kernel, experiment, cotangent, grad_p, grad_y0)
    except SteadyStateError as error:
        if spec.on_failure == "raise" or isinstance(error, SteadyStateSingularError):
            record_failure(error, spec.label(experiment))
            return 1
        record_failure(error, spec.label(experiment), INTEGRATED_PHASE)
        grad_p[:] = 0.0
        grad_y0[:] = 0.0
    except Exception as error:  # noqa: BLE001 - a callback cannot raise into numba
        record_failure(error, spec.label(experiment), INTEGRATED_PHASE)
        return 1
    return 0


_FALLBACK_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int64,
    ctypes.c_int64,  # spec key
    ctypes.c_int64,  # experiment
    ctypes.c_int64,  # address of the start state y0 (float64, N; unused with y0(p))
    ctypes.c_int64,  # address of the parameters (float64, max(P, 1))
    ctypes.c_int64,  # address of the cotangent dL/dy* (float64, N)
    ctypes.c_int64,  # address of dL/dp (float64, P), written
    ctypes.c_int64,  # address of dL/dy0 (float64, N), written
)
_fallback_callback = _FALLBACK_TYPE(_gradient_fallback)

_CALLBACK_TYPE = ctypes.CFUNCTYPE(
    None,
    ctypes.c_int64,  # spec key
    ctypes.c_int64,  # experiment
    ctypes.c_int64,  # status
    ctypes.c_int64,  # address of info (float64, steady_state_status.INFO_SIZE)
    ctypes.c_int64,  # address of stats (int64)
)
_failure_callback = _CALLBACK_TYPE(_on_failure)


def _setup(spec: SteadyStateSpec):
    problem = spec.problem
    key = stable_key(spec)  # the same in every process: compiled graphs are cached
    _steady_specs[key] = spec
    kernels = problem.kernels
    init_state = kernels.initial_state if spec.y0_from_system else kernels.rhs
    init_jac = kernels.initial_state_jac if spec.y0_from_system else kernels.rhs
    return problem, kernels, init_state, init_jac, key


@numba_funcify.register(SteadyStateOp)
def _funcify_steady_state(op, node=None, **kwargs):
    with compiling("the steady-state entry points of the PyMC Ops (NUMBA mode)"):
        from pymc_odesens.ops.steady_state_entries import find_steady_state_entry as find

    spec = op.spec
    problem, kernels, init_state, _, key = _setup(spec)
    n, n_e = spec.system.n_states, spec.n_experiments
    rhs, jac = kernels.rhs, kernels.jac_y_values
    cons, dependent, rtol, atol = problem.cons, problem.dependent, problem.rtol, problem.atol
    structure, source, newton = problem.structure, problem.source, problem.newton
    c = spec.controls
    mode, iterations, steps, max_time = (
        problem.mode,
        c.max_newton_iterations,
        c.max_num_steps,
        (c.max_time),
    )
    nonnegative = int(c.nonnegative)
    t0, from_system = spec.t0, spec.y0_from_system
    raise_on_failure = spec.on_failure == "raise"
    callback = _failure_callback
    min_rcond = MIN_RECIPROCAL_CONDITION
    # AMICI's newtonOnly refuses a singular steady state at once; otherwise the value needs
    # no inverse of the Jacobian (the gradient integrates the sensitivities there)
    check_singular = c.sensitivity == "implicit"

    @numba.njit
    def core(y0, params):
        y = np.empty((n_e, n))
        t = np.full(n_e, t0)
        failed = np.zeros(n_e, dtype=np.int8)
        z = np.zeros(n)
        stats = np.zeros(len(ss.STAT_NAMES), dtype=np.int64)
        info = np.zeros(ss.INFO_SIZE)
        unused = np.zeros(1)
        # closure arrays are read-only constants to numba; the routine takes writable ones
        cons_w, dependent_w, rtol_w, atol_w = (
            cons.copy(),
            dependent.copy(),
            rtol.copy(),
            (atol.copy()),
        )
        structure_w, source_w, newton_w = structure.copy(), source.copy(), newton.copy()
        for e in range(n_e):
            pe = _params_or_dummy(np.ascontiguousarray(params[e]))
            if from_system:
                init_state(t0, unused.ctypes, pe.ctypes, unused.ctypes, z.ctypes)
            else:
                for i in range(n):
                    z[i] = y0[e, i]
            start = z.copy()
            stats[:] = 0
            status = find(
                mode,
                rhs,
                jac,
                t0,
                z,
                pe,
                cons_w,
                dependent_w,
                rtol_w,
                atol_w,
                n,
                iterations,
                steps,
                max_time,
                nonnegative,
                structure_w,
                source_w,
                newton_w,
                stats,
                info,
            )
            if check_singular and status == ss.CONVERGED and not info[ss.INFO_RCOND] >= min_rcond:
                status = ss.SINGULAR
            if status != ss.CONVERGED:
                callback(key, e, status, info.ctypes.data, stats.ctypes.data)
                if raise_on_failure:
                    raise RuntimeError("pymc_odesens: steady state failed (see the warning)")
                failed[e] = 1
                for i in range(n):
                    y[e, i] = start[i] if np.isfinite(start[i]) else 0.0
                continue
            for i in range(n):
                y[e, i] = z[i]
            t[e] = info[ss.INFO_TIME]
        return y, t, failed

    if from_system:

        @numba.njit
        def with_params(params):
            return core(np.zeros((params.shape[0], 0)), params)

        return with_params
    return core


@numba_funcify.register(SteadyStateVJPOp)
def _funcify_steady_state_vjp(op, node=None, **kwargs):
    with compiling("the steady-state entry points of the PyMC Ops (NUMBA mode)"):
        from pymc_odesens.ops.steady_state_entries import steady_state_vjp_entry as vjp

    spec = op.spec
    problem, kernels, _, init_jac, key = _setup(spec)
    n, p, n_e = spec.system.n_states, spec.system.n_params, spec.n_experiments
    jac, vjp_p = kernels.jac_y_values, kernels.vjp_p
    cons, dependent = problem.cons, problem.dependent
    structure, source, n_jac = problem.structure, problem.source, problem.n_jac
    t0, from_system = spec.t0, spec.y0_from_system
    integrate_always = spec.controls.sensitivity == "integration"
    fallback = _fallback_callback

    @numba.njit
    def core(y0, params, y, t, failed, cotangent):
        grad_y0 = np.zeros((n_e, n))
        grad_p = np.zeros((n_e, p))
        unused = np.zeros(1)
        jac0 = np.zeros(max(p, 1) * n)
        cons_w, dependent_w = cons.copy(), dependent.copy()
        structure_w, source_w = structure.copy(), source.copy()
        for e in range(n_e):
            if failed[e]:
                continue
            pe = _params_or_dummy(np.ascontiguousarray(params[e]))
            w = np.ascontiguousarray(cotangent[e])
            regular = False
            if not integrate_always:
                regular = vjp(
                    jac,
                    vjp_p,
                    t[e],
                    np.ascontiguousarray(y[e]),
                    pe,
                    cons_w,
                    dependent_w,
                    structure_w,
                    source_w,
                    n_jac,
                    w,
                    grad_p[e],
                    grad_y0[e],
                )
            if not regular:
                start = np.ascontiguousarray(y0[e]) if not from_system else unused
                row_p, row_y0 = grad_p[e], grad_y0[e]
                code = fallback(
                    key,
                    e,
                    start.ctypes.data,
                    pe.ctypes.data,
                    w.ctypes.data,
                    row_p.ctypes.data,
                    row_y0.ctypes.data,
                )
                if code != 0:
                    raise RuntimeError(
                        "pymc_odesens: steady-state gradient failed (see the warning)"
                    )
            if from_system:
                _add_initial_state_path(init_jac, t0, pe, grad_y0[e], grad_p[e], jac0, unused)
        return grad_y0, grad_p

    if from_system:

        @numba.njit
        def vjp_params(params, y, t, failed, cotangent):
            return core(np.zeros((params.shape[0], 0)), params, y, t, failed, cotangent)

        return vjp_params

    @numba.njit
    def vjp_with_y0(y0, params, y, t, failed, cotangent):
        return core(y0, params, y, t, failed, cotangent)

    return vjp_with_y0
