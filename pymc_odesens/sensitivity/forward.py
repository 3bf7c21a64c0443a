"""Forward sensitivities: integrate ``z = [y, S_0, S_1, ...]`` with any of the four solvers.

The augmented right-hand side ``[f, J_y S_k + J_p[k]]`` is a generated kernel
(:mod:`pymc_odesens.codegen.sensitivity_source`), never finite differences.
Explicit methods integrate ``z`` directly; ``bdf`` and ``adams`` run their
Newton corrector on ``z`` with ONE factorisation of the N x N matrix
``I - c J_y`` applied to the state block and to every sensitivity block (the
block-diagonal structure of CVODES' simultaneous corrector; the N(1+P) system
is never factorised).
"""

from __future__ import annotations

import numpy as np

from pymc_odesens.codegen import (
    compile_event_kernels,
    compile_event_sensitivity_kernels,
    compile_sensitivity_kernel,
)
from pymc_odesens.codegen.sensitivity_source import sensitivity_blocks
from pymc_odesens.solvers.integrate import (
    EventLog,
    evaluate_kernel,
    integrate,
    integrate_events,
)
from pymc_odesens.solvers.solve import OdeProblem
from pymc_odesens.solvers.status import new_stats

__all__ = ["component_names", "forward_sensitivities", "initial_sensitivities"]


def initial_sensitivities(problem: OdeProblem, n_param_cols: int, n_y0_cols: int) -> np.ndarray:
    """``S(t0)`` blocks, flattened: ``dy0/dp`` (zero unless ``y0(p)`` is used) then identity."""
    n = problem.system.n_states
    blocks = np.zeros((n_param_cols + n_y0_cols, n))
    if n_param_cols and problem.y0_from_params:
        blocks[:n_param_cols] = problem.kernels.evaluate(
            "initial_state_jac", problem.t0, problem.y0, problem.params
        )
    blocks[n_param_cols:] = np.eye(n)[:n_y0_cols]
    return blocks.ravel()


def forward_sensitivities(
    problem: OdeProblem, wrt: str, sensitivity_error_control: bool
) -> tuple[
    np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray, EventLog | None, np.ndarray
]:
    """Integrate states and forward sensitivities (through the system's events, if any).

    Returns
    -------
    y : (T, N)
    S_params : (T, N, P) or None
    S_y0 : (T, N, N) or None
    stats : int64 statistics array
    events : EventLog or None
        The events that happened (``before`` holds the state just before each).
    event_time_sensitivities : (K, columns)
        ``d tau_k / d alpha`` of each event time for each sensitivity column
        (parameters first, then initial states).
    """
    system = problem.system
    n = system.n_states
    n_p, n_y0 = sensitivity_blocks(system, wrt)
    blocks = n_p + n_y0
    z0 = np.concatenate((problem.y0, initial_sensitivities(problem, n_p, n_y0)))
    atol = problem.controls.absolute_tolerance
    atol_z = np.tile(atol, 1 + blocks)  # Stan/CVODES: sensitivities share the state tolerances
    n_err = z0.size if sensitivity_error_control else n
    arguments = (
        problem.t0,
        z0,
        problem.params,
        problem.times,
        problem.controls,
    )
    options = dict(
        n_state=n, n_err=n_err, atol=atol_z, state_names=lambda: component_names(system, n_p, n_y0)
    )
    event_kernels = compile_event_kernels(system)
    jac, options["newton"] = problem.newton_jacobian()
    log = None
    dtau = np.zeros((0, blocks))
    if n == 0:  # nothing to integrate (an SBML model made of rules only), as in solve()
        z_out, stats = np.zeros((problem.times.size, 0)), new_stats()
    elif event_kernels is None:
        z_out, stats = integrate(
            problem.controls.method,
            compile_sensitivity_kernel(system, wrt),
            jac,
            *arguments,
            **options,
        )
    else:
        jump, time_sensitivity = compile_event_sensitivity_kernels(system, wrt)
        z_out, stats, record = integrate_events(
            problem.controls.method,
            compile_sensitivity_kernel(system, wrt),
            jac,
            jump,
            time_sensitivity,
            event_kernels,
            *arguments,
            **options,
        )
        dtau = _event_time_sensitivities(record, time_sensitivity, problem.params, blocks)
        log = record.public(event_kernels.names, width=n)
    n_times = problem.times.size
    y = z_out[:, :n].copy()
    sens = z_out[:, n:].reshape(n_times, blocks, n).transpose(0, 2, 1)
    # (T, N, 0) for a system without parameters, not None: the shape stays (T, N, P)
    s_params = np.ascontiguousarray(sens[:, :, :n_p]) if wrt != "y0" else None
    s_y0 = np.ascontiguousarray(sens[:, :, n_p:]) if wrt != "params" else None
    return y, s_params, s_y0, stats, log, dtau


def _event_time_sensitivities(record, time_sensitivity, params, blocks: int) -> np.ndarray:
    """``d tau / d alpha`` (K, columns) of each executed event: its instant's, from the
    instant's cause and the vector before its first event (the rows before a closing row)."""
    rows = []
    first = 0
    for k, index in enumerate(record.index):
        if index >= 0:
            continue
        dtau = evaluate_kernel(
            time_sensitivity,
            record.times[k],
            record.states[first],
            params,
            blocks,
            np.array([float(record.slot[k])]),
        )
        rows += [dtau] * (k - first)
        first = k + 1
    return np.array(rows).reshape(-1, blocks)


def component_names(system, n_p: int, n_y0: int) -> list[str]:
    """Names of the components of ``z = [y, S_0, ...]``: the states, then ``dx/dk`` for each
    of the first ``n_p`` parameters, then ``dx/dy(t0)`` for the first ``n_y0`` states."""
    names = list(system.states)
    for k in range(n_p):
        names += [f"d{s}/d{system.params[k]}" for s in system.states]
    for j in range(n_y0):
        names += [f"d{s}/d{system.states[j]}(t0)" for s in system.states]
    return names
