"""The PyTensor Op of PEtab's log-likelihood (:mod:`pymc_odesens.petab.likelihood_kernel`).

``MeasurementLogLikelihood(kernel)(y, z)`` is the log-likelihood of all measurements given
the simulated states ``y`` (E, T, N) and the parameter values ``z``; its gradient is
``MeasurementLogLikelihoodGradient``, which returns the value, ``d llh / d y`` and
``d llh / d z`` from one call of the gradient kernel. Outside PyMC
(:meth:`PetabProblem.log_likelihood` and its gradient) the graph is then ``x`` -> ``z`` ->
simulations -> this Op: a few dozen nodes instead of one subgraph per observable.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_odesens.ops.concurrent_calls import exclusive_perform
from pymc_odesens.petab.likelihood_kernel import LikelihoodKernel

__all__ = ["MeasurementLogLikelihood", "MeasurementLogLikelihoodGradient"]

_DOUBLE_PTR = ctypes.POINTER(ctypes.c_double)


def _call(kernel, y: np.ndarray, z: np.ndarray, layout: np.ndarray, out: np.ndarray) -> None:
    y = np.ascontiguousarray(y, dtype=np.float64)
    z = np.ascontiguousarray(z, dtype=np.float64)
    kernel.ctypes(
        0.0,
        y.ctypes.data_as(_DOUBLE_PTR),
        z.ctypes.data_as(_DOUBLE_PTR),
        layout.ctypes.data_as(_DOUBLE_PTR),
        out.ctypes.data_as(_DOUBLE_PTR),
    )
    if out[1]:
        raise FloatingPointError(
            f"PEtab log-likelihood: {int(out[1])} measurement(s) have a noise parameter "
            "(noiseFormula) that is not positive"
        )


class _KernelOp(Op):
    __props__ = ("kernel",)

    def __init__(self, kernel: LikelihoodKernel) -> None:
        self.kernel = kernel

    def _inputs(self, y, z):
        return [
            pt.as_tensor_variable(y, dtype="float64"),
            pt.as_tensor_variable(z, dtype="float64"),
        ]


class MeasurementLogLikelihood(_KernelOp):
    """``llh(y, z)``: PEtab's log-likelihood of the problem's measurements (a scalar)."""

    def make_node(self, y, z):
        inputs = self._inputs(y, z)
        return Apply(self, inputs, [pt.dscalar()])

    @exclusive_perform
    def perform(self, node, inputs, output_storage):
        y, z = inputs
        out = np.zeros(2)
        _call(self.kernel.value_kernel, y, z, self.kernel.layout, out)
        output_storage[0][0] = np.asarray(out[0])

    def L_op(self, inputs, outputs, output_grads):
        _, dy, dz = MeasurementLogLikelihoodGradient(self.kernel)(*inputs)
        (g,) = output_grads
        return [g * dy, g * dz]


class MeasurementLogLikelihoodGradient(_KernelOp):
    """``(llh, d llh / d y, d llh / d z)``: :class:`MeasurementLogLikelihood` and its
    gradient from one kernel call."""

    def make_node(self, y, z):
        inputs = self._inputs(y, z)
        return Apply(self, inputs, [pt.dscalar(), inputs[0].type(), inputs[1].type()])

    @exclusive_perform
    def perform(self, node, inputs, output_storage):
        y, z = inputs
        n_y = int(np.prod(self.kernel.shape))
        out = np.zeros(2 + n_y + z.size)
        _call(self.kernel.gradient_kernel, y, z, self.kernel.layout, out)
        output_storage[0][0] = np.asarray(out[0])
        output_storage[1][0] = out[2 : 2 + n_y].reshape(y.shape)
        output_storage[2][0] = out[2 + n_y :].copy()

    def L_op(self, inputs, outputs, output_grads):
        return [
            grad_not_implemented(self, k, x, "second derivatives of the PEtab log-likelihood")
            for k, x in enumerate(inputs)
        ]
