"""Controls of a steady-state computation: names, defaults, validation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_odesens.model import OdeSystem
from pymc_odesens.sensitivity import steady_state_status as ss
from pymc_odesens.solvers.controls import check_linear_solver, resolve_controls

__all__ = [
    "SteadyStateControls",
    "resolve_steady_state_controls",
    "check_steady_state_system",
    "STEADY_STATE_METHODS",
    "STEADY_STATE_SENSITIVITIES",
    "STEADY_STATE_SENSITIVITY_MODES",
    "STEADY_STATE_CONTROL_NAMES",
]

STEADY_STATE_METHODS = tuple(ss.MODES)
STEADY_STATE_SENSITIVITY_MODES = ("auto", "implicit", "integration")
"""How sensitivities of a steady state are computed (AMICI's ``SteadyStateSensitivityMode``):
``"implicit"`` the implicit function theorem at the steady state (``newtonOnly``: a singular
Jacobian is an error), ``"integration"`` forward sensitivities integrated with the state until
both have settled (``integrationOnly``), ``"auto"`` the first, and the second where the
Jacobian is singular (``integrateIfNewtonFails``)."""
STEADY_STATE_SENSITIVITIES = ("implicit", "integration", "auto", "none")
"""The ``sensitivity`` argument of :func:`pymc_odesens.steady_state`."""
DEFAULT_MAX_NEWTON_ITERATIONS = 40
DEFAULT_MAX_NUM_STEPS = 10_000
DEFAULT_MAX_TIME = 1e12


@dataclass(frozen=True)
class SteadyStateControls:
    """Validated controls of a steady-state computation.

    Attributes
    ----------
    method : {"auto", "newton", "integration"}
    relative_tolerance : float
    absolute_tolerance : numpy.ndarray, shape (N,)
    max_newton_iterations : int
    max_num_steps : int
        Integration steps over all horizons together.
    max_time : float
        Longest integrated time.
    nonnegative : bool
    linear_solver : {"auto", "dense", "sparse"}
        The factorisations of the bordered Jacobian and of the integration's Newton
        matrices.
    sensitivity : {"auto", "implicit", "integration"}
        How the sensitivities (or their adjoint) are computed
        (:data:`STEADY_STATE_SENSITIVITY_MODES`).
    """

    method: str
    relative_tolerance: float
    absolute_tolerance: np.ndarray
    max_newton_iterations: int
    max_num_steps: int
    max_time: float
    nonnegative: bool
    linear_solver: str = "auto"
    sensitivity: str = "auto"

    @property
    def mode(self) -> int:
        return ss.MODES[self.method]


def resolve_steady_state_controls(
    n_states: int,
    method: str = "auto",
    relative_tolerance=None,
    absolute_tolerance=None,
    max_newton_iterations: int | None = None,
    max_num_steps: int | None = None,
    max_time: float | None = None,
    nonnegative: bool = False,
    linear_solver: str = "auto",
    sensitivity: str = "auto",
) -> SteadyStateControls:
    """Fill the defaults and validate the controls (errors name the argument)."""
    if not isinstance(sensitivity, str) or sensitivity not in STEADY_STATE_SENSITIVITY_MODES:
        raise ValueError(
            "sensitivity must be one of "
            f"{', '.join(map(repr, STEADY_STATE_SENSITIVITY_MODES))}; got {sensitivity!r}"
        )
    if not isinstance(method, str) or method not in ss.MODES:
        raise ValueError(
            f"method must be one of {', '.join(map(repr, STEADY_STATE_METHODS))}; got {method!r}"
        )
    base = resolve_controls(
        "bdf",
        n_states,
        relative_tolerance,
        absolute_tolerance,
        DEFAULT_MAX_NUM_STEPS if max_num_steps is None else max_num_steps,
    )
    iterations = (
        DEFAULT_MAX_NEWTON_ITERATIONS if max_newton_iterations is None else (max_newton_iterations)
    )
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)):
        raise TypeError(f"max_newton_iterations must be an int >= 1, got {iterations!r}")
    if iterations < 1:
        raise ValueError(f"max_newton_iterations must be >= 1, got {iterations}")
    horizon = DEFAULT_MAX_TIME if max_time is None else max_time
    try:
        horizon = float(horizon)
    except (TypeError, ValueError):
        raise TypeError(f"max_time must be a positive float, got {max_time!r}") from None
    if not horizon > 0.0:
        raise ValueError(f"max_time must be positive, got {max_time!r}")
    if not isinstance(nonnegative, (bool, np.bool_)):
        raise TypeError(f"nonnegative must be True or False, got {nonnegative!r}")
    return SteadyStateControls(
        method=method,
        relative_tolerance=base.relative_tolerance,
        absolute_tolerance=base.absolute_tolerance,
        max_newton_iterations=int(iterations),
        max_num_steps=base.max_num_steps,
        max_time=horizon,
        nonnegative=bool(nonnegative),
        linear_solver=check_linear_solver(linear_solver),
        sensitivity=sensitivity,
    )


def check_steady_state_system(system: OdeSystem) -> None:
    """Raise if ``system`` is not an OdeSystem or has events (a steady state ignores them)."""
    if not isinstance(system, OdeSystem):
        raise TypeError(f"system must be an OdeSystem, got {type(system).__name__}")
    if system.events:
        raise ValueError(
            f"steady states of systems with events are not supported: {system.name!r} declares "
            f"{', '.join(e.name for e in system.events)}"
        )


STEADY_STATE_CONTROL_NAMES = (
    "method",
    "relative_tolerance",
    "absolute_tolerance",
    "max_newton_iterations",
    "max_num_steps",
    "max_time",
    "nonnegative",
    "linear_solver",
    "sensitivity",
)
"""The keyword names of :func:`resolve_steady_state_controls`."""
