"""NUTS with a dense mass matrix that starts from the posterior's curvature at its mode.

PyMC's NUTS starts from a unit diagonal mass matrix and learns the variances over its
tuning windows. On ODE posteriors whose parameters the data fix only in combination
(a scaling factor times an initial amount, rate constants of a fast equilibrium), the
log-density's Hessian has a condition number of 1e4 to 1e7 (docs/petab.md), and most of
it lies in correlations a diagonal cannot remove: the step size is set by the stiffest
direction and trajectories need hundreds of gradients to cross the flattest one. A
dense mass matrix removes correlations; learning one from draws needs draws that have
already crossed the posterior.

:func:`mode_metric_nuts` takes the curvature from where the posterior concentrates: it
finds the mode of the log-density in the sampler's coordinates (L-BFGS-B with the
exact gradient, :func:`find_posterior_mode`), takes the Hessian there by central
differences of that gradient (:func:`negative_hessian`), and returns a NUTS step whose
mass matrix starts as its inverse (the Laplace approximation's covariance) and is then
adapted to the draws during tuning, each window's estimate anchored to that covariance
(:mod:`pymc_odesens.inference.anchored_potential`). The posterior is unchanged; only NUTS's
metric is. Where the posterior is far from a Gaussian the draws correct the start over
the tuning windows.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pymc as pm
from scipy.optimize import minimize

from pymc_odesens.inference.anchored_potential import AnchoredFullAdapt

__all__ = ["PosteriorMode", "find_posterior_mode", "negative_hessian", "mode_metric_nuts"]

# L-BFGS-B restarts (see _maximise) while the gradient's norm is above this
_RESTART_GRADIENT = 1e-2
_MAX_RESTARTS = 50


@dataclass(frozen=True)
class PosteriorMode:
    """Where :func:`find_posterior_mode` ended.

    Attributes
    ----------
    point : dict of str to numpy.ndarray
        The value variables (the sampler's coordinates) at the mode, by name.
    vector : numpy.ndarray
        The same values raveled in the order of ``value_variables``.
    value_variables : tuple of str
        The value variables' names, in the order of ``vector``.
    log_density : float
        The model's log-density there.
    gradient : numpy.ndarray
        The log-density's gradient there (0 at an exact mode), in the order of ``vector``.
    iterations : int
        L-BFGS-B iterations.
    message : str
        L-BFGS-B's message.
    """

    point: dict[str, np.ndarray]
    vector: np.ndarray
    value_variables: tuple[str, ...]
    log_density: float
    gradient: np.ndarray
    iterations: int
    message: str

    @property
    def gradient_norm(self) -> float:
        """The Euclidean norm of :attr:`gradient`."""
        return float(np.linalg.norm(self.gradient))


def _value_variables(model: pm.Model, variables) -> list:
    if variables is None:
        return list(model.continuous_value_vars)
    by_name = {v.name: v for v in model.value_vars}
    chosen = []
    for v in variables:
        name = v if isinstance(v, str) else v.name
        if name not in by_name:
            raise ValueError(
                f"variables: {name!r} is not a value variable of the model; its value "
                f"variables are {sorted(by_name)}"
            )
        chosen.append(by_name[name])
    return chosen


def _log_density_function(model: pm.Model, variables: list, start, compile_kwargs: Mapping):
    """``(vector -> (log-density, gradient))`` over ``variables`` raveled, and its start."""
    function = model.logp_dlogp_function(variables, ravel_inputs=True, **dict(compile_kwargs))
    point, vector = _start_point(model.initial_point(), variables, start)
    function.set_extra_values(point)
    return function, vector, point


def _start_point(point: Mapping, variables: list, start) -> tuple[dict, np.ndarray]:
    """``point`` with ``start``'s values (value variables by name), and ``variables``'
    values raveled; a name in ``start`` that is not in ``point`` raises ``ValueError``."""
    point = dict(point)
    if start is not None:
        unknown = set(start) - set(point)
        if unknown:
            raise ValueError(
                f"start: {sorted(unknown)} are not value variables of the model (give values "
                "on the transformed scale, by value variable name, e.g. 'k_log__')"
            )
        point.update({name: np.asarray(value) for name, value in start.items()})
    vector = np.concatenate([np.ravel(point[v.name]) for v in variables]).astype(float)
    return point, vector


def _positive_definite_inverse(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The eigenvalues of a symmetric ``matrix`` and its inverse (None when an eigenvalue
    is not positive: the caller says what that means)."""
    values, vectors = np.linalg.eigh(matrix)
    if values[0] <= 0:
        return values, None
    return values, (vectors / values) @ vectors.T


def _split(vector: np.ndarray, variables: list, point: Mapping) -> dict[str, np.ndarray]:
    out, offset = {}, 0
    for v in variables:
        shape = np.shape(point[v.name])
        size = int(np.prod(shape))
        out[v.name] = vector[offset : offset + size].reshape(shape)
        offset += size
    return out


def find_posterior_mode(
    model: pm.Model | None = None,
    *,
    start: Mapping[str, np.ndarray] | None = None,
    variables=None,
    max_iterations: int = 20000,
    compile_kwargs: Mapping | None = None,
) -> PosteriorMode:
    """The maximum of the model's log-density in the sampler's (transformed) coordinates.

    L-BFGS-B on minus the log-density and its exact gradient, unbounded (the value
    variables are unconstrained), from ``start``. Points where the log-density is not
    finite (a failed ODE solve rejected by the model) count as infinitely bad; scipy's
    L-BFGS-B then stops at the last finite point, so the search restarts from there while
    the log-density rises and the gradient's norm is above 1e-2. Check ``gradient_norm``:
    a search that ends against such a region is not at a mode.

    Parameters
    ----------
    model : pymc.Model, optional
        Default: the model in context.
    start : dict, optional
        Starting values of value variables by name (transformed scale, e.g. ``'k_log__'``);
        the others start at the model's initial point. Default: the initial point.
    variables : sequence of str or variables, optional
        The value variables to optimise over; default: all continuous ones.
    max_iterations : int
        L-BFGS-B's limit (20000).
    compile_kwargs : dict, optional
        For PyTensor's compile of the log-density and gradient (e.g. ``{"mode": "NUMBA"}``).

    Returns
    -------
    PosteriorMode

    Raises
    ------
    ValueError
        If the log-density is not finite at ``start``.
    """
    model = pm.modelcontext(model)
    variables = _value_variables(model, variables)
    function, vector, point = _log_density_function(model, variables, start, compile_kwargs or {})
    return _maximise(function, vector, point, variables, max_iterations)


def _maximise(function, vector, point, variables, max_iterations: int) -> PosteriorMode:
    value, _ = function(vector)
    if not np.isfinite(value):
        raise ValueError(
            f"start: the model's log-density is {value} there; give a start where it is finite"
        )

    def objective(x):
        value, gradient = function(x)
        if not np.isfinite(value) or not np.all(np.isfinite(gradient)):
            return np.inf, np.zeros_like(x)
        return -float(value), -np.asarray(gradient, dtype=float)

    # L-BFGS-B reports convergence when a line search meets a non-finite value (scipy
    # 1.x: it stops at the last finite point, with "CONVERGENCE" as its message); a
    # restart from there continues with a fresh first step, as long as the log-density
    # still rises and the gradient is not small
    x, iterations, best = np.asarray(vector, dtype=float), 0, float(value)
    for _ in range(_MAX_RESTARTS):
        result = minimize(
            objective,
            x,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": max_iterations - iterations, "ftol": 1e-15, "gtol": 1e-9},
        )
        iterations += int(result.nit)
        value, gradient = function(result.x)
        rose = float(value) > best + 1e-12 * max(1.0, abs(best))
        x, best = np.array(result.x), max(best, float(value))
        if (
            not rose
            or np.linalg.norm(gradient) <= _RESTART_GRADIENT
            or iterations >= max_iterations
        ):
            break
    return PosteriorMode(
        point=_split(x, variables, point),
        vector=x,
        value_variables=tuple(v.name for v in variables),
        log_density=float(value),
        gradient=np.asarray(gradient, dtype=float),
        iterations=iterations,
        message=str(result.message),
    )


def negative_hessian(gradient, vector: np.ndarray, step: float = 1e-3) -> np.ndarray:
    """Minus the Hessian of a log-density: central differences of its exact ``gradient``.

    Parameters
    ----------
    gradient : callable
        ``vector -> gradient of the log-density`` (same length).
    vector : numpy.ndarray
        Where (1-D).
    step : float
        The difference step in each coordinate (1e-3; the error is of order step**2 times
        the third derivatives).

    Returns
    -------
    numpy.ndarray
        Symmetric, ``(n, n)``.
    """
    vector = np.asarray(vector, dtype=float)
    if vector.ndim != 1:
        raise ValueError(f"vector: expected a 1-D array, got shape {vector.shape}")
    if not step > 0:
        raise ValueError(f"step: expected a positive number, got {step!r}")
    rows = []
    for i in range(vector.size):
        e = np.zeros(vector.size)
        e[i] = step
        rows.append(
            -(np.asarray(gradient(vector + e)) - np.asarray(gradient(vector - e))) / (2 * step)
        )
    h = np.array(rows, dtype=float)
    return (h + h.T) / 2


def mode_metric_nuts(
    model: pm.Model | None = None,
    *,
    start: Mapping[str, np.ndarray] | None = None,
    target_accept: float = 0.8,
    fd_step: float = 1e-3,
    initial_weight: int = 100,
    compile_kwargs: Mapping | None = None,
    **nuts_kwargs,
) -> tuple[pm.NUTS, PosteriorMode]:
    """A NUTS step whose dense mass matrix starts as the inverse Hessian at the mode.

    Give the step to :func:`pymc_odesens.sample` (or ``pm.sample``) as ``step=``; chains may
    start anywhere (``initvals``). During tuning the mass matrix is re-estimated from the
    draws of each adaptation window (PyMC's ``QuadPotentialFullAdapt`` schedule), with the
    mode's covariance counted as ``initial_weight`` draws in every window
    (:class:`~pymc_odesens.inference.anchored_potential.AnchoredFullAdapt`).

    Parameters
    ----------
    model : pymc.Model, optional
        Default: the model in context.
    start : dict, optional
        Where the mode search starts (:func:`find_posterior_mode`).
    target_accept : float
        NUTS's target acceptance rate (0.8).
    fd_step : float
        The Hessian's difference step in the sampler's coordinates (1e-3).
    initial_weight : int
        How many draws the mode's covariance counts for in each window's estimate (100).
    compile_kwargs : dict, optional
        PyTensor's compile arguments for the mode search and for NUTS; default
        ``{"mode": "NUMBA"}`` as in :func:`pymc_odesens.sample`.
    **nuts_kwargs
        Other arguments of :class:`pymc.NUTS` (``max_treedepth``, ...).

    Returns
    -------
    (pymc.NUTS, PosteriorMode)
        The step and the mode it was built at (for reporting).

    Warns
    -----
    UserWarning
        If the point found is not at a mode (a Newton step from it would raise the
        log-density by more than 0.5).

    Raises
    ------
    ValueError
        If the Hessian at the point found is not positive definite (not a strict local
        maximum: the message gives the count of eigenvalues that are not positive and the
        gradient norm there).
    """
    model = pm.modelcontext(model)
    if not 0 < target_accept < 1:
        raise ValueError(f"target_accept: expected a number in (0, 1), got {target_accept!r}")
    if initial_weight < 1:
        raise ValueError(f"initial_weight: expected a positive count, got {initial_weight!r}")
    if compile_kwargs is None:
        compile_kwargs = {"mode": "NUMBA"}
    variables = _value_variables(model, None)
    function, vector, point = _log_density_function(model, variables, start, compile_kwargs)
    mode = _maximise(function, vector, point, variables, max_iterations=20000)
    hessian = negative_hessian(lambda x: function(x)[1], mode.vector, fd_step)
    if not np.all(np.isfinite(hessian)):
        raise ValueError(
            f"fd_step={fd_step!r}: the log-density's gradient is not finite within one step of "
            "the point L-BFGS-B found, so its Hessian there is not defined; give a smaller "
            "fd_step"
        )
    values, covariance = _positive_definite_inverse(hessian)
    if covariance is None:
        raise ValueError(
            f"the negative Hessian at the point L-BFGS-B found ({mode.message}; gradient norm "
            f"{mode.gradient_norm:.3g}) has {int(np.sum(values <= 0))} eigenvalues that are not "
            f"positive (smallest {values[0]:.3g}): not a strict local maximum. Give a start "
            "nearer the mode, or sample with PyMC's adapt_diag/adapt_full."
        )
    rise = 0.5 * float(mode.gradient @ covariance @ mode.gradient)  # of a Newton step from there
    if rise > 0.5:
        warnings.warn(
            f"find_posterior_mode stopped short of a mode ({mode.message}; gradient norm "
            f"{mode.gradient_norm:.3g}): a Newton step from there would raise the "
            f"log-density by about {rise:.3g}. The mass matrix starts from the curvature "
            "there (a region where the log-density is not finite may block the search).",
            UserWarning,
            stacklevel=2,
        )
    potential = AnchoredFullAdapt(mode.vector.size, mode.vector, covariance, initial_weight)
    step = pm.NUTS(
        vars=variables,
        model=model,
        potential=potential,
        target_accept=target_accept,
        logp_dlogp_func=function,  # the one compiled for the search (no second compile)
        **nuts_kwargs,
    )
    return step, mode
