"""Layer 2: flat numba kernels generated from a system's exact expressions."""

from pymc_odesens.codegen.kernels import CompiledKernels, compile_kernels
from pymc_odesens.codegen.signature import KERNEL_SIGNATURE, KERNEL_TYPE

__all__ = ["CompiledKernels", "compile_kernels", "KERNEL_SIGNATURE", "KERNEL_TYPE"]
