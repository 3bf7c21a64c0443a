"""Machine code of generated kernels: LLVM IR to object code, object code to function pointers.

The IR of :mod:`pymc_odesens.codegen.llvm_emitter` is compiled for this machine's CPU by
llvmlite (installed with numba) into object code, which the kernel cache keeps on disk; an
object file is loaded into one process-wide MCJIT execution engine
(``ExecutionEngine.add_object_file``) and its functions become :class:`Kernel` objects.

A :class:`Kernel` implements numba's ``WrapperAddressProtocol``: numba-compiled solvers take
it wherever they take a first-class function of type
:data:`~pymc_odesens.codegen.signature.KERNEL_TYPE` (an argument, or a constant captured by
a jitted closure), and call it through its address, exactly as they would call a
``numba.cfunc``.

No IR optimisation passes run: generated code is already free of common subexpressions,
and the code generator selects instructions with LLVM's default (``-O2``) settings. No
fast-math flag is ever set, so floating-point operations happen in the order of the
source, and contraction into fused multiply-adds is not allowed.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading

import llvmlite
import llvmlite.binding as llvm
from numba.experimental.function_type import WrapperAddressProtocol

from pymc_odesens.codegen.signature import KERNEL_SIGNATURE

__all__ = [
    "Kernel",
    "compile_object",
    "load_object",
    "machine_tag",
    "register_symbol",
]

_LOCK = threading.RLock()
_STATE: dict = {}
KERNEL_CTYPE = ctypes.CFUNCTYPE(
    None,
    ctypes.c_double,
    ctypes.POINTER(ctypes.c_double),
    ctypes.POINTER(ctypes.c_double),
    ctypes.POINTER(ctypes.c_double),
    ctypes.POINTER(ctypes.c_double),
)


def _target_machine():
    tm = _STATE.get("target_machine")
    if tm is None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_triple(llvm.get_process_triple())
        tm = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(),
            features=llvm.get_host_cpu_features().flatten(),
            opt=2,
            reloc="static",
            codemodel="jitdefault",
            jit=True,
        )
        _STATE["target_machine"] = tm
    return tm


def _engine():
    engine = _STATE.get("engine")
    if engine is None:
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine())
        _STATE["engine"] = engine
    return engine


def machine_tag() -> str:
    """Directory tag of object code: LLVM version, CPU name and a hash of its features.

    Object code is only valid on the machine (CPU features) and LLVM it was made for, so
    caches shared between machines keep one directory per kind of machine.
    """
    tag = _STATE.get("tag")
    if tag is None:
        features = llvm.get_host_cpu_features().flatten()
        digest = hashlib.sha256(features.encode()).hexdigest()[:8]
        version = ".".join(str(v) for v in llvm.llvm_version_info)
        tag = f"llvm{version}_llvmlite{llvmlite.__version__}_{llvm.get_host_cpu_name()}_{digest}"
        _STATE["tag"] = tag
    return tag


def compile_object(ir_text: str) -> bytes:
    """Object code of the LLVM module ``ir_text`` for this machine.

    Raises
    ------
    RuntimeError
        If LLVM rejects the module (a defect of the code generator: the message holds
        LLVM's diagnosis).
    """
    with _LOCK:
        tm = _target_machine()
        module = llvm.parse_assembly(ir_text)
        module.triple = tm.triple
        module.data_layout = str(tm.target_data)
        module.verify()
        return tm.emit_object(module)


def register_symbol(name: str, address: int) -> None:
    """Make the external C function ``name`` (at ``address``) visible to loaded kernels."""
    with _LOCK:
        llvm.add_symbol(name, address)


def load_object(data: bytes, symbols: list[str]) -> list[int]:
    """Load object code into this process; the addresses of ``symbols`` in it.

    ``data`` must be object code that :func:`compile_object` made, or a cache file's content
    verified against its digest (:func:`pymc_odesens.codegen.cache.read_artefact`): LLVM
    loads whatever it is given, and damaged object code crashes the process or computes
    other numbers.
    """
    with _LOCK:
        engine = _engine()
        engine.add_object_file(llvm.ObjectFileRef.from_data(data))
        engine.finalize_object()
        addresses = [engine.get_function_address(s) for s in symbols]
    missing = [s for s, a in zip(symbols, addresses) if not a]
    if missing:
        raise RuntimeError(f"object code defines no function {missing}")
    return addresses


class Kernel(WrapperAddressProtocol):
    """A compiled kernel ``void (double t, double* y, double* p, double* v, double* out)``.

    Attributes
    ----------
    name : str
        The kernel's name in its generated module.
    address : int
        Address of the machine code.
    """

    __slots__ = ("name", "address", "_ctypes")

    def __init__(self, name: str, address: int) -> None:
        self.name = name
        self.address = int(address)
        self._ctypes = None

    def __wrapper_address__(self) -> int:
        return self.address

    def signature(self):
        return KERNEL_SIGNATURE

    @property
    def ctypes(self):
        """The kernel as a ctypes function (calls from Python: checks and tests)."""
        if self._ctypes is None:
            self._ctypes = KERNEL_CTYPE(self.address)
        return self._ctypes

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, address=0x{self.address:x})"
