"""Compiled accumulation of the expected Fisher information over the output times.

One eagerly compiled numba function, called once per Fisher information:
for every output time it evaluates the observables and their Jacobians (the
generated kernels of :mod:`pymc_odesens.codegen.observable_kernels`, passed as
function pointers), forms ``dh/dtheta = h_y S + h_p`` and adds
``w_tm (dl_m/dtheta)(dl_m/dtheta)^T`` to ``F``, where ``l = h`` (additive noise)
or ``l = log h`` (multiplicative noise) and ``w = 1 / sigma^2``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE

__all__ = [
    "STATUS_OK",
    "STATUS_NON_POSITIVE",
    "STATUS_NON_FINITE",
    "accumulate_fisher_information",
]

STATUS_OK = 0
STATUS_NON_POSITIVE = 1
"""Multiplicative noise and an observable <= 0 (``where`` = time index, observable)."""
STATUS_NON_FINITE = 2
"""An observable or one of its derivatives is not finite (``where`` = time index, observable)."""

_SIGNATURE = types.int64(
    KERNEL_TYPE,  # h
    KERNEL_TYPE,  # dh/dy
    KERNEL_TYPE,  # dh/dp
    types.float64[::1],  # t (T,)
    types.float64[:, ::1],  # y (T, N)
    types.float64[:, :, ::1],  # S (T, N, K): parameter columns first, then y0 columns
    types.int64,  # number of parameter columns in S (P or 0)
    types.float64[::1],  # p (P,)
    types.float64[:, ::1],  # weights 1/sigma^2 (T, M)
    types.boolean,  # multiplicative noise: differentiate log h
    types.float64[:, ::1],  # h out (T, M)
    types.float64[:, :, ::1],  # dh/dtheta out (T, M, K)
    types.float64[:, ::1],  # F out (K, K), overwritten
    types.int64[::1],  # where (2,): time index and observable of a failure
)


@njit(_SIGNATURE, cache=True, nogil=True)
def accumulate_fisher_information(
    h_kernel,
    hy_kernel,
    hp_kernel,
    t,
    y,
    s,
    n_param_columns,
    p,
    weights,
    log_h,
    h,
    dh,
    fisher,
    where,
):
    """Fill ``h``, ``dh`` and ``fisher``; return a status code (``STATUS_*``)."""
    n_t, n = y.shape
    k_cols = s.shape[2]
    m_obs = h.shape[1]
    n_p = p.size
    hy = np.empty(max(m_obs * n, 1))
    hp = np.empty(max(m_obs * n_p, 1))
    v = np.zeros(1)
    grad = np.empty(k_cols)
    fisher[:, :] = 0.0
    for j in range(n_t):
        y_j = y[j]
        h_j = h[j]
        h_kernel(t[j], y_j.ctypes, p.ctypes, v.ctypes, h_j.ctypes)
        hy_kernel(t[j], y_j.ctypes, p.ctypes, v.ctypes, hy.ctypes)
        if n_param_columns > 0:
            hp_kernel(t[j], y_j.ctypes, p.ctypes, v.ctypes, hp.ctypes)
        for m in range(m_obs):
            for c in range(k_cols):
                acc = 0.0
                for i in range(n):
                    acc += hy[m * n + i] * s[j, i, c]
                if c < n_param_columns:
                    acc += hp[m * n_p + c]
                dh[j, m, c] = acc
            value = h_j[m]
            if not np.isfinite(value):
                where[0] = j
                where[1] = m
                return STATUS_NON_FINITE
            scale = 1.0
            if log_h:
                if value <= 0.0:
                    where[0] = j
                    where[1] = m
                    return STATUS_NON_POSITIVE
                scale = 1.0 / value
            w = weights[j, m]
            for c in range(k_cols):
                grad[c] = dh[j, m, c] * scale
                if not np.isfinite(grad[c]):
                    where[0] = j
                    where[1] = m
                    return STATUS_NON_FINITE
            for a in range(k_cols):
                wa = w * grad[a]
                for b in range(a, k_cols):
                    fisher[a, b] += wa * grad[b]
    for a in range(k_cols):
        for b in range(a + 1, k_cols):
            fisher[b, a] = fisher[a, b]
    return STATUS_OK
