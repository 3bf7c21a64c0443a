"""Newton corrector shared by ``bdf`` and ``adams``, with one LU for all blocks.

Both methods solve, at each step, ``y = y_pred + d`` with ``d = c f(t, y) - psi``
for given ``c`` (``h`` times the method's leading coefficient) and ``psi``. The
Newton matrix ``I - c J_y`` has size N whatever the number of blocks: for a
system made of B blocks of N components whose Jacobian is block diagonal with
the same ``J_y`` in every block (the state and its forward sensitivities), one
factorisation serves all B blocks, as in CVODES' simultaneous corrector.

The factorisation may be stale (computed for ``c_lu != c``); the correction is
then scaled by ``2 / (1 + c / c_lu)`` as CVODE does.

Convergence is judged as in CVODE (``cvNlsConvTest``): the contraction rate
estimate ``crate = max(0.3 crate, ||d_m|| / ||d_{m-1}||)`` persists across
steps (reset to 1 with each new factorisation), the iteration has converged
when ``||d_m|| min(1, crate) <= tol``, and it diverges only when a correction
more than doubles. A rate taken from the first two corrections alone (scipy's
test) misjudges the simultaneous corrector: its block-diagonal Newton matrix
leaves out ``d(J_y S + J_p)/dy``, so the sensitivity corrections lag the
state's by one iteration and their second correction is no contraction.
Norms are CVODES' largest weighted RMS norm over the blocks
(:func:`~pymc_odesens.solvers.error_norm.grouped_rms_norm`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.error_norm import grouped_rms_norm
from pymc_odesens.solvers.newton_matrix import solve_newton_blocks

__all__ = ["newton_corrector", "NEWTON_MAX_ITERATIONS"]

NEWTON_MAX_ITERATIONS = 4
RATE_DECAY = 0.3  # CVODE's CRDOWN
DIVERGENCE_RATIO = 2.0  # CVODE's RDIV

CONVERGED = 0
DIVERGED = 1
NON_FINITE = 2


@njit(cache=True)
def newton_corrector(
    rhs,
    p,
    v,
    t_new,
    y_pred,
    c,
    c_lu,
    psi,
    structure,
    factor_ints,
    factor_floats,
    weights,
    n_lu,
    n_err,
    tol,
    rate,
    y,
    d,
    f,
    block_work,
    stats,
):
    """Solve ``y = y_pred + d``, ``d = c f(t_new, y) - psi`` by modified Newton.

    The first ``n_lu`` components (blocks of ``N = block_work.shape[0]``) are corrected
    with the factorised Newton matrix; the rest are quadratures with an
    identity Newton matrix: they are updated once more from the converged
    iterate (otherwise they would lag the blocks by one iteration).
    ``rate[0]`` is CVODE's convergence-rate estimate, read and updated in
    place (the caller resets it to 1 after a new factorisation).
    ``structure``, ``factor_ints`` and ``factor_floats`` hold the factorised Newton matrix
    (:mod:`pymc_odesens.solvers.newton_matrix`); ``block_work`` is work space of at
    least ``(N, n_lu // N)`` for the blocked triangular solves.

    Returns ``(outcome, iterations)`` with outcome CONVERGED (the iterate is
    finite in every component), DIVERGED or NON_FINITE; ``y`` and ``d`` hold the
    last iterate and ``f`` is overwritten (work space).
    """
    n = y.size
    n_block = block_work.shape[0]
    blocks = n_lu // n_block
    for i in range(n):
        y[i] = y_pred[i]
        d[i] = 0.0
    scale = 1.0
    if c != c_lu:
        scale = 2.0 / (1.0 + c / c_lu)
    norm_old = 0.0
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
        solve_newton_blocks(structure, factor_ints, factor_floats, f, blocks, block_work)
        if scale != 1.0:
            for i in range(n):
                f[i] *= scale
        norm = grouped_rms_norm(f, weights, n_block, n_lu, n_err)
        if not math.isfinite(norm):
            # f was finite: the Newton matrix (J_y) is not; the iteration diverged
            return DIVERGED, k + 1
        if k > 0:
            rate[0] = max(RATE_DECAY * rate[0], norm / norm_old)
        for i in range(n):
            y[i] += f[i]
            d[i] += f[i]
        if norm * min(1.0, rate[0]) <= tol:
            if n_lu < n:
                # quadratures were corrected with f at the previous iterate: one more
                # evaluation at the converged one, as CVODES does for its quadratures
                rhs(t_new, y.ctypes, p.ctypes, v.ctypes, f.ctypes)
                stats[st.N_RHS] += 1
                for i in range(n_lu, n):
                    if not np.isfinite(f[i]):
                        return NON_FINITE, k + 1
                for i in range(n_lu, n):
                    correction = c * f[i] - psi[i] - d[i]
                    y[i] += correction
                    d[i] += correction
            return CONVERGED, k + 1
        if k > 0 and norm > DIVERGENCE_RATIO * norm_old:
            return DIVERGED, k + 1
        norm_old = norm
    return DIVERGED, NEWTON_MAX_ITERATIONS
