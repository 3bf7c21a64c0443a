"""Exact symbolic derivatives of a right-hand side (sympy).

Layouts follow DESIGN.md: ``J_y[i, j] = df_i/dy_j`` (N x N) and
``J_p[k, i] = df_i/dp_k`` (P x N, one parameter per row).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

__all__ = [
    "clean_derivative",
    "gradient",
    "jacobian_nonzeros",
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


class _Power(sp.Function):
    """``base**exponent`` whose derivative in the base is ``exponent * base**(exponent - 1)``.

    sympy differentiates ``(x/K)**h`` (``h`` a symbol, as in Hill kinetics) into
    ``h*(x/K)**h/x``, which is 0/0 at ``x = 0`` although the derivative is finite there for
    ``h >= 1``; powers with a symbolic exponent are differentiated as this function instead.
    """

    nargs = 2

    def fdiff(self, argindex=1):
        base, exponent = self.args
        if argindex == 1:
            return exponent * _Power(base, exponent - 1)
        # d(b**e)/de = b**e log(b), whose limit at b = 0 is 0 (for e > 0)
        return sp.Piecewise((sp.S.Zero, sp.Eq(base, 0)), (self * sp.log(base), True))


def _is_symbolic_power(e) -> bool:
    return isinstance(e, sp.Pow) and not e.exp.is_Number


def _differentiable(expr: sp.Expr) -> sp.Expr:
    if not expr.find(_is_symbolic_power):
        return expr
    return expr.replace(_is_symbolic_power, lambda e: _Power(e.base, e.exp))


def _diff(expr: sp.Expr, symbol: sp.Symbol) -> sp.Expr:
    """``d expr / d symbol`` (``expr`` prepared by :func:`_differentiable`), cleaned."""
    derivative = sp.diff(expr, symbol)
    if derivative.has(_Power):
        derivative = derivative.replace(lambda e: isinstance(e, _Power), lambda e: sp.Pow(*e.args))
    return clean_derivative(derivative)


def jacobian_nonzeros(
    rhs: Sequence[sp.Expr], symbols: Sequence[sp.Symbol]
) -> dict[tuple[int, int], sp.Expr]:
    """The structurally non-zero entries ``(i, j) -> d rhs_i / d symbols[j]``, row by row.

    Only the symbols an expression contains are differentiated, so the cost grows with
    the number of non-zeros, not with ``len(rhs) * len(symbols)`` (a 500-species network
    has 2000 non-zeros among 250000 entries). Entries whose derivative vanishes are left out.
    """
    position = {s: j for j, s in enumerate(symbols)}
    entries: dict[tuple[int, int], sp.Expr] = {}
    for i, expr in enumerate(rhs):
        expr = _differentiable(sp.sympify(expr))
        for j in sorted(position[s] for s in expr.free_symbols if s in position):
            derivative = _diff(expr, symbols[j])
            if not (derivative.is_Number and derivative == 0):
                entries[(i, j)] = derivative
    return entries


def gradient(expr: sp.Expr, symbols: Sequence[sp.Symbol]) -> tuple:
    """``(d expr / d s)`` for each ``s`` of ``symbols`` (zeros where ``expr`` does not
    contain ``s``, without differentiating: an event's condition reads a few of hundreds
    of states)."""
    entries = jacobian_nonzeros([expr], symbols)
    return tuple(entries.get((0, j), sp.S.Zero) for j in range(len(symbols)))


def jacobian_wrt_states(rhs: Sequence[sp.Expr], states: Sequence[sp.Symbol]) -> sp.SparseMatrix:
    """``J_y`` with ``J_y[i, j] = d rhs_i / d y_j`` (N x N, a sparse sympy matrix)."""
    return sp.ImmutableSparseMatrix(len(rhs), len(states), jacobian_nonzeros(rhs, states))


def jacobian_wrt_params(rhs: Sequence[sp.Expr], params: Sequence[sp.Symbol]) -> sp.SparseMatrix:
    """``J_p`` with ``J_p[k, i] = d rhs_i / d p_k`` (P x N, a sparse sympy matrix)."""
    entries = {(k, i): e for (i, k), e in jacobian_nonzeros(rhs, params).items()}
    return sp.ImmutableSparseMatrix(len(params), len(rhs), entries)


def vector_jacobian_product(
    jacobian: sp.MatrixBase, cotangent: Sequence[sp.Symbol], *, rows_are_outputs: bool
) -> list[sp.Expr]:
    """``lambda^T J`` for a Jacobian whose outputs index rows or columns.

    Parameters
    ----------
    jacobian : sympy matrix
        ``J_y`` (outputs are rows) or ``J_p`` (outputs are columns, DESIGN layout).
    cotangent : sequence of sympy.Symbol
        ``lambda``, one symbol per right-hand-side component.
    rows_are_outputs : bool
        True for ``J_y``, False for the (P, N) ``J_p``.
    """
    entries = _nonzeros(jacobian)
    if rows_are_outputs:
        terms: list[list] = [[] for _ in range(jacobian.shape[1])]
        for (i, j), e in entries:
            terms[j].append(cotangent[i] * e)
    else:
        terms = [[] for _ in range(jacobian.shape[0])]
        for (k, i), e in entries:
            terms[k].append(cotangent[i] * e)
    return [sp.Add(*t) for t in terms]


def jacobian_vector_product(
    jacobian: sp.MatrixBase, direction: Sequence[sp.Symbol]
) -> list[sp.Expr]:
    """``J_y v`` for a square state Jacobian."""
    terms: list[list] = [[] for _ in range(jacobian.shape[0])]
    for (i, j), e in _nonzeros(jacobian):
        terms[i].append(e * direction[j])
    return [sp.Add(*t) for t in terms]


def _nonzeros(matrix: sp.MatrixBase) -> list[tuple[tuple[int, int], sp.Expr]]:
    """The non-zero entries of ``matrix``, row by row."""
    return sorted(((key, e) for key, e in matrix.todok().items() if e != 0), key=lambda x: x[0])
