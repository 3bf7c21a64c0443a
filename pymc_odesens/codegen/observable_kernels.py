"""Generated kernels of observables ``h(t, y, p)`` and their exact Jacobians.

For M observables (sympy expressions in a system's time, state and parameter
symbols) one cached module holds three kernels with the shared kernel
signature (:mod:`pymc_odesens.codegen.signature`; ``v`` is unused):

- ``observable``: ``out[m] = h_m`` (M),
- ``observable_jac_y``: ``out[m*N + i] = dh_m/dy_i`` (M x N, row-major),
- ``observable_jac_p``: ``out[m*P + k] = dh_m/dp_k`` (M x P, row-major).

sympy differentiates, eliminates common subexpressions and writes flat scalar
code exactly as for the right-hand side; the module is keyed by the system's
kernel key and a hash of the observables, so a second process loads it from
the disk cache.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp

from pymc_odesens.codegen.kernel_source import header, kernel_function_source
from pymc_odesens.codegen.kernels import kernel_cache_key, load_generated_module
from pymc_odesens.codegen.printer import KernelPrinter
from pymc_odesens.model import OdeSystem
from pymc_odesens.model.derivatives import jacobian_nonzeros

__all__ = [
    "OBSERVABLE_CODEGEN_VERSION",
    "ObservableKernels",
    "compile_observable_kernels",
    "compile_observable_values",
    "evaluate_observable_kernel",
    "observable_module_source",
]

OBSERVABLE_CODEGEN_VERSION = "2"
"""Bump when the generated observable code changes (invalidates cached modules)."""


@dataclass(frozen=True)
class ObservableKernels:
    """The compiled observable kernels of one system and one list of observables.

    Attributes
    ----------
    value, jac_y, jac_p : pymc_odesens.codegen.machine_code.Kernel
        ``h`` (M), ``dh/dy`` (M x N) and ``dh/dp`` (M x P), row-major.
    n_observables, n_states, n_params : int
    """

    value: object
    jac_y: object
    jac_p: object
    n_observables: int
    n_states: int
    n_params: int


def _canonical(system: OdeSystem, expressions: Sequence[sp.Expr]) -> list[sp.Expr]:
    return [system.to_canonical(sp.sympify(e)) for e in expressions]


def observable_module_source(system: OdeSystem, expressions: Sequence[sp.Expr]) -> str:
    """Source of the module with ``observable``, ``observable_jac_y``, ``observable_jac_p``.

    Parameters
    ----------
    system : OdeSystem
    expressions : sequence of sympy.Expr
        The M observables in the system's symbols (``system.t``,
        ``system.state_symbols``, ``system.param_symbols``).
    """
    n, p = system.n_states, system.n_params
    exprs = [sp.sympify(e) for e in expressions]
    m = len(exprs)
    printer = KernelPrinter()

    def jacobian(name: str, symbols, width: int) -> str:
        # only the symbols an observable contains are differentiated (row-major order)
        entries = jacobian_nonzeros(exprs, symbols)
        return kernel_function_source(
            name,
            _canonical(system, list(entries.values())),
            printer,
            positions=[row * width + col for row, col in entries],
            size=m * width,
        )

    parts = [
        header(system),
        f"# {m} observables (observable codegen {OBSERVABLE_CODEGEN_VERSION})",
        kernel_function_source("observable", _canonical(system, exprs), printer),
        jacobian("observable_jac_y", system.state_symbols, n),
        jacobian("observable_jac_p", system.param_symbols, p),
    ]
    return "\n".join(parts) + "\n"


def observables_key(system: OdeSystem, expressions: Sequence[sp.Expr]) -> str:
    """Cache key of the observable module: the system's kernel key and the expressions."""
    text = "|".join(sp.srepr(e) for e in _canonical(system, expressions))
    digest = hashlib.sha256(f"{OBSERVABLE_CODEGEN_VERSION}:{text}".encode()).hexdigest()[:16]
    return f"{kernel_cache_key(system)}_obs_{digest}"


def compile_observable_kernels(
    system: OdeSystem, expressions: Sequence[sp.Expr]
) -> ObservableKernels:
    """Generate, cache and compile the observable kernels (once per process and key).

    Parameters
    ----------
    system : OdeSystem
    expressions : sequence of sympy.Expr
        The observables in the system's symbols; at least one.

    Returns
    -------
    ObservableKernels
    """
    expressions = list(expressions)
    if not expressions:
        raise ValueError("observables: at least one observable is needed")
    key = observables_key(system, expressions)
    module = load_generated_module(key, lambda: observable_module_source(system, expressions))
    return ObservableKernels(
        value=module.observable,
        jac_y=module.observable_jac_y,
        jac_p=module.observable_jac_p,
        n_observables=len(expressions),
        n_states=system.n_states,
        n_params=system.n_params,
    )


def compile_observable_values(system: OdeSystem, expressions: Sequence[sp.Expr]):
    """The kernel ``out[m] = h_m(t, y, p)`` alone (no Jacobians): generated, cached, compiled.

    For reading variables off a solution (:meth:`pymc_odesens.solvers.OdeSolution.evaluate`),
    which needs the values only, so that it pays one compile instead of three.
    """
    expressions = list(expressions)
    if not expressions:
        raise ValueError("observables: at least one observable is needed")
    key = observables_key(system, expressions) + "_values"

    def source() -> str:
        body = kernel_function_source(
            "observable", _canonical(system, expressions), KernelPrinter()
        )
        return "\n".join([header(system), f"# {len(expressions)} observable values", body]) + "\n"

    return load_generated_module(key, source).observable


def evaluate_observable_kernel(kernel, t: float, y, p, size: int) -> np.ndarray:
    """Call one observable kernel from Python (checks and tests, not inner loops)."""
    ptr = ctypes.POINTER(ctypes.c_double)
    y = np.ascontiguousarray(y, dtype=float)
    p = np.ascontiguousarray(p, dtype=float)
    v = np.zeros(1)
    out = np.zeros(max(size, 1))
    kernel.ctypes(float(t), *(a.ctypes.data_as(ptr) for a in (y, p, v, out)))
    return out[:size]
