"""The Op of a log-likelihood computed outside the graph: one evaluation for value and
gradient, the value alone where no gradient is used, the numba callback (NUMBA mode), errors
of the evaluator propagated with their type."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_odesens.ops import DistributedLogLikelihoodOp


class Recorder:
    """``-0.5 * |x - c|^2`` and its gradient; records each call's ``gradient`` flag; raises
    for ``x[0] > 10``."""

    def __init__(self) -> None:
        self.calls: list[bool] = []
        self.centre = np.array([0.5, -1.0, 2.0])

    def __call__(self, x, gradient):
        self.calls.append(gradient)
        if x[0] > 10:
            raise RuntimeError("worker tcp://10.0.0.7:4242 is gone (a test)")
        d = x - self.centre
        return -0.5 * float(d @ d), (-d if gradient else None)


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
def test_value_and_gradient_cost_one_evaluation(mode):
    evaluator = Recorder()
    x = pt.dvector("x")
    llh = DistributedLogLikelihoodOp(evaluator)(x)[0]
    cost = llh + pt.sum(x)
    function = pytensor.function([x], [cost, pytensor.grad(cost, x)], mode=mode)
    at = np.array([1.0, 2.0, 3.0])
    value, gradient = function(at)
    d = at - evaluator.centre
    assert value == pytest.approx(-0.5 * d @ d + at.sum(), rel=1e-15)
    np.testing.assert_allclose(gradient, -d + 1.0, rtol=1e-15)
    assert evaluator.calls == [True]


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
def test_a_value_alone_asks_for_no_gradient(mode):
    evaluator = Recorder()
    x = pt.dvector("x")
    function = pytensor.function([x], DistributedLogLikelihoodOp(evaluator)(x)[0], mode=mode)
    assert float(function(np.zeros(3))) == pytest.approx(-0.5 * evaluator.centre @ evaluator.centre)
    assert evaluator.calls == [False]


@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA"])
def test_an_error_of_the_evaluator_propagates(mode):
    x = pt.dvector("x")
    function = pytensor.function([x], DistributedLogLikelihoodOp(Recorder())(x)[0], mode=mode)
    with pytest.raises(RuntimeError, match=r"tcp://10.0.0.7:4242 is gone"):
        function(np.array([11.0, 0.0, 0.0]))


def test_second_derivatives_are_refused():
    x = pt.dvector("x")
    outputs = DistributedLogLikelihoodOp(Recorder())(x)
    with pytest.raises(Exception, match="second derivatives of a distributed log-likelihood"):
        pytensor.function([x], pytensor.grad(pt.sum(outputs[1]), x))


def test_x_must_be_a_vector():
    with pytest.raises(ValueError, match="x must be a vector, got 2 dimensions"):
        DistributedLogLikelihoodOp(Recorder())(pt.dmatrix("x"))
