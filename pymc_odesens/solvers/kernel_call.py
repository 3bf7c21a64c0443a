"""Calling a generated kernel (a numba cfunc) once from Python."""

from __future__ import annotations

import numpy as np
from numba import njit, types

from pymc_odesens.codegen.signature import KERNEL_TYPE

__all__ = ["call_kernel", "evaluate_along"]


@njit(
    types.void(
        KERNEL_TYPE,
        types.float64,
        types.float64[::1],
        types.float64[::1],
        types.float64[::1],
        types.float64[::1],
    ),
    cache=True,
)
def call_kernel(kernel, t, y, p, v, out):
    """``kernel(t, y, p, v, out)`` with numpy arrays (compiled once for all kernels)."""
    kernel(t, y.ctypes, p.ctypes, v.ctypes, out.ctypes)


@njit(
    types.void(
        KERNEL_TYPE,
        types.float64[::1],
        types.float64[:, ::1],
        types.float64[::1],
        types.float64[:, ::1],
    ),
    cache=True,
)
def evaluate_along(kernel, times, y, p, out):
    """``out[i] = kernel(times[i], y[i], p)`` for every output time (compiled once)."""
    v = np.zeros(1)
    for i in range(times.size):
        kernel(times[i], y[i].ctypes, p.ctypes, v.ctypes, out[i].ctypes)
