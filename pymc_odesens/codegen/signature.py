"""The one C signature shared by every generated kernel.

``void kernel(double t, double* y, double* p, double* v, double* out)``

``v`` is the extra vector of products (the cotangent ``lambda`` of a
vector-Jacobian product, the direction of a Jacobian-vector product, or the
sensitivity block of an augmented right-hand side); kernels that need no
extra vector ignore it. Solvers take kernels as arguments of type
:data:`KERNEL_TYPE`, so they are compiled once for every model.
"""

from __future__ import annotations

from numba import types

__all__ = ["KERNEL_SIGNATURE", "KERNEL_TYPE", "KERNEL_NAMES"]

_double_ptr = types.CPointer(types.float64)

KERNEL_SIGNATURE = types.void(types.float64, _double_ptr, _double_ptr, _double_ptr, _double_ptr)
"""numba signature of a generated kernel."""

KERNEL_TYPE = types.FunctionType(KERNEL_SIGNATURE)
"""First-class function type with which solvers receive kernels."""

KERNEL_NAMES = ("rhs", "jac_y", "jac_y_values", "jac_p", "vjp_y", "vjp_p", "jvp_y")
"""Kernels generated for every system (output sizes N, N*N, nnz(J_y), P*N, N, P, N)."""
