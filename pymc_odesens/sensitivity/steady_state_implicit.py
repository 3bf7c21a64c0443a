"""Implicit-function sensitivities of a steady state and their adjoint (compiled).

At the steady state ``G(y*, p, y0) = 0`` with ``G_i = f_i(t, y, p)`` outside the dependent
states and ``G_{d_r} = C_r (y - y0)`` on them (see
:mod:`~pymc_odesens.sensitivity.steady_state_linear`). With ``A = dG/dy`` (the bordered
Jacobian, already factorised):

- forward: ``A dy*/dp_k = -(df/dp_k with the dependent rows zeroed)`` and
  ``A dy*/dy0_j = (C[:, j] on the dependent rows, 0 elsewhere)``: P + N solves with one
  factorisation;
- adjoint: for a cotangent ``w = dL/dy*``, one transposed solve ``A^T lambda = w``; then
  ``dL/dp = -lambda_free^T df/dp`` (``lambda`` with its dependent entries zeroed, through
  the generated ``lambda^T J_p`` kernel: no P x N matrix) and
  ``dL/dy0 = C^T lambda_dependent``.

Without conservation laws ``A = J_y`` and ``dy*/dy0 = 0``. The factors are those of
:func:`~pymc_odesens.sensitivity.steady_state_linear.factor_steady_state_jacobian`:
``(structure, ints, floats, scales)``, dense or sparse.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE
from pymc_odesens.sensitivity.steady_state_linear import (
    MIN_RECIPROCAL_CONDITION,
    factor_steady_state_jacobian,
    reciprocal_condition,
    solve_bordered,
    solve_bordered_transpose,
)

__all__ = [
    "implicit_sensitivities",
    "implicit_vjp",
    "steady_state_vjp",
    "STEADY_STATE_VJP_SIGNATURE",
]


@njit(cache=True, nogil=True)
def implicit_sensitivities(
    jac_p, t, y, p, cons, dependent, structure, ints, floats, scales, s_params, s_y0
):
    """``s_params[k] = dy*/dp_k`` (P, N) and ``s_y0[j] = dy*/dy0_j`` (N, N) from the factors."""
    n = y.size
    n_p = s_params.shape[0]
    unused = np.zeros(1)
    work = np.zeros(n)
    if n_p > 0:
        jac_p(t, y.ctypes, p.ctypes, unused.ctypes, s_params.ctypes)
        for k in range(n_p):
            column = s_params[k]
            for i in range(n):
                column[i] = -column[i]
            for r in range(dependent.size):
                column[dependent[r]] = 0.0
            solve_bordered(structure, ints, floats, scales, column, work)
    for j in range(s_y0.shape[0]):
        column = s_y0[j]
        for i in range(n):
            column[i] = 0.0
        if dependent.size == 0:
            continue
        for r in range(dependent.size):
            column[dependent[r]] = cons[r, j]
        solve_bordered(structure, ints, floats, scales, column, work)


@njit(cache=True, nogil=True)
def implicit_vjp(
    vjp_p, t, y, p, cons, dependent, structure, ints, floats, scales, cotangent, grad_p, grad_y0
):
    """``grad_p = dL/dp`` (P) and ``grad_y0 = dL/dy0`` (N) for ``cotangent = dL/dy*``."""
    n = y.size
    lam = cotangent.copy()
    solve_bordered_transpose(structure, ints, floats, scales, lam, np.zeros(n))
    for j in range(n):
        grad_y0[j] = 0.0
    for r in range(dependent.size):
        weight = lam[dependent[r]]
        for j in range(n):
            grad_y0[j] += weight * cons[r, j]
        lam[dependent[r]] = 0.0
    if grad_p.size > 0:
        vjp_p(t, y.ctypes, p.ctypes, lam.ctypes, grad_p.ctypes)
        for k in range(grad_p.size):
            grad_p[k] = -grad_p[k]


STEADY_STATE_VJP_SIGNATURE = types.boolean(
    KERNEL_TYPE,  # J_y's non-zeros (jac_y_values)
    KERNEL_TYPE,  # lambda^T J_p
    types.float64,  # t at the steady state
    types.float64[::1],  # y*
    types.float64[::1],  # p
    types.float64[:, ::1],  # conservation laws C (M, N)
    types.int64[::1],  # dependent state of each law
    types.int64[::1],  # structure of the bordered Jacobian (steady_state_linear)
    types.int64[::1],  # source of its values
    types.int64,  # number of J_y's non-zeros
    types.float64[::1],  # cotangent dL/dy*
    types.float64[::1],  # out: dL/dp
    types.float64[::1],  # out: dL/dy0
)


@njit(STEADY_STATE_VJP_SIGNATURE, cache=True, nogil=True)
def steady_state_vjp(
    jac, vjp_p, t, y, p, cons, dependent, structure, source, n_jac, cotangent, grad_p, grad_y0
):
    """Factorise the bordered Jacobian at ``y`` and apply :func:`implicit_vjp`.

    Returns False (gradients untouched) when the matrix is singular: no pivot, or a
    reciprocal condition estimate below
    :data:`~pymc_odesens.sensitivity.steady_state_linear.MIN_RECIPROCAL_CONDITION` (the
    test of the steady-state routine).
    """
    ok, ints, floats, scales = factor_steady_state_jacobian(
        jac, t, y, p, cons, structure, source, n_jac
    )
    if not ok:
        return False
    n = y.size
    rcond = reciprocal_condition(
        structure, ints, floats, scales, np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    )
    if not rcond >= MIN_RECIPROCAL_CONDITION:
        return False
    implicit_vjp(
        vjp_p, t, y, p, cons, dependent, structure, ints, floats, scales, cotangent, grad_p, grad_y0
    )
    return True
