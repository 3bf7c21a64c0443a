"""Damped Newton iteration for ``f(t, y, p) = 0`` on the bordered system (compiled).

The residual test is CVODES' and AMICI's: the weighted RMS norm of ``f``,
``sqrt(mean((f_i w_i)^2))`` with ``w_i = 1 / (atol_i + rtol_i |y_i|)``, below 1. (For a
vector of blocks, the state and its forward sensitivities, the largest norm of the blocks.)

Each iteration evaluates ``J_y``'s non-zeros (the generated ``jac_y_values`` kernel),
factorises the bordered Jacobian, dense or sparse
(:mod:`pymc_odesens.sensitivity.steady_state_linear`; a sparse factorisation reuses the
last pivot sequence while it stays acceptable) and solves for the full Newton step
``dy``. A trial ``y + gamma dy`` is accepted when its residual norm is smaller than the
current one (and, with ``nonnegative``, no state is below ``-atol``); otherwise ``gamma``
is divided by 4 (a damping step). After an accepted trial ``gamma`` doubles, up to 1. The
rows of the conservation laws are linear, so every iterate stays on ``C y = T``.

The iteration has converged at an iterate ``y`` whose residual passes the test *and* whose
Newton correction ``dy`` (from a regular Jacobian at ``y``) is within the tolerances
(weighted RMS norm below 1), or, when ``dy`` is not, no damped step along it decreases the
residual any more (the residual is at the level of rounding errors). The residual test
alone measures how fast the state moves, not how far it is from a steady state: it passes
for a state that grows without bound once ``rtol |y|`` is large (``y' = 1/y`` at
``y = 1e5``), and at a start with a singular Jacobian (``y' = k`` from a large ``y0``);
the correction is the distance to the steady state, to first order. The factors of the
Jacobian at the converged iterate are left in the factor storage (the caller's
reciprocal condition estimate uses them).

The iteration fails when ``gamma`` falls below :data:`MIN_DAMPING` while the residual test
does not hold, after ``max_iterations`` steps, or on a singular Jacobian.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from pymc_odesens.sensitivity import steady_state_status as ss
from pymc_odesens.sensitivity.steady_state_linear import (
    factor_bordered_jacobian,
    solve_bordered,
)
from pymc_odesens.solvers.error_norm import grouped_rms_norm, weighted_rms_norm

__all__ = ["residual_norm", "damped_newton", "MIN_DAMPING"]

MIN_DAMPING = 1e-8
"""Smallest damping factor tried (AMICI's default lower bound)."""
DAMPING_DECREASE = 0.25
DAMPING_INCREASE = 2.0


@njit(cache=True)
def residual_norm(rhs, t, z, p, unused, rtol, atol, n_state, f, weights):
    """``f <- rhs(t, z)`` and its weighted RMS norm (largest over blocks of ``n_state``).

    Infinite when ``f`` or ``z`` is not finite (an infinite state has zero weight: its
    ``f`` would pass any test).
    """
    n_total = z.size
    rhs(t, z.ctypes, p.ctypes, unused.ctypes, f.ctypes)
    for i in range(n_total):
        if not (np.isfinite(f[i]) and np.isfinite(z[i])):
            return math.inf
        weights[i] = 1.0 / (atol[i] + rtol[i] * abs(z[i]))
    return grouped_rms_norm(f, weights, n_state, n_total, n_total)


@njit(cache=True)
def damped_newton(
    rhs,
    jac,
    t,
    y,
    p,
    cons,
    dependent,
    totals,
    rtol,
    atol,
    max_iterations,
    nonnegative,
    structure,
    source,
    jac_work,
    ints,
    floats,
    values,
    scales,
    f,
    f_trial,
    weights,
    step,
    y_trial,
    stats,
):
    """Damped Newton from ``y`` (updated in place to the last accepted iterate).

    ``structure`` and ``source`` describe the bordered Jacobian
    (:func:`~pymc_odesens.sensitivity.steady_state_linear.bordered_structure`), ``ints`` and
    ``floats`` hold its factors, ``values`` its values; ``jac_work`` receives ``J_y``'s.

    Returns ``(outcome, residual norm at y, ints, floats)`` with outcome one of
    :mod:`~pymc_odesens.sensitivity.steady_state_status`'s ``NEWTON_*`` codes and the
    factors' storage to use from now on.
    """
    n = y.size
    unused = np.zeros(1)
    norm = residual_norm(rhs, t, y, p, unused, rtol, atol, n, f, weights)
    stats[ss.N_RHS] += 1
    if not math.isfinite(norm):
        return ss.NEWTON_NON_FINITE, norm, ints, floats
    gamma = 1.0
    for iteration in range(max_iterations + 1):
        jac(t, y.ctypes, p.ctypes, unused.ctypes, jac_work.ctypes)
        stats[ss.N_JAC] += 1
        stats[ss.N_LU] += 1
        ok, ints, floats = factor_bordered_jacobian(
            structure, source, jac_work, cons, ints, floats, values, scales
        )
        if not ok:
            stats[ss.N_NEWTON_ITERATIONS] += 1
            return ss.NEWTON_SINGULAR, norm, ints, floats
        for i in range(n):
            step[i] = -f[i]
        for r in range(dependent.size):
            drift = -totals[r]
            for j in range(n):
                drift += cons[r, j] * y[j]
            step[dependent[r]] = -drift
        solve_bordered(structure, ints, floats, scales, step, y_trial)
        # weights are those of y: the last residual evaluated is y's (a trial becomes y)
        converged = norm < 1.0
        if converged and weighted_rms_norm(step, weights, n) < 1.0:
            return ss.NEWTON_CONVERGED, norm, ints, floats
        if iteration == max_iterations:
            break
        stats[ss.N_NEWTON_ITERATIONS] += 1
        while True:
            admissible = True
            for i in range(n):
                y_trial[i] = y[i] + gamma * step[i]
                if nonnegative and y_trial[i] < -atol[i]:
                    admissible = False
            trial_norm = math.inf
            if admissible:
                trial_norm = residual_norm(
                    rhs, t, y_trial, p, unused, rtol, atol, n, f_trial, weights
                )
                stats[ss.N_RHS] += 1
            if trial_norm < norm:
                for i in range(n):
                    y[i] = y_trial[i]
                    f[i] = f_trial[i]
                norm = trial_norm
                gamma = min(1.0, DAMPING_INCREASE * gamma)
                break
            gamma *= DAMPING_DECREASE
            stats[ss.N_DAMPING_STEPS] += 1
            if gamma < MIN_DAMPING:
                if converged:
                    # no step decreases the residual any more: rounding errors; y's
                    # factors are still in the storage
                    return ss.NEWTON_CONVERGED, norm, ints, floats
                return ss.NEWTON_DAMPING_FAILED, norm, ints, floats
    return ss.NEWTON_MAX_ITERATIONS, norm, ints, floats
