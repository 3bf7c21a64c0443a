"""ODE solutions with a chosen sensitivity route, for samplers that need ``S`` itself.

:class:`OdeRouteSensitivityOp` has the outputs and the gradient of
:class:`~pymc_odesens.ops.ode_ops.OdeForwardOp` (``y``, ``S``, ``[S_y0]``,
``failed``), but computes ``S`` with any route of
:func:`pymc_odesens.solve_sensitivity`: exact forward sensitivities, or the
Peano-Baker approximations (one state solve, ``S`` from the trajectory).
With an approximate route, gradients of the log-density contract the
approximate ``S``: a Metropolis-Hastings correction with the exact
log-density keeps a sampler exact.

:func:`with_sensitivity_route` rewrites a graph so that every ODE solution in
it (whatever route :func:`pymc_odesens.ode_solution` chose) comes from one
such Op: a compiled function of the log-density, its gradient and the Fisher
information then solves each ODE once per evaluation.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from pytensor.graph.basic import Variable
from pytensor.graph.replace import clone_replace
from pytensor.link.numba.dispatch import numba_funcify
from pytensor.link.numba.dispatch.basic import generate_fallback_impl

from pymc_odesens.ops.concurrent_calls import exclusive_perform
from pymc_odesens.ops.experiments import (
    OdeSpec,
    _handle,
    _map,
    _placeholder_state,
    _y0_row,
)
from pymc_odesens.ops.graph_traversal import ancestors
from pymc_odesens.ops.ode_ops import (
    OdeAdjointOp,
    OdeDiscreteAdjointOp,
    OdeForwardOp,
    OdePbsOp,
    OdeStatesOp,
)
from pymc_odesens.sensitivity import solve_sensitivity
from pymc_odesens.sensitivity.adjoint_controls import ADJOINT_DEFAULTS
from pymc_odesens.sensitivity.pbs_options import PBS_ALGORITHMS, PbsOptions
from pymc_odesens.solvers import OdeSolverError

__all__ = [
    "ODE_OPS",
    "OdeRouteSensitivityOp",
    "forward_spec",
    "ode_nodes",
    "solve_with_route",
    "with_sensitivity_route",
]

ODE_OPS = (OdeStatesOp, OdeForwardOp, OdePbsOp, OdeAdjointOp, OdeDiscreteAdjointOp)
"""The Ops of :func:`pymc_odesens.ode_solution` whose solution a route Op replaces."""


def forward_spec(spec: OdeSpec) -> OdeSpec:
    """``spec`` with the plain controls of a forward solve, whatever its route was.

    An adjoint solution keeps its forward phase's method and tolerances
    (Stan's adjoint defaults where it gave none), so ``y`` is as accurate as before.
    """
    if spec.route != "adjoint":
        return replace(spec, route="forward")
    c = spec.controls
    controls = {
        "relative_tolerance": c.get(
            "relative_tolerance_forward", ADJOINT_DEFAULTS["relative_tolerance_forward"]
        ),
        "absolute_tolerance": c.get(
            "absolute_tolerance_forward", ADJOINT_DEFAULTS["absolute_tolerance_forward"]
        ),
        "max_num_steps": c.get("max_num_steps", ADJOINT_DEFAULTS["max_num_steps"]),
    }
    return replace(spec, route="forward", controls=controls)


def solve_with_route(spec: OdeSpec, route: str, y0, params, pbs_options=None):
    """States and sensitivities of a batch of experiments by ``route``.

    ``pbs_options`` (a :class:`~pymc_odesens.sensitivity.PbsOptions`) is passed
    on for the Peano-Baker routes.

    Returns ``y`` (E, T, N), ``S`` (E, T, N, P), ``S_y0`` (E, T, N, N) or None
    when ``spec.wrt_y0`` is False, and ``failed`` (E,) int8; failures are
    handled as in :func:`pymc_odesens.ops.experiments.solve_forward`.
    """
    system = spec.system
    n_e, n, p = spec.n_experiments, system.n_states, system.n_params
    n_t = spec.n_times
    y = np.empty((n_e, n_t, n))
    s_p = np.zeros((n_e, n_t, n, p))
    s_y0 = np.zeros((n_e, n_t, n, n)) if spec.wrt_y0 else None
    failed = np.zeros(n_e, dtype=np.int8)
    wrt = "both" if spec.wrt_y0 else "params"
    extra = {} if route not in PBS_ALGORITHMS else {"pbs_options": pbs_options}

    def run(e):
        try:
            result = solve_sensitivity(
                system,
                _y0_row(spec, y0, e),
                spec.times_of(e),
                params[e],
                t0=spec.t0,
                method=spec.method,
                sensitivity=route,
                wrt=wrt,
                **spec.controls,
                **extra,
            )
        except OdeSolverError as error:
            _handle(spec, error, e)
            y[e] = _placeholder_state(spec, y0, e)
            failed[e] = 1
            return
        y[e] = result.y
        s_p[e] = result.S
        if s_y0 is not None:
            s_y0[e] = result.S_y0

    _map(run, n_e)
    return y, s_p, s_y0, failed


class OdeRouteSensitivityOp(OdeForwardOp):
    """``(y, S, [S_y0,] failed)`` with ``S`` from ``solve_sensitivity(..., sensitivity=route)``.

    The gradient is :class:`~pymc_odesens.ops.ode_ops.OdeForwardOp`'s: a contraction
    with the stored ``S`` (exact or approximate, as the route gives it).
    """

    __props__ = ("spec", "route", "pbs_options")

    def __init__(self, spec: OdeSpec, route: str, pbs_options: PbsOptions | None = None) -> None:
        super().__init__(spec)
        self.route = route
        self.pbs_options = pbs_options

    def __str__(self) -> str:
        return f"OdeRouteSensitivityOp{{{self.spec.system.name}, {self.spec.method}, {self.route}}}"

    @exclusive_perform
    def perform(self, node, inputs, outputs):
        y0, params = self._split(inputs)
        y, s_p, s_y0, failed = solve_with_route(self.spec, self.route, y0, params, self.pbs_options)
        outputs[0][0] = y
        outputs[1][0] = s_p
        if self.spec.wrt_y0:
            outputs[2][0] = s_y0
        outputs[-1][0] = failed


@numba_funcify.register(OdeRouteSensitivityOp)
def _funcify_route(op, node=None, **kwargs):
    """Forward route: the compiled forward Op; other routes: ``perform`` in object mode."""
    if op.route == "forward":
        return numba_funcify.dispatch(OdeForwardOp)(op, node=node, **kwargs)
    return generate_fallback_impl(op, node, **kwargs)


def ode_nodes(outputs) -> list:
    """The Apply nodes of ODE solutions (any Op of :data:`ODE_OPS` or route Op) in a graph."""
    seen, nodes = set(), []
    for var in ancestors(list(outputs)):
        node = var.owner
        if node is not None and isinstance(node.op, ODE_OPS) and node not in seen:
            seen.add(node)
            nodes.append(node)
    return nodes


def with_sensitivity_route(
    outputs: list[Variable], route: str, pbs_options: PbsOptions | None = None
) -> tuple[list[Variable], list]:
    """Rewrite ``outputs`` so every ODE solution comes from an :class:`OdeRouteSensitivityOp`.

    Parameters
    ----------
    outputs : list of Variable
    route : str
        A route of :func:`pymc_odesens.solve_sensitivity`.
    pbs_options : PbsOptions, optional
        Options of the Peano-Baker routes (None: their defaults).

    Returns
    -------
    outputs : list of Variable
        The rewritten graph (the inputs are untouched).
    failed : list of Variable
        The ``failed`` flags (E,) of the new nodes, one per ODE solution.
    """
    replacements, failed, new_nodes = {}, [], {}
    for node in ode_nodes(outputs):
        if (
            isinstance(node.op, OdeRouteSensitivityOp)
            and node.op.route == route
            and node.op.pbs_options == pbs_options
        ):
            failed.append(node.outputs[-1])
            continue
        # Every ode_solution call has its own Op (its own spec), so nodes with equal Ops are
        # copies of one solution in cloned graphs (the log-density, the likelihood's location,
        # ...), whose inputs are equal expressions of the same value variables. They all get
        # one new node, built on the first copy's inputs: the ODE is solved once per
        # evaluation (PyTensor's rewrites may otherwise give the copies differently
        # arranged, unmergeable inputs).
        new = new_nodes.get(node.op)
        if new is None:
            op = OdeRouteSensitivityOp(forward_spec(node.op.spec), route, pbs_options)
            y0, params = node.op._split(node.inputs)
            new = new_nodes[node.op] = op.make_node(y0, params).outputs
            failed.append(new[-1])
        replacements[node.outputs[0]] = new[0]
        replacements[node.outputs[-1]] = new[-1]
        if isinstance(node.op, OdeForwardOp):
            # (an OdePbsOp's branch counts, after S and S_y0, have no counterpart)
            for old_s, new_s in zip(node.outputs[1:-1], new[1:-1]):
                replacements[old_s] = new_s
    if not replacements:
        return list(outputs), failed
    cloned = clone_replace(list(outputs) + failed, replace=replacements)
    return list(cloned[: len(outputs)]), list(cloned[len(outputs) :])
