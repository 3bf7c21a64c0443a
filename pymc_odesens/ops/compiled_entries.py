"""C entry points of the compiled solver cores, for the numba implementations of the Ops.

A numba function that calls another jitted function links the callee's code into
its own module, and LLVM then generates machine code for the whole solver again:
measured here, 20 to 50 s for every PyTensor graph compiled in NUMBA mode (the
solvers are large). Called through the address of a ``cfunc`` instead, the
solver's machine code is generated once (and cached on disk, like the solvers
themselves), and a graph's own numba function compiles in well under a second.

Each entry has the exact signature of the core it wraps; the Ops' numba code
calls these objects instead of the cores (and, through first-class function
types, passes the generated kernels on as it would to the cores). An entry is
compiled (or loaded from numba's cache) when it is first imported, and so is the
core it wraps (the module of a core compiles it when it is imported), so that a
process compiles only the solvers its graphs call: a forward-sensitivity model
skips the adjoint, PBS and recording entries and their cores (measured on a new
installation at load 7: the discrete adjoint and the PBS march alone are 38 s of
CPU time that a forward-sensitivity model no longer spends).
"""

from __future__ import annotations

import threading
from importlib import import_module
from typing import TYPE_CHECKING

from numba import cfunc

from pymc_odesens.caching.compile_notice import compiling

if TYPE_CHECKING:  # the cores: imported by __getattr__ when their entry is first asked for
    from pymc_odesens.sensitivity.adjoint_backward import backward_pass
    from pymc_odesens.sensitivity.discrete_adjoint import discrete_adjoint_backward
    from pymc_odesens.sensitivity.pbs_march import march_sensitivities
    from pymc_odesens.solvers.hybrid import explicit_schedule, integrate_hybrid
    from pymc_odesens.solvers.multistep import run_multistep
    from pymc_odesens.solvers.runge_kutta import integrate_explicit_rk


def _integrate_hybrid_entry(
    code,
    rhs,
    jac,
    newton,
    conditions,
    rates,
    triggers,
    priorities,
    jump,
    time_sensitivity,
    directions,
    table,
    cause_table,
    stop_times,
    stop_owner,
    stop_slot,
    t0,
    z0,
    p,
    times,
    rtol,
    atol,
    max_num_steps,
    n_state,
    n_lu,
    n_err,
    record_every,
    rec_t,
    rec_y,
    rec_f,
    rec_count,
    op_log,
    snapshots,
    op_count,
    ev_t,
    ev_index,
    ev_slot,
    ev_z,
    ev_count,
    z_out,
    stats,
    info,
):
    """:func:`pymc_odesens.solvers.hybrid.integrate_hybrid` behind a C address."""
    return integrate_hybrid(
        code,
        rhs,
        jac,
        newton,
        conditions,
        rates,
        triggers,
        priorities,
        jump,
        time_sensitivity,
        directions,
        table,
        cause_table,
        stop_times,
        stop_owner,
        stop_slot,
        t0,
        z0,
        p,
        times,
        rtol,
        atol,
        max_num_steps,
        n_state,
        n_lu,
        n_err,
        record_every,
        rec_t,
        rec_y,
        rec_f,
        rec_count,
        op_log,
        snapshots,
        op_count,
        ev_t,
        ev_index,
        ev_slot,
        ev_z,
        ev_count,
        z_out,
        stats,
        info,
    )


def _run_multistep_entry(
    family,
    rhs,
    jac,
    newton,
    t0,
    y0,
    p,
    times,
    rtol,
    atol,
    max_num_steps,
    n_state,
    n_lu,
    n_err,
    record_every,
    rec_t,
    rec_y,
    rec_f,
    rec_count,
    op_log,
    snapshots,
    op_count,
    conditions,
    directions,
    g_zero,
    t_stop,
    event_out,
    z_event,
    y_out,
    stats,
    info,
):
    """:func:`pymc_odesens.solvers.multistep.run_multistep` behind a C address (``bdf`` and
    ``adams`` for a system without events: no hybrid driver to compile)."""
    return run_multistep(
        family,
        rhs,
        jac,
        newton,
        t0,
        y0,
        p,
        times,
        rtol,
        atol,
        max_num_steps,
        n_state,
        n_lu,
        n_err,
        record_every,
        rec_t,
        rec_y,
        rec_f,
        rec_count,
        op_log,
        snapshots,
        op_count,
        conditions,
        directions,
        g_zero,
        t_stop,
        event_out,
        z_event,
        y_out,
        stats,
        info,
    )


def _explicit_schedule_entry(
    times_kernel, slot_event, slot_time, t0, p, stop_times, stop_owner, stop_slot
):
    """:func:`pymc_odesens.solvers.hybrid.explicit_schedule` behind a C address."""
    return explicit_schedule(
        times_kernel, slot_event, slot_time, t0, p, stop_times, stop_owner, stop_slot
    )


def _backward_pass_entry(
    family_forward,
    family_backward,
    rhs,
    jac,
    newton,
    adjoint_rhs,
    adjoint_jac,
    newton_adjoint,
    t0,
    params,
    times,
    cotangent,
    checkpoint_t,
    checkpoint_y,
    n_checkpoints,
    rtol_forward,
    atol_forward,
    rtol_backward,
    atol_backward,
    max_num_steps,
    buffer,
    event_adjoint_jump,
    event_time_gradient,
    event_t,
    event_index,
    event_slot,
    event_y,
    t_frozen,
    z,
    stats_forward,
    stats_backward,
    info,
):
    """:func:`pymc_odesens.sensitivity.adjoint_backward.backward_pass` behind a C address."""
    return backward_pass(
        family_forward,
        family_backward,
        rhs,
        jac,
        newton,
        adjoint_rhs,
        adjoint_jac,
        newton_adjoint,
        t0,
        params,
        times,
        cotangent,
        checkpoint_t,
        checkpoint_y,
        n_checkpoints,
        rtol_forward,
        atol_forward,
        rtol_backward,
        atol_backward,
        max_num_steps,
        buffer,
        event_adjoint_jump,
        event_time_gradient,
        event_t,
        event_index,
        event_slot,
        event_y,
        t_frozen,
        z,
        stats_forward,
        stats_backward,
        info,
    )


def _discrete_adjoint_entry(
    rhs,
    jac,
    newton,
    vjp_y,
    vjp_p,
    p,
    times,
    cotangent,
    op_log,
    snapshots,
    n_ops,
    n_snapshots,
    rtol,
    atol,
    adjoint_jump,
    time_gradient,
    ev_t,
    ev_index,
    ev_slot,
    ev_y,
    y0_bar,
    p_bar,
    stats,
    info,
):
    """:func:`pymc_odesens.sensitivity.discrete_adjoint.discrete_adjoint_backward` behind a
    C address."""
    return discrete_adjoint_backward(
        rhs,
        jac,
        newton,
        vjp_y,
        vjp_p,
        p,
        times,
        cotangent,
        op_log,
        snapshots,
        n_ops,
        n_snapshots,
        rtol,
        atol,
        adjoint_jump,
        time_gradient,
        ev_t,
        ev_index,
        ev_slot,
        ev_y,
        y0_bar,
        p_bar,
        stats,
        info,
    )


def _integrate_explicit_rk_entry(
    rhs,
    t0,
    y0,
    p,
    times,
    rtol,
    atol,
    max_num_steps,
    n_state,
    n_err,
    method,
    record_every,
    rec_t,
    rec_y,
    rec_f,
    rec_count,
    rec_dense,
    events,
    directions,
    g_zero,
    t_stop,
    event_out,
    z_event,
    y_out,
    stats,
    info,
):
    """:func:`pymc_odesens.solvers.runge_kutta.integrate_explicit_rk` behind a C address
    (the PBS routes record ``rk45``'s continuous extension, which the hybrid driver does not;
    ``rk45`` and ``ckrk`` for a system without events)."""
    return integrate_explicit_rk(
        rhs,
        t0,
        y0,
        p,
        times,
        rtol,
        atol,
        max_num_steps,
        n_state,
        n_err,
        method,
        record_every,
        rec_t,
        rec_y,
        rec_f,
        rec_count,
        rec_dense,
        events,
        directions,
        g_zero,
        t_stop,
        event_out,
        z_event,
        y_out,
        stats,
        info,
    )


def _march_sensitivities_entry(
    algorithm,
    rhs,
    jac_y,
    jac_p,
    p,
    n_forced,
    rec_t,
    rec_y,
    rec_f,
    rec_dense,
    n_rec,
    kind,
    times,
    s0,
    controls,
    norm_kind,
    test_both,
    exp_trapezoid,
    s_out,
    branch,
    substeps,
    counters,
):
    """:func:`pymc_odesens.sensitivity.pbs_march.march_sensitivities` behind a C address."""
    return march_sensitivities(
        algorithm,
        rhs,
        jac_y,
        jac_p,
        p,
        n_forced,
        rec_t,
        rec_y,
        rec_f,
        rec_dense,
        n_rec,
        kind,
        times,
        s0,
        controls,
        norm_kind,
        test_both,
        exp_trapezoid,
        s_out,
        branch,
        substeps,
        counters,
    )


_CORES = {
    # entry: (module of the core, the core, its signature)
    "integrate_hybrid_entry": (
        "pymc_odesens.solvers.hybrid",
        "integrate_hybrid",
        "HYBRID_SIGNATURE",
    ),
    "run_multistep_entry": (
        "pymc_odesens.solvers.multistep",
        "run_multistep",
        "MULTISTEP_SIGNATURE",
    ),
    "explicit_schedule_entry": (
        "pymc_odesens.solvers.hybrid",
        "explicit_schedule",
        "EXPLICIT_SCHEDULE_SIGNATURE",
    ),
    "backward_pass_entry": (
        "pymc_odesens.sensitivity.adjoint_backward",
        "backward_pass",
        "BACKWARD_SIGNATURE",
    ),
    "discrete_adjoint_entry": (
        "pymc_odesens.sensitivity.discrete_adjoint",
        "discrete_adjoint_backward",
        "DISCRETE_ADJOINT_SIGNATURE",
    ),
    "integrate_explicit_rk_entry": (
        "pymc_odesens.solvers.runge_kutta",
        "integrate_explicit_rk",
        "RK_SIGNATURE",
    ),
    "march_sensitivities_entry": (
        "pymc_odesens.sensitivity.pbs_march",
        "march_sensitivities",
        "MARCH_SIGNATURE",
    ),
}
__all__ = list(_CORES)


_compile_lock = threading.Lock()


def __getattr__(name: str):
    """The entry ``name``, compiled or loaded from numba's cache at its first import (once,
    also when several threads import it at once: graphs keep the address of the entry).

    The core's module is imported first (which compiles the core or loads it from numba's
    cache), and the core becomes the global the entry's body calls."""
    core = _CORES.get(name)
    if core is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _compile_lock:
        entry = globals().get(name)
        if entry is None:
            module_name, core_name, signature_name = core
            with compiling(f"the solver entry point {name} of the PyMC Ops (NUMBA mode)"):
                module = import_module(module_name)
                globals()[core_name] = getattr(module, core_name)
                entry = cfunc(getattr(module, signature_name), cache=True)(globals()[f"_{name}"])
            globals()[name] = entry
    return entry
