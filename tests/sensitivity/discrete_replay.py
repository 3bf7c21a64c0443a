"""A plain-Python replay of a logged ``bdf`` / ``adams`` run: the discrete map
``(y0, p) -> y(times)`` whose exact derivative the discrete adjoint computes.

Same logged step sizes and orders, the solver's own table operations, and a full
Newton iteration to rounding level at every step, so that finite differences of
this map measure the adjoint's exactness, free of step-size control.
"""

from __future__ import annotations

import numpy as np

from pymc_odesens.solvers.difference_table import change_step_size
from pymc_odesens.solvers.multistep import (
    BDF,
    OP_RESAMPLE,
    OP_STEP,
    _accept,
    _dense_output,
    _initialise,
    _predict,
    table_rows,
)


def replay_outputs(checkpoints, y0, params) -> np.ndarray:
    """The logged run's outputs for another ``y0`` and ``params`` (same steps)."""
    problem = checkpoints.problem
    kernels = problem.kernels
    family = BDF if checkpoints.controls.forward_method == "bdf" else 1
    log = checkpoints.step_log
    times = checkpoints.t
    y0 = np.array(y0, dtype=float)
    params = np.array(params, dtype=float)
    n = y0.size
    rows = table_rows(family)
    table = np.zeros((rows, n))
    work = [np.empty((rows, rows)) for _ in range(3)] + [np.empty((rows, n))]
    t = float(log[0, 3])
    _initialise(family, table, y0, kernels.evaluate("rhs", t, y0, params), float(log[0, 2]))
    y_cur = y0.copy()
    out = np.empty((times.size, n))
    k_out = 0
    while k_out < times.size and times[k_out] <= t:
        out[k_out] = y0
        k_out += 1
    y_pred, psi = np.empty(n), np.empty(n)
    poly, dense, scratch = np.zeros(rows + 2), np.empty(n), np.empty(n)
    for kind, order, value, t_new in log[1:]:
        order = int(order)
        if kind == OP_RESAMPLE:
            change_step_size(table, order, value, *work)
            continue
        assert kind == OP_STEP
        h = value
        c = _predict(family, table, order, h, y_cur, y_pred, psi)
        y = y_pred.copy()
        d = np.zeros(n)
        for _ in range(50):
            residual = c * kernels.evaluate("rhs", t_new, y, params) - psi - d
            jac = kernels.evaluate("jac_y", t_new, y, params)
            delta = np.linalg.solve(np.eye(n) - c * jac, residual)
            y += delta
            d += delta
            if np.abs(delta).max() <= 1e-15 * (1.0 + np.abs(y).max()):
                break
        _accept(family, table, order, d, c, scratch)
        y_cur = y
        while k_out < times.size and times[k_out] <= t_new:
            if times[k_out] == t_new:
                out[k_out] = y
            else:
                _dense_output(family, table, order, t_new, h, y, times[k_out], poly, dense)
                out[k_out] = dense
            k_out += 1
        t = t_new
    return out
