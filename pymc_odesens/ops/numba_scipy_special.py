"""PyTensor's scipy.special scalar Ops in PyTensor's NUMBA cache (digamma and its kin).

PyTensor's numba implementation of a scalar Op such as ``Psi`` (digamma) calls scipy's
Cython function through its address, and so gives the Op no cache key: every NUMBA-mode
graph that holds one is compiled again in every process. The gradient of a negative
binomial, gamma, beta or Student-t log-density holds ``Psi``, so a model such as the SIR
fit of the boarding-school outbreak (negative binomial counts) compiled its whole
log-density + gradient function anew in each process (about 2 of nutpie's 7 seconds).

Here the same generated function calls the same Cython function by a linker symbol
(:class:`~pymc_odesens.ops.numba_cache.SymbolFunction`, bound to this process's address
before any code is compiled or loaded), and the Op gets a key: the Op's class and its
scipy function, the generated source, the dtypes, the C signature and the versions of
scipy, numba and this package. Ops whose scipy function is not a Cython function keep
PyTensor's own implementation and key.
"""

from __future__ import annotations

import hashlib

import numba
import scipy
from numba.core import types
from pytensor.link.numba.dispatch.basic import numba_funcify_and_cache_key
from pytensor.link.numba.dispatch.scalar import numba_funcify_ScalarOp
from pytensor.scalar import math as scalar_math
from pytensor.scalar.basic import ScalarOp

from pymc_odesens.ops.numba_cache import SymbolFunction

__all__ = ["register_scipy_special_ops"]


def _funcify_scipy_special_and_cache_key(op, node, **kwargs):
    from pymc_odesens.version import __version__ as package_version

    func, key = numba_funcify_ScalarOp(op, node, **kwargs)
    namespace = getattr(getattr(func, "py_func", None), "__globals__", {})
    cython_function = namespace.get("scalar_func_numba")
    if key is not None or not isinstance(cython_function, types.WrapperAddressProtocol):
        return func, key
    signature = cython_function.signature()
    identity = repr(
        (
            type(op).__module__,
            type(op).__qualname__,
            op.nfunc_spec,
            func.py_func.__source__,
            [i.type.dtype for i in node.inputs],
            [o.type.dtype for o in node.outputs],
            str(signature),
            scipy.__version__,
            numba.__version__,
            package_version,
        )
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()
    symbol = f"pymc_odesens_scipy_{op.nfunc_spec[0].rpartition('.')[2]}_{digest[:24]}"
    # the generated function reads its scipy function from this namespace (its own dict,
    # made for this Op) when numba compiles it: it now calls the symbol
    namespace["scalar_func_numba"] = SymbolFunction(
        symbol, signature, cython_function.__wrapper_address__(), cython_function
    )
    return func, f"pymc_odesens_{digest}"


def _scipy_special_op_types() -> list[type]:
    """PyTensor's scalar Ops of scipy.special functions that its generic scalar
    implementation compiles (without a cache key when the function is Cython's)."""
    generic = numba_funcify_and_cache_key.dispatch(ScalarOp)
    found = []
    for value in vars(scalar_math).values():
        if not (isinstance(value, type) and issubclass(value, ScalarOp)):
            continue
        spec = getattr(value, "nfunc_spec", None)
        if (
            spec
            and str(spec[0]).startswith("scipy.special.")
            and numba_funcify_and_cache_key.dispatch(value) is generic
        ):
            found.append(value)
    return found


def register_scipy_special_ops() -> list[type]:
    """Give PyTensor's scipy.special scalar Ops (``Psi``, ``GammaInc``, ``Iv``, ...) cache
    keys in NUMBA mode (see the module docstring); returns the Op types registered."""
    op_types = _scipy_special_op_types()
    for op_type in op_types:
        numba_funcify_and_cache_key.register(op_type)(_funcify_scipy_special_and_cache_key)
    return op_types
