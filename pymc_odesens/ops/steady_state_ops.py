"""PyTensor Ops of steady states: the state and, as its gradient, one transposed solve.

- :class:`SteadyStateOp`: ``[y0,] params`` (leading experiment axis E) to ``(y*, t*,
  failed)``; ``t*`` is the time at which each steady state was reached (its Jacobian is
  evaluated there).
- :class:`SteadyStateVJPOp`: ``(dL/dy0, dL/dp)`` from the inputs, the outputs and ``dL/dy*``
  by the implicit function theorem's adjoint (no P x N sensitivity matrix is formed).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_odesens.ops.concurrent_calls import exclusive_perform
from pymc_odesens.ops.ode_ops import node_inputs
from pymc_odesens.ops.rejection import GradientGuard
from pymc_odesens.ops.steady_state_experiments import (
    SteadyStateSpec,
    solve_steady_states,
    steady_state_vjps,
)

__all__ = ["SteadyStateOp", "SteadyStateVJPOp"]


class _SteadyStateBase(Op):
    __props__ = ("spec",)

    def __init__(self, spec: SteadyStateSpec) -> None:
        self.spec = spec

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{self.spec.system.name}}}"

    def _split(self, inputs):
        if self.spec.y0_from_system:
            return None, inputs[0], inputs[1:]
        return inputs[0], inputs[1], inputs[2:]


class SteadyStateOp(_SteadyStateBase):
    """``(y* (E, N), t* (E,), failed (E,) int8)`` from ``[y0 (E, N),] params (E, P)``.

    Its gradient is :class:`SteadyStateVJPOp`, which has none of its own: so no forward
    derivatives (``R_op``, which PyTensor forms from the gradient's gradient) either, and no
    Fisher information of a likelihood through a steady state
    (:func:`~pymc_odesens.inference.smmala_metric.likelihood_terms` says so).
    """

    forward_derivatives = False

    def make_node(self, *inputs):
        s = self.spec
        inputs = node_inputs(type(self).__name__, s.y0_from_system, inputs)
        e, n = s.n_experiments, s.system.n_states
        outputs = [
            pt.tensor(dtype="float64", shape=(e, n)),
            pt.tensor(dtype="float64", shape=(e,)),
            pt.tensor(dtype="int8", shape=(e,)),
        ]
        return Apply(self, inputs, outputs)

    @exclusive_perform
    def perform(self, node, inputs, outputs):
        y0, params, _ = self._split(inputs)
        for storage, value in zip(outputs, solve_steady_states(self.spec, y0, params)):
            storage[0] = value

    def L_op(self, inputs, outputs, output_grads):
        # failed (last) is an integer flag: its gradient is zero by definition
        for g in output_grads[1:-1]:
            if not isinstance(g.type, DisconnectedType):
                raise NotImplementedError("only the steady state itself can be differentiated")
        g_y = output_grads[0]
        y0, params, _ = self._split(inputs)
        if isinstance(g_y.type, DisconnectedType):
            grads = [pt.zeros_like(params)]
            return grads if y0 is None else [pt.zeros_like(y0), *grads]
        grad_y0, grad_p = SteadyStateVJPOp(self.spec)(*inputs, *outputs, g_y)
        # zero gradients of a rejected proposal, also through overflowing transforms
        grad_p = GradientGuard()(grad_p, outputs[-1])
        return [grad_p] if y0 is None else [GradientGuard()(grad_y0, outputs[-1]), grad_p]


class SteadyStateVJPOp(_SteadyStateBase):
    """``(dL/dy0 (E, N), dL/dp (E, P))`` from ``[y0,] params, y*, t*, failed, dL/dy*``."""

    def make_node(self, *inputs):
        s = self.spec
        inputs = [pt.as_tensor_variable(x) for x in inputs]
        outputs = [
            pt.tensor(dtype="float64", shape=(s.n_experiments, s.system.n_states)),
            pt.tensor(dtype="float64", shape=(s.n_experiments, s.system.n_params)),
        ]
        return Apply(self, inputs, outputs)

    @exclusive_perform
    def perform(self, node, inputs, outputs):
        y0, params, (y, t, failed, cotangent) = self._split(inputs)
        grad_y0, grad_p = steady_state_vjps(
            self.spec, y0, params, y, t, failed, np.asarray(cotangent, dtype=float)
        )
        outputs[0][0] = grad_y0
        outputs[1][0] = grad_p

    def L_op(self, inputs, outputs, output_grads):
        raise NotImplementedError("second derivatives of steady states are not available")
