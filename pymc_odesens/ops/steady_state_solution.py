"""Steady states in PyMC models: `steady_state_solution`, pre-equilibration, outputs at ``inf``.

- :func:`steady_state_solution`: ``y*`` as a differentiable tensor (gradient by one
  transposed solve per experiment).
- :class:`Preequilibration`: given to :func:`pymc_odesens.ode_solution`, the simulation
  starts from the steady state of another setting (other parameters, other initial state),
  with states optionally re-initialised afterwards: PEtab's pre-equilibration conditions.
- Output times ``inf`` in :func:`pymc_odesens.ode_solution` return the steady state reached
  from the simulation's initial state with its parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytensor.tensor as pt

from pymc_odesens.model import OdeSystem
from pymc_odesens.model.system import require_states
from pymc_odesens.ops.failure_potential import failure_potential, resolve_on_failure
from pymc_odesens.ops.graph_inputs import as_matrix, experiment_count, known_times
from pymc_odesens.ops.steady_state_experiments import SteadyStateSpec
from pymc_odesens.ops.steady_state_ops import SteadyStateOp
from pymc_odesens.sensitivity.steady_state_controls import (
    STEADY_STATE_CONTROL_NAMES,
    SteadyStateControls,
    check_steady_state_system,
    resolve_steady_state_controls,
)

__all__ = [
    "Preequilibration",
    "steady_state_solution",
    "steady_state_tensors",
    "steady_state_controls_from_dict",
    "split_infinite_times",
    "preequilibration_inputs",
    "preequilibrated_initial_state",
]


@dataclass(frozen=True)
class Preequilibration:
    """Start a simulation from the steady state of a pre-equilibration setting.

    Parameters
    ----------
    params : tensor-like of shape (P,) or (E, P), or a list of P scalars
        The parameters during pre-equilibration (e.g. no stimulus, other inputs). A vector
        is shared by all experiments of the batch; a matrix gives one setting each.
    y0 : tensor-like of shape (N,) or (E, N), optional
        The state pre-equilibration starts from. Default: the system's ``y0(params)`` if it
        declares one, else the ``y0`` given to :func:`~pymc_odesens.ode_solution`. With
        conservation laws, its totals select the steady state.
    reinitialize : array_like of bool, shape (N,) or (E, N), optional
        States that, after pre-equilibration, take the value of
        :func:`~pymc_odesens.ode_solution`'s ``y0`` instead of their steady-state value
        (PEtab's condition-table overrides of initial states); the others start from the
        steady state. Needs ``y0`` in ``ode_solution``.

    Examples
    --------
    ``ode_solution(system, y0, times, params_stimulated,
    preequilibration=Preequilibration(params_unstimulated))``
    """

    params: Any
    y0: Any = None
    reinitialize: Any = None


def steady_state_controls_from_dict(
    system: OdeSystem, controls: dict | None
) -> SteadyStateControls:
    """Validate a dict of :func:`pymc_odesens.steady_state` controls (names checked)."""
    controls = {} if controls is None else dict(controls)
    unknown = sorted(set(controls) - set(STEADY_STATE_CONTROL_NAMES))
    if unknown:
        raise TypeError(
            f"unknown steady-state control(s) {unknown}; accepted: "
            f"{', '.join(STEADY_STATE_CONTROL_NAMES)}"
        )
    return resolve_steady_state_controls(system.n_states, **controls)


def steady_state_tensors(
    system: OdeSystem,
    y0_m,
    params_m,
    n_experiments: int,
    t0: float,
    controls: SteadyStateControls,
    on_failure: str,
):
    """``(y* (E, N), failed (E,))`` for start states ``y0_m`` (E, N) (None: the system's
    ``y0(p)``) and parameters ``params_m`` (E, P)."""
    check_steady_state_system(system)
    if y0_m is None and system.initial_state_expressions is None:
        raise ValueError("y0 is required: the system declares no initial_state y0(p)")
    spec = SteadyStateSpec(
        system=system,
        t0=float(t0),
        controls=controls,
        n_experiments=n_experiments,
        y0_from_system=y0_m is None,
        on_failure=on_failure,
    )
    _ = spec.problem  # generate and compile the kernels and find the laws now
    y_star, _t, failed = SteadyStateOp(spec)(y0_m, params_m)
    return y_star, failed


def steady_state_solution(
    system: OdeSystem,
    y0,
    params,
    *,
    t0: float = 0.0,
    on_failure: str | None = None,
    name: str | None = None,
    **controls,
):
    """The steady state ``y*`` reached from ``y0`` as a differentiable PyTensor tensor.

    Parameters
    ----------
    system : OdeSystem
        Without events.
    y0 : tensor-like of shape (N,) or (E, N), a list of N scalars, or None
        The starting state (with conservation laws, its totals select the steady state);
        None uses the system's ``y0(p)``.
    params : tensor-like of shape (P,) or (E, P), or a list of P scalars
    t0 : float
        Time at which the right-hand side is evaluated by Newton's method and the
        integration fallback starts.
    on_failure : {"reject", "raise"}, optional
        As in :func:`~pymc_odesens.ode_solution`: inside a model (default ``"reject"``) a
        failure adds ``-inf`` to the log-density and is counted; ``"raise"`` propagates the
        :class:`~pymc_odesens.SteadyStateError`.
    name : str, optional
        Name of the failure potential (default ``"<system>_steady_state_failed"``).
    **controls
        ``method``, ``relative_tolerance``, ``absolute_tolerance``,
        ``max_newton_iterations``, ``max_num_steps``, ``max_time``, ``nonnegative``,
        ``linear_solver`` (see :func:`pymc_odesens.steady_state`), and ``sensitivity``:
        how the gradient is computed, as AMICI's ``SteadyStateSensitivityMode``:
        ``"auto"`` (default; ``integrateIfNewtonFails``) the implicit function theorem, or
        where the Jacobian at the steady state is singular the forward sensitivities
        integrated with the state from ``y0`` until they have settled; ``"implicit"``
        (``newtonOnly``) a singular Jacobian fails the steady state itself;
        ``"integration"`` (``integrationOnly``) always integrated.

    Returns
    -------
    TensorVariable
        Shape (N,), or (E, N) when ``y0`` or ``params`` has an experiment axis. Its gradient
        is the implicit function theorem's adjoint (one transposed solve per experiment),
        with respect to ``params`` and, through the conserved totals, ``y0`` (or the
        integrated sensitivities, see ``sensitivity``).
    """
    check_steady_state_system(system)
    require_states(system, "steady_state_solution", "its steady state would be an empty tensor")
    model, on_failure = resolve_on_failure(on_failure)
    resolved = steady_state_controls_from_dict(system, controls)
    n, p = system.n_states, system.n_params
    params_m, params_batched = as_matrix("params", params, p, "one value per parameter")
    sizes = {"params": params_m.type.shape[0]} if params_batched else {}
    y0_m = None
    if y0 is not None:
        y0_m, y0_batched = as_matrix("y0", y0, n, "one value per state")
        if y0_batched:
            sizes["y0"] = y0_m.type.shape[0]
    batched, n_e = experiment_count(sizes)
    params_m = pt.broadcast_to(params_m, (n_e, p)) if params_m.type.shape[0] != n_e else params_m
    if y0_m is not None and y0_m.type.shape[0] != n_e:
        y0_m = pt.broadcast_to(y0_m, (n_e, n))
    y_star, failed = steady_state_tensors(
        system, y0_m, params_m, n_e, float(t0), resolved, on_failure
    )
    if on_failure == "reject":
        failure_potential(model, name or f"{system.name}_steady_state_failed", [failed])
    return y_star if batched else y_star[0]


def split_infinite_times(times, t0: float, validate) -> tuple[np.ndarray, np.ndarray | None]:
    """``(finite times, infinite mask)``: output times with ``inf`` entries (steady-state
    outputs) replaced by the last finite time of their row (or ``t0``), for ``validate``.

    The mask is None when no time is infinite. ``inf`` may only end a row.
    """
    raw = known_times(times)  # data, real: symbolic, shared, text, complex raise TypeError
    infinite = np.isposinf(raw)
    if not infinite.any():
        return validate(times, t0), None
    if np.any(np.isnan(raw)) or np.any(np.isneginf(raw)):
        raise ValueError("times must be finite or +inf (a steady-state output); got NaN or -inf")
    rows = raw.reshape(-1, raw.shape[-1]) if raw.ndim else raw.reshape(1, 1)
    flags = infinite.reshape(rows.shape)
    finite_rows = rows.copy()
    for r in range(rows.shape[0]):
        first = int(np.argmax(flags[r])) if flags[r].any() else rows.shape[1]
        if not flags[r, first:].all():
            raise ValueError(
                "times must be non-decreasing: inf (the steady state) may only be followed by "
                f"inf; got {rows[r].tolist()}"
            )
        finite_rows[r, first:] = rows[r, first - 1] if first > 0 else t0
    return validate(finite_rows.reshape(raw.shape), t0), infinite


def preequilibration_inputs(system: OdeSystem, preequilibration: Preequilibration):
    """``(params (E', P), start (E', N) or None, sizes)`` of a pre-equilibration; ``sizes``
    maps its inputs with an experiment axis to their lengths (as ode_solution's inputs)."""
    if not isinstance(preequilibration, Preequilibration):
        raise TypeError(
            "preequilibration must be a pymc_odesens.Preequilibration, got "
            f"{type(preequilibration).__name__}"
        )
    n, p = system.n_states, system.n_params
    params_m, params_batched = as_matrix(
        "preequilibration.params", preequilibration.params, p, "one value per parameter"
    )
    sizes = {"preequilibration.params": params_m.type.shape[0]} if params_batched else {}
    start = None
    if preequilibration.y0 is not None:
        start, start_batched = as_matrix(
            "preequilibration.y0", preequilibration.y0, n, "one value per state"
        )
        if start_batched:
            sizes["preequilibration.y0"] = start.type.shape[0]
    return params_m, start, sizes


def preequilibrated_initial_state(
    system: OdeSystem,
    preequilibration: Preequilibration,
    inputs: tuple,
    y0_m,
    n_experiments: int,
    t0: float,
    controls: SteadyStateControls,
    on_failure: str,
):
    """``(initial state (E, N), failed (E,))`` of a simulation that starts after
    ``preequilibration``; ``inputs`` from :func:`preequilibration_inputs`, ``y0_m``
    ode_solution's ``y0`` as (E, N) or None."""
    n, p, n_e = system.n_states, system.n_params, n_experiments
    pre_params, start, _ = inputs
    pre_params = _rows(pre_params, n_e, p)
    if start is not None:
        start = _rows(start, n_e, n)
    elif system.initial_state_expressions is None:
        if y0_m is None:
            raise ValueError(
                "pre-equilibration needs a starting state: give y0, preequilibration.y0, or "
                "declare the system's initial_state"
            )
        start = y0_m
    y_star, failed = steady_state_tensors(system, start, pre_params, n_e, t0, controls, on_failure)
    if preequilibration.reinitialize is None:
        return y_star, failed
    mask = np.asarray(preequilibration.reinitialize)
    if mask.dtype != bool or mask.shape not in ((n,), (n_e, n)):
        raise ValueError(
            f"preequilibration.reinitialize must be a boolean array of shape ({n},) or "
            f"({n_e}, {n}) (one flag per state); got dtype {mask.dtype}, shape {mask.shape}"
        )
    if y0_m is None:
        raise ValueError(
            "preequilibration.reinitialize takes the re-initialised states from y0: give y0"
        )
    return pt.where(np.broadcast_to(mask, (n_e, n)), y0_m, y_star), failed


def _rows(x, n_e: int, width: int):
    """``x`` (1 or E rows, already checked against the batch) as (E, width)."""
    return x if x.type.shape[0] == n_e else pt.broadcast_to(x, (n_e, width))
