"""Layer 2: machine-code kernels generated from a system's exact expressions (sympy, llvmlite)."""

from pymc_odesens.codegen.kernels import (
    CompiledKernels,
    EventKernels,
    compile_adjoint_kernels,
    compile_event_kernels,
    compile_event_sensitivity_kernels,
    compile_kernels,
    compile_sensitivity_kernel,
)
from pymc_odesens.codegen.signature import KERNEL_SIGNATURE, KERNEL_TYPE

__all__ = [
    "compile_adjoint_kernels",
    "compile_event_kernels",
    "compile_event_sensitivity_kernels",
    "CompiledKernels",
    "EventKernels",
    "compile_kernels",
    "compile_sensitivity_kernel",
    "KERNEL_SIGNATURE",
    "KERNEL_TYPE",
]
