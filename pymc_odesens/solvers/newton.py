"""Newton corrector shared by ``bdf`` and ``adams``, with one LU for all blocks.

Both methods solve, at each step, ``y = y_pred + d`` with ``d = c f(t, y) - psi``
for given ``c`` (``h`` times the method's leading coefficient) and ``psi``. The
Newton matrix ``I - c J_y`` has size N whatever the number of blocks: for a
system made of B blocks of N components whose Jacobian is block diagonal with
the same ``J_y`` in every block (the state and its forward sensitivities), one
factorisation serves all B blocks, as in CVODES' simultaneous corrector.

The factorisation may be stale (computed for ``c_lu != c``); the correction is
then scaled by ``2 / (1 + c / c_lu)`` as CVODE does.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.dense_lu import lu_factor, lu_solve
from pymc_odesens.solvers.error_norm import weighted_rms_norm

__all__ = ["newton_corrector", "factor_newton_matrix", "NEWTON_MAX_ITERATIONS"]

NEWTON_MAX_ITERATIONS = 4

CONVERGED = 0
DIVERGED = 1
NON_FINITE = 2


@njit(cache=True)
def factor_newton_matrix(jac, c, lu, pivots, stats):
    """``lu <- LU(I - c J)``; returns False if singular."""
    n = jac.shape[0]
    for i in range(n):
        for j in range(n):
            lu[i, j] = -c * jac[i, j]
        lu[i, i] += 1.0
    stats[st.N_LU] += 1
    return lu_factor(lu, pivots)


@njit(cache=True)
def newton_corrector(
    rhs, p, v, t_new, y_pred, c, c_lu, psi, lu, pivots, weights, n_lu, n_err, tol, y, d, f, stats
):
    """Solve ``y = y_pred + d``, ``d = c f(t_new, y) - psi`` by modified Newton.

    The first ``n_lu`` components (blocks of ``lu.shape[0]``) are corrected
    with the factorised Newton matrix; the rest are quadratures with an
    identity Newton matrix. Returns ``(outcome, iterations)`` with outcome
    CONVERGED, DIVERGED or NON_FINITE; ``y`` and ``d`` hold the last iterate
    and ``f`` is overwritten (work space).
    """
    n = y.size
    n_block = lu.shape[0]
    blocks = n_lu // n_block
    for i in range(n):
        y[i] = y_pred[i]
        d[i] = 0.0
    scale = 1.0
    if c != c_lu:
        scale = 2.0 / (1.0 + c / c_lu)
    norm_old = -1.0
    rate = -1.0
    for k in range(NEWTON_MAX_ITERATIONS):
        rhs(t_new, y.ctypes, p.ctypes, v.ctypes, f.ctypes)
        stats[st.N_RHS] += 1
        stats[st.N_NEWTON_ITERS] += 1
        finite = True
        for i in range(n):
            if not np.isfinite(f[i]):
                finite = False
                break
        if not finite:
            return NON_FINITE, k + 1
        # residual into f: c f - psi - d (f is kept only through this residual)
        for i in range(n):
            f[i] = c * f[i] - psi[i] - d[i]
        for b in range(blocks):
            lu_solve(lu, pivots, f, b * n_block)
        if scale != 1.0:
            for i in range(n):
                f[i] *= scale
        norm = weighted_rms_norm(f, weights, n_err)
        if not math.isfinite(norm):
            # f was finite: the Newton matrix (J_y) is not; the iteration diverged
            return DIVERGED, k + 1
        if norm_old >= 0.0:
            rate = norm / norm_old
            if rate >= 1.0 or rate ** (NEWTON_MAX_ITERATIONS - k) / (1.0 - rate) * norm > tol:
                return DIVERGED, k + 1
        for i in range(n):
            y[i] += f[i]
            d[i] += f[i]
        if norm == 0.0 or (rate >= 0.0 and rate / (1.0 - rate) * norm < tol):
            return CONVERGED, k + 1
        norm_old = norm
    return DIVERGED, NEWTON_MAX_ITERATIONS
