"""A log-likelihood evaluated outside the graph, by the workers of a cluster, as an Op.

``DistributedLogLikelihoodOp(evaluator)(x)`` is ``[value, gradient]`` of a log-likelihood
that an *evaluator* computes: a callable ``evaluator(x, gradient) -> (value, gradient or
None)`` (a :class:`pymc_odesens.inference.DistributedLogLikelihood`, which sends ``x`` to
the workers of a Dask cluster and sums their parts). The Op knows nothing of clusters: it
hands ``x`` over and takes the numbers back.

One node computes both outputs, so a log-density and its gradient cost one evaluation
(one round trip to the workers); its ``L_op`` uses the gradient output. A graph that uses
the value alone (a log-density without gradient: SMC's likelihood, ``compile_logp``) is
rewritten to the node that asks for no gradient (``gradient=False``: the workers then
solve the states alone). Its numba implementation, for PyTensor's NUMBA mode and nutpie,
is :mod:`pymc_odesens.ops.distributed_numba`.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.tensor.rewriting.basic import register_canonicalize

from pymc_odesens.ops.concurrent_calls import exclusive_perform

__all__ = ["DistributedLogLikelihoodOp"]


class DistributedLogLikelihoodOp(Op):
    """``[value, gradient]`` (``gradient=True``) or ``[value]`` of ``evaluator`` at ``x``.

    Parameters
    ----------
    evaluator : callable
        ``evaluator(x, gradient: bool) -> (float, numpy.ndarray or None)``; compared by
        identity.
    gradient : bool
        Whether the node also returns the gradient.
    """

    __props__ = ("evaluator", "gradient")

    def __init__(self, evaluator, gradient: bool = True) -> None:
        self.evaluator = evaluator
        self.gradient = bool(gradient)

    def make_node(self, x):
        x = pt.as_tensor_variable(x, dtype="float64")
        if x.type.ndim != 1:
            raise ValueError(
                f"DistributedLogLikelihoodOp: x must be a vector, got {x.type.ndim} dimensions"
            )
        outputs = [pt.dscalar()] + ([pt.dvector()] if self.gradient else [])
        return Apply(self, [x], outputs)

    @exclusive_perform
    def perform(self, node, inputs, output_storage):
        value, gradient = self.evaluator(inputs[0], self.gradient)
        output_storage[0][0] = np.asarray(value, dtype=np.float64)
        if self.gradient:
            output_storage[1][0] = np.asarray(gradient, dtype=np.float64)

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        if self.gradient and not isinstance(output_grads[1].type, DisconnectedType):
            return [
                grad_not_implemented(
                    self, 0, x, "second derivatives of a distributed log-likelihood"
                )
            ]
        if self.gradient:
            gradient = outputs[1]
        else:
            gradient = DistributedLogLikelihoodOp(self.evaluator, gradient=True)(x)[1]
        return [output_grads[0] * gradient]

    def __str__(self) -> str:
        return f"DistributedLogLikelihood{{{self.evaluator!r}, gradient={self.gradient}}}"


@register_canonicalize
@node_rewriter([DistributedLogLikelihoodOp])
def distributed_value_only(fgraph, node):
    """The value alone where the gradient output is not used: the workers skip it."""
    if node.op.gradient and not fgraph.clients.get(node.outputs[1]):
        value = DistributedLogLikelihoodOp(node.op.evaluator, gradient=False)(node.inputs[0])
        return {node.outputs[0]: value}
    return None
