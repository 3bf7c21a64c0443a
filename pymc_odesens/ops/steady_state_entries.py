"""C entry points of the compiled steady-state routines, for the numba Ops.

As :mod:`pymc_odesens.ops.compiled_entries` does for the integrators (and for the same
reason: a graph's numba function must not generate the routines' machine code again), in a
module of their own so that only models that use steady states compile them.
"""

from __future__ import annotations

from numba import cfunc

from pymc_odesens.sensitivity.steady_state_core import STEADY_STATE_SIGNATURE, find_steady_state
from pymc_odesens.sensitivity.steady_state_implicit import (
    STEADY_STATE_VJP_SIGNATURE,
    steady_state_vjp,
)

__all__ = ["find_steady_state_entry", "steady_state_vjp_entry"]


@cfunc(STEADY_STATE_SIGNATURE, cache=True)
def find_steady_state_entry(
    mode,
    rhs,
    jac,
    t0,
    z,
    p,
    cons,
    dependent,
    rtol,
    atol,
    n_state,
    max_newton_iterations,
    max_num_steps,
    max_time,
    nonnegative,
    structure,
    source,
    newton,
    stats,
    info,
):
    """:func:`pymc_odesens.sensitivity.steady_state_core.find_steady_state` behind a C
    address."""
    return find_steady_state(
        mode,
        rhs,
        jac,
        t0,
        z,
        p,
        cons,
        dependent,
        rtol,
        atol,
        n_state,
        max_newton_iterations,
        max_num_steps,
        max_time,
        nonnegative,
        structure,
        source,
        newton,
        stats,
        info,
    )


@cfunc(STEADY_STATE_VJP_SIGNATURE, cache=True)
def steady_state_vjp_entry(
    jac, vjp_p, t, y, p, cons, dependent, structure, source, n_jac, cotangent, grad_p, grad_y0
):
    """:func:`pymc_odesens.sensitivity.steady_state_implicit.steady_state_vjp` behind a C
    address."""
    return steady_state_vjp(
        jac, vjp_p, t, y, p, cons, dependent, structure, source, n_jac, cotangent, grad_p, grad_y0
    )
