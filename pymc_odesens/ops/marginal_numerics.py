"""The closed forms of a marginal normal likelihood, its gradient and its conditional posterior.

For one block (:mod:`pymc_odesens.ops.marginal_structure`) of ``n`` measurements ``z``
with fixed part ``c``, design ``A`` (n x k), prior mean ``mu_0`` and precision
``Lambda_0 = diag(lambda_0)`` of its columns ``theta``, let ``r = z - c - A mu_0``:

- known noise, ``D = diag(sigma_i^2)``: ``P = Lambda_0 + A' D^-1 A``, ``b = A' D^-1 r``,
  ``log p(z) = -n/2 log 2 pi - sum log sigma_i + 1/2 log|Lambda_0| - 1/2 log|P|
  - 1/2 (r' D^-1 r - b' P^-1 b)``;
- marginal noise variance (no columns), ``sigma^2 ~ InverseGamma(alpha, beta)``:
  ``log p(z) = -n/2 log 2 pi + alpha log beta - lgamma(alpha) + lgamma(alpha_n)
  - alpha_n log(beta + r'r / 2)``, ``alpha_n = alpha + n/2``;
- normal-inverse-gamma (``theta | sigma^2 ~ Normal(mu_0, sigma^2 Lambda_0^-1)``):
  ``P = Lambda_0 + A'A``, ``b = A'r``, ``beta_n = beta + (r'r - b' P^-1 b) / 2``,
  ``log p(z) = -n/2 log 2 pi + 1/2 log|Lambda_0| - 1/2 log|P| + alpha log beta
  - alpha_n log beta_n + lgamma(alpha_n) - lgamma(alpha)``.

They are computed as ``P mu_n = Lambda_0 mu_0 + A' D^-1 (z - c)`` and ``r' D^-1 r - b' P^-1 b =
e' D^-1 e + (mu_n - mu_0)' Lambda_0 (mu_n - mu_0)`` (below), free of the cancellation of the
first forms when the prior mean is far from the data (as a weakly informative one may be).

The gradient is the posterior expectation of the joint log-density's gradient (Fisher's
identity: the priors do not depend on ``c``, ``A`` or ``sigma``). With the posterior mean
``mu_n = mu_0 + P^-1 b``, the residual ``e = z - c - A mu_n`` and ``S = P^-1``:

- known noise: ``dL/dc_i = e_i / sigma_i^2``, ``dL/dA_ij = (e_i mu_n,j - (A S)_ij) /
  sigma_i^2``, ``dL/dsigma_i = -1/sigma_i + (e_i^2 + a_i' S a_i) / sigma_i^3``;
- marginal noise: ``dL/dc_i = (alpha_n / beta_n) r_i``;
- normal-inverse-gamma: ``dL/dc_i = (alpha_n / beta_n) e_i``,
  ``dL/dA_ij = (alpha_n / beta_n) e_i mu_n,j - (A S)_ij``;

and ``dL/dz = -dL/dc``. The conditional posteriors: ``theta ~ Normal(mu_n, S)`` (known
noise); ``sigma^2 ~ InverseGamma(alpha_n, beta_n)`` (marginal noise); ``sigma^2 ~
InverseGamma(alpha_n, beta_n)`` and ``theta | sigma^2 ~ Normal(mu_n, sigma^2 S)``
(normal-inverse-gamma).

Non-finite inputs, a given ``sigma_i`` that is not positive, or a ``P`` that is not
numerically positive definite give ``-inf`` and a zero gradient (the proposal is rejected).
All functions are numba-compiled (cached) and allocate only per call.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["conditional_posterior", "conditional_draw", "marginal_log_density"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@numba.njit(cache=True)
def _cholesky(p, k):
    """In place: the lower Cholesky factor of ``p[:k, :k]`` (lower triangle read); False
    if a pivot is not positive."""
    for j in range(k):
        s = p[j, j]
        for m in range(j):
            s -= p[j, m] * p[j, m]
        if not s > 0.0:
            return False
        d = math.sqrt(s)
        p[j, j] = d
        for i in range(j + 1, k):
            t = p[i, j]
            for m in range(j):
                t -= p[i, m] * p[j, m]
            p[i, j] = t / d
    return True


@numba.njit(cache=True)
def _solve(chol, k, rhs, out):
    """``out = P^-1 rhs`` for ``P = L L'`` (``L`` lower, in ``chol``)."""
    for i in range(k):
        t = rhs[i]
        for m in range(i):
            t -= chol[i, m] * out[m]
        out[i] = t / chol[i, i]
    for i in range(k - 1, -1, -1):
        t = out[i]
        for m in range(i + 1, k):
            t -= chol[m, i] * out[m]
        out[i] = t / chol[i, i]


@numba.njit(cache=True)
def _row_design(a, row, row_entries_start, row_entries, entry_column, column_local, k, out):
    """The row's entries of ``A`` in its block's local columns (repeated entries add up)."""
    for j in range(k):
        out[j] = 0.0
    for q in range(row_entries_start[row], row_entries_start[row + 1]):
        e = row_entries[q]
        out[column_local[entry_column[e]]] += a[e]


@numba.njit(cache=True)
def _inputs_finite(z, c, a, sigma, block_kind, block_rows_start, block_rows):
    for i in range(z.size):
        if not (math.isfinite(z[i]) and math.isfinite(c[i])):
            return False
    for e in range(a.size):
        if not math.isfinite(a[e]):
            return False
    for b in range(block_kind.size):
        if block_kind[b] == 0:
            for q in range(block_rows_start[b], block_rows_start[b + 1]):
                s = sigma[block_rows[q]]
                if not (math.isfinite(s) and s > 0.0):
                    return False
    return True


@numba.njit(cache=True)
def _block_factor(
    b,
    z,
    c,
    a,
    sigma,
    block_kind,
    block_rows_start,
    block_rows,
    block_columns_start,
    block_columns,
    column_local,
    row_entries_start,
    row_entries,
    entry_column,
    prior_mean,
    prior_precision,
    chol,
    rhs,
    mean,
    row,
):
    """Factor block ``b``: ``chol`` (L of P) and the posterior mean ``mean`` (local
    columns) from ``P mu_n = Lambda_0 mu_0 + A' W (z - c)``; returns ``(ok, Q, sum log
    sigma_i (known noise), log|P| - log|Lambda_0|)`` with the quadratic form
    ``Q = e' W e + (mu_n - mu_0)' Lambda_0 (mu_n - mu_0)`` (``e = z - c - A mu_n``), which
    equals ``r' W r - b' P^-1 b`` without its cancellation (a prior mean far from the
    data, as a weakly informative one is, made that difference lose every digit).
    """
    kind = block_kind[b]
    c0, c1 = block_columns_start[b], block_columns_start[b + 1]
    k = c1 - c0
    for j in range(k):
        column = block_columns[c0 + j]
        rhs[j] = prior_precision[column] * prior_mean[column]
        for m_ in range(k):
            chol[j, m_] = 0.0
        chol[j, j] = prior_precision[column]
    log_sigma = 0.0
    for q in range(block_rows_start[b], block_rows_start[b + 1]):
        i = block_rows[q]
        w = 1.0
        if kind == 0:
            w = 1.0 / (sigma[i] * sigma[i])
            log_sigma += math.log(sigma[i])
        if k == 0:
            continue
        _row_design(a, i, row_entries_start, row_entries, entry_column, column_local, k, row)
        r = z[i] - c[i]
        for j in range(k):
            wa = w * row[j]
            rhs[j] += wa * r
            for m_ in range(j + 1):
                chol[j, m_] += wa * row[m_]
    log_det_ratio = 0.0
    quadratic = 0.0
    if k > 0:
        if not _cholesky(chol, k):
            return False, 0.0, 0.0, 0.0
        _solve(chol, k, rhs, mean)
        for j in range(k):
            column = block_columns[c0 + j]
            d = mean[j] - prior_mean[column]
            quadratic += prior_precision[column] * d * d
            log_det_ratio += 2.0 * math.log(chol[j, j]) - math.log(prior_precision[column])
    for q in range(block_rows_start[b], block_rows_start[b + 1]):
        i = block_rows[q]
        e = z[i] - c[i]
        if k > 0:
            _row_design(a, i, row_entries_start, row_entries, entry_column, column_local, k, row)
            for j in range(k):
                e -= row[j] * mean[j]
        w = 1.0 / (sigma[i] * sigma[i]) if kind == 0 else 1.0
        quadratic += w * e * e
    return True, quadratic, log_sigma, log_det_ratio


@numba.njit(cache=True)
def marginal_log_density(
    z,
    c,
    a,
    sigma,
    gradient,
    block_kind,
    block_rows_start,
    block_rows,
    block_columns_start,
    block_columns,
    column_local,
    row_entries_start,
    row_entries,
    entry_column,
    prior_mean,
    prior_precision,
    alpha,
    beta,
    max_columns,
):
    """The marginal log-density of all blocks and, if ``gradient``, its derivatives.

    Returns
    -------
    (value, dz, dc, da, dsigma)
        ``dz``, ``dc``, ``dsigma`` (n,) and ``da`` (nnz,); zeros without ``gradient``.
    """
    n = z.size
    dz = np.zeros(n)
    dc = np.zeros(n)
    da = np.zeros(a.size)
    dsigma = np.zeros(n)
    if not _inputs_finite(z, c, a, sigma, block_kind, block_rows_start, block_rows):
        return -np.inf, dz, dc, da, dsigma
    kmax = max(max_columns, 1)
    chol = np.zeros((kmax, kmax))
    rhs = np.zeros(kmax)
    mean = np.zeros(kmax)
    row = np.zeros(kmax)
    solved = np.zeros(kmax)
    total = 0.0
    for b in range(block_kind.size):
        kind = block_kind[b]
        n_b = block_rows_start[b + 1] - block_rows_start[b]
        c0 = block_columns_start[b]
        k = block_columns_start[b + 1] - c0
        ok, quadratic, log_sigma, log_det_ratio = _block_factor(
            b,
            z,
            c,
            a,
            sigma,
            block_kind,
            block_rows_start,
            block_rows,
            block_columns_start,
            block_columns,
            column_local,
            row_entries_start,
            row_entries,
            entry_column,
            prior_mean,
            prior_precision,
            chol,
            rhs,
            mean,
            row,
        )
        if not ok:
            return -np.inf, np.zeros(n), np.zeros(n), np.zeros(a.size), np.zeros(n)
        value = -n_b * _HALF_LOG_2PI - 0.5 * log_det_ratio
        scale = 1.0  # E[1 / sigma^2] in the noise-variance blocks
        if kind == 0:
            value += -log_sigma - 0.5 * quadratic
        else:
            alpha_n = alpha[b] + 0.5 * n_b
            beta_n = beta[b] + 0.5 * quadratic
            value += (
                alpha[b] * math.log(beta[b])
                - alpha_n * math.log(beta_n)
                + math.lgamma(alpha_n)
                - math.lgamma(alpha[b])
            )
            scale = alpha_n / beta_n
        total += value
        if not gradient:
            continue
        for q in range(block_rows_start[b], block_rows_start[b + 1]):
            i = block_rows[q]
            _row_design(a, i, row_entries_start, row_entries, entry_column, column_local, k, row)
            e = z[i] - c[i]
            for j in range(k):
                e -= row[j] * mean[j]
            if k > 0:
                _solve(chol, k, row, solved)  # S a_i
            if kind == 0:
                w = 1.0 / (sigma[i] * sigma[i])
                dc[i] = w * e
                spread = 0.0
                for j in range(k):
                    spread += row[j] * solved[j]
                dsigma[i] = -1.0 / sigma[i] + (e * e + spread) * w / sigma[i]
                for t in range(row_entries_start[i], row_entries_start[i + 1]):
                    entry = row_entries[t]
                    j = column_local[entry_column[entry]]
                    da[entry] = w * (e * mean[j] - solved[j])
            else:
                dc[i] = scale * e
                for t in range(row_entries_start[i], row_entries_start[i + 1]):
                    entry = row_entries[t]
                    j = column_local[entry_column[entry]]
                    da[entry] = scale * e * mean[j] - solved[j]
            dz[i] = -dc[i]
    return total, dz, dc, da, dsigma


@numba.njit(cache=True)
def conditional_posterior(
    z,
    c,
    a,
    sigma,
    block_kind,
    block_rows_start,
    block_rows,
    block_columns_start,
    block_columns,
    column_local,
    row_entries_start,
    row_entries,
    entry_column,
    prior_mean,
    prior_precision,
    alpha,
    beta,
    max_columns,
):
    """The conditional posterior of every block's marginalised parameters.

    Returns
    -------
    ok : bool
        False if an input is not finite or a ``P`` is not positive definite.
    mean : (K,)
        ``mu_n`` of every column.
    factor : (B, kmax, kmax)
        The lower Cholesky factor of each block's ``P``.
    alpha_n, beta_n : (B,)
        The inverse-gamma posterior of each block's noise variance (NaN for known noise).
    """
    n_blocks = block_kind.size
    kmax = max(max_columns, 1)
    mean = np.zeros(prior_mean.size)
    factor = np.zeros((n_blocks, kmax, kmax))
    alpha_n = np.full(n_blocks, np.nan)
    beta_n = np.full(n_blocks, np.nan)
    if not _inputs_finite(z, c, a, sigma, block_kind, block_rows_start, block_rows):
        return False, mean, factor, alpha_n, beta_n
    rhs = np.zeros(kmax)
    local_mean = np.zeros(kmax)
    row = np.zeros(kmax)
    for b in range(n_blocks):
        ok, quadratic, _, _ = _block_factor(
            b,
            z,
            c,
            a,
            sigma,
            block_kind,
            block_rows_start,
            block_rows,
            block_columns_start,
            block_columns,
            column_local,
            row_entries_start,
            row_entries,
            entry_column,
            prior_mean,
            prior_precision,
            factor[b],
            rhs,
            local_mean,
            row,
        )
        if not ok:
            return False, mean, factor, alpha_n, beta_n
        c0 = block_columns_start[b]
        for j in range(block_columns_start[b + 1] - c0):
            mean[block_columns[c0 + j]] = local_mean[j]
        if block_kind[b] != 0:
            n_b = block_rows_start[b + 1] - block_rows_start[b]
            alpha_n[b] = alpha[b] + 0.5 * n_b
            beta_n[b] = beta[b] + 0.5 * quadratic
    return True, mean, factor, alpha_n, beta_n


@numba.njit(cache=True)
def conditional_draw(
    mean, factor, variance, normals, block_kind, block_columns_start, block_columns
):
    """``theta = mu_n + sqrt(v) L'^-1 normals`` per block (``v = 1`` for known noise, else
    the block's drawn noise variance ``variance[b]``): a draw from the conditional posterior
    given standard normal ``normals`` (K,)."""
    theta = mean.copy()
    kmax = factor.shape[1]
    solved = np.zeros(kmax)
    for b in range(block_kind.size):
        c0 = block_columns_start[b]
        k = block_columns_start[b + 1] - c0
        scale = 1.0 if block_kind[b] == 0 else math.sqrt(variance[b])
        for i in range(k - 1, -1, -1):  # L' x = normals
            t = normals[block_columns[c0 + i]]
            for m in range(i + 1, k):
                t -= factor[b, m, i] * solved[m]
            solved[i] = t / factor[b, i, i]
        for j in range(k):
            theta[block_columns[c0 + j]] += scale * solved[j]
    return theta
