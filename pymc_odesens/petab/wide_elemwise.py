"""Sums and products of many terms in functions run by PyTensor's Python thunks.

The functions of :class:`~pymc_odesens.petab.problem.PetabProblem` outside PyMC run each
node's Python ``perform`` (:func:`~pymc_odesens.petab.problem.python_mode`). PyTensor's
canonicalisation flattens nested sums into one ``Add`` node with every term as an input, and
an elementwise node's ``perform`` calls a NumPy ufunc, which takes at most 32 operands:
above that it fails (``AttributeError: 'Scratchpad' object has no attribute 'ufunc'``).
Observable formulas do sum that many states (Smith_BMCSystBiol2013's ``FOXO4__3C`` sums 48).
:data:`split_wide_sums` rewrites every such ``Add`` or ``Mul`` into nested nodes of at most
31 inputs each, after the other rewrites (which would flatten it again).
"""

from __future__ import annotations

import pytensor.scalar as ps
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.tensor.elemwise import Elemwise

__all__ = ["MAX_UFUNC_OPERANDS", "split_wide_sums", "SPLIT_POSITION"]

MAX_UFUNC_OPERANDS = 32
"""NumPy's limit on a ufunc's inputs and outputs together."""

SPLIT_POSITION = 99
"""Where :data:`split_wide_sums` runs among a mode's rewrites: after canonicalisation (1)
and specialisation (2), which flatten nested sums."""


@node_rewriter([Elemwise])
def _split_wide_sum(fgraph, node):
    """An ``Add`` or ``Mul`` of more than 31 inputs as nested ones of at most 31."""
    scalar_op = node.op.scalar_op
    if len(node.inputs) + len(node.outputs) <= MAX_UFUNC_OPERANDS:
        return None
    if not isinstance(scalar_op, ps.Add | ps.Mul):
        return None  # only associative operations can be split
    width = MAX_UFUNC_OPERANDS - 1
    inputs = list(node.inputs)
    while len(inputs) > width:
        inputs = [
            Elemwise(scalar_op)(*inputs[i : i + width])
            if len(inputs[i : i + width]) > 1
            else inputs[i]
            for i in range(0, len(inputs), width)
        ]
    return [Elemwise(scalar_op)(*inputs)]


split_wide_sums = in2out(_split_wide_sum, name="split_wide_sums")
"""The graph rewrite; register it with ``mode.register((split_wide_sums, SPLIT_POSITION))``."""
