"""The checks every user expression passes (model/expression_checks.py)."""

import pytest
import sympy as sp

from pymc_odesens.model.expression_checks import checked_expression


def test_an_expression_comes_back_as_sympy():
    x = sp.Symbol("x")
    assert checked_expression(2 * x, "rhs[0]") == 2 * x
    assert checked_expression(3, "rhs[0]") == sp.Integer(3)


def test_faults_are_refused_by_name():
    x = sp.Symbol("x")
    with pytest.raises(TypeError, match=r"rhs\[0\] is not an expression: <class 'object'>"):
        checked_expression(object, "rhs[0]")
    with pytest.raises(TypeError, match=r"rhs\[1\] must be a scalar expression"):
        checked_expression([x, x], "rhs[1]")
    with pytest.raises(TypeError, match=r"rhs\[1\] must be a scalar expression"):
        checked_expression(sp.Matrix([x, x]), "rhs[1]")  # a matrix is a sympy Expr
    for bad in (sp.nan, sp.oo, -sp.oo, sp.zoo):
        with pytest.raises(ValueError, match=r"rhs\[2\] contains a non-finite constant"):
            checked_expression(x + bad, "rhs[2]")
    # numbers beyond the double range are infinities in the compiled kernels
    for bad in (sp.Float("1e309"), sp.Integer(10) ** 400):
        with pytest.raises(
            ValueError,
            match=r"rhs\[3\] contains a non-finite constant \(nan "
            r"or inf: 1.000E\+(309|400), beyond the double range\)",
        ):
            checked_expression(bad * x, "rhs[3]")


def test_scalar_false_accepts_what_is_not_a_scalar_expression():
    x = sp.Symbol("x")
    relation = checked_expression(x > 1, "trigger", scalar=False)
    assert relation == (x > 1)
    with pytest.raises(TypeError, match="trigger must be a scalar expression"):
        checked_expression(x > 1, "trigger")
