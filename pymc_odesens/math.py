"""Elementary functions for writing right-hand sides.

A right-hand side ``rhs(t, y, p)`` is traced once with symbolic ``y`` and ``p``;
ordinary arithmetic (``+ - * / **``) works directly on them. The functions below
are the documented namespace for everything else. Each one accepts numbers and
symbolic expressions, so the same right-hand side can be differentiated exactly
and compiled to numba kernels.

>>> from pymc_odesens import math as om
>>> def rhs(t, y, p):
...     return [-p[0] * om.exp(-t) * y[0], om.maximum(y[0], 0.0) - p[1] * y[1]]

Conditionals
------------
``where(condition, if_true, if_false)`` selects between two expressions with a
relational condition such as ``t < p["t_lag"]``. Build conditions with the
comparison operators on symbols or with :func:`less`, :func:`greater`, ...
(Python's ``<`` on two symbolic expressions also works). ``heaviside(x)`` is
the unit step (value ``1/2`` at ``x == 0`` unless ``at_zero`` is given).

Triggers
--------
Event triggers (:class:`pymc_odesens.TriggerEvent`) are boolean expressions:
comparisons combined with ``&``, ``|``, ``~``, ``^`` or :func:`logical_and`,
:func:`logical_or`, :func:`logical_not`, :func:`logical_xor`. Use :func:`equal` and
:func:`not_equal` for ``==`` and ``!=``: on symbols, Python's ``==`` compares the
expressions' structure and returns a plain ``bool``.

Rounding
--------
:func:`floor`, :func:`ceil` and :func:`trunc` round to integers (as floats).

Derivatives of ``abs``, ``minimum``, ``maximum``, ``where``, ``heaviside`` and
the rounding functions are taken piecewise; the Dirac delta at a switching point
is dropped (it has measure zero along a trajectory). Integrate across genuine
discontinuities with events instead.
"""

from __future__ import annotations

import math as _pymath

import sympy as sp

__all__ = [
    "exp",
    "expm1",
    "log",
    "log1p",
    "log10",
    "log2",
    "sqrt",
    "cbrt",
    "power",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "arctan2",
    "sinh",
    "cosh",
    "tanh",
    "arcsinh",
    "arccosh",
    "arctanh",
    "abs",
    "sign",
    "minimum",
    "maximum",
    "heaviside",
    "where",
    "piecewise",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "equal",
    "not_equal",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "floor",
    "ceil",
    "trunc",
    "pi",
    "e",
]

pi = sp.pi
e = sp.E


def _sym(x):
    return sp.sympify(x)


def exp(x):
    """Exponential ``e**x``."""
    return sp.exp(_sym(x))


def expm1(x):
    """``exp(x) - 1`` (compiled with ``math.expm1`` for accuracy near 0)."""
    return sp.exp(_sym(x)) - 1


def log(x):
    """Natural logarithm."""
    return sp.log(_sym(x))


def log1p(x):
    """``log(1 + x)``."""
    return sp.log(1 + _sym(x))


def log10(x):
    """Base-10 logarithm."""
    return sp.log(_sym(x), 10)


def log2(x):
    """Base-2 logarithm."""
    return sp.log(_sym(x), 2)


def sqrt(x):
    """Square root."""
    return sp.sqrt(_sym(x))


def cbrt(x):
    """Real cube root (``x ** (1/3)`` for ``x >= 0``)."""
    return sp.Pow(_sym(x), sp.Rational(1, 3))


def power(x, a):
    """``x ** a``."""
    return sp.Pow(_sym(x), _sym(a))


def sin(x):
    """Sine."""
    return sp.sin(_sym(x))


def cos(x):
    """Cosine."""
    return sp.cos(_sym(x))


def tan(x):
    """Tangent."""
    return sp.tan(_sym(x))


def arcsin(x):
    """Inverse sine."""
    return sp.asin(_sym(x))


def arccos(x):
    """Inverse cosine."""
    return sp.acos(_sym(x))


def arctan(x):
    """Inverse tangent."""
    return sp.atan(_sym(x))


def arctan2(y, x):
    """Four-quadrant inverse tangent of ``y / x``."""
    return sp.atan2(_sym(y), _sym(x))


def sinh(x):
    """Hyperbolic sine."""
    return sp.sinh(_sym(x))


def cosh(x):
    """Hyperbolic cosine."""
    return sp.cosh(_sym(x))


def tanh(x):
    """Hyperbolic tangent."""
    return sp.tanh(_sym(x))


def arcsinh(x):
    """Inverse hyperbolic sine."""
    return sp.asinh(_sym(x))


def arccosh(x):
    """Inverse hyperbolic cosine."""
    return sp.acosh(_sym(x))


def arctanh(x):
    """Inverse hyperbolic tangent."""
    return sp.atanh(_sym(x))


def abs(x):  # noqa: A001 - the namespace mirrors numpy's names
    """Absolute value."""
    return sp.Abs(_sym(x))


def sign(x):
    """Sign of ``x`` (-1, 0 or 1)."""
    return sp.sign(_sym(x))


def minimum(*args):
    """Smallest of the arguments."""
    return sp.Min(*(_sym(a) for a in args))


def maximum(*args):
    """Largest of the arguments."""
    return sp.Max(*(_sym(a) for a in args))


def heaviside(x, at_zero=0.5):
    """Unit step: 0 for ``x < 0``, 1 for ``x > 0`` and ``at_zero`` at 0."""
    return sp.Heaviside(_sym(x), _sym(at_zero))


def less(a, b):
    """Condition ``a < b`` for :func:`where`."""
    return sp.Lt(_sym(a), _sym(b))


def less_equal(a, b):
    """Condition ``a <= b`` for :func:`where`."""
    return sp.Le(_sym(a), _sym(b))


def greater(a, b):
    """Condition ``a > b`` for :func:`where`."""
    return sp.Gt(_sym(a), _sym(b))


def greater_equal(a, b):
    """Condition ``a >= b`` for :func:`where`."""
    return sp.Ge(_sym(a), _sym(b))


def equal(a, b):
    """Condition ``a == b`` (Python's ``==`` on symbols compares structure, not values)."""
    return sp.Eq(_sym(a), _sym(b))


def not_equal(a, b):
    """Condition ``a != b``."""
    return sp.Ne(_sym(a), _sym(b))


def _condition(x, name: str):
    x = sp.sympify(x)
    if not isinstance(x, sp.logic.boolalg.Boolean):
        raise TypeError(
            f"{name}(): arguments must be conditions (comparisons such as `y.x > 1` or "
            f"booleans), got {x!r}"
        )
    return x


def logical_and(*conditions):
    """All ``conditions`` hold (the same as ``c1 & c2 & ...``)."""
    return sp.And(*(_condition(c, "logical_and") for c in conditions))


def logical_or(*conditions):
    """At least one of ``conditions`` holds (the same as ``c1 | c2 | ...``)."""
    return sp.Or(*(_condition(c, "logical_or") for c in conditions))


def logical_not(condition):
    """``condition`` does not hold (the same as ``~condition``)."""
    return sp.Not(_condition(condition, "logical_not"))


def logical_xor(*conditions):
    """An odd number of ``conditions`` hold (for two: exactly one; ``c1 ^ c2``)."""
    return sp.Xor(*(_condition(c, "logical_xor") for c in conditions))


class _Rounding(sp.Function):
    """A rounding function: piecewise constant, so its derivative is zero (almost everywhere)."""

    nargs = 1
    _numeric = None
    _printed = None

    @classmethod
    def eval(cls, x):
        if x.is_Number:
            return sp.Integer(cls._numeric(float(x))) if x.is_finite else None
        return None

    def fdiff(self, argindex=1):
        return sp.S.Zero

    def _pythoncode(self, printer) -> str:
        return f"float({self._printed}({printer._print(self.args[0])}))"


class Floor(_Rounding):
    """``floor(x)``: the largest integer not above ``x`` (see :func:`floor`)."""

    _numeric = staticmethod(_pymath.floor)
    _printed = "math.floor"


class Ceil(_Rounding):
    """``ceil(x)``: the smallest integer not below ``x`` (see :func:`ceil`)."""

    _numeric = staticmethod(_pymath.ceil)
    _printed = "math.ceil"


class Trunc(_Rounding):
    """``trunc(x)``: ``x`` rounded towards zero (see :func:`trunc`)."""

    _numeric = staticmethod(_pymath.trunc)
    _printed = "math.trunc"


def floor(x):
    """Largest integer not above ``x`` (a float); derivative zero."""
    return Floor(_sym(x))


def ceil(x):
    """Smallest integer not below ``x`` (a float); derivative zero."""
    return Ceil(_sym(x))


def trunc(x):
    """``x`` rounded towards zero (a float); derivative zero."""
    return Trunc(_sym(x))


def where(condition, if_true, if_false):
    """``if_true`` where ``condition`` holds, else ``if_false``.

    Parameters
    ----------
    condition : relational expression or bool
        For example ``t < p["t_lag"]`` or ``less(y[0], 1.0)``.
    if_true, if_false : expression or number
    """
    condition = sp.sympify(condition)
    if condition is sp.true:
        return _sym(if_true)
    if condition is sp.false:
        return _sym(if_false)
    if not isinstance(condition, (sp.core.relational.Relational, sp.logic.boolalg.Boolean)):
        raise TypeError(
            f"where(): condition must be a comparison such as `t < p['t_lag']`, got {condition!r}"
        )
    return sp.Piecewise((_sym(if_true), condition), (_sym(if_false), True))


def piecewise(*pieces):
    """Several branches: ``piecewise((value1, cond1), (value2, cond2), ..., (default, True))``.

    The first branch whose condition holds is taken; the last condition must be
    ``True`` so that the expression is defined everywhere.
    """
    if not pieces or sp.sympify(pieces[-1][1]) is not sp.true:
        raise ValueError("piecewise(): the last piece must be (default_value, True)")
    return sp.Piecewise(*((_sym(v), c) for v, c in pieces))
