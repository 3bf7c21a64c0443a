"""The controls of Stan's ``ode_adjoint_tol_ctl``: names, meanings, defaults, validation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_odesens.solvers.controls import check_linear_solver, positive_count

__all__ = [
    "AdjointControls",
    "resolve_adjoint_controls",
    "ADJOINT_DEFAULTS",
    "ADJOINT_METHODS",
]

SOLVER_CODES = {1: "adams", 2: "bdf"}
INTERPOLATION_CODES = {1: "hermite", 2: "polynomial"}

ADJOINT_DEFAULTS = {
    "relative_tolerance_forward": 1e-6,
    "absolute_tolerance_forward": 1e-6,
    "relative_tolerance_backward": 1e-6,
    "absolute_tolerance_backward": 1e-6,
    "relative_tolerance_quadrature": 1e-6,
    "absolute_tolerance_quadrature": 1e-6,
    "max_num_steps": 100_000_000,
    "num_steps_between_checkpoints": 150,
    "interpolation_polynomial": 1,
    "solver_forward": 2,
    "solver_backward": 2,
}
"""Defaults. Stan requires every argument of ``ode_adjoint_tol_ctl``; these are
the values its documentation works with: tolerances 1e-6, ``max_num_steps`` of
Stan's ``ode_bdf`` (1e8), 150 steps between checkpoints, Hermite
interpolation, BDF forwards and backwards."""

ADJOINT_METHODS = ("continuous", "discrete")
"""Values of the control ``adjoint_method`` (not Stan's; default ``"continuous"``):
Stan's backward ODE with its own error control, or the exact adjoint of the
forward run's logged steps (:mod:`pymc_odesens.sensitivity.discrete_adjoint`),
which ignores the backward and quadrature controls and the interpolation."""

_ALL_DEFAULTS = {**ADJOINT_DEFAULTS, "adjoint_method": "continuous", "linear_solver": "auto"}


@dataclass(frozen=True)
class AdjointControls:
    """Validated controls of an adjoint gradient (Stan's ``ode_adjoint_tol_ctl``).

    Attributes
    ----------
    relative_tolerance_forward : float
    absolute_tolerance_forward : numpy.ndarray, shape (N,)
    relative_tolerance_backward : float
    absolute_tolerance_backward : numpy.ndarray, shape (N,)
    relative_tolerance_quadrature, absolute_tolerance_quadrature : float
    max_num_steps : int
        Largest number of steps between two output times, in either phase.
    num_steps_between_checkpoints : int
    interpolation_polynomial : int
        1 Hermite, 2 polynomial.
    solver_forward, solver_backward : int
        1 Adams, 2 BDF.
    adjoint_method : str
        ``"continuous"`` (Stan's) or ``"discrete"`` (see :data:`ADJOINT_METHODS`).
    linear_solver : str
        ``"auto"``, ``"dense"`` or ``"sparse"``: the Newton matrices of both phases
        (:mod:`pymc_odesens.solvers.newton_matrix`; not Stan's).
    """

    relative_tolerance_forward: float
    absolute_tolerance_forward: np.ndarray
    relative_tolerance_backward: float
    absolute_tolerance_backward: np.ndarray
    relative_tolerance_quadrature: float
    absolute_tolerance_quadrature: float
    max_num_steps: int
    num_steps_between_checkpoints: int
    interpolation_polynomial: int
    solver_forward: int
    solver_backward: int
    adjoint_method: str = "continuous"
    linear_solver: str = "auto"

    @property
    def forward_method(self) -> str:
        """``"adams"`` or ``"bdf"``."""
        return SOLVER_CODES[self.solver_forward]

    @property
    def backward_method(self) -> str:
        """``"adams"`` or ``"bdf"``."""
        return SOLVER_CODES[self.solver_backward]


def _relative(name: str, value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a positive float, got {value!r}") from None
    if not (np.isfinite(value) and 0.0 < value < 1.0):
        raise ValueError(f"{name} must be positive, finite and < 1; got {value!r}")
    return value


def _absolute(name: str, value, n_states: int | None) -> np.ndarray | float:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a positive float or array of floats, got {value!r}"
        ) from None
    if n_states is None:
        if arr.ndim != 0:
            raise ValueError(f"{name} must be a scalar; got shape {arr.shape}")
    elif arr.ndim == 0:
        arr = np.full(n_states, float(arr))
    elif arr.shape != (n_states,):
        raise ValueError(
            f"{name} must be a scalar or have shape ({n_states},) (one per state); "
            f"got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be positive and finite; got {value!r}")
    return float(arr) if n_states is None else np.ascontiguousarray(arr)


def _code(name: str, value, choices: dict[int, str]) -> int:
    if isinstance(value, str):
        named = {v: k for k, v in choices.items()}
        if value in named:
            return named[value]
    elif not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value in choices:
        return int(value)
    listing = ", ".join(f"{k} ({v!r})" for k, v in choices.items())
    raise ValueError(f"{name} must be one of {listing}; got {value!r}")


def resolve_adjoint_controls(n_states: int, **controls) -> AdjointControls:
    """Fill the defaults of :data:`ADJOINT_DEFAULTS` and validate every control.

    Unknown names raise TypeError listing the accepted ones. Solver and
    interpolation choices take Stan's integer codes or the names
    ``"adams"``/``"bdf"`` and ``"hermite"``/``"polynomial"``.
    """
    unknown = sorted(set(controls) - set(_ALL_DEFAULTS))
    if unknown:
        raise TypeError(
            f"unknown adjoint control(s) {unknown}; accepted: {', '.join(_ALL_DEFAULTS)}"
        )
    values = {
        k: (_ALL_DEFAULTS[k] if controls.get(k) is None else controls[k]) for k in _ALL_DEFAULTS
    }
    if values["adjoint_method"] not in ADJOINT_METHODS:
        raise ValueError(
            f"adjoint_method must be one of {ADJOINT_METHODS}; got {values['adjoint_method']!r}"
        )
    resolved = AdjointControls(
        relative_tolerance_forward=_relative(
            "relative_tolerance_forward", values["relative_tolerance_forward"]
        ),
        absolute_tolerance_forward=_absolute(
            "absolute_tolerance_forward", values["absolute_tolerance_forward"], n_states
        ),
        relative_tolerance_backward=_relative(
            "relative_tolerance_backward", values["relative_tolerance_backward"]
        ),
        absolute_tolerance_backward=_absolute(
            "absolute_tolerance_backward", values["absolute_tolerance_backward"], n_states
        ),
        relative_tolerance_quadrature=_relative(
            "relative_tolerance_quadrature", values["relative_tolerance_quadrature"]
        ),
        absolute_tolerance_quadrature=_absolute(
            "absolute_tolerance_quadrature", values["absolute_tolerance_quadrature"], None
        ),
        max_num_steps=positive_count("max_num_steps", values["max_num_steps"]),
        num_steps_between_checkpoints=positive_count(
            "num_steps_between_checkpoints", values["num_steps_between_checkpoints"]
        ),
        interpolation_polynomial=_code(
            "interpolation_polynomial", values["interpolation_polynomial"], INTERPOLATION_CODES
        ),
        solver_forward=_code("solver_forward", values["solver_forward"], SOLVER_CODES),
        solver_backward=_code("solver_backward", values["solver_backward"], SOLVER_CODES),
        adjoint_method=values["adjoint_method"],
        linear_solver=check_linear_solver(values["linear_solver"]),
    )
    if resolved.adjoint_method == "discrete" and resolved.forward_method != "bdf":
        raise ValueError(
            "adjoint_method='discrete' needs solver_forward=2 ('bdf'); got "
            f"{resolved.forward_method!r} (the linearised steps of adams are unstable on stiff "
            "problems; use adjoint_method='continuous' with adams)"
        )
    return resolved
