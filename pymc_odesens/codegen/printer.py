"""Print sympy expressions as flat, scalar numba-compatible Python source."""

from __future__ import annotations

import math
import re

import sympy as sp
from sympy.printing.pycode import PythonCodePrinter

from pymc_odesens.model.internal_symbols import InternalSymbol

__all__ = ["KernelPrinter"]

_CANONICAL = re.compile(r"^_(y|p|v)(\d+)$")
_MAX_EXPANDED_POWER = 8


def _refuse_beyond_doubles(number: sp.Number) -> None:
    """A number the kernels' doubles cannot hold (sympy keeps ``2e308`` exactly, a
    derivative of ``1e308 x**2`` makes one) is refused, not printed as ``inf``."""
    try:
        finite = math.isfinite(float(number))
    except OverflowError:
        finite = False
    if not finite:
        raise ValueError(
            f"code generation met the number {sp.Float(number, 4)}, beyond the range of a "
            "double (at most 1.8e308): the model's constants (or their derivatives) overflow "
            "in double precision"
        )


class KernelPrinter(PythonCodePrinter):
    """Printer for generated kernels.

    Canonical symbols ``_t``, ``_y3``, ``_p2``, ``_v1`` become ``t``, ``y[3]``,
    ``p[2]``, ``v[1]`` (pointer reads in the cfunc); other internal symbols (the
    locals of generated code) print as their names; a user's symbol never reaches the
    printer (expressions are rewritten in canonical symbols first), and one that does is
    refused rather than printed under a name that could alias a local; numbers are printed as
    floats so numba never mixes integer and float arithmetic; small integer
    powers become products (``x**3`` -> ``x*x*x``) and half powers ``sqrt``.
    """

    def __init__(self) -> None:
        super().__init__({"fully_qualified_modules": True, "standard": "python3"})

    def _print_Symbol(self, expr: sp.Symbol) -> str:
        if not isinstance(expr, InternalSymbol):
            raise ValueError(
                f"code generation met the symbol {expr.name!r}, which is not in canonical "
                "form: rewrite expressions with OdeSystem.to_canonical before printing"
            )
        name = expr.name
        if name == "_t":
            return "t"
        match = _CANONICAL.match(name)
        if match:
            return f"{match.group(1)}[{match.group(2)}]"
        return name

    def _print_Integer(self, expr: sp.Integer) -> str:
        _refuse_beyond_doubles(expr)
        return f"{int(expr)}.0"

    def _print_Rational(self, expr: sp.Rational) -> str:
        _refuse_beyond_doubles(expr)
        return f"({int(expr.p)}.0/{int(expr.q)}.0)"

    def _print_Half(self, expr) -> str:
        return "0.5"

    def _print_Float(self, expr: sp.Float) -> str:
        _refuse_beyond_doubles(expr)
        return repr(float(expr))

    def _print_Pow(self, expr: sp.Pow, rational: bool = False) -> str:
        base, exponent = expr.args
        b = self.parenthesize(base, 1000)  # always bracket compound bases
        if exponent.is_Integer and 0 < abs(int(exponent)) <= _MAX_EXPANDED_POWER:
            n = int(exponent)
            product = "*".join([b] * abs(n))
            return f"({product})" if n > 0 else f"(1.0/({product}))"
        if exponent == sp.S.Half:
            return f"math.sqrt({self._print(base)})"
        if exponent == -sp.S.Half:
            return f"(1.0/math.sqrt({self._print(base)}))"
        return f"({b}**{self.parenthesize(exponent, 1000)})"

    def _print_Heaviside(self, expr: sp.Heaviside) -> str:
        arg = self._print(expr.args[0])
        at_zero = expr.args[1] if len(expr.args) > 1 else sp.S.Half
        return f"(0.0 if ({arg}) < 0.0 else ({self._print(at_zero)} if ({arg}) == 0.0 else 1.0))"

    def _print_DiracDelta(self, expr) -> str:
        return "0.0"

    def _print_sign(self, expr: sp.sign) -> str:
        arg = self._print(expr.args[0])
        return f"(0.0 if ({arg}) == 0.0 else math.copysign(1.0, {arg}))"

    def _print_Abs(self, expr: sp.Abs) -> str:
        return f"abs({self._print(expr.args[0])})"

    def _print_TimeSince(self, expr) -> str:
        """``t - tau`` as one subtraction (:mod:`pymc_odesens.codegen.time_offsets`)."""
        t, tau = expr.args
        return f"({self._print(t)} - {self._print(tau)})"

    def _print_BooleanTrue(self, expr) -> str:
        return "True"

    def _print_BooleanFalse(self, expr) -> str:
        return "False"
