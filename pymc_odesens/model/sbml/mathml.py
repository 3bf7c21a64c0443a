"""SBML math (MathML) to sympy, by walking libsbml's ASTNode tree.

libsbml parses the MathML of every element into an :class:`libsbml.ASTNode` tree; this
module walks that tree (never the XML) and returns sympy expressions in which

- an SBML id appears as a :class:`SbmlSymbol` of that name (the importer replaces each by
  what the id denotes: a state, a parameter, an expression of them),
- the ``time`` csymbol is the system's time symbol, ``avogadro`` the number
  6.02214179e23, ``rateOf(x)`` a :class:`RateOf` marker around ``x``'s symbol,
- function definitions are inlined (their arguments substituted),
- piecewise, relational and logical operators become sympy ``Piecewise``, relationals and
  ``And`` / ``Or`` / ``Not`` / ``Xor`` (the functions of :mod:`pymc_odesens.math`),
- a boolean used as a number is 1 or 0 and a number used as a condition is ``!= 0``, as
  SBML Level 3 Version 2 defines.

Anything outside SBML's MathML subset (``delay()`` is refused before, see
:mod:`pymc_odesens.model.sbml.refusals`) raises :class:`SbmlUnsupportedError` naming the
element.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import libsbml
import sympy as sp
from sympy.logic.boolalg import Boolean

from pymc_odesens import math as om
from pymc_odesens.model.sbml.refusals import SbmlError, SbmlUnsupportedError

__all__ = [
    "AVOGADRO",
    "MathConverter",
    "RateOf",
    "SbmlSymbol",
    "as_condition",
    "as_number",
    "float_number",
]

AVOGADRO = 6.02214179e23
"""The value of SBML's ``avogadro`` csymbol (SBML Level 3)."""

_EXACT_INTEGER_LIMIT = 2.0**53


class SbmlSymbol(sp.Symbol):
    """An SBML id as written in the model's math, before the importer resolves it.

    A class of its own, so that it never equals a state or parameter symbol of the same
    name (an SBML species' symbol may denote its concentration while the state holds its
    amount).
    """


class RateOf(sp.Function):
    """SBML's ``rateOf`` csymbol applied to an id: the time derivative of what it denotes."""

    nargs = 1


def float_number(value: float) -> sp.Expr:
    """A number of the file as an exact sympy number: the rational its shortest decimal
    form denotes (``1.4`` is ``7/5``), so that products and quotients of the file's numbers
    (a stoichiometry over a compartment's size, times a rate) stay exact and
    ``stoichiometry @ rates`` equals the right-hand side term by term; the compiled kernels
    print ``7.0/5.0``, the same double as ``1.4``. Magnitudes beyond 1e+-100 stay floats."""
    if math.isnan(value):
        return sp.nan
    if math.isinf(value):
        return sp.oo if value > 0 else -sp.oo
    if value == int(value) and abs(value) < _EXACT_INTEGER_LIMIT:
        return sp.Integer(int(value))
    if value != 0 and not 1e-100 < abs(value) < 1e100:
        return sp.Float(value)
    return sp.Rational(repr(value))


def _is_condition(value) -> bool:
    # sympy's Symbol is a Boolean too: a condition is a Boolean that is not an expression
    return isinstance(value, Boolean) and not isinstance(value, sp.Expr)


def as_number(value) -> sp.Expr:
    """A condition used as a number: 1 where it holds, else 0."""
    if value is sp.true or value is True:
        return sp.S.One
    if value is sp.false or value is False:
        return sp.S.Zero
    if _is_condition(value):
        return sp.Piecewise((sp.S.One, value), (sp.S.Zero, True))
    return value


def as_condition(value) -> Boolean:
    """A number used as a condition: true where it is not zero."""
    if _is_condition(value):
        return value
    return sp.Ne(value, 0)


_UNARY = {
    libsbml.AST_FUNCTION_ABS: sp.Abs,
    libsbml.AST_FUNCTION_EXP: sp.exp,
    libsbml.AST_FUNCTION_LN: sp.log,
    libsbml.AST_FUNCTION_FLOOR: om.floor,
    libsbml.AST_FUNCTION_CEILING: om.ceil,
    libsbml.AST_FUNCTION_FACTORIAL: lambda x: sp.gamma(x + 1),
    libsbml.AST_FUNCTION_SIN: sp.sin,
    libsbml.AST_FUNCTION_COS: sp.cos,
    libsbml.AST_FUNCTION_TAN: sp.tan,
    libsbml.AST_FUNCTION_SEC: lambda x: 1 / sp.cos(x),
    libsbml.AST_FUNCTION_CSC: lambda x: 1 / sp.sin(x),
    libsbml.AST_FUNCTION_COT: lambda x: sp.cos(x) / sp.sin(x),
    libsbml.AST_FUNCTION_SINH: sp.sinh,
    libsbml.AST_FUNCTION_COSH: sp.cosh,
    libsbml.AST_FUNCTION_TANH: sp.tanh,
    libsbml.AST_FUNCTION_SECH: lambda x: 1 / sp.cosh(x),
    libsbml.AST_FUNCTION_CSCH: lambda x: 1 / sp.sinh(x),
    libsbml.AST_FUNCTION_COTH: lambda x: sp.cosh(x) / sp.sinh(x),
    libsbml.AST_FUNCTION_ARCSIN: sp.asin,
    libsbml.AST_FUNCTION_ARCCOS: sp.acos,
    libsbml.AST_FUNCTION_ARCTAN: sp.atan,
    libsbml.AST_FUNCTION_ARCSEC: lambda x: sp.acos(1 / x),
    libsbml.AST_FUNCTION_ARCCSC: lambda x: sp.asin(1 / x),
    libsbml.AST_FUNCTION_ARCCOT: lambda x: sp.atan(1 / x),
    libsbml.AST_FUNCTION_ARCSINH: sp.asinh,
    libsbml.AST_FUNCTION_ARCCOSH: sp.acosh,
    libsbml.AST_FUNCTION_ARCTANH: sp.atanh,
    libsbml.AST_FUNCTION_ARCSECH: lambda x: sp.acosh(1 / x),
    libsbml.AST_FUNCTION_ARCCSCH: lambda x: sp.asinh(1 / x),
    libsbml.AST_FUNCTION_ARCCOTH: lambda x: sp.atanh(1 / x),
}

_RELATIONAL = {
    libsbml.AST_RELATIONAL_EQ: sp.Eq,
    libsbml.AST_RELATIONAL_NEQ: sp.Ne,
    libsbml.AST_RELATIONAL_LT: sp.Lt,
    libsbml.AST_RELATIONAL_LEQ: sp.Le,
    libsbml.AST_RELATIONAL_GT: sp.Gt,
    libsbml.AST_RELATIONAL_GEQ: sp.Ge,
}

_LOGICAL = {
    libsbml.AST_LOGICAL_AND: sp.And,
    libsbml.AST_LOGICAL_OR: sp.Or,
    libsbml.AST_LOGICAL_XOR: sp.Xor,
}


class MathConverter:
    """Converts the ASTNode trees of one SBML model into sympy.

    Parameters
    ----------
    model : libsbml.Model
        Its function definitions are inlined where called.
    time : sympy.Symbol
        The symbol of the ``time`` csymbol.
    known_ids : callable
        ``known_ids(name)`` is true for the ids a model's math may refer to (species,
        compartments, parameters, reactions, species references).
    """

    def __init__(self, model: libsbml.Model, time: sp.Symbol, known_ids: Callable) -> None:
        self.time = time
        self._known = known_ids
        self._functions = {fd.getId(): fd for fd in model.getListOfFunctionDefinitions()}
        self._symbols: dict[str, SbmlSymbol] = {}

    def symbol(self, sid: str) -> SbmlSymbol:
        """The :class:`SbmlSymbol` of ``sid`` (one per id)."""
        found = self._symbols.get(sid)
        if found is None:
            found = self._symbols[sid] = SbmlSymbol(sid, real=True)
        return found

    # public entry points -----------------------------------------------------------------
    def expression(self, ast, where: str, local: Mapping[str, sp.Expr] | None = None):
        """The number-valued sympy expression of ``ast`` (a condition becomes 1 or 0).

        Parameters
        ----------
        ast : libsbml.ASTNode or None
        where : str
            The element the math belongs to, for messages (e.g. ``"kinetic law of
            reaction 'R1'"``).
        local : mapping, optional
            Names bound inside this math only (a kinetic law's local parameters).
        """
        return as_number(self._convert(ast, where, local))

    def condition(self, ast, where: str, local: Mapping[str, sp.Expr] | None = None):
        """The boolean sympy expression of ``ast`` (a number is true where it is not 0)."""
        return as_condition(self._convert(ast, where, local))

    # the walk ------------------------------------------------------------------------------
    def _convert(self, ast, where: str, local):
        if ast is None:
            raise SbmlUnsupportedError("element without math", where, "it has no <math>")
        return self._walk(ast, where, dict(local or {}), ())

    def _walk(self, node, where: str, local: dict, calls: tuple):
        kind = node.getType()
        children = [node.getChild(i) for i in range(node.getNumChildren())]

        def walk(child):
            return self._walk(child, where, local, calls)

        def numbers():
            return [as_number(walk(c)) for c in children]

        if kind == libsbml.AST_INTEGER:
            return sp.Integer(node.getInteger())
        if kind in (libsbml.AST_REAL, libsbml.AST_REAL_E):
            return float_number(node.getReal())
        if kind == libsbml.AST_RATIONAL:
            return sp.Rational(node.getNumerator(), node.getDenominator())
        if kind == libsbml.AST_NAME:
            return self._name(node.getName(), where, local)
        if kind == libsbml.AST_NAME_TIME:
            return self.time
        if kind == libsbml.AST_NAME_AVOGADRO:
            return sp.Float(AVOGADRO)
        if kind == libsbml.AST_CONSTANT_E:
            return sp.E
        if kind == libsbml.AST_CONSTANT_PI:
            return sp.pi
        if kind == libsbml.AST_CONSTANT_TRUE:
            return sp.true
        if kind == libsbml.AST_CONSTANT_FALSE:
            return sp.false
        if kind == libsbml.AST_PLUS:
            return sp.Add(*numbers())
        if kind == libsbml.AST_TIMES:
            return sp.Mul(*numbers())
        if kind == libsbml.AST_MINUS:
            args = numbers()
            if len(args) == 1:
                return -args[0]
            self._arity(node, where, args, 2)
            return args[0] - args[1]
        if kind == libsbml.AST_DIVIDE:
            args = numbers()
            self._arity(node, where, args, 2)
            return args[0] / args[1]
        if kind in (libsbml.AST_POWER, libsbml.AST_FUNCTION_POWER):
            args = numbers()
            self._arity(node, where, args, 2)
            return sp.Pow(args[0], args[1])
        if kind == libsbml.AST_FUNCTION_ROOT:
            args = numbers()
            if len(args) == 1:
                return sp.sqrt(args[0])
            self._arity(node, where, args, 2)
            return sp.Pow(args[1], 1 / args[0])
        if kind == libsbml.AST_FUNCTION_LOG:
            args = numbers()
            if len(args) == 1:
                return sp.log(args[0], 10)
            self._arity(node, where, args, 2)
            return sp.log(args[1]) / sp.log(args[0])
        if kind in _UNARY:
            args = numbers()
            self._arity(node, where, args, 1)
            return _UNARY[kind](args[0])
        if kind == libsbml.AST_FUNCTION_MAX:
            return sp.Max(*numbers())
        if kind == libsbml.AST_FUNCTION_MIN:
            return sp.Min(*numbers())
        if kind == libsbml.AST_FUNCTION_QUOTIENT:
            args = numbers()
            self._arity(node, where, args, 2)
            return om.trunc(args[0] / args[1])
        if kind == libsbml.AST_FUNCTION_REM:
            args = numbers()
            self._arity(node, where, args, 2)
            return args[0] - args[1] * om.trunc(args[0] / args[1])
        if kind == libsbml.AST_FUNCTION_PIECEWISE:
            return self._piecewise(children, walk, where)
        if kind in _RELATIONAL:
            args = numbers()
            if kind == libsbml.AST_RELATIONAL_NEQ:
                self._arity(node, where, args, 2)
            if len(args) < 2:
                return sp.true
            relation = _RELATIONAL[kind]
            return sp.And(*(relation(a, b) for a, b in zip(args[:-1], args[1:])))
        if kind in _LOGICAL:
            return _LOGICAL[kind](*(as_condition(walk(c)) for c in children))
        if kind == libsbml.AST_LOGICAL_NOT:
            self._arity(node, where, children, 1)
            return sp.Not(as_condition(walk(children[0])))
        if kind == libsbml.AST_LOGICAL_IMPLIES:
            self._arity(node, where, children, 2)
            a, b = (as_condition(walk(c)) for c in children)
            return sp.Or(sp.Not(a), b)
        if kind == libsbml.AST_FUNCTION_RATE_OF:
            self._arity(node, where, children, 1)
            target = children[0]
            if target.getType() == libsbml.AST_NAME and target.getName() in local:
                if local[target.getName()].is_Number:
                    return sp.S.Zero  # a local parameter is a constant
            if target.getType() != libsbml.AST_NAME or target.getName() in local:
                raise SbmlUnsupportedError(
                    "rateOf() of an expression",
                    where,
                    "rateOf takes the id of a model variable",
                )
            return RateOf(self._name(target.getName(), where, {}))
        if kind == libsbml.AST_FUNCTION:
            return self._call(node.getName(), children, walk, where, calls)
        if kind == libsbml.AST_FUNCTION_DELAY:
            raise SbmlUnsupportedError("delay()", where)
        name = node.getName() or libsbml.formulaToL3String(node)
        raise SbmlUnsupportedError(f"MathML element {name!r}", where)

    @staticmethod
    def _arity(node, where: str, args, count: int) -> None:
        if len(args) != count:
            raise SbmlError(
                f"{where}: {libsbml.formulaToL3String(node)!r} takes {count} argument(s), "
                f"got {len(args)}"
            )

    def _name(self, name: str, where: str, local: Mapping):
        if name in local:
            return local[name]
        if self._known(name):
            return self.symbol(name)
        raise SbmlError(f"{where}: the math refers to {name!r}, which the model does not define")

    def _piecewise(self, children, walk, where: str):
        pieces = []
        for j in range(0, len(children) - 1, 2):
            pieces.append((as_number(walk(children[j])), as_condition(walk(children[j + 1]))))
        if len(children) % 2 == 1:
            pieces.append((as_number(walk(children[-1])), sp.true))
        elif not pieces:
            raise SbmlError(f"{where}: an empty piecewise has no value")
        elif sp.Or(*(condition for _, condition in pieces)) is sp.true:
            pieces[-1] = (pieces[-1][0], sp.true)  # the pieces cover every case
        else:
            # SBML leaves the value undefined where no piece holds: NaN there, so that a
            # solve reaching it fails instead of returning a number the model never gave
            pieces.append((sp.nan, sp.true))
        return sp.Piecewise(*pieces)

    def _call(self, name: str, children, walk, where: str, calls: tuple):
        definition = self._functions.get(name)
        if definition is None:
            raise SbmlUnsupportedError(
                f"function {name!r}", where, "it is not defined in the model"
            )
        if name in calls:
            raise SbmlError(f"{where}: function definition {name!r} calls itself")
        body = definition.getBody()
        if body is None:
            raise SbmlUnsupportedError(
                "function definition without a body", f"function definition {name!r}"
            )
        n_args = definition.getNumArguments()
        if len(children) != n_args:
            raise SbmlError(
                f"{where}: function {name!r} takes {n_args} argument(s), got {len(children)}"
            )
        bound = {definition.getArgument(i).getName(): walk(children[i]) for i in range(n_args)}
        label = f"function definition {name!r} (called in {where})"
        return self._walk(body, label, bound, (*calls, name))
