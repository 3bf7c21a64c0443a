"""sympy expressions evaluated on PyTensor tensors: values, gradients, refusals."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import sympy as sp

from pymc_odesens.petab import PetabUnsupportedError
from pymc_odesens.petab.tensor_expressions import expression_tensor

x, y = sp.symbols("x y", real=True)


def _evaluate(expr, xs, ys):
    a, b = pt.vector("a"), pt.vector("b")
    out = expression_tensor(expr, {x: a, y: b}, "test")
    function = pytensor.function([a, b], out, on_unused_input="ignore")
    return function(np.asarray(xs, float), np.asarray(ys, float))


@pytest.mark.parametrize(
    "expr",
    [
        x + 2 * y,
        x * y / (1 + x**2),
        sp.exp(-x) * sp.log(y) + sp.sqrt(y) - y ** sp.Rational(3, 2),
        sp.log(x, 10) + sp.sin(y) * sp.cos(x) + sp.tanh(x),
        sp.Abs(x - y) + sp.Max(x, y) - sp.Min(x, 1.5 * y) + sp.sign(x - 1),
        sp.Piecewise((x, x < y), (y**2, x < 2 * y), (3.0, True)),
        sp.Piecewise((1.0, sp.And(x > 0.5, y <= 2.0)), (0.0, True)) + sp.floor(x) + sp.ceiling(y),
        sp.Heaviside(x - 1.0) + sp.pi * sp.E,
    ],
)
def test_values_equal_sympy(expr):
    xs, ys = [0.3, 1.0, 1.7, 2.5], [0.5, 2.0, 0.9, 1.25]
    expected = [float(expr.subs({x: a, y: b})) for a, b in zip(xs, ys)]
    np.testing.assert_allclose(_evaluate(expr, xs, ys), expected, rtol=1e-13, atol=1e-14)


def test_gradient_of_a_formula():
    a = pt.vector("a")
    expr = x**2 * sp.exp(y) / (1 + x)
    out = expression_tensor(expr, {x: a, y: 0.5}, "test").sum()
    grad = pytensor.function([a], pytensor.grad(out, a))(np.array([0.5, 2.0]))
    expected = [float(sp.diff(expr, x).subs({x: v, y: 0.5})) for v in (0.5, 2.0)]
    np.testing.assert_allclose(grad, expected, rtol=1e-12)


def test_constants_and_broadcasting():
    out = expression_tensor(sp.Float(2.5) * x, {x: np.array([1.0, 2.0])}, "test")
    np.testing.assert_allclose(out.eval(), [2.5, 5.0])
    assert expression_tensor(sp.Integer(3), {}, "test").eval() == 3.0


def test_a_symbol_without_value_is_named():
    with pytest.raises(PetabUnsupportedError, match="observable 'o'.*'y'"):
        expression_tensor(x + y, {x: 1.0}, "observable 'o'")


def test_an_unknown_function_is_named():
    with pytest.raises(PetabUnsupportedError, match="gamma"):
        expression_tensor(sp.gamma(x), {x: 1.0}, "formula")
