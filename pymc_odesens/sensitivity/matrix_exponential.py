"""The matrix exponential ``e^Z`` together with ``phi_1(Z)``, without inverting ``Z`` (numba).

``phi_1(Z) = sum_k Z^k / (k+1)! = int_0^1 e^(sZ) ds``, so that for constant ``A``
and ``B`` the exact solution of ``S' = A S + B`` over a step ``h`` is
``S(h) = e^(hA) S(0) + h phi_1(hA) B``: this is the top-right block of Van Loan's
augmented exponential ``exp([[hA, hB], [0, 0]])``, obtained here without forming
the augmented matrix and without ``A^{-1}`` (a Jacobian with conservation laws is
singular).

Method: scaling and squaring of a truncated Taylor series of ``phi_1``.
``Y = Z / 2^s``; ``phi_1(Y)`` is the degree-``m`` Taylor polynomial evaluated by
Paterson and Stockmeyer's scheme (``q - 1`` products for the powers
``Y^2 .. Y^q`` and ``ceil((m+1)/q) - 1`` Horner products in ``Y^q``),
``e^Y = I + Y phi_1(Y)`` (one product), and ``s`` doublings

    phi_1(2Y) = phi_1(Y) (e^Y + I) / 2,    e^(2Y) = e^Y e^Y

(two products each; the matrices commute). ``(m, s)`` minimise the number of
products subject to the truncation bound
``sum_{k>m} alpha^k / (k+1)! <= 2^-53`` (unit roundoff), from a table of
degrees whose Paterson–Stockmeyer cost steps by one product. ``alpha`` is
``||Z||_1 / 2^s``, or, when the degree needs ``Y^2`` and ``Y^3`` anyway,
``max(||Z^2||^(1/2), ||Z^3||^(1/3)) / 2^s`` (Al-Mohy and Higham 2009,
Theorem 4.2: the remainder's coefficients are non-negative), which is smaller
for non-normal matrices such as stiff Jacobians and saves squarings.

Every product is written as ``C = A B^T`` over contiguous rows (dot products
that vectorise), with ``B^T`` formed once per factor. All work arrays come from
the caller: nothing is allocated.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = [
    "EXPM_WORK_MATRICES",
    "TAYLOR_DEGREES",
    "TAYLOR_THETA",
    "expm_phi1",
    "expm_and_phi1",
    "matmul_transposed",
    "transpose_into",
    "one_norm",
]

_FASTMATH = {"reassoc", "contract", "nsz"}  # vectorised reductions, NaN/inf semantics kept
UNIT_ROUNDOFF = 2.0**-53


def _theta(m: int) -> float:
    """Largest ``x`` with ``sum_{k>m} x^k/(k+1)! <= u`` (bisection on the tail bound)."""

    def tail(x: float) -> float:
        term = x ** (m + 1) / math.factorial(m + 2)
        total = 0.0
        k = m + 1
        while term > 1e-40 * max(total, 1e-300) and k < m + 200:
            total += term
            k += 1
            term *= x / (k + 1)
        return total

    lo, hi = 0.0, 64.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if tail(mid) <= UNIT_ROUNDOFF:
            lo = mid
        else:
            hi = mid
    return lo


def _ps_block(m: int) -> tuple[int, int]:
    """Paterson–Stockmeyer block size q and product count for degree m (with e^Y = I + Y phi)."""
    best = None
    for q in range(1, m + 2):
        r = -(-(m + 1) // q)
        cost = (q - 1) + (r - 1) + 1
        if best is None or cost < best[1]:
            best = (q, cost)
    return best


# Degrees at which the Paterson–Stockmeyer cost rises by one product (largest degree per cost).
TAYLOR_DEGREES = np.array([1, 2, 4, 6, 9, 12, 16, 20, 25, 30, 36], dtype=np.int64)
"""Taylor degrees ``m`` of ``phi_1`` considered (each the largest of its product count)."""
TAYLOR_BLOCK = np.array([_ps_block(int(m))[0] for m in TAYLOR_DEGREES], dtype=np.int64)
TAYLOR_COST = np.array([_ps_block(int(m))[1] for m in TAYLOR_DEGREES], dtype=np.int64)
TAYLOR_THETA = np.array([_theta(int(m)) for m in TAYLOR_DEGREES])
"""``theta_m``: degree-``m`` Taylor is accurate to unit roundoff for ``||Y||_1 <= theta_m``."""
TAYLOR_LOG2_THETA = np.log2(TAYLOR_THETA)
MAX_BLOCK = int(TAYLOR_BLOCK.max())
_INV_FACTORIAL_SHIFTED = np.array([1.0 / math.factorial(k + 1) for k in range(64)])

EXPM_WORK_MATRICES = MAX_BLOCK + 5
"""Number of N x N work matrices :func:`expm_phi1` needs (``work`` has shape (this, N, N))."""


BLAS_MIN_MULTIPLICATIONS = 12000
"""Products with at least this many multiply-adds go to BLAS (``np.dot`` into ``c``, no
allocation); smaller ones to the loop below, which beats BLAS's call overhead there
(measured, best of 15: 11 x 11, 0.18 us against 0.28 us; 21 x 21, 0.65 us against 0.77 us;
59 x 21 by 21 x 21, 1.83 us against 1.72 us)."""


@njit(cache=True, fastmath=_FASTMATH)
def matmul_transposed(a, bt, c):
    """``c = a @ bt.T`` for C-contiguous ``a`` (n x k), ``bt`` (m x k); ``c`` (n x m) distinct.

    Below :data:`BLAS_MIN_MULTIPLICATIONS`: four dot products at a time (one pass over a
    row of ``a`` for four rows of ``bt``; 30 % faster than one at a time at 21 x 21).
    """
    n, k = a.shape
    m = bt.shape[0]
    if n * m * k >= BLAS_MIN_MULTIPLICATIONS:
        np.dot(a, bt.T, c)
        return
    m4 = m - m % 4
    for i in range(n):
        for j in range(0, m4, 4):
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            for l in range(k):  # noqa: E741
                x = a[i, l]
                s0 += x * bt[j, l]
                s1 += x * bt[j + 1, l]
                s2 += x * bt[j + 2, l]
                s3 += x * bt[j + 3, l]
            c[i, j] = s0
            c[i, j + 1] = s1
            c[i, j + 2] = s2
            c[i, j + 3] = s3
        for j in range(m4, m):
            s = 0.0
            for l in range(k):  # noqa: E741
                s += a[i, l] * bt[j, l]
            c[i, j] = s


@njit(cache=True)
def transpose_into(a, out):
    """``out = a.T`` (square or not; ``out`` distinct)."""
    n, m = a.shape
    for i in range(n):
        for j in range(m):
            out[j, i] = a[i, j]


@njit(cache=True)
def one_norm(a):
    """``||a||_1``: the largest absolute column sum."""
    n, m = a.shape
    best = 0.0
    for j in range(m):
        s = 0.0
        for i in range(n):
            s += abs(a[i, j])
        if s > best or s != s:  # NaN propagates
            best = s
    return best


@njit(cache=True)
def _choose_degree(norm):
    """Index into the Taylor table and number of squarings minimising the product count."""
    best_index = 0
    best_s = 0
    best_cost = -1
    log2_norm = math.log2(norm) if norm > 0.0 else -math.inf
    for idx in range(TAYLOR_DEGREES.size):
        theta = TAYLOR_THETA[idx]
        s = 0
        if norm > theta:
            s = max(int(math.ceil(log2_norm - TAYLOR_LOG2_THETA[idx])), 0)
            # guard the rounding of log2 at exact powers of two
            while norm / 2.0**s > theta:
                s += 1
        cost = TAYLOR_COST[idx] + 2 * s
        if best_cost < 0 or cost < best_cost:
            best_cost = cost
            best_index = idx
            best_s = s
    return best_index, best_s


@njit(cache=True)
def expm_phi1(z, e, phi, work):
    """``e = exp(z)``, ``phi = phi_1(z)`` for a square C-contiguous ``z`` (not modified).

    Parameters
    ----------
    z : (N, N) float64
    e, phi : (N, N) float64, outputs (distinct from ``z`` and from each other)
    work : (EXPM_WORK_MATRICES, N, N) float64 scratch

    Returns
    -------
    int
        The number of N x N matrix products used (for statistics). A
        non-finite ``z`` gives non-finite outputs.
    """
    n = z.shape[0]
    norm = one_norm(z)
    if not np.isfinite(norm):
        for i in range(n):
            for j in range(n):
                e[i, j] = np.nan
                phi[i, j] = np.nan
        return 0
    idx, s = _choose_degree(norm)
    # work layout: [0 .. MAX_BLOCK-1] powers Y^1 .. Y^q; then Y^T, (Y^q)^T, acc, tmp, phi^T
    powers = work
    yt = work[MAX_BLOCK]
    yqt = work[MAX_BLOCK + 1]
    acc = work[MAX_BLOCK + 2]
    tmp = work[MAX_BLOCK + 3]
    phit = work[MAX_BLOCK + 4]
    y1 = powers[0]
    products = 0
    have = 1  # powers Z^1 .. Z^have are in place (unscaled)
    for i in range(n):
        for j in range(n):
            y1[i, j] = z[i, j]
    if TAYLOR_BLOCK[idx] >= 3:
        # Z^2 and Z^3 are needed anyway: use the sharper bound alpha = max(d_2, d_3)
        transpose_into(y1, yt)
        matmul_transposed(y1, yt, powers[1])
        matmul_transposed(powers[1], yt, powers[2])
        products += 2
        have = 3
        alpha = max(math.sqrt(one_norm(powers[1])), one_norm(powers[2]) ** (1.0 / 3.0))
        if alpha < norm:
            idx, s = _choose_degree(alpha)
    m = TAYLOR_DEGREES[idx]
    q = TAYLOR_BLOCK[idx]
    scale = 0.5**s
    factor = 1.0
    for pw in range(have):
        factor *= scale
        for i in range(n):
            for j in range(n):
                powers[pw][i, j] *= factor
    if q > have:
        transpose_into(y1, yt)
        for pw in range(have, q):
            matmul_transposed(powers[pw - 1], yt, powers[pw])
            products += 1
    # Horner in Y^q over blocks B_j = sum_{i<q} c_{jq+i} Y^i, c_k = 1/(k+1)! (0 beyond m)
    r = (m + q) // q  # ceil((m + 1) / q)
    _block_sum(powers, q, m, r - 1, acc)
    if r > 1:
        transpose_into(powers[q - 1], yqt)
        for jb in range(r - 2, -1, -1):
            matmul_transposed(acc, yqt, tmp)
            products += 1
            _block_sum(powers, q, m, jb, acc)
            for i in range(n):
                for j in range(n):
                    acc[i, j] += tmp[i, j]
    # phi = phi_1(Y), e = I + Y phi
    for i in range(n):
        for j in range(n):
            phi[i, j] = acc[i, j]
    transpose_into(phi, phit)
    matmul_transposed(y1, phit, e)
    products += 1
    for i in range(n):
        e[i, i] += 1.0
    # doublings: phi <- phi (e + I) / 2, e <- e e
    for _ in range(s):
        transpose_into(e, yt)
        matmul_transposed(phi, yt, tmp)
        matmul_transposed(e, yt, acc)
        products += 2
        for i in range(n):
            for j in range(n):
                phi[i, j] = 0.5 * (tmp[i, j] + phi[i, j])
                e[i, j] = acc[i, j]
    return products


@njit(cache=True)
def _block_sum(powers, q, m, jb, out):
    """``out = sum_{i<q} c_{jb q + i} Y^i`` (``Y^0 = I``, ``c_k = 1/(k+1)!``, zero beyond m)."""
    n = out.shape[0]
    base = jb * q
    c0 = _INV_FACTORIAL_SHIFTED[base] if base <= m else 0.0
    for i in range(n):
        for j in range(n):
            out[i, j] = 0.0
        out[i, i] = c0
    for deg in range(1, q):
        k = base + deg
        if k > m:
            break
        c = _INV_FACTORIAL_SHIFTED[k]
        pw = powers[deg - 1]
        for i in range(n):
            for j in range(n):
                out[i, j] += c * pw[i, j]


def expm_and_phi1(z) -> tuple[np.ndarray, np.ndarray]:
    """``(exp(z), phi_1(z))`` of a square matrix (Python entry point for checks and tests).

    Parameters
    ----------
    z : array_like, shape (N, N)

    Returns
    -------
    exp_z, phi1_z : numpy.ndarray, shape (N, N)
    """
    z = np.ascontiguousarray(z, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] != z.shape[1]:
        raise ValueError(f"z must be a square matrix, got shape {z.shape}")
    n = z.shape[0]
    e = np.empty((n, n))
    phi = np.empty((n, n))
    expm_phi1(z, e, phi, np.empty((EXPM_WORK_MATRICES, n, n)))
    return e, phi
