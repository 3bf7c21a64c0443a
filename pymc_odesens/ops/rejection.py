"""Rejecting a proposal whose solve or gradient failed: ``-inf`` and a finite gradient.

A failed solve marks its experiments in the Op's ``failed`` output; the potential
that :func:`pymc_odesens.ode_solution` adds to the model is
:class:`FailurePenalty` of those flags (``-inf`` if any is set). Two things cannot
be decided by the Ops alone, because they happen in the gradient of the whole
log-density, which PyTensor builds later:

- a gradient pass that fails after a successful solve (the adjoint's backward
  phase, its re-integration, the discrete adjoint's replay) must reject the
  proposal too, so the potential must also read the backward pass's flags;
- the gradient of a rejected proposal must be finite. The Ops return zero
  gradients, but the chain rule through the user's transforms can still make NaN:
  ``k = exp(z)`` overflowing to ``inf`` gives ``0 * exp(z) = NaN`` for ``dlogp/dz``.

So every gradient leaving an Op is wrapped in :class:`GradientGuard` (an identity
that carries the flags it depends on), and two graph rewrites, run when a function
is compiled, look at the whole function:

1. :class:`MaskRejectedGradients` (first): every output that depends on a guarded
   gradient becomes ``0`` when one of its flags is set;
2. :class:`RejectFailedGradientPasses` (after PyTensor's own rewrites): each
   :class:`FailurePenalty` also reads the flags of the guards that share one of its
   flags (the backward pass of the same solve), whenever the function computes that
   gradient (``logp`` and ``dlogp`` together, as every gradient-based sampler does);
   then the markers become ordinary PyTensor operations (nothing of them remains in
   the compiled function).

Both run in PyTensor's default (``FAST_RUN``) and ``NUMBA`` modes. Without
PyTensor's merges (``FAST_COMPILE``) the penalty and the backward pass may see two
copies of the solve, and a failed backward pass then only zeroes the gradient; compiled
without rewrites (``mode=Mode(optimizer=None)``) the markers are plain identities.
Failures are counted in every case.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.compile import optdb
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import GraphRewriter

from pymc_odesens.ops.graph_traversal import ancestors

__all__ = [
    "FailurePenalty",
    "GradientGuard",
    "MaskRejectedGradients",
    "RejectFailedGradientPasses",
]


def _flag(x):
    x = pt.as_tensor_variable(x)
    if x.dtype != "int8" or x.ndim != 1:
        raise TypeError(f"failure flags must be an int8 vector, got {x.type}")
    return x


class FailurePenalty(Op):
    """``-inf`` if any entry of its int8 flag vectors is set, else ``0.0`` (a float64 scalar)."""

    __props__ = ()

    def make_node(self, *flags):
        if not flags:
            raise TypeError("FailurePenalty needs at least one flag vector")
        return Apply(self, [_flag(f) for f in flags], [pt.dscalar()])

    def perform(self, node, inputs, outputs):
        failed = any(np.any(f) for f in inputs)
        outputs[0][0] = np.array(-np.inf if failed else 0.0)

    def connection_pattern(self, node):
        return [[False] for _ in node.inputs]

    def L_op(self, inputs, outputs, output_grads):
        return [DisconnectedType()() for _ in inputs]


class GradientGuard(Op):
    """``gradient`` unchanged; ``flags`` are the failure flags of the solves it comes from."""

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, gradient, *flags):
        gradient = pt.as_tensor_variable(gradient)
        if not flags:
            raise TypeError("GradientGuard needs at least one flag vector")
        return Apply(self, [gradient, *(_flag(f) for f in flags)], [gradient.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = inputs[0]

    def connection_pattern(self, node):
        return [[True]] + [[False] for _ in node.inputs[1:]]

    def L_op(self, inputs, outputs, output_grads):
        return [output_grads[0]] + [DisconnectedType()() for _ in inputs[1:]]


def _any_set(flags):
    """Scalar bool: some entry of some flag vector is set."""
    unique = list(dict.fromkeys(flags))
    return pt.any(pt.concatenate(unique) if len(unique) > 1 else unique[0])


class MaskRejectedGradients(GraphRewriter):
    """Outputs computed from a guarded gradient are zero when one of its flags is set.

    Runs first (exact dependencies: before fusion, an output of a fused node would seem to
    depend on every input of that node).
    """

    def apply(self, fgraph):
        guards = {n.outputs[0]: n for n in fgraph.apply_nodes if isinstance(n.op, GradientGuard)}
        if not guards:
            return
        for i, output in enumerate(list(fgraph.outputs)):
            reached = [guards[v] for v in ancestors([output]) if v in guards]
            if not reached:
                continue
            flags = [f for guard in reached for f in guard.inputs[1:]]
            masked = pt.switch(_any_set(flags), pt.zeros_like(output), output)
            client, index = fgraph.get_output_client(i)
            fgraph.change_node_input(client, index, masked, reason="mask_rejected_gradients")


class RejectFailedGradientPasses(GraphRewriter):
    """Each :class:`FailurePenalty` also reads the flags of the gradient passes of its solves;
    then the markers become ordinary operations.

    Runs late: after canonicalisation the gradient's seed no longer reads ``logp`` (before,
    it is ``fill(logp, 1)``: reading the gradient pass's flags in ``logp`` would close a
    cycle), and after the merges one node computes each solve, so that the penalty and the
    guards see the same ``failed`` flags.
    """

    def apply(self, fgraph):
        guards = [n for n in fgraph.apply_nodes if isinstance(n.op, GradientGuard)]
        penalties = [n for n in fgraph.apply_nodes if isinstance(n.op, FailurePenalty)]
        for node in penalties:
            flags = list(node.inputs)
            for guard in guards:
                extra = [f for f in guard.inputs[1:] if f not in flags]
                if (
                    extra
                    and any(f in flags for f in guard.inputs[1:])
                    and node.outputs[0] not in ancestors(extra)
                ):
                    flags += extra
            value = pt.switch(
                _any_set(flags),
                pt.constant(-np.inf, dtype="float64"),
                pt.constant(0.0, dtype="float64"),
            )
            fgraph.replace(node.outputs[0], value, reason="reject_failed_gradient_passes")
        for guard in guards:
            fgraph.replace(
                guard.outputs[0], guard.inputs[0], reason="reject_failed_gradient_passes"
            )


_TAGS = ("fast_run", "fast_compile", "minimum_compile")
optdb.register(
    "pymc_odesens_mask_rejected_gradients",
    MaskRejectedGradients(),
    *_TAGS,
    position=0.02,  # after the first merge, before canonicalisation
)
optdb.register(
    "pymc_odesens_reject_failed_gradient_passes",
    RejectFailedGradientPasses(),
    *_TAGS,
    position=49.2,  # after fusion and the merges, before the in-place rewrites
)
