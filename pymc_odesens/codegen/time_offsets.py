"""Linear functions of time printed as offsets from their zero: ``a*t + b`` -> ``a*(t - tau)``.

SBML models switch inputs on with expressions such as ``sin(50*pi*(time - 1799.99))``;
sympy distributes the number over the sum (``pi*(50*t - 179999/2)``), and in double
precision ``50*t`` rounds to an ulp of 90000, so near the switch-on the argument is noise
of about one ulp of ``t`` (2.3e-13) instead of the exact ``t - 1799.99`` (a difference of
two nearby doubles is exact). An integrator that restarts at the switch-on with a small
absolute tolerance then cannot pass its error test at any step size it can take
(Chen_MSB2009 at atol 1e-16). Before the common-subexpression pass, every two-term sum
``a*t + b`` with numbers ``a`` (not +-1) and ``b`` becomes ``a*TimeSince(t, -b/a)``, which
the kernel printer writes as ``(t - tau)``: one subtraction, exact near ``tau``, then one
rounding of the product. Away from ``tau`` the result differs from the distributed form by
rounding only.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

from pymc_odesens.model.internal_symbols import InternalSymbol

__all__ = ["TimeSince", "exact_time_offsets"]

_TIME = InternalSymbol("_t", real=True)


class TimeSince(sp.Function):
    """``t - tau`` for a number ``tau``, kept as one subtraction by the printer."""

    nargs = 2
    is_real = True


def _offset(expr: sp.Add, t: sp.Symbol):
    """``(a, tau)`` if ``expr`` is ``a*t + b`` (numbers ``a``, ``b``; ``|a| != 1``)."""
    if len(expr.args) != 2:
        return None
    first, second = expr.args
    number, term = (first, second) if first.is_Number else (second, first)
    if not number.is_Number or number == 0:
        return None
    coefficient, factor = term.as_coeff_Mul()
    if factor != t or not coefficient.is_Number or abs(coefficient) == 1:
        return None
    return coefficient, -number / coefficient


def exact_time_offsets(expressions: Sequence[sp.Expr], t: sp.Symbol = _TIME) -> list[sp.Expr]:
    """``expressions`` with every ``a*t + b`` (numbers ``a != +-1``, ``b != 0``) written
    ``a*TimeSince(t, -b/a)``."""

    def rewrite(expr):
        found = _offset(expr, t)
        coefficient, tau = found
        return sp.Mul(coefficient, TimeSince(t, tau), evaluate=False)

    def matches(expr) -> bool:
        return isinstance(expr, sp.Add) and _offset(expr, t) is not None

    return [
        e.replace(matches, rewrite) if isinstance(e, sp.Basic) and e.has(t) else e
        for e in expressions
    ]
