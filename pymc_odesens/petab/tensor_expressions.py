"""sympy expressions evaluated on PyTensor tensors (observable and noise formulas).

PEtab's observable and noise formulas, with the SBML model's assignment rules substituted,
are sympy expressions; :func:`expression_tensor` evaluates one elementwise on tensors (one
entry per measurement), so that PyTensor differentiates it and compiles it with the rest
of the model (also in NUMBA mode). Functions it does not know are refused by name.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytensor.tensor as pt
import sympy as sp

from pymc_odesens.petab.errors import PetabUnsupportedError

__all__ = ["expression_tensor"]

_UNARY = {
    sp.exp: pt.exp,
    sp.log: pt.log,
    sp.sin: pt.sin,
    sp.cos: pt.cos,
    sp.tan: pt.tan,
    sp.asin: pt.arcsin,
    sp.acos: pt.arccos,
    sp.atan: pt.arctan,
    sp.sinh: pt.sinh,
    sp.cosh: pt.cosh,
    sp.tanh: pt.tanh,
    sp.asinh: pt.arcsinh,
    sp.acosh: pt.arccosh,
    sp.atanh: pt.arctanh,
    sp.Abs: pt.abs,
    sp.sign: pt.sign,
    sp.floor: pt.floor,
    sp.ceiling: pt.ceil,
}
_RELATIONS = {
    sp.StrictLessThan: pt.lt,
    sp.LessThan: pt.le,
    sp.StrictGreaterThan: pt.gt,
    sp.GreaterThan: pt.ge,
    sp.Equality: pt.eq,
    sp.Unequality: pt.neq,
}


class _Converter:
    def __init__(self, values: Mapping, label: str) -> None:
        self.values = values
        self.label = label
        self.memo: dict = {}

    def __call__(self, expr):
        found = self.memo.get(expr)
        if found is None:
            found = self._convert(expr)
            self.memo[expr] = found
        return found

    def _convert(self, expr):  # noqa: C901 - one dispatch over sympy's node types
        if isinstance(expr, sp.Symbol):
            if expr not in self.values:
                raise PetabUnsupportedError(f"{self.label}: no value for the symbol {expr.name!r}")
            value = self.values[expr]
            if not isinstance(value, pt.TensorVariable):
                # float64 always: PyTensor would make a Python 0.5 a float32 constant
                value = np.asarray(value, dtype=np.float64)
            return pt.as_tensor_variable(value)
        if expr in (sp.true, sp.false):
            return pt.as_tensor_variable(np.bool_(expr == sp.true))
        if expr.is_Number or isinstance(expr, sp.NumberSymbol):
            value = float(expr)
            if not np.isfinite(value):
                raise PetabUnsupportedError(f"{self.label}: non-finite constant {expr}")
            return pt.as_tensor_variable(np.float64(value))
        if isinstance(expr, sp.Piecewise):
            result = pt.as_tensor_variable(np.float64(np.nan))  # no condition holds
            for value, condition in reversed(expr.args):
                if condition == sp.true:
                    result = self(value)
                else:
                    result = pt.switch(self(condition), self(value), result)
            return result
        args = [self(a) for a in expr.args]
        if isinstance(expr, sp.Add):
            return _fold(pt.add, args)
        if isinstance(expr, sp.Mul):
            return _fold(pt.mul, args)
        if isinstance(expr, sp.Pow):
            exponent = expr.args[1]
            if exponent == sp.S.Half:
                return pt.sqrt(args[0])
            if exponent == -1:
                return pt.reciprocal(args[0])
            return pt.power(args[0], args[1])
        for kind, function in _UNARY.items():
            if isinstance(expr, kind) and len(args) == 1:
                return function(args[0])
        for kind, function in _RELATIONS.items():
            if isinstance(expr, kind):
                return function(args[0], args[1])
        if isinstance(expr, sp.Min):
            return _fold(pt.minimum, args)
        if isinstance(expr, sp.Max):
            return _fold(pt.maximum, args)
        if isinstance(expr, sp.And):
            return _fold(pt.and_, args)
        if isinstance(expr, sp.Or):
            return _fold(pt.or_, args)
        if isinstance(expr, sp.Not):
            return pt.invert(args[0])
        if isinstance(expr, sp.Heaviside):
            at_zero = args[1] if len(args) > 1 else pt.as_tensor_variable(np.float64(0.5))
            x = args[0]
            zero, one = np.float64(0.0), np.float64(1.0)
            return pt.switch(pt.lt(x, zero), zero, pt.switch(pt.eq(x, zero), at_zero, one))
        raise PetabUnsupportedError(
            f"{self.label}: the function {type(expr).__name__} is not supported in observable "
            f"and noise formulas ({expr})"
        )


def _fold(function, args):
    result = args[0]
    for a in args[1:]:
        result = function(result, a)
    return result


def expression_tensor(expr: sp.Expr, values: Mapping, label: str):
    """``expr`` evaluated on tensors.

    Parameters
    ----------
    expr : sympy.Expr
    values : mapping of sympy.Symbol to tensor-like
        A value (a tensor, broadcast elementwise, or a number) for every free symbol.
    label : str
        Names the formula in errors.

    Returns
    -------
    TensorVariable
        float64, of the broadcast shape of the values used.

    Raises
    ------
    PetabUnsupportedError
        A symbol without a value, a function that has no PyTensor counterpart here.
    """
    result = _Converter(values, label)(sp.sympify(expr))
    return pt.cast(result, "float64")
