"""The linear algebra of steady states: the bordered Jacobian, its factors and solves.

A system with M linear conservation laws ``C y = T`` has a singular ``J_y``. Its steady
state solves ``G(y) = 0`` with ``G_i = f_i`` for the states ``i`` not in ``dependent`` and
``G_{dependent[r]} = C_r y - T_r``: the rows of ``f`` that the laws make redundant
(``C f = 0`` identically) are replaced by the laws. The Jacobian of ``G`` is ``J_y`` with
the rows ``dependent`` replaced by ``C``, non-singular at a regular steady state; it serves
Newton's method, the implicit-function sensitivities and their adjoint.

Its pattern (``J_y``'s structural non-zeros off the dependent rows, ``C``'s non-zeros on
them) is known once the laws are: :func:`bordered_structure` builds, once per system, the
structure of :mod:`pymc_odesens.solvers.newton_matrix` for it, dense or sparse by the
control ``linear_solver`` and the same ``"auto"`` rule as the integrators' Newton
matrices (the sparse analysis is stored with the system's kernels). The values come from
the ``jac_y_values`` kernel and ``C`` (``source`` says which); no ``N x N`` array exists
on the sparse path.

The matrix is equilibrated (rows, then columns scaled by their largest entry, as LAPACK's
``dgeequ``) before it is factorised, so that pivoting and the reciprocal condition
estimate do not depend on the units of states and rates. Every solve takes the scales into
account: with ``A_hat = R A K``, ``A x = b`` is ``x = K A_hat^-1 R b`` and ``A^T x = b`` is
``x = R A_hat^-T K b``.
"""

from __future__ import annotations

import hashlib

import numpy as np
from numba import njit

from pymc_odesens.solvers.newton_matrix import (
    factor_matrix,
    new_newton_factor,
    pattern_structure,
    solve_newton,
    solve_newton_transpose,
    structure_pattern,
    structure_size,
    structure_states,
)

__all__ = [
    "MIN_RECIPROCAL_CONDITION",
    "bordered_pattern",
    "bordered_structure",
    "factor_bordered_jacobian",
    "factor_steady_state_jacobian",
    "reciprocal_condition",
    "solve_bordered",
    "solve_bordered_transpose",
]

MIN_RECIPROCAL_CONDITION = 1e-13
"""Below this estimate of ``1 / cond_1`` of the equilibrated bordered Jacobian, a steady
state counts as singular: its sensitivities are not defined by the implicit function
theorem (a rank-deficient matrix gives about 1e-16)."""


def bordered_pattern(jac_rows, jac_cols, cons: np.ndarray, dependent: np.ndarray):
    """The pattern of the bordered Jacobian and where its values come from.

    Parameters
    ----------
    jac_rows, jac_cols : array_like of int
        ``J_y``'s structural non-zeros (the order of the ``jac_y_values`` kernel).
    cons : numpy.ndarray, shape (M, N)
    dependent : numpy.ndarray of int, shape (M,)

    Returns
    -------
    rows, cols : numpy.ndarray of int64
        The entries: ``J_y``'s off the dependent rows, then ``C``'s non-zeros.
    source : numpy.ndarray of int64
        For each entry, the index of its value among ``J_y``'s values (``>= 0``), or
        ``-1 - (r N + j)`` for the entry ``C[r, j]``.
    """
    jac_rows = np.asarray(jac_rows, dtype=np.int64)
    jac_cols = np.asarray(jac_cols, dtype=np.int64)
    n = cons.shape[1]
    kept = ~np.isin(jac_rows, dependent)
    law, column = np.nonzero(cons)
    rows = np.concatenate((jac_rows[kept], np.asarray(dependent, np.int64)[law]))
    cols = np.concatenate((jac_cols[kept], column.astype(np.int64)))
    source = np.concatenate((np.flatnonzero(kept), -1 - (law * n + column))).astype(np.int64)
    return rows, cols, source


def bordered_structure(kernels, cons: np.ndarray, dependent: np.ndarray, linear_solver: str):
    """``(structure, source)`` of the bordered Jacobians of a system (see the module
    docstring): the :mod:`~pymc_odesens.solvers.newton_matrix` structure chosen by
    ``linear_solver`` and the ``source`` of :func:`bordered_pattern`."""
    rows, cols, source = bordered_pattern(*kernels.jacobian_pattern, cons, dependent)
    digest = hashlib.sha256(
        np.ascontiguousarray(dependent, np.int64).tobytes() + (cons != 0).tobytes()
    ).hexdigest()[:16]
    structure = pattern_structure(kernels, f"bordered_{digest}", rows, cols, linear_solver)
    return structure, source


@njit(cache=True)
def factor_bordered_jacobian(structure, source, jac_values, cons, ints, floats, values, scales):
    """Assemble, equilibrate and factorise the bordered Jacobian.

    Parameters
    ----------
    structure, source : from :func:`bordered_structure`
    jac_values : ``J_y``'s values (the ``jac_y_values`` kernel's output)
    cons : (M, N) conservation laws ``C``
    ints, floats : the storage of the factors (``newton_matrix.new_newton_factor``)
    values : (structure_size(structure),) work: the equilibrated matrix's values
    scales : (2N + 1,) out: row scales ``R``, column scales ``K``, then ``||A_hat||_1``

    Returns ``(ok, ints, floats)``: ``ok`` is False when the matrix has a zero or
    non-finite row, a zero column or no acceptable pivot (singular); ``ints`` and
    ``floats`` are the storage to use from now on.
    """
    n = structure_states(structure)
    rows, cols = structure_pattern(structure)
    n_cols = cons.shape[1]
    for i in range(2 * n + 1):
        scales[i] = 0.0
    for e in range(rows.size):
        s = source[e]
        if s >= 0:
            v = jac_values[s]
        else:
            k = -1 - s
            v = cons[k // n_cols, k % n_cols]
        if not np.isfinite(v):
            return False, ints, floats
        values[e] = v
        scales[rows[e]] = max(scales[rows[e]], abs(v))
    for i in range(n):
        largest = scales[i]
        if not (largest > 0.0):
            return False, ints, floats
        scales[i] = 1.0 / largest
    for e in range(rows.size):
        values[e] *= scales[rows[e]]
        scales[n + cols[e]] = max(scales[n + cols[e]], abs(values[e]))
    for j in range(n):
        if not (scales[n + j] > 0.0):
            return False, ints, floats
        scales[n + j] = 1.0 / scales[n + j]
    column_sums = np.zeros(n)
    for e in range(rows.size):
        values[e] *= scales[n + cols[e]]
        column_sums[cols[e]] += abs(values[e])
    scales[2 * n] = column_sums.max() if n > 0 else 0.0
    return factor_matrix(structure, ints, floats, values)


@njit(cache=True)
def factor_steady_state_jacobian(jac_values, t, y, p, cons, structure, source, n_jac):
    """``J_y`` at ``(t, y, p)`` from the ``jac_y_values`` kernel (``n_jac`` values), then
    :func:`factor_bordered_jacobian` into new storage.

    Returns ``(ok, ints, floats, scales)``.
    """
    n = y.size
    unused = np.zeros(1)
    jac_work = np.zeros(max(n_jac, 1))
    values = np.zeros(max(structure_size(structure), 1))
    scales = np.zeros(2 * n + 1)
    ints, floats = new_newton_factor(structure)
    jac_values(t, y.ctypes, p.ctypes, unused.ctypes, jac_work.ctypes)
    ok, ints, floats = factor_bordered_jacobian(
        structure, source, jac_work, cons, ints, floats, values, scales
    )
    return ok, ints, floats, scales


@njit(cache=True)
def solve_bordered(structure, ints, floats, scales, b, work):
    """Solve ``A x = b`` in place (``A`` factorised by :func:`factor_bordered_jacobian`;
    ``work``: N)."""
    n = b.size
    for i in range(n):
        b[i] *= scales[i]
    solve_newton(structure, ints, floats, b, work)
    for j in range(n):
        b[j] *= scales[n + j]


@njit(cache=True)
def solve_bordered_transpose(structure, ints, floats, scales, b, work):
    """Solve ``A^T x = b`` in place (``work``: N)."""
    n = b.size
    for j in range(n):
        b[j] *= scales[n + j]
    solve_newton_transpose(structure, ints, floats, b, work)
    for i in range(n):
        b[i] *= scales[i]


@njit(cache=True)
def reciprocal_condition(structure, ints, floats, scales, x, y, z, work):
    """Estimate of ``1 / (||A_hat||_1 ||A_hat^-1||_1)`` for the equilibrated factors.

    Hager's (1984) estimate of ``||A_hat^-1||_1`` from a few solves with the factors
    (``||A_hat||_1`` was stored in ``scales[2N]`` by :func:`factor_bordered_jacobian`);
    ``x``, ``y``, ``z`` and ``work`` are work vectors of length N.
    """
    n = x.size
    norm_one = scales[2 * n]
    if n == 0:
        return 1.0
    for i in range(n):
        x[i] = 1.0 / n
    estimate = 0.0
    for _ in range(5):
        for i in range(n):
            y[i] = x[i]
        solve_newton(structure, ints, floats, y, work)
        total = 0.0
        for i in range(n):
            total += abs(y[i])
        if not (total < float("inf")):
            return 0.0
        if total <= estimate:
            break
        estimate = total
        for i in range(n):
            z[i] = 1.0 if y[i] >= 0.0 else -1.0
        solve_newton_transpose(structure, ints, floats, z, work)
        best, index, dot = -1.0, 0, 0.0
        for i in range(n):
            dot += z[i] * x[i]
            if abs(z[i]) > best:
                best, index = abs(z[i]), i
        if best <= dot:
            break
        for i in range(n):
            x[i] = 0.0
        x[index] = 1.0
    if estimate == 0.0:
        return 0.0
    return 1.0 / (norm_one * estimate)
