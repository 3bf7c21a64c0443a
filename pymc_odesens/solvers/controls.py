"""Stan's ODE controls: names, meanings, defaults per method, validation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "LINEAR_SOLVERS",
    "METHODS",
    "SolverControls",
    "check_linear_solver",
    "positive_count",
    "resolve_controls",
    "validate_times",
]

MAX_COUNT = 2**63 - 1
"""Largest step count a control may give: the compiled solvers count in 64-bit integers."""

METHODS = ("rk45", "ckrk", "bdf", "adams")
LINEAR_SOLVERS = ("auto", "dense", "sparse")
"""Values of the control ``linear_solver`` (the Newton matrices of ``bdf`` and ``adams``)."""

# Stan: rk45 and ckrk default to 1e-6 / 1e-6 / 1e6; bdf and adams to 1e-10 / 1e-10 / 1e8.
_DEFAULTS = {
    "rk45": (1e-6, 1e-6, 1_000_000),
    "ckrk": (1e-6, 1e-6, 1_000_000),
    "bdf": (1e-10, 1e-10, 100_000_000),
    "adams": (1e-10, 1e-10, 100_000_000),
}


@dataclass(frozen=True)
class SolverControls:
    """Validated controls of one solve.

    Attributes
    ----------
    method : str
    relative_tolerance : float
    absolute_tolerance : numpy.ndarray
        Per-state absolute tolerances, shape (N,).
    max_num_steps : int
        Largest number of steps between two output times.
    linear_solver : str
        ``"auto"``, ``"dense"`` or ``"sparse"``: how ``bdf`` and ``adams`` factorise their
        Newton matrices (:mod:`pymc_odesens.solvers.newton_matrix`; not a Stan control).
    """

    method: str
    relative_tolerance: float
    absolute_tolerance: np.ndarray
    max_num_steps: int
    linear_solver: str = "auto"


def positive_count(name: str, value) -> int:
    """``value`` as a positive int of at most :data:`MAX_COUNT` (a float equal to one is
    accepted, as Stan's ``1e8``), else a TypeError / ValueError naming ``name``."""
    given = value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a positive int, got {given!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {given!r}")
    if value > MAX_COUNT:
        raise ValueError(
            f"{name} must be at most 2**63 - 1 = {MAX_COUNT} (the solvers count steps in "
            f"64-bit integers); got {given!r}"
        )
    return int(value)


def check_method(method: str) -> str:
    """Return ``method`` if it is one of :data:`METHODS`, else raise ValueError."""
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}; got {method!r}")
    return method


def check_linear_solver(linear_solver) -> str:
    """``linear_solver`` if it is one of :data:`LINEAR_SOLVERS` (None: ``"auto"``)."""
    if linear_solver is None:
        return "auto"
    if not isinstance(linear_solver, str) or linear_solver not in LINEAR_SOLVERS:
        raise ValueError(
            f"linear_solver must be one of {', '.join(map(repr, LINEAR_SOLVERS))}; "
            f"got {linear_solver!r}"
        )
    return linear_solver


def resolve_controls(
    method: str,
    n_states: int,
    relative_tolerance=None,
    absolute_tolerance=None,
    max_num_steps=None,
    linear_solver=None,
) -> SolverControls:
    """Fill Stan's per-method defaults and validate the controls.

    Parameters
    ----------
    method : {"rk45", "ckrk", "bdf", "adams"}
    n_states : int
    relative_tolerance : float, optional
        Positive, finite, below 1.
    absolute_tolerance : float or array_like of shape (n_states,), optional
        Positive and finite (per state if an array).
    max_num_steps : int, optional
        Positive, at most ``2**63 - 1``.
    linear_solver : {"auto", "dense", "sparse"}, optional
        Factorisation of ``bdf``'s and ``adams``' Newton matrices (default ``"auto"``).
    """
    check_method(method)
    linear_solver = check_linear_solver(linear_solver)
    rtol_default, atol_default, steps_default = _DEFAULTS[method]
    rtol = rtol_default if relative_tolerance is None else relative_tolerance
    try:
        rtol = float(rtol)
    except (TypeError, ValueError):
        raise TypeError(
            f"relative_tolerance must be a positive float, got {relative_tolerance!r}"
        ) from None
    if not (np.isfinite(rtol) and 0.0 < rtol < 1.0):
        raise ValueError(f"relative_tolerance must be positive, finite and < 1; got {rtol!r}")
    atol = atol_default if absolute_tolerance is None else absolute_tolerance
    try:
        atol_arr = np.asarray(atol, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            "absolute_tolerance must be a positive float or one per state, "
            f"got {absolute_tolerance!r}"
        ) from None
    if atol_arr.ndim == 0:
        atol_arr = np.full(n_states, float(atol_arr))
    elif atol_arr.shape != (n_states,):
        raise ValueError(
            f"absolute_tolerance must be a scalar or have shape ({n_states},) (one per state); "
            f"got shape {atol_arr.shape}"
        )
    if not np.all(np.isfinite(atol_arr)) or np.any(atol_arr <= 0):
        raise ValueError(f"absolute_tolerance must be positive and finite; got {atol!r}")
    steps = positive_count(
        "max_num_steps", steps_default if max_num_steps is None else max_num_steps
    )
    return SolverControls(method, rtol, np.ascontiguousarray(atol_arr), steps, linear_solver)


def validate_times(times, t0: float) -> np.ndarray:
    """Output times as a float array, checked to be finite, non-decreasing and >= t0."""
    if np.iscomplexobj(times):
        raise TypeError(f"times must be real, got complex values {times!r}")
    try:
        ts = np.asarray(times, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"times must be a 1-d array of floats, got {times!r}") from None
    if ts.ndim == 0:
        ts = ts.reshape(1)
    if ts.ndim != 1:
        raise ValueError(f"times must be 1-dimensional, got shape {ts.shape}")
    if ts.size == 0:
        raise ValueError("times must contain at least one output time")
    if not np.all(np.isfinite(ts)):
        raise ValueError("times must be finite")
    if not np.isfinite(t0):
        raise ValueError(f"t0 must be finite, got {t0!r}")
    if np.any(np.diff(ts) < 0):
        i = int(np.argmax(np.diff(ts) < 0))
        raise ValueError(
            f"times must be non-decreasing; times[{i + 1}] = {ts[i + 1]!r} < times[{i}] = {ts[i]!r}"
        )
    if ts[0] < t0:
        raise ValueError(f"times must be >= t0 = {t0!r}; times[0] = {ts[0]!r}")
    return np.ascontiguousarray(ts)
