"""Exact symbolic derivatives of a right-hand side (sympy).

Layouts follow DESIGN.md: ``J_y[i, j] = df_i/dy_j`` (N x N) and
``J_p[k, i] = df_i/dp_k`` (P x N, one parameter per row).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

__all__ = [
    "clean_derivative",
    "jacobian_wrt_states",
    "jacobian_wrt_params",
    "vector_jacobian_product",
    "jacobian_vector_product",
]


def clean_derivative(expr: sp.Expr) -> sp.Expr:
    """Drop Dirac deltas (derivatives of steps at switching points) from ``expr``.

    A switching surface has measure zero along a trajectory; discontinuities that
    matter are handled by events, not by distributions in the Jacobian.
    """
    if expr.has(sp.DiracDelta):
        expr = expr.replace(lambda e: isinstance(e, sp.DiracDelta), lambda e: sp.S.Zero)
    return expr


def _diff(expr: sp.Expr, symbol: sp.Symbol) -> sp.Expr:
    return clean_derivative(sp.diff(expr, symbol))


def jacobian_wrt_states(rhs: Sequence[sp.Expr], states: Sequence[sp.Symbol]) -> sp.Matrix:
    """``J_y`` with ``J_y[i, j] = d rhs_i / d y_j`` (N x N)."""
    return sp.Matrix(len(rhs), len(states), lambda i, j: _diff(rhs[i], states[j]))


def jacobian_wrt_params(rhs: Sequence[sp.Expr], params: Sequence[sp.Symbol]) -> sp.Matrix:
    """``J_p`` with ``J_p[k, i] = d rhs_i / d p_k`` (P x N)."""
    return sp.Matrix(len(params), len(rhs), lambda k, i: _diff(rhs[i], params[k]))


def vector_jacobian_product(
    jacobian: sp.Matrix, cotangent: Sequence[sp.Symbol], *, rows_are_outputs: bool
) -> list[sp.Expr]:
    """``lambda^T J`` for a Jacobian whose outputs index rows or columns.

    Parameters
    ----------
    jacobian : sympy.Matrix
        ``J_y`` (outputs are rows) or ``J_p`` (outputs are columns, DESIGN layout).
    cotangent : sequence of sympy.Symbol
        ``lambda``, one symbol per right-hand-side component.
    rows_are_outputs : bool
        True for ``J_y``, False for the (P, N) ``J_p``.
    """
    if rows_are_outputs:
        n_out, n_in = jacobian.shape
        return [sp.Add(*(cotangent[i] * jacobian[i, j] for i in range(n_out))) for j in range(n_in)]
    n_in, n_out = jacobian.shape
    return [sp.Add(*(cotangent[i] * jacobian[k, i] for i in range(n_out))) for k in range(n_in)]


def jacobian_vector_product(jacobian: sp.Matrix, direction: Sequence[sp.Symbol]) -> list[sp.Expr]:
    """``J_y v`` for a square state Jacobian."""
    n_out, n_in = jacobian.shape
    return [sp.Add(*(jacobian[i, j] * direction[j] for j in range(n_in))) for i in range(n_out)]
