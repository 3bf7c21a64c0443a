"""NUMBA-mode graphs with ODE Ops in PyTensor's on-disk cache: a warm compile loads them.

PyTensor caches the machine code of a whole compiled graph when every Op in it gives a
cache key (``numba_funcify_and_cache_key``). Our Ops' numba implementations
(:mod:`pymc_odesens.ops.numba_dispatch`, :mod:`pymc_odesens.ops.steady_state_numba`)
are closures over the generated kernels and the solvers' C entry points, which numba
would embed as this process's addresses ("dynamic globals"), and such code is never
cached: every process compiled every graph again (seconds per graph).

Here each of those function pointers becomes a :class:`SymbolFunction`: a C function
known to LLVM's linker by a name that is the same in every process. Compiled code
calls it through that name, the name is bound to this process's address
(``llvmlite.binding.add_symbol``) before any code is compiled or loaded, and the
code can be cached. The cache key of an Op hashes everything its numba function bakes
in: the bytecode of every jitted function of the closure, the sources of the modules
they read globals from, every captured constant (times, tolerances, tables), the
signatures of the function pointers, the Op's spec (the system by its kernels' cache
key) and the versions of numba and this package. Anything the walk does not know makes
the Op uncacheable (``None``), never wrong.
"""

from __future__ import annotations

import ctypes
import dataclasses
import dis
import hashlib
import sys
import types as python_types
from functools import cache
from pathlib import Path

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.ccallback import CFunc
from numba.core.datamodel import register_default
from numba.core.dispatcher import Dispatcher
from numba.core.imputils import lower_cast, lower_constant
from numba.core.typeconv import Conversion
from numba.core.typing import ctypes_utils
from numba.core.typing.typeof import typeof_impl
from numba.experimental.function_type import FunctionModel
from pytensor.link.numba.dispatch.basic import numba_funcify, numba_funcify_and_cache_key

__all__ = ["SymbolFunction", "register_cacheable", "op_cache_key", "stable_key"]


class SymbolFunction:
    """A C function that compiled code calls by its linker symbol, not by its address.

    Parameters
    ----------
    symbol : str
        Name under which the address is registered with LLVM (``add_symbol``).
    signature : numba Signature
    address : int
    keep_alive : object
        The object that owns the code (a cfunc, a kernel, a ctypes callback).
    """

    def __init__(self, symbol: str, signature, address: int, keep_alive) -> None:
        self.symbol = symbol
        self.signature = signature
        self.address = int(address)
        self.keep_alive = keep_alive
        llvm.add_symbol(symbol, self.address)

    def __repr__(self) -> str:
        return f"SymbolFunction({self.symbol!r}, {self.signature})"


class SymbolFunctionType(types.FunctionType):
    """numba type of a :class:`SymbolFunction`: a first-class function whose address is a
    linker symbol; converts to the plain :class:`numba.types.FunctionType` of its
    signature (same data model)."""

    def __init__(self, signature, symbol: str) -> None:
        super().__init__(signature)
        self.symbol = symbol
        self._key = (self.ftype.key, symbol)

    def get_call_type(self, context, args, kws):
        # as numba types the ctypes and cfunc pointers this replaces: any argument that
        # converts to the signature's type is cast at the call (a uint64 address passed
        # as int64 included), where FunctionType accepts safe conversions only
        if kws:
            raise TypeError(f"{self.symbol}: a function pointer takes no keyword arguments")
        if len(args) != self.nargs:
            raise TypeError(f"{self.symbol}: {self.nargs} arguments expected, got {len(args)}")
        for given, expected in zip(args, self.signature.args):
            if context.context.can_convert(types.unliteral(given), expected) is None:
                raise TypeError(f"{self.symbol}: argument {given} does not convert to {expected}")
        return self.signature

    def can_convert_to(self, typingctx, other):
        if type(other) is types.FunctionType and other.signature == self.signature:
            return Conversion.safe
        return None


register_default(SymbolFunctionType)(FunctionModel)


@typeof_impl.register(SymbolFunction)
def _typeof_symbol_function(value, context):
    return SymbolFunctionType(value.signature, value.symbol)


@lower_constant(SymbolFunctionType)
def _lower_symbol_function(context, builder, typ, pyval):
    function_type = context.get_value_type(typ.ftype).pointee
    function = cgutils.get_or_insert_function(builder.module, function_type, typ.symbol)
    value = cgutils.create_struct_proxy(typ)(context, builder)
    value.c_addr = builder.bitcast(function, cgutils.voidptr_t)
    value.py_addr = ir.Constant(cgutils.voidptr_t, None)
    value.jit_addr = ir.Constant(cgutils.voidptr_t, None)
    return value._getvalue()


@lower_cast(SymbolFunctionType, types.FunctionType)
def _cast_symbol_function(context, builder, fromty, toty, value):
    return value


class Uncacheable(Exception):
    """The closure holds something whose identity across processes is not known."""


def _as_symbol_function(value, symbol: str) -> SymbolFunction | None:
    """``value`` as a :class:`SymbolFunction` named ``symbol``, if it is a function pointer
    (a numba cfunc, a kernel implementing ``WrapperAddressProtocol``, a ctypes callback)."""
    if isinstance(value, SymbolFunction):
        return value
    if isinstance(value, CFunc):
        return SymbolFunction(symbol, value._sig, value.address, value)
    if isinstance(value, types.WrapperAddressProtocol):
        return SymbolFunction(symbol, value.signature(), value.__wrapper_address__(), value)
    if isinstance(value, ctypes._CFuncPtr):
        signature = ctypes_utils.make_function_type(value).sig
        address = ctypes.cast(value, ctypes.c_void_p).value
        return SymbolFunction(symbol, signature, address, value)
    return None


@cache
def _module_source_digest(module_name: str) -> str:
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if path is None:
        raise Uncacheable(f"module {module_name} has no source file")
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _source_digest_or_name(module_name: str) -> str:
    """The source digest of a module, or its name and version for compiled modules (numpy,
    the standard library's builtins), whose code does not change within a version."""
    module = sys.modules.get(module_name)
    if getattr(module, "__file__", "").endswith(".py"):
        return _module_source_digest(module_name)
    top = sys.modules.get(module_name.partition(".")[0])
    return f"{module_name} {getattr(top, '__version__', sys.version)}"


def _global_names(code: python_types.CodeType) -> list[str]:
    """The globals a code object (and the code objects nested in it) reads, in order."""
    names = [i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"]
    for const in code.co_consts:
        if isinstance(const, python_types.CodeType):
            names += _global_names(const)
    return list(dict.fromkeys(names))


def _stable(value):
    """A representation of ``value`` that is equal in every process for equal contents."""
    from pymc_odesens.codegen.kernels import kernel_cache_key
    from pymc_odesens.model import OdeSystem

    if isinstance(value, OdeSystem):
        return ("OdeSystem", kernel_cache_key(value), value.name, *value.states, *value.params)
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, hashlib.sha256(value.tobytes()).hexdigest())
    if isinstance(value, (bool, int, float, str, bytes, type(None), np.generic)):
        return (type(value).__name__, repr(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *map(_stable, value))
    if isinstance(value, dict):
        return ("dict", *sorted((repr(k), _stable(v)) for k, v in value.items()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [(f.name, _stable(getattr(value, f.name))) for f in dataclasses.fields(value)]
        return (type(value).__qualname__, *fields)
    raise Uncacheable(f"no stable representation of {type(value).__name__}")


def _code_fingerprint(code: python_types.CodeType) -> tuple:
    """What a code object computes (bytecode, constants, names), equal in every process
    (``marshal.dumps`` is not: its reference flags depend on reference counts)."""
    consts = tuple(
        _code_fingerprint(c)
        if isinstance(c, python_types.CodeType)
        else (type(c).__name__, repr(c))
        for c in code.co_consts
    )
    return (code.co_code.hex(), consts, code.co_names, code.co_varnames, code.co_freevars)


def stable_key(value) -> int:
    """A non-negative int64 that identifies ``value``'s contents in every process (where
    that is not known, ``id(value)``): the key a compiled function passes back to Python
    to find its spec, which must survive a cached compile."""
    try:
        digest = hashlib.sha256(repr(_stable(value)).encode()).digest()
    except Uncacheable:
        return id(value)
    return int.from_bytes(digest[:8], "little") >> 1


class _ClosureWalk:
    """Fingerprint of a jitted function and everything it captures; function pointers in
    its closure cells are replaced by symbol functions (named after ``prefix``)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.digest = hashlib.sha256()
        self.pointers: list = []
        self.seen: set = set()

    def add(self, *parts) -> None:
        self.digest.update(repr(parts).encode())

    def function(self, dispatcher) -> None:
        py_func = dispatcher.py_func
        if id(py_func) in self.seen:
            self.add("seen", py_func.__qualname__)
            return
        self.seen.add(id(py_func))
        self.add("function", py_func.__module__, py_func.__qualname__)
        self.add(_module_source_digest(py_func.__module__))
        self.add(_code_fingerprint(py_func.__code__))
        for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__ or ()):
            self.add("cell", name)
            cell.cell_contents = self.value(cell.cell_contents)
        for name in _global_names(py_func.__code__):
            if name in py_func.__globals__:
                self.add("global", name)
                self.global_value(py_func.__globals__[name])

    def global_value(self, value) -> None:
        """A module-level name the function reads: numba bakes it in at compile time, so
        the key covers its module's source (a module, a function, a class) or its value."""
        if isinstance(value, Dispatcher):
            self.function(value)
        elif isinstance(value, python_types.ModuleType):
            self.add(value.__name__, _source_digest_or_name(value.__name__))
        elif isinstance(value, (type, python_types.FunctionType, python_types.BuiltinFunctionType)):
            module = getattr(value, "__module__", None) or "builtins"
            self.add(module, getattr(value, "__qualname__", ""), _source_digest_or_name(module))
        else:  # a constant; a function pointer or anything unknown raises Uncacheable
            self.add(_stable(value))

    def value(self, value):
        symbol = f"{self.prefix}_{len(self.pointers)}"
        pointer = _as_symbol_function(value, symbol)
        if pointer is not None:
            self.pointers.append(pointer)
            self.add("pointer", str(pointer.signature))
            return pointer
        if isinstance(value, Dispatcher):
            self.function(value)
            return value
        if isinstance(value, tuple):
            return tuple(self.value(v) for v in value)
        self.add(_stable(value))
        return value


def op_cache_key(op, func) -> str | None:
    """The cache key of ``op``'s numba function ``func`` (its closure's function pointers
    become symbol functions), or None when something in it cannot be identified."""
    import numba

    from pymc_odesens.version import __version__ as package_version

    try:
        props = tuple((name, _stable(getattr(op, name))) for name in op.__props__)
        base = hashlib.sha256(
            repr((type(op).__module__, type(op).__qualname__, props)).encode()
        ).hexdigest()
        walk = _ClosureWalk(f"pymc_odesens_{base[:32]}")
        walk.add(numba.__version__, package_version, base)
        walk.function(func)
    except Uncacheable:
        return None
    return f"pymc_odesens_{walk.digest.hexdigest()}"


def _funcify_and_cache_key(op, node=None, **kwargs):
    func = numba_funcify(op, node=node, **kwargs)
    return func, op_cache_key(op, func)


def register_cacheable(*op_types) -> None:
    """Give the numba implementations of ``op_types`` cache keys (see the module docstring).

    Their ``numba_funcify`` implementations must already be registered.
    """
    for op_type in op_types:
        numba_funcify_and_cache_key.register(op_type)(_funcify_and_cache_key)
