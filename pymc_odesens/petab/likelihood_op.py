"""The PyTensor Op of PEtab's log-likelihood (:mod:`pymc_odesens.petab.likelihood_kernel`).

``MeasurementLogLikelihood(kernel)(y, z)`` is the log-likelihood of all measurements given
the simulated states ``y`` (E, T, N) and the parameter values ``z``; its gradient is
``MeasurementLogLikelihoodGradient``, which returns the value, ``d llh / d y`` and
``d llh / d z`` from one call of the gradient kernel. Outside PyMC
(:meth:`PetabProblem.log_likelihood` and its gradient) the graph is then ``x`` -> ``z`` ->
simulations -> this Op: a few dozen nodes instead of one subgraph per observable.

Where a measurement's simulated observable is zero or negative on a ``log`` / ``log10``
scale, its density is zero: the log-likelihood is ``-inf`` and the gradient is that of a
rejection, zero (as the ODE Ops give a rejected proposal: finite, never NaN). A simulated
observable that is NaN or infinite, or a noise parameter that is not positive, raises
``FloatingPointError`` naming the observable.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_odesens.ops.concurrent_calls import exclusive_perform
from pymc_odesens.petab import likelihood_kernel as lk
from pymc_odesens.petab.likelihood_kernel import LikelihoodKernel

__all__ = ["MeasurementLogLikelihood", "MeasurementLogLikelihoodGradient"]

_DOUBLE_PTR = ctypes.POINTER(ctypes.c_double)


def _call(kernel: LikelihoodKernel, function, y, z, out: np.ndarray) -> bool:
    """Run ``function`` (one of ``kernel``'s) into ``out``; True when the log-likelihood is
    ``-inf`` (a non-positive simulation on a log scale). Raises on what has no value."""
    y = np.ascontiguousarray(y, dtype=np.float64)
    z = np.ascontiguousarray(z, dtype=np.float64)
    function.ctypes(
        0.0,
        y.ctypes.data_as(_DOUBLE_PTR),
        z.ctypes.data_as(_DOUBLE_PTR),
        kernel.layout.ctypes.data_as(_DOUBLE_PTR),
        out.ctypes.data_as(_DOUBLE_PTR),
    )
    # a NaN observable first: a noise formula that uses it is NaN too
    if out[lk.OUT_NON_FINITE_SIMULATION]:
        observable = kernel.observable_ids[int(out[lk.OUT_FIRST_NON_FINITE_OBSERVABLE])]
        raise FloatingPointError(
            f"PEtab log-likelihood: {int(out[lk.OUT_NON_FINITE_SIMULATION])} measurement(s) "
            f"have a simulated observable that is NaN or infinite, the first of observable "
            f"{observable!r} at time {out[lk.OUT_FIRST_NON_FINITE_TIME]:g} (its "
            "observableFormula at the simulated states)"
        )
    if out[lk.OUT_NON_POSITIVE_NOISE]:
        raise FloatingPointError(
            f"PEtab log-likelihood: {int(out[lk.OUT_NON_POSITIVE_NOISE])} measurement(s) have "
            "a noise parameter (noiseFormula) that is not positive"
        )
    return bool(out[lk.OUT_NON_POSITIVE_SIMULATION])


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
        out = np.zeros(lk.HEADER_SIZE)
        rejected = _call(self.kernel, self.kernel.value_kernel, y, z, out)
        output_storage[0][0] = np.asarray(-np.inf if rejected else out[lk.OUT_LLH])

    def L_op(self, inputs, outputs, output_grads):
        _, dy, dz = MeasurementLogLikelihoodGradient(self.kernel)(*inputs)
        (g,) = output_grads
        return [g * dy, g * dz]


class MeasurementLogLikelihoodGradient(_KernelOp):
    """``(llh, d llh / d y, d llh / d z)``: :class:`MeasurementLogLikelihood` and its
    gradient from one kernel call (zero where ``llh`` is ``-inf``)."""

    def make_node(self, y, z):
        inputs = self._inputs(y, z)
        return Apply(self, inputs, [pt.dscalar(), inputs[0].type(), inputs[1].type()])

    @exclusive_perform
    def perform(self, node, inputs, output_storage):
        y, z = inputs
        n_y = int(np.prod(self.kernel.shape))
        start = lk.HEADER_SIZE
        out = np.zeros(start + n_y + z.size)
        rejected = _call(self.kernel, self.kernel.gradient_kernel, y, z, out)
        if rejected:
            out[start:] = 0.0  # the gradient of a rejection
        output_storage[0][0] = np.asarray(-np.inf if rejected else out[lk.OUT_LLH])
        output_storage[1][0] = out[start : start + n_y].reshape(y.shape)
        output_storage[2][0] = out[start + n_y :].copy()

    def L_op(self, inputs, outputs, output_grads):
        return [
            grad_not_implemented(self, k, x, "second derivatives of the PEtab log-likelihood")
            for k, x in enumerate(inputs)
        ]
