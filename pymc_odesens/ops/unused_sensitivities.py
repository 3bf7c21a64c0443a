"""A forward-sensitivity solve whose sensitivities nothing uses, solved without them.

A model built with ``sensitivity="forward"`` (or a Peano-Baker route) has one
:class:`~pymc_odesens.ops.ode_ops.OdeForwardOp` that returns the states and their
sensitivities, so that a log-density and its gradient share one solve. A function compiled
from the same model that needs the states only (the marginalised parameters' recovery at
every draw, a posterior predictive draw) still integrates every sensitivity: on
Boehm_JProteomeRes2014's marginalised model (8 states, 6 sensitivity parameters) the
recovery's evaluation took 1.48 ms per draw with them and 0.35 ms without.

The graph rewrite ``local_states_without_unused_sensitivities`` replaces such a node by an
:class:`~pymc_odesens.ops.ode_ops.OdeStatesOp` of the same spec (the same solver, method,
controls and failure handling, without the sensitivity equations). It runs only in modes
that ask for it, :func:`states_only_mode`, never by default: the states of a solve whose
error control sees them alone differ, within the solver's tolerances but not to the last
bit, from those of the sensitivity solve, whose error test also covers the sensitivities
(``solvers/error_norm.py``); by default a model's log-density alone and its log-density with
gradient come from the same trajectory, bit for bit
(``tests/ops/test_unused_sensitivities.py``).
"""

from __future__ import annotations

from pytensor.compile import optdb
from pytensor.graph.rewriting.basic import in2out, node_rewriter

from pymc_odesens.ops.ode_ops import OdeForwardOp, OdePbsOp, OdeStatesOp

__all__ = ["STATES_ONLY", "local_states_without_unused_sensitivities", "states_only_mode"]

STATES_ONLY = "pymc_odesens_states_only"
"""The rewrite's tag: ``mode.including(STATES_ONLY)`` turns it on."""

_REPLACED = (OdeForwardOp, OdePbsOp)  # exact types: subclasses may need their sensitivities


@node_rewriter(list(_REPLACED))
def local_states_without_unused_sensitivities(fgraph, node):
    """``OdeForwardOp`` -> ``OdeStatesOp`` when no client uses a sensitivity output."""
    if type(node.op) not in _REPLACED:
        return None
    clients = fgraph.clients
    if any(clients.get(output) for output in node.outputs[1:-1]):
        return None
    y, failed = OdeStatesOp(node.op.spec)(*node.inputs)
    replacements = {}
    if clients.get(node.outputs[0]):
        replacements[node.outputs[0]] = y
    if clients.get(node.outputs[-1]):
        replacements[node.outputs[-1]] = failed
    return replacements or None


# compile time only, after fusion and the merges, and only where a mode includes its tag
optdb.register(
    STATES_ONLY,
    in2out(local_states_without_unused_sensitivities, name="states_without_sensitivities"),
    position=49.1,
)


def states_only_mode(mode=None):
    """PyTensor's ``mode`` (a name, a ``Mode`` or None: the default) with the rewrite on.

    Returns
    -------
    pytensor.compile.mode.Mode
    """
    from pytensor.compile.mode import get_mode

    return get_mode(mode).including(STATES_ONLY)
