"""One step of the Peano–Baker-series methods, and the matrix norms of PBSR's switch (numba).

Layouts (DESIGN.md): ``A = J_y`` (N x N, ``A[i, j] = df_i/dy_j``); the forcing
``B = J_p`` is held transposed as the generated kernel writes it, ``Bt[k, i] =
df_i/dp_k`` (P x N); the sensitivities likewise, ``St[k, i] = dy_i/dalpha_k``
(one column per row, contiguous). The first ``n_forced`` columns are parameter
columns (forced by ``B``); the rest (``dy/dy0``) are unforced.

PBS step (Algorithm 1, eq. 24), from ``t_a`` to ``t_b = t_a + dt``::

    I1 = dt/2 (A_a + A_b),   I2 = dt/2 A_b I1          (= dt^2/4 A_b (A_a + A_b))
    Phi_f = I + I1 + I2,     Phi_b = I - I1 + I2
    S_b = Phi_f (S_a + dt/2 (B_a + Phi_b B_b))

Cost: one N x N product for ``I2``, ``N nnz(B)`` for ``Phi_b B_b`` (the zeros of
``J_p``, most of it for reaction networks, are skipped) and ``N^2 (columns)``
for the product with ``Phi_f``.

Exp step (Algorithm 3, Corollary 1), exact for constant ``A``, ``B``::

    S_b = e^(dt A_a) S_a + dt phi_1(dt A_a) B_a

with ``e^Z`` and ``phi_1(Z)`` from :func:`~.matrix_exponential.expm_phi1` (no
inverse of ``A``, which conservation laws make singular).
"""

from __future__ import annotations

import math

from numba import njit

from pymc_odesens.sensitivity.matrix_exponential import (
    expm_phi1,
    matmul_transposed,
    transpose_into,
)

__all__ = [
    "NORM_SPECTRAL",
    "NORM_ONE",
    "NORM_INF",
    "NORM_FROBENIUS",
    "SPECTRAL_NORM_TOLERANCE",
    "pbs_step",
    "exp_step",
    "exp_factors",
    "exp_apply",
    "matrix_norm",
    "relative_change_below",
]

NORM_SPECTRAL, NORM_ONE, NORM_INF, NORM_FROBENIUS = 0, 1, 2, 3
SPECTRAL_NORM_TOLERANCE = 1e-6
SPECTRAL_NORM_MAX_ITERATIONS = 300

# work matrices of pbs_step / exp_step: indices into a (PBS_WORK_MATRICES, N, N) array
_I1, _I1T, _PHI_F, _PHI_BT, _TMP = 0, 1, 2, 3, 4
PBS_WORK_MATRICES = 5


@njit(cache=True)
def _forcing_product(bt, mt, scale, out, n_forced):
    """``out[k] = scale * M bt[k]`` for the first ``n_forced`` rows, skipping zeros of ``bt``.

    ``mt`` holds ``M^T`` so that each nonzero ``bt[k, j]`` adds a contiguous row.
    """
    n = mt.shape[0]
    for k in range(n_forced):
        for i in range(n):
            out[k, i] = 0.0
        for j in range(n):
            b = bt[k, j]
            if b != 0.0:
                b *= scale
                for i in range(n):
                    out[k, i] += b * mt[j, i]


@njit(cache=True)
def pbs_step(dt, a_a, a_b, bt_a, bt_b, st, n_forced, work, xt, out):
    """Advance ``st`` (columns x N) by one PBS step of length ``dt`` (in place).

    ``work`` is (PBS_WORK_MATRICES, N, N); ``xt`` and ``out`` are (columns, N) scratch.
    Returns the number of N x N products (1).
    """
    n = a_a.shape[0]
    n_cols = st.shape[0]
    half = 0.5 * dt
    i1 = work[_I1]
    i1t = work[_I1T]
    phi_f = work[_PHI_F]
    phi_bt = work[_PHI_BT]
    i2 = work[_TMP]
    for i in range(n):
        for j in range(n):
            i1[i, j] = half * (a_a[i, j] + a_b[i, j])
    transpose_into(i1, i1t)
    matmul_transposed(a_b, i1t, i2)  # A_b I1
    for i in range(n):
        for j in range(n):
            i2[i, j] *= half
    for i in range(n):
        for j in range(n):
            phi_f[i, j] = i1[i, j] + i2[i, j]
            phi_bt[j, i] = i2[i, j] - i1[i, j]
        phi_f[i, i] += 1.0
        phi_bt[i, i] += 1.0
    # x = S_a + dt/2 (B_a + Phi_b B_b) for the forced columns, S_a for the others
    _forcing_product(bt_b, phi_bt, 1.0, xt, n_forced)
    for k in range(n_forced):
        for i in range(n):
            xt[k, i] = st[k, i] + half * (bt_a[k, i] + xt[k, i])
    for k in range(n_forced, n_cols):
        for i in range(n):
            xt[k, i] = st[k, i]
    matmul_transposed(xt, phi_f, out)  # out[k] = Phi_f x[k]
    for k in range(n_cols):
        for i in range(n):
            st[k, i] = out[k, i]
    return 1


@njit(cache=True)
def exp_factors(dt, a_a, z, e, phi, expm_work):
    """``e = e^(dt A)``, ``phi = phi_1(dt A)``; returns the number of N x N products."""
    n = a_a.shape[0]
    for i in range(n):
        for j in range(n):
            z[i, j] = dt * a_a[i, j]
    return expm_phi1(z, e, phi, expm_work)


@njit(cache=True)
def exp_apply(dt, e, phi, bt_a, st, n_forced, phit, gt, out):
    """``S <- e S + dt phi B`` with factors from :func:`exp_factors` (in place)."""
    n = e.shape[0]
    n_cols = st.shape[0]
    transpose_into(phi, phit)
    _forcing_product(bt_a, phit, dt, gt, n_forced)
    matmul_transposed(st, e, out)  # out[k] = e^(dt A) S[k]
    for k in range(n_forced):
        for i in range(n):
            st[k, i] = out[k, i] + gt[k, i]
    for k in range(n_forced, n_cols):
        for i in range(n):
            st[k, i] = out[k, i]


@njit(cache=True)
def exp_step(dt, a_a, bt_a, st, n_forced, z, e, phi, expm_work, phit, gt, out):
    """Advance ``st`` by one Exp step ``S <- e^(dt A) S + dt phi_1(dt A) B`` (in place).

    ``z``, ``e``, ``phi``, ``phit`` are N x N scratch, ``expm_work`` the work of
    :func:`expm_phi1`, ``gt`` and ``out`` (columns, N) scratch. Returns the number
    of N x N products.
    """
    products = exp_factors(dt, a_a, z, e, phi, expm_work)
    exp_apply(dt, e, phi, bt_a, st, n_forced, phit, gt, out)
    return products


@njit(cache=True)
def _frobenius(m):
    s = 0.0
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            s += m[i, j] * m[i, j]
    return math.sqrt(s)


@njit(cache=True)
def _spectral_norm(m, v, u):
    """Largest singular value of ``m`` (r x c) by power iteration on ``m^T m``.

    ``v`` (c,) is the start vector and returns the converged right singular
    vector (a warm start for a matrix that changes slowly); ``u`` (r,) scratch.
    The estimate ``sqrt(||m^T m v||)`` (unit v) increases to ``sigma_max``; it
    stops at a relative change below SPECTRAL_NORM_TOLERANCE.
    """
    r, c = m.shape
    nv = 0.0
    for j in range(c):
        nv += v[j] * v[j]
    nv = math.sqrt(nv)
    if not (nv > 0.0) or not math.isfinite(nv):
        for j in range(c):
            v[j] = 1.0 / math.sqrt(c)
    else:
        for j in range(c):
            v[j] /= nv
    estimate = 0.0
    restarted = False
    for _ in range(SPECTRAL_NORM_MAX_ITERATIONS):
        nu = 0.0
        for i in range(r):
            s = 0.0
            for j in range(c):
                s += m[i, j] * v[j]
            u[i] = s
            nu += s * s
        if nu == 0.0:
            if restarted:
                return 0.0
            # v lies in the null space: restart from the largest row (m m_i^T != 0 unless m = 0)
            best = -1.0
            row = 0
            for i in range(r):
                s = 0.0
                for j in range(c):
                    s += m[i, j] * m[i, j]
                if s > best:
                    best = s
                    row = i
            if best <= 0.0 or not math.isfinite(best):
                return 0.0 if best == 0.0 else math.nan
            best = math.sqrt(best)
            for j in range(c):
                v[j] = m[row, j] / best
            restarted = True
            continue
        nw = 0.0
        for j in range(c):
            s = 0.0
            for i in range(r):
                s += m[i, j] * u[i]
            v[j] = s
            nw += s * s
        nw = math.sqrt(nw)
        if not math.isfinite(nw):
            return math.nan
        for j in range(c):
            v[j] /= nw
        new = math.sqrt(nw)
        if abs(new - estimate) <= SPECTRAL_NORM_TOLERANCE * new:
            return new
        estimate = new
    return estimate


@njit(cache=True)
def matrix_norm(m, kind, stored_transposed, v, u):
    """Norm of the matrix ``M`` held in ``m`` (``m = M^T`` if ``stored_transposed``).

    ``kind``: NORM_SPECTRAL (power iteration, warm-started from ``v``), NORM_ONE,
    NORM_INF or NORM_FROBENIUS.
    """
    if kind == NORM_SPECTRAL:
        return _spectral_norm(m, v, u)
    if kind == NORM_FROBENIUS:
        return _frobenius(m)
    r, c = m.shape
    column_sums = (kind == NORM_ONE) != stored_transposed
    best = 0.0
    if column_sums:
        for j in range(c):
            s = 0.0
            for i in range(r):
                s += abs(m[i, j])
            if s > best or s != s:
                best = s
    else:
        for i in range(r):
            s = 0.0
            for j in range(c):
                s += abs(m[i, j])
            if s > best or s != s:
                best = s
    return best


@njit(cache=True)
def relative_change_below(m_new, m_old, norm_old, eps, kind, stored_transposed, diff, v, u):
    """Whether ``||M_new - M_old|| < eps ||M_old||`` (``diff`` scratch, same shape).

    For the spectral norm the Frobenius norm decides it when it can
    (``||D||_F / sqrt(rank) <= ||D||_2 <= ||D||_F``); power iteration otherwise.
    A zero ``M_old`` counts as constant only if ``M_new`` is zero too.
    """
    r, c = m_new.shape
    for i in range(r):
        for j in range(c):
            diff[i, j] = m_new[i, j] - m_old[i, j]
    bound = eps * norm_old
    if kind == NORM_SPECTRAL:
        fro = _frobenius(diff)
        if fro == 0.0:
            return True
        if not math.isfinite(fro):
            return False
        if fro < bound:
            return True
        if fro / math.sqrt(min(r, c)) >= bound:
            return False
        return _spectral_norm(diff, v, u) < bound
    d = matrix_norm(diff, kind, stored_transposed, v, u)
    if d == 0.0:
        return True
    return d < bound
