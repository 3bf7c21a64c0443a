"""Sums and products of more terms than a NumPy ufunc takes, in the functions of a
PetabProblem (Python thunks after PyTensor's canonicalisation)."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_odesens.petab.problem import python_mode


@pytest.mark.parametrize("operation", ["add", "mul"])
def test_many_terms_evaluate_and_differentiate(operation):
    xs = [pt.vector(f"x{i}") for i in range(70)]
    fold = pt.add if operation == "add" else pt.mul
    result = xs[0]
    for x in xs[1:]:
        result = fold(result, 1.01 * x)  # nested: PyTensor flattens it into one node
    gradient = pytensor.grad(result.sum(), xs[3])
    f = pytensor.function(xs, [result, gradient], mode=python_mode())
    widest = max(len(node.inputs) for node in f.maker.fgraph.toposort())
    assert widest <= 31
    values = [np.full(2, 1.0 + 0.001 * i) for i in range(70)]
    value, grad = f(*values)
    scaled = [values[0]] + [1.01 * v for v in values[1:]]
    expected = sum(scaled) if operation == "add" else np.prod(scaled, axis=0)
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    if operation == "add":
        np.testing.assert_allclose(grad, 1.01, rtol=1e-12)
    else:
        np.testing.assert_allclose(grad, expected / values[3], rtol=1e-12)
