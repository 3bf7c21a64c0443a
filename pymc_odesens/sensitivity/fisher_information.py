"""Expected Fisher information of ODE parameters and initial states under Gaussian noise.

For observations ``d_tm = h_m(t, y(t), p) + e_tm`` with independent
``e_tm ~ N(0, sigma_tm^2)`` (additive noise), the expected Fisher information of
``theta`` (parameters, initial state or both) is

    F = sum_t (dh/dtheta)_t^T Sigma_t^{-1} (dh/dtheta)_t,
    dh/dtheta = h_y S + h_p,

with ``S = dy/dtheta`` the sensitivities and ``Sigma_t = diag(sigma_t^2)``.
Multiplicative (log-normal) noise, ``log d_tm ~ N(log h_m, sigma_tm^2)``, is the
same formula for ``log h``: ``d log h / dtheta = (dh/dtheta) / h``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np

from pymc_odesens.codegen.observable_kernels import compile_observable_kernels
from pymc_odesens.model import OdeSystem
from pymc_odesens.sensitivity.observables import Observables, resolve_observables
from pymc_odesens.sensitivity.solve_sensitivity import solve_sensitivity

__all__ = ["NOISE_MODELS", "FisherInformationResult", "fisher_information", "noise_weights"]

NOISE_MODELS = ("additive", "multiplicative")

_ROUTE_ARGUMENTS = {"system", "y0", "times", "params", "t0", "method", "sensitivity", "wrt"}


@dataclass
class FisherInformationResult:
    """The expected Fisher information and what it was computed from.

    Attributes
    ----------
    matrix : numpy.ndarray, shape (K, K)
        ``F``, symmetric positive semi-definite. Columns in the order of
        :attr:`columns`.
    columns : list of str
        Parameter names (``wrt`` "params" or "both"), then ``"y0[<state>]"``
        for the initial-state columns (``wrt`` "y0" or "both").
    observables : list of str
        Names of the M observables.
    t : numpy.ndarray, shape (T,)
    y : numpy.ndarray, shape (T, N)
    h : numpy.ndarray, shape (T, M)
        Observables at the output times.
    dh : numpy.ndarray, shape (T, M, K)
        Their derivatives ``dh/dtheta = h_y S + h_p`` (of ``h``, also for
        multiplicative noise).
    weights : numpy.ndarray, shape (T, M)
        ``1 / sigma^2``.
    noise, sensitivity, method, wrt : str
    stats : dict
        Statistics of the sensitivity solve.
    """

    matrix: np.ndarray
    columns: list
    observables: list
    t: np.ndarray
    y: np.ndarray
    h: np.ndarray
    dh: np.ndarray
    weights: np.ndarray
    noise: str
    sensitivity: str
    method: str
    wrt: str
    stats: dict


def noise_weights(sigma, n_times: int, n_observables: int) -> np.ndarray:
    """``1 / sigma^2`` of shape (T, M) from a scalar, per-observable or per-point ``sigma``.

    Raises
    ------
    ValueError
        A shape other than (), (M,) or (T, M), or values that are not finite
        and positive.
    """
    try:
        s = np.asarray(sigma, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError(f"sigma must be numeric, got {sigma!r}") from err
    if s.ndim == 0:
        s = np.full((n_times, n_observables), float(s))
    elif s.shape == (n_observables,):
        s = np.broadcast_to(s, (n_times, n_observables))
    elif s.shape != (n_times, n_observables):
        raise ValueError(
            f"sigma must be a scalar, one value per observable (shape ({n_observables},)) or "
            f"one per time and observable (shape ({n_times}, {n_observables})); "
            f"got shape {s.shape}"
        )
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        bad = s[~(np.isfinite(s) & (s > 0))].ravel()[0]
        raise ValueError(f"sigma must be finite and > 0 everywhere; got {bad}")
    return np.ascontiguousarray(1.0 / s**2)


def _solver_controls(controls: dict) -> dict:
    accepted = set(inspect.signature(solve_sensitivity).parameters) - _ROUTE_ARGUMENTS
    unknown = sorted(set(controls) - accepted)
    if unknown:
        raise TypeError(f"unknown control(s) {unknown}; accepted: {', '.join(sorted(accepted))}")
    return controls


def fisher_information(
    system: OdeSystem,
    y0,
    times,
    params,
    sigma,
    *,
    t0: float = 0.0,
    sensitivity: str = "forward",
    method: str = "bdf",
    observables=None,
    noise: str = "additive",
    wrt: str = "params",
    **controls,
) -> FisherInformationResult:
    """Expected Fisher information ``F = sum_t (dh/dtheta)^T Sigma_t^{-1} (dh/dtheta)``.

    Parameters
    ----------
    system : OdeSystem
    y0 : array_like, shape (N,), or None
        Initial state (None: the system's ``y0(p)``, see
        :func:`pymc_odesens.solve_sensitivity`).
    times : array_like, shape (T,)
        Observation times.
    params : array_like, shape (P,)
    sigma : float or array_like, shape (M,) or (T, M)
        Standard deviation of the noise: one for all observations, one per
        observable, or one per observation. With multiplicative noise it is
        the standard deviation of ``log d``.
    t0 : float
    sensitivity : str
        How ``S`` is computed; any route of :func:`pymc_odesens.solve_sensitivity`
        (``"forward"``: exact forward sensitivities; the Peano-Baker
        approximations where available).
    method : {"bdf", "adams", "rk45", "ckrk"}
    observables : None, sequence, mapping or callable
        What is observed: None for all states, or see
        :func:`pymc_odesens.sensitivity.observables.resolve_observables`
        (state names or indices, names of JSON ``outputs``, expressions, a dict,
        or ``h(t, y, p)``). Their Jacobians ``h_y``, ``h_p`` are exact (sympy,
        compiled like the system's kernels).
    noise : {"additive", "multiplicative"}
        ``d = h + e`` (Gaussian, as ``pm.Normal(mu=h, sigma=sigma)``) or
        ``log d = log h + e`` (log-normal, as ``pm.LogNormal(mu=log(h), sigma=sigma)``;
        needs ``h > 0``).
    wrt : {"params", "y0", "both"}
        The parameters, the initial state, or both (parameters first).
    **controls
        Solver controls of :func:`pymc_odesens.solve_sensitivity`
        (``relative_tolerance``, ``absolute_tolerance``, ``max_num_steps``, ...).

    Returns
    -------
    FisherInformationResult
        ``.matrix`` is ``F`` (K, K); ``.columns`` names its rows and columns.

    Raises
    ------
    ValueError, TypeError
        Bad ``sigma`` shape or values, unknown ``noise``, observables or
        controls, and everything :func:`pymc_odesens.solve_sensitivity` checks;
        with multiplicative noise, an observable that is not positive.
    OdeSolverError
        The solve failed.
    """
    if noise not in NOISE_MODELS:
        raise ValueError(f"noise must be one of {NOISE_MODELS}, got {noise!r}")
    resolved: Observables = resolve_observables(system, observables)
    kernels = compile_observable_kernels(system, resolved.expressions)
    result = solve_sensitivity(
        system,
        y0,
        times,
        params,
        t0=t0,
        method=method,
        sensitivity=sensitivity,
        wrt=wrt,
        **_solver_controls(controls),
    )
    n_t = result.t.size
    m = len(resolved)
    weights = noise_weights(sigma, n_t, m)
    if wrt == "both":
        s = np.concatenate([result.S, result.S_y0], axis=2)
    else:
        s = result.S
    s = np.ascontiguousarray(s, dtype=float)
    n_param_columns = system.n_params if wrt in ("params", "both") else 0
    k = s.shape[2]
    p = np.ascontiguousarray(params, dtype=float).reshape(system.n_params)
    h = np.empty((n_t, m))
    dh = np.empty((n_t, m, k))
    fisher = np.empty((k, k))
    where = np.zeros(2, dtype=np.int64)
    # compiled (or loaded from numba's cache) at its first import: not at the package's
    from pymc_odesens.sensitivity.fisher_accumulation import (
        STATUS_NON_FINITE,
        STATUS_NON_POSITIVE,
        STATUS_OK,
        accumulate_fisher_information,
    )

    status = accumulate_fisher_information(
        kernels.value,
        kernels.jac_y,
        kernels.jac_p,
        np.ascontiguousarray(result.t, dtype=float),
        np.ascontiguousarray(result.y, dtype=float),
        s,
        n_param_columns,
        p,
        weights,
        noise == "multiplicative",
        h,
        dh,
        fisher,
        where,
    )
    if status != STATUS_OK:
        j, obs = int(where[0]), int(where[1])
        name = resolved.names[obs]
        if status == STATUS_NON_POSITIVE:
            raise ValueError(
                f"noise='multiplicative' needs positive observables; {name!r} is "
                f"{h[j, obs]:g} at t = {result.t[j]:g}"
            )
        if status == STATUS_NON_FINITE:
            raise ValueError(
                f"observable {name!r} or its derivative is not finite at t = {result.t[j]:g}"
            )
        raise RuntimeError(f"unexpected status {status} from accumulate_fisher_information")
    columns = []
    if n_param_columns:
        columns += list(system.params)
    if wrt in ("y0", "both"):
        columns += [f"y0[{s_}]" for s_ in system.states]
    return FisherInformationResult(
        matrix=fisher,
        columns=columns,
        observables=list(resolved.names),
        t=result.t,
        y=result.y,
        h=h,
        dh=dh,
        weights=weights,
        noise=noise,
        sensitivity=sensitivity,
        method=method,
        wrt=wrt,
        stats=result.stats,
    )
