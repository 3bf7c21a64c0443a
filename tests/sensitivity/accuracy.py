"""Error measures and finite-difference references used by the sensitivity tests.

Sensitivity columns differ by many orders of magnitude (pka: dy/dp_k from 1e-13 to 5e2;
robertson: dy/dk1 ~ 6, dy/dk2 ~ 4e-9), so one global ``max|err| / max|S|`` would hide
every column but the largest. Errors are therefore measured per column (one parameter
or one initial state), relative to that column's largest magnitude over all times and
states, and the worst column is reported.
"""

from __future__ import annotations

import numpy as np

from pymc_odesens import solve


def column_errors(S: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per column k: ``max_{t,i} |S - truth| / max_{t,i} |truth|``.

    Columns that are identically zero in the truth (pka's parameters 21-29, which the
    model's outputs do not depend on over [0, 600]) are measured in absolute terms
    against the overall scale of ``truth``.
    """
    err = np.abs(S - truth).max(axis=(0, 1))
    scale = np.abs(truth).max(axis=(0, 1))
    floor = 1e-12 * max(1.0, scale.max())
    return err / np.maximum(scale, floor)


def worst_column_error(S: np.ndarray, truth: np.ndarray) -> float:
    """Largest :func:`column_errors` over all columns."""
    return float(column_errors(S, truth).max())


def entry_excess(S: np.ndarray, truth: np.ndarray, relative: float) -> np.ndarray:
    """Per entry (state i, column k): ``max_t |S - truth| - relative * max_t |truth|``.

    What is left of the error once a relative allowance has been subtracted: the part
    that only an absolute tolerance can account for.
    """
    err = np.abs(S - truth).max(axis=0)
    return err - relative * np.abs(truth).max(axis=0)


def fd_params(system, y0, times, params, columns, *, t0=0.0, method="bdf", tol=1e-12):
    """Central differences of :func:`solve` w.r.t. ``params[k]`` for k in ``columns``.

    ``h = 1e-4 max(|p_k|, 1e-2)`` (as in shared/models' own checks): the truncation error
    is O(h^2) relative and the solver noise O(tol / h).
    Returns shape (T, N, len(columns)).
    """
    params = np.asarray(params, dtype=float)
    cols = []
    for k in columns:
        h = 1e-4 * max(abs(params[k]), 1e-2)
        up, down = params.copy(), params.copy()
        up[k] += h
        down[k] -= h
        kw = dict(t0=t0, method=method, relative_tolerance=tol, absolute_tolerance=tol * 1e-2)
        cols.append(
            (solve(system, y0, times, up, **kw).y - solve(system, y0, times, down, **kw).y)
            / (2 * h)
        )
    return np.stack(cols, axis=-1)


def fd_initial_state(system, y0, times, params, *, t0=0.0, method="bdf", tol=1e-12):
    """Central differences of :func:`solve` w.r.t. every ``y0[j]``: shape (T, N, N)."""
    y0 = np.asarray(y0, dtype=float)
    cols = []
    for j in range(y0.size):
        h = 1e-5 * max(abs(y0[j]), 1e-1)
        up, down = y0.copy(), y0.copy()
        up[j] += h
        down[j] -= h
        kw = dict(t0=t0, method=method, relative_tolerance=tol, absolute_tolerance=tol * 1e-2)
        cols.append(
            (solve(system, up, times, params, **kw).y - solve(system, down, times, params, **kw).y)
            / (2 * h)
        )
    return np.stack(cols, axis=-1)
