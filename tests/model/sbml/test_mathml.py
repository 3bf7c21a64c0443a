"""MathML to sympy: every operator SBML allows, against Python's math on numbers."""

from __future__ import annotations

import math

import libsbml
import pytest
import sympy as sp

from pymc_odesens.model.internal_symbols import time_symbol
from pymc_odesens.model.sbml import SbmlError, SbmlUnsupportedError
from pymc_odesens.model.sbml.mathml import AVOGADRO, MathConverter, RateOf, SbmlSymbol

IDS = {"x", "y", "z"}


@pytest.fixture(scope="module")
def converter():
    document = libsbml.SBMLDocument(3, 2)
    model = document.createModel()
    for fid, text in {
        "square": "lambda(a, a * a)",
        "hill": "lambda(s, k, n, s^n / (k^n + s^n))",
        "positive": "lambda(a, a > 0)",
        "twice_square": "lambda(a, 2 * square(a))",
    }.items():
        f = model.createFunctionDefinition()
        f.setId(fid)
        f.setMath(libsbml.parseL3Formula(text))
    converter = MathConverter(model, time_symbol(), lambda sid: sid in IDS)
    converter._document = document  # keep the model alive
    return converter


def value(converter, formula: str, t: float = 0.0, **numbers) -> float:
    ast = libsbml.parseL3Formula(formula)
    assert ast is not None, libsbml.getLastParseL3Error()
    expr = converter.expression(ast, "test")
    replacements = {converter.symbol(k): sp.Float(v) for k, v in numbers.items()}
    replacements[converter.time] = sp.Float(t)
    return float(expr.xreplace(replacements))


@pytest.mark.parametrize(
    ("formula", "expected"),
    [
        ("x + y * z - x / y", 2.0 + 3.0 * 0.5 - 2.0 / 3.0),
        ("-x", -2.0),
        ("x^y", 8.0),
        ("pow(x, z)", math.sqrt(2.0)),
        ("sqrt(x)", math.sqrt(2.0)),
        ("root(3, x)", 2.0 ** (1 / 3)),
        ("exp(z)", math.exp(0.5)),
        ("ln(x)", math.log(2.0)),
        ("log10(x)", math.log10(2.0)),
        ("log(3, x)", math.log(2.0, 3.0)),
        ("abs(-x)", 2.0),
        ("floor(-z)", -1.0),
        ("ceil(z)", 1.0),
        ("factorial(y)", 6.0),
        ("sin(z) + cos(z) + tan(z)", math.sin(0.5) + math.cos(0.5) + math.tan(0.5)),
        ("sec(z) * csc(z) * cot(z)", 1 / math.cos(0.5) / math.sin(0.5) / math.tan(0.5)),
        ("sinh(z) + cosh(z) + tanh(z)", math.sinh(0.5) + math.cosh(0.5) + math.tanh(0.5)),
        ("sech(z) * csch(z) * coth(z)", 1 / math.cosh(0.5) / math.sinh(0.5) / math.tanh(0.5)),
        ("arcsin(z) + arccos(z) + arctan(z)", math.asin(0.5) + math.acos(0.5) + math.atan(0.5)),
        ("arcsec(x) + arccsc(x) + arccot(x)", math.acos(0.5) + math.asin(0.5) + math.atan(0.5)),
        ("arcsinh(z) + arccosh(x) + arctanh(z)", math.asinh(0.5) + math.acosh(2) + math.atanh(0.5)),
        ("arcsech(z) + arccsch(x) + arccoth(x)", math.acosh(2) + math.asinh(0.5) + math.atanh(0.5)),
        ("max(x, y, z) + min(x, y, z)", 3.5),
        ("quotient(7, x) + rem(7, x)", 3.0 + 1.0),
        ("quotient(-7, x) + rem(-7, x)", -3.0 - 1.0),
        ("piecewise(1, x > y, 2, x > z, 3)", 2.0),
        ("piecewise(1, x > y, 3)", 3.0),
        ("(x > y) + (x < y) * 10", 10.0),
        ("piecewise(5, z, 6)", 5.0),
        ("piecewise(7, and(x > z, y > x, true), 8)", 7.0),
        ("piecewise(7, or(x > y, false), 8)", 8.0),
        ("piecewise(7, xor(x > z, y > x), 8)", 8.0),
        ("piecewise(7, not(x > y), 8)", 7.0),
        ("piecewise(7, implies(x > y, z > 1), 8)", 7.0),
        ("piecewise(7, z < x < y, 8)", 7.0),
        ("piecewise(7, x == 2, 8) + piecewise(1, x != 2, 0)", 7.0),
        ("piecewise(7, x >= 2 && x <= 2, 8)", 7.0),
        ("avogadro / 1e23", AVOGADRO / 1e23),
        ("pi + exponentiale", math.pi + math.e),
        ("time * 2", 3.0),
        ("square(x) + hill(x, y, 2)", 4.0 + 4.0 / 13.0),
        ("twice_square(z)", 0.5),
        ("piecewise(1, positive(z), 0)", 1.0),
    ],
)
def test_operators(converter, formula, expected):
    assert value(converter, formula, t=1.5, x=2.0, y=3.0, z=0.5) == pytest.approx(
        expected, rel=1e-14
    )


def test_conditions_and_markers(converter):
    condition = converter.condition(libsbml.parseL3Formula("x"), "test")
    assert condition == sp.Ne(converter.symbol("x"), 0)
    rate = converter.expression(libsbml.parseL3Formula("rateOf(x)"), "test")
    assert rate == RateOf(converter.symbol("x"))
    assert isinstance(converter.symbol("x"), SbmlSymbol)
    assert converter.symbol("x") != sp.Symbol("x", real=True)
    # local names (a kinetic law's local parameters) shadow ids and are constants for rateOf
    local = converter.expression(libsbml.parseL3Formula("x + rateOf(x)"), "test", {"x": sp.S(4)})
    assert local == 4


def test_incomplete_piecewise_is_undefined_outside_its_pieces(converter):
    expr = converter.expression(libsbml.parseL3Formula("piecewise(1, x > 0)"), "test")
    assert expr.xreplace({converter.symbol("x"): 1}) == 1
    assert expr.xreplace({converter.symbol("x"): -1}) is sp.nan
    # pieces that cover every case need no otherwise
    covered = converter.expression(libsbml.parseL3Formula("piecewise(1, x > 0, 2, x <= 0)"), "t")
    assert not covered.has(sp.nan)
    assert covered.xreplace({converter.symbol("x"): -1}) == 2


def test_errors_name_the_element(converter):
    with pytest.raises(SbmlError, match=r"kinetic law of reaction 'R1': the math refers to 'w'"):
        converter.expression(libsbml.parseL3Formula("w + 1"), "kinetic law of reaction 'R1'")
    with pytest.raises(SbmlUnsupportedError, match=r"SBML delay\(\) is not supported \(rule"):
        converter.expression(libsbml.parseL3Formula("delay(x, 1)"), "rule for 'y'")
    with pytest.raises(SbmlUnsupportedError, match="function 'nowhere'"):
        converter.expression(libsbml.parseL3Formula("nowhere(x)"), "rule for 'y'")
    with pytest.raises(SbmlError, match="function 'square' takes 1 argument"):
        converter.expression(libsbml.parseL3Formula("square(x, y)"), "rule for 'y'")
    with pytest.raises(SbmlUnsupportedError, match="element without math"):
        converter.expression(None, "rule for 'y'")
