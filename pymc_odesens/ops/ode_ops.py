"""PyTensor Ops over :mod:`pymc_odesens.ops.experiments`.

Inputs are ``[y0, params]`` (or ``[params]`` when the system supplies
``y0(p)``), both with a leading experiment axis E. Every Op also returns
``failed`` (E,) int8, which :func:`pymc_odesens.ode_solution` turns into a
``-inf`` log-density term.

- :class:`OdeStatesOp`: states only (no gradient; for prediction).
- :class:`OdeForwardOp`: states and forward sensitivities; the gradient is a
  contraction with the stored sensitivities, so it costs no second solve.
- :class:`OdePbsOp`: states and Peano-Baker sensitivities (PBS, PBSR, Exp) from
  one state solve, and the number of solver steps per branch; the gradient is
  the forward Op's contraction, with the approximate ``S``.
- :class:`OdeAdjointOp` and :class:`OdeAdjointVJPOp`: the forward phase returns
  its checkpoints as arrays that the backward phase reads; the backward phase
  returns its own ``failed`` flags.

Every gradient an Op returns is wrapped in
:class:`~pymc_odesens.ops.rejection.GradientGuard` with the flags it depends on,
so that a failed solve or backward pass rejects the proposal with a finite
gradient (see :mod:`pymc_odesens.ops.rejection`).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_odesens.ops.concurrent_calls import exclusive_perform
from pymc_odesens.ops.experiments import (
    OdeSpec,
    adjoint_vjp,
    discrete_adjoint_vjp,
    solve_adjoint_forward,
    solve_discrete_adjoint_forward,
    solve_forward,
    solve_pbs,
    solve_states,
)
from pymc_odesens.ops.rejection import GradientGuard
from pymc_odesens.sensitivity.pbs_report import BRANCH_NAMES

__all__ = [
    "OdeStatesOp",
    "OdeForwardOp",
    "OdePbsOp",
    "OdeAdjointOp",
    "OdeAdjointVJPOp",
    "OdeDiscreteAdjointOp",
    "OdeDiscreteAdjointVJPOp",
]


def _check_only_solution_differentiated(output_grads) -> None:
    """Gradients may flow into ``y`` only (``failed``, last, is an integer flag: its
    gradient is zero by definition; sensitivities and checkpoints have none)."""
    for g in output_grads[1:-1]:
        if not isinstance(g.type, DisconnectedType):
            raise NotImplementedError(
                "only the ODE solution itself can be differentiated, not its sensitivities"
            )


def node_inputs(op_name: str, y0_from_system: bool, inputs: tuple) -> list:
    """An ODE Op's node inputs ``[y0, params]``, or ``[params]`` when the system supplies
    ``y0``, from ``(y0, params)`` (``y0`` then ignored) or from the node's own inputs."""
    if len(inputs) == 1 and y0_from_system:
        return [pt.as_tensor_variable(inputs[0], dtype="float64")]
    if len(inputs) != 2:
        accepted = "(y0, params) or (params,)" if y0_from_system else "(y0, params)"
        raise TypeError(f"{op_name} takes {accepted}; got {len(inputs)} inputs")
    params = pt.as_tensor_variable(inputs[1], dtype="float64")
    if y0_from_system:
        return [params]
    return [pt.as_tensor_variable(inputs[0], dtype="float64"), params]


class _OdeOp(Op):
    """Shared input handling. Ops of one type with the same spec (the same object) are equal,
    so PyTensor merges duplicated applies (e.g. one backward pass, not two)."""

    __props__ = ("spec",)

    def __init__(self, spec: OdeSpec) -> None:
        self.spec = spec

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{self.spec.system.name}, {self.spec.method}}}"

    def do_constant_folding(self, fgraph, node) -> bool:
        # a solve is never folded into a constant when a function is compiled: its
        # failures belong to the function's evaluation (raised or counted there)
        return False

    def _inputs(self, inputs: tuple) -> list:
        """The node's inputs from ``make_node``'s arguments ``(y0, params)``; when the system
        supplies ``y0``, also ``(params,)``, the node's own inputs (PyTensor re-makes a node
        from them, e.g. when it vectorises a graph)."""
        return node_inputs(type(self).__name__, self.spec.y0_from_system, inputs)

    def _split(self, inputs):
        if self.spec.y0_from_system:
            return None, inputs[0]
        return inputs[0], inputs[1]

    def _y_type(self):
        s = self.spec
        return pt.tensor(dtype="float64", shape=(s.n_experiments, s.n_times, s.system.n_states))

    def _failed_type(self):
        return pt.tensor(dtype="int8", shape=(self.spec.n_experiments,))


class OdeStatesOp(_OdeOp):
    """``(y, failed)`` without sensitivities."""

    def make_node(self, *inputs):
        return Apply(self, self._inputs(inputs), [self._y_type(), self._failed_type()])

    @exclusive_perform
    def perform(self, node, inputs, outputs):
        y0, params = self._split(inputs)
        y, failed = solve_states(self.spec, y0, params)
        outputs[0][0] = y
        outputs[1][0] = failed

    def L_op(self, inputs, outputs, output_grads):
        raise NotImplementedError(
            "OdeStatesOp has no gradient; build the solution with sensitivity='forward', "
            "'adjoint' or 'auto' to differentiate it"
        )


class OdeForwardOp(_OdeOp):
    """``(y, S, [S_y0,] failed)``: states and forward sensitivities in one solve."""

    def make_node(self, *inputs):
        return Apply(self, self._inputs(inputs), self._output_types())

    def _output_types(self) -> list:
        s = self.spec
        n, p, e, t = s.system.n_states, s.system.n_params, s.n_experiments, s.n_times
        outputs = [self._y_type(), pt.tensor(dtype="float64", shape=(e, t, n, p))]
        if s.wrt_y0:
            outputs.append(pt.tensor(dtype="float64", shape=(e, t, n, n)))
        outputs.append(self._failed_type())
        return outputs

    @exclusive_perform
    def perform(self, node, inputs, outputs):
        y0, params = self._split(inputs)
        y, s_p, s_y0, failed = solve_forward(self.spec, y0, params)
        outputs[0][0] = y
        outputs[1][0] = s_p
        if self.spec.wrt_y0:
            outputs[2][0] = s_y0
        outputs[-1][0] = failed

    def L_op(self, inputs, outputs, output_grads):
        _check_only_solution_differentiated(output_grads)
        y0, params = self._split(inputs)
        g_y = output_grads[0]
        failed = outputs[-1]
        if isinstance(g_y.type, DisconnectedType):
            grads = [pt.zeros_like(params)]
        else:
            grad_p = (g_y[..., None] * outputs[1]).sum(axis=(1, 2))
            grads = [GradientGuard()(grad_p, failed)]
        if self.spec.y0_from_system:
            return grads
        if self.spec.wrt_y0 and not isinstance(g_y.type, DisconnectedType):
            grad_y0 = GradientGuard()((g_y[..., None] * outputs[2]).sum(axis=(1, 2)), failed)
        else:
            grad_y0 = pt.zeros_like(y0)
        return [grad_y0, *grads]

    def R_op(self, inputs, eval_points):
        """Jacobian-vector products: ``dy = S . dparams (+ S_y0 . dy0)``; the same contraction
        as :meth:`L_op`, with the stored (exact or, for the Peano-Baker routes, approximate)
        ``S``, guarded by ``failed`` as the gradient is. Only ``y`` has one: the
        sensitivities' own derivatives would need second-order sensitivities (None)."""
        outputs = self.make_node(*inputs).outputs  # merged with the node itself on compiling
        if self.spec.y0_from_system:
            (d_params,), d_y0 = eval_points, None
        else:
            d_y0, d_params = eval_points
        terms = []
        if d_params is not None:
            terms.append((outputs[1] * d_params[:, None, None, :]).sum(axis=-1))
        if d_y0 is not None and self.spec.wrt_y0:
            terms.append((outputs[2] * d_y0[:, None, None, :]).sum(axis=-1))
        if terms:
            d_y = GradientGuard()(pt.add(*terms) if len(terms) > 1 else terms[0], outputs[-1])
        else:
            d_y = pt.zeros_like(outputs[0])
        return [d_y] + [None] * (len(outputs) - 1)


class OdePbsOp(OdeForwardOp):
    """``(y, S, [S_y0,] branches, failed)``: states and the Peano-Baker ``S`` of
    ``spec.route`` ("pbs", "pbsr" or "exp") from one state solve.

    ``branches`` (E, len(BRANCH_NAMES)) int64 counts the solver steps of each
    experiment per branch (``PbsStepReport.counts()`` of
    :func:`~pymc_odesens.solve_sensitivity`). The gradient contracts the
    cotangent with the approximate ``S``, as :class:`OdeForwardOp` does with the
    exact one.
    """

    def __str__(self) -> str:
        s = self.spec
        return f"OdePbsOp{{{s.system.name}, {s.method}, {s.route}}}"

    def _output_types(self) -> list:
        *solution, failed = super()._output_types()
        branches = pt.tensor(dtype="int64", shape=(self.spec.n_experiments, len(BRANCH_NAMES)))
        return [*solution, branches, failed]

    @exclusive_perform
    def perform(self, node, inputs, outputs):
        y0, params = self._split(inputs)
        y, s_p, s_y0, branches, failed = solve_pbs(self.spec, y0, params)
        outputs[0][0] = y
        outputs[1][0] = s_p
        if self.spec.wrt_y0:
            outputs[2][0] = s_y0
        outputs[-2][0] = branches
        outputs[-1][0] = failed

    def L_op(self, inputs, outputs, output_grads):
        # the branch counts are integers, like `failed`: no gradient flows through them
        drop = len(outputs) - 2
        keep = [i for i in range(len(outputs)) if i != drop]
        return super().L_op(inputs, [outputs[i] for i in keep], [output_grads[i] for i in keep])


class _AdjointPhaseOp(_OdeOp):
    """The forward phase of an adjoint: ``(y, *record, failed)``; its gradient is the
    backward phase, an Op of type ``_vjp_op`` given the record.

    Subclasses define ``_vjp_op``, ``_record_types()`` (the types of the record's
    outputs) and ``_solve(y0, params)`` (all outputs).
    """

    def make_node(self, *inputs):
        outputs = [self._y_type(), *self._record_types(), self._failed_type()]
        return Apply(self, self._inputs(inputs), outputs)

    @exclusive_perform
    def perform(self, node, inputs, outputs):
        y0, params = self._split(inputs)
        for storage, value in zip(outputs, self._solve(y0, params)):
            storage[0] = value

    def L_op(self, inputs, outputs, output_grads):
        _check_only_solution_differentiated(output_grads)
        y0, params = self._split(inputs)
        g_y = output_grads[0]
        if isinstance(g_y.type, DisconnectedType):
            grads = [pt.zeros_like(params)]
            return grads if y0 is None else [pt.zeros_like(y0), *grads]
        grad_y0, grad_p, backward_failed = self._vjp_op(self.spec)(*inputs, *outputs[1:], g_y)
        flags = (outputs[-1], backward_failed)
        grad_p = GradientGuard()(grad_p, *flags)
        return [grad_p] if y0 is None else [GradientGuard()(grad_y0, *flags), grad_p]


class _AdjointVJPBase(_OdeOp):
    """``(dL/dy0, dL/dp, backward_failed)`` from ``[y0,] params``, a forward phase's record,
    ``failed`` and ``dL/dy``; subclasses define ``_vjp(y0, params, record, failed,
    cotangent)``. ``backward_failed`` (E,) int8 marks the experiments whose gradient pass
    failed after a successful solve (their gradient is zero)."""

    def make_node(self, *inputs):
        s = self.spec
        inputs = [pt.as_tensor_variable(x) for x in inputs]
        outputs = [
            pt.tensor(dtype="float64", shape=(s.n_experiments, s.system.n_states)),
            pt.tensor(dtype="float64", shape=(s.n_experiments, s.system.n_params)),
            self._failed_type(),
        ]
        return Apply(self, inputs, outputs)

    @exclusive_perform
    def perform(self, node, inputs, outputs):
        if self.spec.y0_from_system:
            y0, params, rest = None, inputs[0], inputs[1:]
        else:
            y0, params, rest = inputs[0], inputs[1], inputs[2:]
        record, failed, cotangent = rest[:-2], rest[-2], rest[-1]
        grad_y0, grad_p, backward_failed = self._vjp(
            y0, params, record, failed, np.asarray(cotangent, float)
        )
        outputs[0][0] = grad_y0
        outputs[1][0] = grad_p
        outputs[2][0] = backward_failed

    def L_op(self, inputs, outputs, output_grads):
        raise NotImplementedError("second derivatives of adjoint gradients are not available")


class OdeAdjointVJPOp(_AdjointVJPBase):
    """``(dL/dy0, dL/dp, backward_failed)`` from ``[y0,] params``, the checkpoints and event
    log, ``failed`` and ``dL/dy``."""

    def _vjp(self, y0, params, record, failed, cotangent):
        return adjoint_vjp(self.spec, y0, params, record, failed, cotangent)


class OdeDiscreteAdjointVJPOp(_AdjointVJPBase):
    """``(dL/dy0, dL/dp, backward_failed)`` from ``[y0,] params``, the checkpoints, event
    log, step logs and snapshots, ``failed`` and ``dL/dy``."""

    def _vjp(self, y0, params, record, failed, cotangent):
        return discrete_adjoint_vjp(self.spec, y0, params, record, failed, cotangent)


class OdeAdjointOp(_AdjointPhaseOp):
    """``(y, checkpoint_times, checkpoint_states, checkpoint_counts, event_times,
    event_ids, event_states, event_counts, failed)``; ``checkpoint_counts`` (E, 2) holds
    the number of checkpoints and of forward steps of each experiment.

    The adjoint's forward phase. The checkpoints and the event log (times, event
    index and time position, state before each event; all padded to the largest
    count, at least one) are ordinary arrays, so that the backward phase needs
    nothing else and the Op compiles in every PyTensor backend.
    """

    _vjp_op = OdeAdjointVJPOp

    def _record_types(self) -> list:
        e, n = self.spec.n_experiments, self.spec.system.n_states
        return [
            pt.tensor(dtype="float64", shape=(e, None)),
            pt.tensor(dtype="float64", shape=(e, None, n)),
            pt.tensor(dtype="int64", shape=(e, 2)),
            pt.tensor(dtype="float64", shape=(e, None)),
            pt.tensor(dtype="int64", shape=(e, None, 2)),
            pt.tensor(dtype="float64", shape=(e, None, n)),
            pt.tensor(dtype="int64", shape=(e,)),
        ]

    def _solve(self, y0, params):
        return solve_adjoint_forward(self.spec, y0, params)


class OdeDiscreteAdjointOp(_AdjointPhaseOp):
    """The outputs of :class:`OdeAdjointOp` with, before ``failed``, the step logs
    (E, L, 4), history snapshots (E, S, W) and their counts (E, 2): the forward phase of
    the discrete adjoint (``adjoint_method="discrete"``)."""

    _vjp_op = OdeDiscreteAdjointVJPOp

    def _record_types(self) -> list:
        e = self.spec.n_experiments
        return [
            *OdeAdjointOp._record_types(self),
            pt.tensor(dtype="float64", shape=(e, None, None)),
            pt.tensor(dtype="float64", shape=(e, None, None)),
            pt.tensor(dtype="int64", shape=(e, 2)),
        ]

    def _solve(self, y0, params):
        return solve_discrete_adjoint_forward(self.spec, y0, params)
