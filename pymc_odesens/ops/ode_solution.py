"""`ode_solution`: a differentiable ODE solution inside a PyMC model."""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Constant

from pymc_odesens.model import OdeSystem
from pymc_odesens.model.system import require_states
from pymc_odesens.ops.experiments import OdeSpec
from pymc_odesens.ops.failure_potential import failure_potential, resolve_on_failure
from pymc_odesens.ops.graph_inputs import (
    experiment_count,
    experiment_inputs,
    experiment_times,
)
from pymc_odesens.ops.graph_traversal import ancestors
from pymc_odesens.ops.ode_ops import (
    OdeAdjointOp,
    OdeDiscreteAdjointOp,
    OdeForwardOp,
    OdePbsOp,
    OdeStatesOp,
)
from pymc_odesens.ops.steady_state_solution import (
    Preequilibration,
    preequilibrated_initial_state,
    preequilibration_inputs,
    split_infinite_times,
    steady_state_controls_from_dict,
    steady_state_tensors,
)
from pymc_odesens.sensitivity.adjoint_controls import ADJOINT_DEFAULTS
from pymc_odesens.sensitivity.pbs_options import PBS_ALGORITHMS, PbsOptions, resolve_pbs_options
from pymc_odesens.solvers.controls import METHODS

__all__ = ["ode_solution", "choose_sensitivity_route", "SENSITIVITY_ROUTES"]

SENSITIVITY_ROUTES = ("auto", "forward", "adjoint", "pbs", "pbsr", "exp", "none")
_SIMPLE_CONTROLS = ("relative_tolerance", "absolute_tolerance", "max_num_steps", "linear_solver")


def choose_sensitivity_route(n_states: int, n_params: int, n_times: int) -> str:
    """The route ``sensitivity="auto"`` takes: ``"forward"`` or ``"adjoint"``.

    Forward sensitivities integrate ``N (1 + P)`` components; the adjoint
    integrates ``N`` forwards, re-integrates them, and ``N + P`` backwards,
    but the backward solve restarts at every output time and each jump of
    ``lambda`` there excites the system's fast modes, which costs steps.
    The rule compares ``N (1 + P)`` with ``4 (N + P) (1 + T / 2)``: forward
    unless the first is larger. (On the PKA model, N = 11, P = 35, T = 61,
    forward sensitivities were measured 6.7 times as fast as the continuous
    adjoint, 1.96 against 13.1 ms at rtol 1e-6 / atol 1e-8 in
    ``benchmarks/results/bench_adjoint.json``, and the rule picks forward;
    with many parameters and few output times it picks the adjoint.)
    """
    if n_states * (1 + n_params) <= 4 * (n_states + n_params) * (1 + n_times / 2):
        return "forward"
    return "adjoint"


def _route_controls(route: str, method: str, controls: dict) -> dict:
    adjoint_names = set(ADJOINT_DEFAULTS) | {"adjoint_method"}
    unknown = set(controls) - adjoint_names - set(_SIMPLE_CONTROLS)
    if unknown:
        raise TypeError(
            f"unknown control(s) {sorted(unknown)}; accepted: {', '.join(_SIMPLE_CONTROLS)} "
            f"and, with sensitivity='adjoint', {', '.join(ADJOINT_DEFAULTS)}, adjoint_method"
        )
    if route != "adjoint":
        extra = sorted(set(controls) - set(_SIMPLE_CONTROLS))
        if extra:
            raise TypeError(
                f"control(s) {extra} apply to sensitivity='adjoint' only; "
                f"this solution uses {route!r}"
            )
        return dict(controls)
    if method not in ("bdf", "adams"):
        raise ValueError(
            f"method must be 'bdf' or 'adams' with sensitivity='adjoint' (Stan's adjoint solver "
            f"is CVODES); got {method!r}"
        )
    mapped = {"solver_forward": method, "solver_backward": method}
    rtol = controls.get("relative_tolerance")
    atol = controls.get("absolute_tolerance")
    if rtol is not None:
        for phase in ("forward", "backward", "quadrature"):
            mapped[f"relative_tolerance_{phase}"] = rtol
    if atol is not None:
        mapped["absolute_tolerance_forward"] = atol
        mapped["absolute_tolerance_backward"] = atol
        if np.ndim(atol) == 0:
            mapped["absolute_tolerance_quadrature"] = atol
    for name in ("max_num_steps", "linear_solver"):
        if controls.get(name) is not None:
            mapped[name] = controls[name]
    mapped.update({k: v for k, v in controls.items() if k in adjoint_names})
    return mapped


def ode_solution(
    system: OdeSystem,
    y0,
    times,
    params,
    *,
    t0: float = 0.0,
    method: str = "bdf",
    sensitivity: str = "auto",
    on_failure: str | None = None,
    name: str | None = None,
    pbs_options: PbsOptions | dict | None = None,
    preequilibration: Preequilibration | None = None,
    steady_state_controls: dict | None = None,
    **controls,
):
    """The solution ``y(t)`` of an ODE as a differentiable PyTensor tensor.

    Parameters
    ----------
    system : OdeSystem
    y0 : tensor-like of shape (N,) or (E, N), a list of N scalars, or None
        Initial state (random variables, transforms or constants). None uses
        the system's ``y0(p)``. A leading axis E solves E experiments.
    times : array_like, shape (T,) or (E, T)
        Output times (data), shared by all experiments or one row each. ``inf`` (only at
        the end of a row) stands for the steady state reached from the initial state with
        ``params`` (see :func:`pymc_odesens.steady_state`).
    params : tensor-like of shape (P,) or (E, P), or a list of P scalars
        Parameters; a vector is shared by all experiments.
    t0 : float
        Initial time.
    method : {"bdf", "adams", "rk45", "ckrk"}
    sensitivity : {"auto", "forward", "adjoint", "pbs", "pbsr", "exp", "none"}
        How gradients are computed:

        - ``"forward"``: the solve also returns the forward sensitivities,
          and the gradient contracts them (no second solve).
        - ``"adjoint"``: the solve keeps checkpoints; the gradient runs one
          backward pass per evaluation (Stan's ``ode_adjoint_tol_ctl``;
          ``bdf``/``adams`` only).
        - ``"pbs"``, ``"pbsr"``, ``"exp"``: the solve integrates the state
          alone and carries an approximate ``S`` over its accepted steps with
          the Peano-Baker series (``solve_sensitivity``'s methods of the same
          names, docs/pbs.md); the gradient contracts that ``S``. Approximate:
          HMC/NUTS stay valid MCMC (the accept step uses the exact
          log-density) but mix worse when the approximation is poor. Not for
          systems with events. :func:`pymc_odesens.pbs_branch_counts` gives
          the branch each solver step took.
        - ``"auto"``: forward or adjoint by :func:`choose_sensitivity_route`.
        - ``"none"``: states only, no gradient (prediction, simulation).
    on_failure : {"reject", "raise"}, optional
        What a solver failure does. ``"reject"`` (default inside a model):
        a potential adds ``-inf`` to the model's log-density, so the proposal
        is rejected; outputs stay finite and the gradient of the log-density is
        zero (also through transforms that overflowed), the failure is counted
        (:func:`pymc_odesens.failure_counts`), announced once and summarised
        when the process ends. A gradient pass that fails after the solve (the
        adjoint's backward phase) rejects the proposal the same way whenever the
        log-density is evaluated with its gradient (see
        :mod:`pymc_odesens.ops.rejection`). ``"raise"`` (default outside a
        model): the :class:`~pymc_odesens.OdeSolverError` propagates.
    name : str, optional
        Name of the failure potential (default ``"<system>_solver_failed"``).
    pbs_options : PbsOptions or dict, optional
        Options of the ``"pbs"``, ``"pbsr"`` and ``"exp"`` routes (see
        :class:`~pymc_odesens.sensitivity.PbsOptions`; None: its defaults).
        Only valid with these routes.
    preequilibration : Preequilibration, optional
        Start from the steady state of a pre-equilibration setting: its parameters (and
        optionally its starting state and the states re-initialised afterwards, see
        :class:`~pymc_odesens.Preequilibration`). Gradients flow through the steady state
        (implicit function theorem) on every route.
    steady_state_controls : dict, optional
        Controls of the steady states (pre-equilibration and ``inf`` outputs): ``method``,
        ``relative_tolerance``, ``absolute_tolerance``, ``max_newton_iterations``,
        ``max_num_steps``, ``max_time``, ``nonnegative``, ``linear_solver``
        (:func:`pymc_odesens.steady_state`'s defaults) and ``sensitivity``
        (:func:`~pymc_odesens.steady_state_solution`: ``"auto"``, ``"implicit"`` or
        ``"integration"``).
    **controls
        ``relative_tolerance``, ``absolute_tolerance``, ``max_num_steps``
        (Stan's defaults per method), ``linear_solver`` (``bdf``'s and ``adams``' Newton
        matrices, docs/solvers.md); with ``sensitivity="adjoint"`` also
        every control of :func:`pymc_odesens.adjoint_gradient` (the simple
        names then set all phases).

    Returns
    -------
    TensorVariable
        Shape (T, N), or (E, T, N) when ``y0``, ``params`` or ``times``
        carries an experiment axis.

    Raises
    ------
    ValueError, TypeError
        Bad shapes, names or controls, when the graph is built.
    """
    if not isinstance(system, OdeSystem):
        raise TypeError(f"system must be an OdeSystem, got {type(system).__name__}")
    require_states(
        system,
        "ode_solution",
        "its solution would be an empty (T, 0) tensor: write the outputs you need as tensors "
        "of the parameters",
    )
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if sensitivity not in SENSITIVITY_ROUTES:
        raise ValueError(f"sensitivity must be one of {SENSITIVITY_ROUTES}; got {sensitivity!r}")
    if sensitivity in PBS_ALGORITHMS:
        _check_pbs_supported(system, sensitivity)
        pbs_options = resolve_pbs_options(pbs_options)
    elif pbs_options is not None:
        raise ValueError(
            f"pbs_options applies to sensitivity='pbs', 'pbsr' or 'exp', not {sensitivity!r}"
        )
    model, on_failure = resolve_on_failure(on_failure)
    n, p = system.n_states, system.n_params
    t0 = float(t0)
    times_arr, infinite = split_infinite_times(times, t0, experiment_times)
    params_m, y0_m, sizes = experiment_inputs(
        system, y0, params, times_arr, needs_y0=preequilibration is None
    )
    ss_controls = None
    if preequilibration is not None or infinite is not None:
        ss_controls = steady_state_controls_from_dict(system, steady_state_controls)
    elif steady_state_controls is not None:
        raise TypeError(
            "steady_state_controls apply to pre-equilibration and inf output times; "
            "this solution has neither"
        )
    if preequilibration is not None:
        pre_inputs = preequilibration_inputs(system, preequilibration)
        sizes.update(pre_inputs[2])
    batched, n_e = experiment_count(sizes)
    if params_m.type.shape[0] != n_e:
        params_m = pt.broadcast_to(params_m, (n_e, p))
    if y0_m is not None and y0_m.type.shape[0] != n_e:
        y0_m = pt.broadcast_to(y0_m, (n_e, n))
    failed_flags = []
    if preequilibration is not None:
        y0_m, pre_failed = preequilibrated_initial_state(
            system, preequilibration, pre_inputs, y0_m, n_e, t0, ss_controls, on_failure
        )
        failed_flags.append(pre_failed)
    y0_from_system = y0_m is None
    wrt_y0 = y0_m is not None and not _is_constant(y0_m)
    route = sensitivity
    if route == "auto":
        route = choose_sensitivity_route(n, p + (n if wrt_y0 else 0), times_arr.shape[-1])
        if route == "adjoint" and method not in ("bdf", "adams"):
            route = "forward"
    spec = OdeSpec(
        system=system,
        times=times_arr,
        t0=t0,
        method=method,
        route=route,
        controls=_route_controls(route, method, controls),
        n_experiments=n_e,
        y0_from_system=y0_from_system,
        wrt_y0=wrt_y0,
        on_failure=on_failure,
        pbs_options=pbs_options,
    )
    _check_controls(spec)
    _compile_route_kernels(spec)
    op_type = {"forward": OdeForwardOp, "adjoint": OdeAdjointOp, "none": OdeStatesOp}.get(
        route, OdePbsOp
    )
    if route == "adjoint" and spec.controls.get("adjoint_method") == "discrete":
        op_type = OdeDiscreteAdjointOp
    op = op_type(spec)
    outputs = op(y0_m, params_m)
    y, failed = outputs[0], outputs[-1]
    failed_flags.append(failed)
    if infinite is not None:
        y_steady, steady_failed = steady_state_tensors(
            system, y0_m, params_m, n_e, t0, ss_controls, on_failure
        )
        mask = np.broadcast_to(infinite, (n_e, times_arr.shape[-1]))[:, :, None]
        y = pt.where(mask, y_steady[:, None, :], y)
        failed_flags.append(steady_failed)
    if on_failure == "reject":
        failure_potential(model, name or f"{system.name}_solver_failed", failed_flags)
    return y if batched else y[0]


def _check_pbs_supported(system: OdeSystem, route: str) -> None:
    """The Peano-Baker march has no event jumps: refuse systems with events (implicit,
    explicit or trigger) when building, naming them."""
    if system.events:
        names = ", ".join(f"{event.kind} event {event.name!r}" for event in system.events)
        raise ValueError(
            f"sensitivity={route!r} does not support systems with events (system "
            f"{system.name!r} declares {names}); use sensitivity='forward' or 'adjoint'"
        )


def _is_constant(x) -> bool:
    """True when ``x`` depends on constants only (no random variable, no input)."""
    return all(isinstance(v, Constant) for v in ancestors([x]) if v.owner is None)


def _check_controls(spec: OdeSpec) -> None:
    """Validate the controls now, so that bad ones fail when the graph is built."""
    from pymc_odesens.sensitivity.adjoint_controls import resolve_adjoint_controls
    from pymc_odesens.solvers.controls import resolve_controls

    if spec.route == "adjoint":
        resolve_adjoint_controls(spec.system.n_states, **spec.controls)
    else:
        resolve_controls(spec.method, spec.system.n_states, **spec.controls)


def _compile_route_kernels(spec: OdeSpec) -> None:
    """Generate and compile the kernels the route needs now, while the graph is built."""
    from pymc_odesens.codegen import (
        compile_adjoint_kernels,
        compile_kernels,
        compile_sensitivity_kernel,
    )

    compile_kernels(spec.system)
    if spec.route == "forward":
        compile_sensitivity_kernel(spec.system, "both" if spec.wrt_y0 else "params")
    elif spec.route == "adjoint":
        compile_adjoint_kernels(spec.system)
    elif spec.route in PBS_ALGORITHMS:
        import pymc_odesens.sensitivity.pbs  # noqa: F401  (loads the compiled march)
