"""Expressions written as text (model files), parsed with every name bound explicitly.

``parse_expression("-k1 * A + lambda * B", names)`` reads Python arithmetic syntax with
Python's own tokenizer and ``ast`` module and builds the sympy expression from the syntax
tree. Unlike ``sympy.sympify``, it

- binds names only from ``names``: an undeclared name is an error naming it, never a sympy
  object that happens to share the name (``E``, ``I``, ``S``, ``N``, ``beta``, ``gamma``);
- accepts any identifier as a name, Python keywords included (``lambda``, ``in``), because
  names are replaced by placeholders at the token level before the text is parsed;
- refuses what Python refuses (``k1 * * A`` is a syntax error, not ``k1**A``) and every
  construct that is not arithmetic (attributes, subscripts, lambdas, strings);
- calls only the functions of :mod:`pymc_odesens.math` (and ``abs``, ``min``, ``max``,
  ``pow``), so that what a file can say is what a Python right-hand side can say.

Integer literals stay exact (``8/7`` is the rational 8/7); ``pi`` is the constant unless a
name of the model is called ``pi``.
"""

from __future__ import annotations

import ast
import io
import keyword
import token
import tokenize
from collections.abc import Mapping

import sympy as sp

from pymc_odesens import math as om

__all__ = ["ExpressionSyntaxError", "parse_expression", "EXPRESSION_FUNCTIONS"]

EXPRESSION_FUNCTIONS = {
    name: getattr(om, name) for name in om.__all__ if callable(getattr(om, name))
}
EXPRESSION_FUNCTIONS.update({"min": om.minimum, "max": om.maximum, "pow": om.power, "ln": om.log})
"""Functions an expression may call: those of :mod:`pymc_odesens.math`, ``min``, ``max``,
``pow`` and ``ln``."""

_CONSTANTS = {"pi": sp.pi}

_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}
_COMPARE = {
    ast.Lt: sp.Lt,
    ast.LtE: sp.Le,
    ast.Gt: sp.Gt,
    ast.GtE: sp.Ge,
    ast.Eq: sp.Eq,
    ast.NotEq: sp.Ne,
}


class ExpressionSyntaxError(ValueError):
    """An expression in a model file that cannot be read; the message names where it is."""


def _placeholder(k: int) -> str:
    return f"__name{k}__"


def _rename_names(text: str, where: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """The text with every variable name replaced by a placeholder.

    Returns the new text, placeholder -> original name, and the names that are called
    (placeholder -> function name; a called name stays a function, never a variable).
    """
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError) as err:
        raise ExpressionSyntaxError(f"{where}: cannot read {text!r}: {err}") from None
    significant = [
        tok
        for tok in tokens
        if tok.type not in (token.NEWLINE, token.NL, token.ENDMARKER, token.INDENT, token.DEDENT)
    ]
    out: list[str] = []
    variables: dict[str, str] = {}
    functions: dict[str, str] = {}
    for i, tok in enumerate(significant):
        if tok.type == token.NAME:
            following = significant[i + 1].string if i + 1 < len(significant) else ""
            if following == "(" and not keyword.iskeyword(tok.string):
                holder = f"__call{len(functions)}__"
                functions[holder] = tok.string
            elif tok.string in ("and", "or", "not"):
                out.append(tok.string)
                continue
            else:
                holder = _placeholder(len(variables))
                variables[holder] = tok.string
            out.append(holder)
        elif tok.type in (token.NUMBER, token.OP):
            out.append(tok.string)
        elif tok.type == token.COMMENT:
            raise ExpressionSyntaxError(f"{where}: comments are not allowed in {text!r}")
        else:
            raise ExpressionSyntaxError(
                f"{where}: unexpected {token.tok_name[tok.type].lower()} {tok.string!r} in {text!r}"
            )
    return " ".join(out), variables, functions


class _Builder:
    def __init__(self, text, names, variables, functions, where):
        self.text = text
        self.names = names
        self.variables = variables
        self.functions = functions
        self.where = where

    def fail(self, what: str):
        raise ExpressionSyntaxError(f"{self.where}: {what} in {self.text!r}")

    def build(self, node):
        if isinstance(node, ast.Expression):
            return self.build(node.body)
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self.fail(f"the constant {value!r} is not a real number")
            return sp.Integer(value) if isinstance(value, int) else sp.Float(value)
        if isinstance(node, ast.Name):
            name = self.variables[node.id]
            if name in self.names:
                return sp.sympify(self.names[name])
            if name in _CONSTANTS:
                return _CONSTANTS[name]
            known = ", ".join(sorted(self.names)) or "(none)"
            self.fail(f"the name {name!r} is not defined (known names: {known})")
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](self.build(node.left), self.build(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self.build(node.operand)
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return sp.Not(self.build(node.operand))
        if isinstance(node, ast.BoolOp):
            combine = sp.And if isinstance(node.op, ast.And) else sp.Or
            return combine(*(self.build(v) for v in node.values))
        if isinstance(node, ast.Compare):
            parts = []
            left = self.build(node.left)
            for op, comparator in zip(node.ops, node.comparators):
                if type(op) not in _COMPARE:
                    self.fail(f"the comparison {type(op).__name__} is not supported")
                right = self.build(comparator)
                parts.append(_COMPARE[type(op)](left, right))
                left = right
            return parts[0] if len(parts) == 1 else sp.And(*parts)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = self.functions.get(node.func.id)
            if name is None or name not in EXPRESSION_FUNCTIONS:
                allowed = ", ".join(sorted(EXPRESSION_FUNCTIONS))
                self.fail(f"the function {name or node.func.id!r} is unknown (allowed: {allowed})")
            if node.keywords:
                self.fail(f"keyword arguments in a call of {name}() are not supported")
            args = [self.build(a) for a in node.args]
            try:
                return EXPRESSION_FUNCTIONS[name](*args)
            except TypeError as err:
                self.fail(f"{name}() called with {len(args)} argument(s): {err}")
        self.fail(f"the construct {type(node).__name__} is not arithmetic")


def parse_expression(text: str, names: Mapping[str, object], where: str) -> sp.Basic:
    """Parse ``text`` into a sympy expression with every name bound from ``names``.

    Parameters
    ----------
    text : str
        Python arithmetic: ``+ - * / **``, parentheses, numbers, names, calls of
        :data:`EXPRESSION_FUNCTIONS`, comparisons and ``and``/``or``/``not`` (for
        conditions, e.g. inside ``where``).
    names : mapping of str to sympy expression
        What each name means (states, parameters, time, intermediates).
    where : str
        Where the text comes from (file and field), for error messages.

    Returns
    -------
    sympy.Basic
        An expression, or a relational / boolean for a condition.

    Raises
    ------
    ExpressionSyntaxError
        (a ValueError) naming ``where`` and what is wrong: a syntax error, an undefined
        name, an unknown function, a construct that is not arithmetic.
    """
    if not isinstance(text, str):
        raise ExpressionSyntaxError(
            f"{where}: expected an expression as a string, got {type(text).__name__} {text!r}"
        )
    if not text.strip():
        raise ExpressionSyntaxError(f"{where}: the expression is empty")
    renamed, variables, functions = _rename_names(text, where)
    try:
        tree = ast.parse(renamed, mode="eval")
    except SyntaxError as err:
        raise ExpressionSyntaxError(f"{where}: invalid syntax in {text!r} ({err.msg})") from None
    return _Builder(text, names, variables, functions, where).build(tree)
