"""Checks every user expression passes: a sympy expression, scalar, free of nan and inf.

A number beyond the range of a double (sympy keeps ``1e309`` as a Float) counts as an
infinity: the compiled kernels compute in doubles.

The system's right-hand side and initial state, events and observables take expressions
from users (numbers, sympy objects, text already parsed); each refuses the same faults with
the same messages, naming the expression (``label``).
"""

from __future__ import annotations

import math

import sympy as sp

__all__ = [
    "NON_FINITE_CONSTANTS",
    "checked_expression",
    "non_finite_constants",
    "refuse_non_finite",
]

NON_FINITE_CONSTANTS = (sp.nan, sp.zoo, sp.oo, sp.S.NegativeInfinity)
"""sympy's constants that have no finite value."""


def _beyond_doubles(number: sp.Number) -> bool:
    try:
        return not math.isfinite(float(number))
    except (OverflowError, TypeError):
        return True


def non_finite_constants(expr: sp.Basic) -> list:
    """The constants in ``expr`` without a finite double value: nan, the infinities and
    numbers beyond the double range."""
    found = [bad for bad in NON_FINITE_CONSTANTS if expr.has(bad)]
    found += [
        number for number in expr.atoms(sp.Number) if number.is_finite and _beyond_doubles(number)
    ]
    return found


def refuse_non_finite(expr: sp.Basic, label: str) -> None:
    """Raise ``ValueError`` naming ``label`` when ``expr`` contains nan, an infinity or a
    number beyond the double range."""
    found = non_finite_constants(expr)
    if found:
        shown = ", ".join(sorted({_shown(c) for c in found}))
        raise ValueError(f"{label} contains a non-finite constant (nan or inf: {shown}): {expr}")


def _shown(constant: sp.Basic) -> str:
    """A non-finite constant as a message shows it."""
    if constant is sp.nan:
        return "nan"
    if constant is sp.zoo:
        return "zoo (a division by zero)"
    if constant in (sp.oo, sp.S.NegativeInfinity):
        return str(float(constant))
    return f"{sp.Float(constant, 4)}, beyond the double range"


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
