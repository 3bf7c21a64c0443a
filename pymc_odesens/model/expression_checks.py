"""Checks every user expression passes: a sympy expression, scalar, free of nan and inf.

The system's right-hand side and initial state, events and observables take expressions
from users (numbers, sympy objects, text already parsed); each refuses the same faults with
the same messages, naming the expression (``label``).
"""

from __future__ import annotations

import sympy as sp

__all__ = ["NON_FINITE_CONSTANTS", "checked_expression", "refuse_non_finite"]

NON_FINITE_CONSTANTS = (sp.nan, sp.zoo, sp.oo, sp.S.NegativeInfinity)
"""sympy's constants that have no finite value."""


def refuse_non_finite(expr: sp.Basic, label: str) -> None:
    """Raise ``ValueError`` naming ``label`` when ``expr`` contains nan or an infinity."""
    if any(expr.has(bad) for bad in NON_FINITE_CONSTANTS):
        raise ValueError(f"{label} contains a non-finite constant (nan or inf): {expr}")


def checked_expression(raw, label: str, *, scalar: bool = True) -> sp.Basic:
    """``raw`` as a sympy expression, refused by name when it is none.

    Parameters
    ----------
    raw : object
        A number, a sympy object or anything ``sympy.sympify`` accepts.
    label : str
        How error messages name the expression (e.g. ``"rhs[0] (dx/dt)"``).
    scalar : bool
        Also require a scalar ``sympy.Expr`` (not a matrix, relation or boolean).

    Raises
    ------
    TypeError
        ``raw`` is not an expression (or, with ``scalar``, not a scalar one).
    ValueError
        It contains nan or an infinity.
    """
    try:
        expr = sp.sympify(raw)
    except (sp.SympifyError, TypeError) as err:
        raise TypeError(f"{label} is not an expression: {raw!r}") from err
    if scalar and (not isinstance(expr, sp.Expr) or expr.is_Matrix):
        raise TypeError(f"{label} must be a scalar expression, got {expr!r}")
    refuse_non_finite(expr, label)
    return expr
