"""Compiled kernels of a system: generate once, cache on disk, load in any process.

One interface, whatever emits the machine code: a generator writes the source of its
kernels (the kernel language of :mod:`pymc_odesens.codegen.llvm_emitter`) and
:func:`load_generated_module` returns them compiled. Each kernel is compiled when first
used, its object code is written to the cache (:mod:`pymc_odesens.codegen.cache`), and a
later process loads that object code: it neither generates nor compiles anything. Every
file is verified before it is used (its SHA-256 digest and name); one that does not verify
is generated again and replaced, with a
:class:`~pymc_odesens.caching.disk_cache.KernelCacheWarning` naming it.
"""

from __future__ import annotations

import ast
import ctypes
import hashlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pymc_odesens.caching.compile_notice import compiling
from pymc_odesens.codegen.adjoint_source import adjoint_module_source
from pymc_odesens.codegen.cache import (
    GENERATION_LOCK,
    artefact_path,
    load_artefact,
    read_artefact,
    store_artefact,
)
from pymc_odesens.codegen.event_source import (
    EVENT_KERNELS_VERSION,
    event_module_source,
    event_sensitivity_module_source,
)
from pymc_odesens.codegen.event_tables import event_table
from pymc_odesens.codegen.kernel_source import CODEGEN_VERSION, kernel_sources
from pymc_odesens.codegen.llvm_emitter import (
    TRAJECTORY_STATE_SYMBOL,
    function_definitions,
    kernel_ir,
)
from pymc_odesens.codegen.machine_code import Kernel, compile_object, load_object, register_symbol
from pymc_odesens.codegen.sensitivity_source import sensitivity_blocks, sensitivity_module_source
from pymc_odesens.codegen.signature import KERNEL_NAMES
from pymc_odesens.model import OdeSystem

__all__ = [
    "CompiledKernels",
    "GeneratedKernels",
    "compile_kernels",
    "compile_sensitivity_kernel",
    "compile_adjoint_kernels",
    "compile_event_kernels",
    "compile_event_sensitivity_kernels",
    "EventKernels",
    "load_generated_module",
    "kernel_cache_key",
]

_DOUBLE_PTR = ctypes.POINTER(ctypes.c_double)


def kernel_cache_key(system: OdeSystem) -> str:
    """Cache key: the system's fingerprint and the code generator's version."""
    return hashlib.sha256(f"{CODEGEN_VERSION}:{system.fingerprint}".encode()).hexdigest()[:24]


# ----------------------------------------------------------------------------- externals


def _trajectory_state_address() -> int:
    # the adjoint kernels read the forward trajectory through this function of the
    # recorded-trajectory layout (a numba cfunc compiled once, cached by numba; imported here
    # so that only systems with adjoint kernels load it)
    from pymc_odesens.codegen.recorded_trajectory import trajectory_state_cfunc

    return trajectory_state_cfunc.address


_EXTERNALS: dict[str, Callable[[], int]] = {TRAJECTORY_STATE_SYMBOL: _trajectory_state_address}
"""Functions of the library that generated kernels may call, by symbol."""
_REGISTERED: set[str] = set()


def _ensure_externals(symbols: list[str]) -> None:
    for symbol in symbols:
        if symbol not in _REGISTERED:
            register_symbol(symbol, _EXTERNALS[symbol]())
            _REGISTERED.add(symbol)


def _external_calls(function: ast.FunctionDef) -> list[str]:
    names = {
        node.func.id
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    return [TRAJECTORY_STATE_SYMBOL] if "trajectory_state" in names else []


# ----------------------------------------------------------------------------- modules

_LOADED_SYMBOLS: dict[str, Kernel] = {}


class GeneratedKernels:
    """The kernels of one generated module (one cache key), each compiled on first use.

    Attributes are the module's kernels by function name (:class:`Kernel` objects, which
    numba-compiled code takes as first-class functions).

    Parameters
    ----------
    key : str
        Cache key (a hash of everything the source depends on).
    make_source : callable
        ``make_source()`` returns the module's source; called only when the cache holds
        neither the source nor the object code that is asked for.
    label : str
        What the kernels belong to, in a notice when their compile takes long.
    """

    def __init__(
        self, key: str, make_source: Callable[[], str], label: str = "a generated module"
    ) -> None:
        self.key = key
        self.label = label
        self._make_source = make_source
        self._kernels: dict[str, Kernel] = {}
        self._manifest: dict | None = None
        self._text: str | None = None
        self._definitions: dict[str, ast.FunctionDef] | None = None

    @property
    def source_path(self):
        """Path of the generated source in the cache directory."""
        return artefact_path(self.key, ".py")

    def _source(self) -> str:
        if self._text is None:
            path = self.source_path
            text = load_artefact(path, bytes.decode)
            if text is None:
                text = self._make_source()
                store_artefact(path, text.encode())
            self._text = text
        return self._text

    def _parsed(self) -> dict[str, ast.FunctionDef]:
        if self._definitions is None:
            self._definitions = function_definitions(self._source())
        return self._definitions

    def manifest(self) -> dict:
        """``{"kernels": {name: [external symbols]}}`` (read from the cache, else written)."""
        if self._manifest is None:
            path = artefact_path(self.key, ".json")
            manifest = load_artefact(path, _decode_manifest)
            if manifest is None:
                definitions = self._parsed()
                kernels = {name: _external_calls(f) for name, f in definitions.items()}
                manifest = {"codegen": CODEGEN_VERSION, "kernels": kernels}
                store_artefact(path, json.dumps(manifest, indent=1).encode())
            self._manifest = manifest
        return self._manifest

    @property
    def names(self) -> tuple[str, ...]:
        """Names of the module's kernels."""
        return tuple(self.manifest()["kernels"])

    def kernel(self, name: str) -> Kernel | None:
        """The compiled kernel ``name`` (None if the module defines none of that name)."""
        kernel = self._kernels.get(name)
        if kernel is not None:
            return kernel
        with GENERATION_LOCK:
            kernel = self._kernels.get(name)
            if kernel is not None:
                return kernel
            externals = self.manifest()["kernels"].get(name)
            if externals is None:
                return None
            symbol = f"pos_{self.key}_{name}"
            kernel = _LOADED_SYMBOLS.get(symbol)
            if kernel is None:
                path = artefact_path(self.key, f".{name}.o")
                data = read_artefact(path)  # verified, or None: never unverified bytes
                if data is None:
                    with compiling(f"the kernel {name} of {self.label}"):
                        definition = self._parsed().get(name)
                        if definition is None:
                            raise RuntimeError(
                                f"the generated source {self.source_path} defines no kernel "
                                f"{name!r}, which its manifest lists (a code generator defect)"
                            )
                        data = compile_object(kernel_ir(definition, symbol))
                    store_artefact(path, data)
                _ensure_externals(externals)
                (address,) = load_object(data, [symbol])
                kernel = _LOADED_SYMBOLS[symbol] = Kernel(name, address)
            self._kernels[name] = kernel
            return kernel

    def __getattr__(self, name: str) -> Kernel:
        if name.startswith("_"):
            raise AttributeError(name)
        kernel = self.kernel(name)
        if kernel is None:
            raise AttributeError(f"generated module {self.key} has no kernel {name!r}")
        return kernel


def _decode_manifest(data: bytes) -> dict:
    manifest = json.loads(data)
    kernels = manifest.get("kernels") if isinstance(manifest, dict) else None
    if not isinstance(kernels, dict) or not all(
        isinstance(externals, list) and all(s in _EXTERNALS for s in externals)
        for externals in kernels.values()
    ):
        raise ValueError("no kernels with known external symbols")
    return manifest


_LOADED_MODULES: dict[str, GeneratedKernels] = {}


def load_generated_module(
    key: str, make_source: Callable[[], str], label: str = "a generated module"
) -> GeneratedKernels:
    """The kernels of the generated module cached under ``key`` (one object per process).

    ``make_source()`` is called only when the cache lacks what is asked for; the kernels
    are attributes of the result, compiled (or loaded from the cache) on first access.
    ``label`` names what they belong to (a model) when a compile takes long enough to be
    announced (:mod:`pymc_odesens.caching.compile_notice`).
    """
    with GENERATION_LOCK:
        module = _LOADED_MODULES.get(key)
        if module is None:
            module = _LOADED_MODULES[key] = GeneratedKernels(key, make_source, label)
        return module


# ----------------------------------------------------------------------------- a system


class CompiledKernels:
    """The compiled kernels of one system (see :mod:`pymc_odesens.codegen.signature`).

    Each kernel is generated and compiled when first used (and then loaded from the disk
    cache in later processes): a solve needs ``rhs`` and ``J_y`` only, so a new model does
    not wait for kernels it does not use.

    Attributes
    ----------
    rhs, jac_y, jac_y_values, jac_p, vjp_y, vjp_p, jvp_y : Kernel
        ``f``; ``J_y`` (row-major N x N); the structural non-zeros of ``J_y`` in the order
        of :attr:`jacobian_pattern`; ``J_p`` (P x N, ``out[k*N + i] = df_i/dp_k``);
        ``lambda^T J_y`` (N); ``lambda^T J_p`` (P); ``J_y v`` (N).
    initial_state, initial_state_jac : Kernel or None
        ``y0(p)`` (N) and ``dy0/dp`` (P x N) when the system declares ``y0(p)``
        (they read only ``p``).
    n_states, n_params : int
    key : str
        The cache key.
    path : pathlib.Path
        The system's manifest in the cache directory.
    """

    _NAMES = (*KERNEL_NAMES, "initial_state", "initial_state_jac")

    def __init__(self, system: OdeSystem, key: str) -> None:
        self.n_states = system.n_states
        self.n_params = system.n_params
        self.key = key
        self.path = artefact_path(key, ".system.json")
        self._has_initial_state = system.initial_state_expressions is not None
        self._system = system
        self._sources = None
        self._pattern = None

    def _module(self, name: str) -> GeneratedKernels:
        def make_source() -> str:
            if self._sources is None:
                self._sources = kernel_sources(self._system)
            return self._sources[name]()

        label = f"model {self._system.name!r} ({self.n_states} states)"
        return load_generated_module(f"{self.key}_{name}", make_source, label)

    def __getattr__(self, name: str):
        if name not in CompiledKernels._NAMES:
            raise AttributeError(name)
        if name.startswith("initial_state") and not self.__dict__["_has_initial_state"]:
            return None
        return self._module(name).kernel(name)

    @property
    def jacobian_pattern(self) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, cols)`` of the structural non-zeros of ``J_y``, row by row (int64).

        The order of ``jac_y_values``' outputs; read from the cache (no sympy) when the
        system was seen before.
        """
        if self._pattern is None:
            path = artefact_path(self.key, ".pattern.npz")
            with GENERATION_LOCK:
                pattern = load_artefact(path, self._decode_pattern)
                if pattern is None:
                    keys = list(self._system.J_y_nonzeros)
                    rows = np.array([i for i, _ in keys], dtype=np.int64)
                    cols = np.array([j for _, j in keys], dtype=np.int64)
                    buffer = io.BytesIO()
                    np.savez(buffer, rows=rows, cols=cols)
                    store_artefact(path, buffer.getvalue())
                else:
                    rows, cols = pattern
            self._pattern = (
                np.ascontiguousarray(rows, dtype=np.int64),
                np.ascontiguousarray(cols, dtype=np.int64),
            )
        return self._pattern

    def _decode_pattern(self, data: bytes) -> tuple[np.ndarray, np.ndarray]:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            rows, cols = arrays["rows"], arrays["cols"]
        n = self.n_states
        if not (
            rows.ndim == cols.ndim == 1
            and rows.size == cols.size
            and rows.dtype.kind == cols.dtype.kind == "i"
            and np.all((rows >= 0) & (rows < n) & (cols >= 0) & (cols < n))
        ):
            raise ValueError(f"not a sparsity pattern of {n} x {n} matrices")
        return rows, cols

    def output_shape(self, name: str) -> tuple[int, ...]:
        """numpy shape of the output of kernel ``name``."""
        n, p = self.n_states, self.n_params
        if name == "jac_y_values":
            return (self.jacobian_pattern[0].size,)
        return {
            "rhs": (n,),
            "jac_y": (n, n),
            "jac_p": (p, n),
            "vjp_y": (n,),
            "vjp_p": (p,),
            "jvp_y": (n,),
            "initial_state": (n,),
            "initial_state_jac": (p, n),
        }[name]

    def evaluate(self, name: str, t: float, y, p, v=None) -> np.ndarray:
        """Call kernel ``name`` from Python (for checks and tests, not inner loops).

        Parameters
        ----------
        name : {"rhs", "jac_y", "jac_y_values", "jac_p", "vjp_y", "vjp_p", "jvp_y"}
        t : float
        y : array_like, shape (N,)
        p : array_like, shape (P,)
        v : array_like, shape (N,), optional
            Cotangent (``vjp_*``) or direction (``jvp_y``).
        """
        if name not in CompiledKernels._NAMES or getattr(self, name) is None:
            raise ValueError(
                f"no kernel {name!r}; kernels are {KERNEL_NAMES} (+ initial_state when the "
                "system declares y0(p))"
            )
        y = np.ascontiguousarray(y, dtype=float).reshape(self.n_states)
        p = np.ascontiguousarray(p, dtype=float).reshape(self.n_params)
        v = np.zeros(self.n_states) if v is None else np.ascontiguousarray(v, dtype=float)
        out = np.zeros(self.output_shape(name))
        # empty arrays still need a valid pointer
        arrays = [a if a.size else np.zeros(1) for a in (y, p, v)] + [out]
        if out.size == 0:
            return out
        getattr(self, name).ctypes(float(t), *[a.ctypes.data_as(_DOUBLE_PTR) for a in arrays])
        return out


def compile_kernels(system: OdeSystem) -> CompiledKernels:
    """The kernels of ``system`` (once per process; generated and compiled on first use).

    Kernels are generated into :func:`pymc_odesens.codegen.cache.kernel_directory` under a
    key hashing the expressions; a later process loads their object code directly.
    """
    cached = getattr(system, "_compiled_kernels", None)
    if cached is not None:
        return cached
    with GENERATION_LOCK:
        cached = getattr(system, "_compiled_kernels", None)
        if cached is not None:  # another thread made them while this one waited
            return cached
        key = kernel_cache_key(system)
        kernels = CompiledKernels(system, key)
        if read_artefact(kernels.path) is None:
            description = {
                "name": system.name,
                "n_states": system.n_states,
                "n_params": system.n_params,
                "codegen": CODEGEN_VERSION,
            }
            store_artefact(kernels.path, json.dumps(description, indent=1).encode())
        system._compiled_kernels = kernels
        return kernels


def compile_sensitivity_kernel(system: OdeSystem, wrt: str = "params") -> Kernel:
    """The kernel ``sens_rhs`` of the forward-sensitivity system (generated, cached, compiled).

    Parameters
    ----------
    system : OdeSystem
    wrt : {"params", "y0", "both"}
        Columns of the sensitivity matrix (see
        :mod:`pymc_odesens.codegen.sensitivity_source`).
    """
    sensitivity_blocks(system, wrt)  # validates wrt
    key = f"{kernel_cache_key(system)}_sens_{wrt}"
    return load_generated_module(key, lambda: sensitivity_module_source(system, wrt)).sens_rhs


def compile_adjoint_kernels(system: OdeSystem) -> tuple[Kernel, Kernel]:
    """The kernels ``(adjoint_rhs, adjoint_jac)`` of the backward adjoint system.

    See :mod:`pymc_odesens.codegen.adjoint_source` for what they compute and
    the trajectory buffer they read instead of a plain parameter vector.
    """
    key = f"{kernel_cache_key(system)}_adjoint"
    module = load_generated_module(key, lambda: adjoint_module_source(system))
    return module.adjoint_rhs, module.adjoint_jac


@dataclass(frozen=True)
class EventKernels:
    """Compiled kernels and static tables of a system's events.

    Attributes
    ----------
    conditions, rates, times, triggers, priorities, jump, time_sensitivity, adjoint_jump, \
time_gradient : Kernel
        See :mod:`pymc_odesens.codegen.event_source` (``jump`` and ``time_sensitivity``
        are the plain state's; the latter writes nothing).
    directions : numpy.ndarray of int64
        Sign changes of each root atom that stop an integrator run (+1 up, -1 down, 0
        both).
    table : numpy.ndarray of int64, shape (E, EVENT_TABLE_WIDTH)
        See :mod:`pymc_odesens.codegen.event_tables`.
    cause_table : numpy.ndarray of int64, shape (1 + R + S, 2)
        Class and an event of each cause code ``c`` at row ``c + 1``
        (:mod:`pymc_odesens.model.event_atoms`).
    slot_event, slot_time : numpy.ndarray of int64
        For each slot of ``times``: its explicit event's index and the position within
        that event's times, or ``-1 - m`` and 0 for time atom ``m``.
    names : tuple of str
        Event names by index.
    slot_names : tuple of str
        What each slot's time is, for messages.
    """

    conditions: object
    rates: object
    times: object
    triggers: object
    priorities: object
    jump: object
    time_sensitivity: object
    adjoint_jump: object
    time_gradient: object
    directions: np.ndarray
    table: np.ndarray
    cause_table: np.ndarray
    slot_event: np.ndarray
    slot_time: np.ndarray
    names: tuple
    slot_names: tuple


def _event_cache_key(system: OdeSystem) -> str:
    return f"{kernel_cache_key(system)}_events{EVENT_KERNELS_VERSION}"


def compile_event_kernels(system: OdeSystem) -> EventKernels | None:
    """The event kernels of ``system`` (generated, cached, compiled), or None without events."""
    if not system.events:
        return None
    module = load_generated_module(_event_cache_key(system), lambda: event_module_source(system))
    atoms = system.event_atoms
    names = tuple(e.name for e in system.events)
    slot_names = tuple(
        f"event {names[owner]!r} (time {position})"
        if owner >= 0
        else f"the time {atoms.time_atoms[-1 - owner]} of a trigger"
        for owner, position, _ in atoms.slots
    )
    return EventKernels(
        conditions=module.event_conditions,
        rates=module.event_condition_rates,
        times=module.event_times,
        triggers=module.event_triggers,
        priorities=module.event_priorities,
        jump=module.event_jump,
        time_sensitivity=module.event_time_sensitivity,
        adjoint_jump=module.event_adjoint_jump,
        time_gradient=module.event_time_gradient,
        directions=np.array(atoms.root_directions, dtype=np.int64),
        table=event_table(system),
        cause_table=np.ascontiguousarray(
            np.stack([atoms.cause_classes, atoms.cause_events], axis=1)
        ),
        slot_event=np.array([owner for owner, _, _ in atoms.slots], dtype=np.int64),
        slot_time=np.array([position for _, position, _ in atoms.slots], dtype=np.int64),
        names=names,
        slot_names=slot_names,
    )


def compile_event_sensitivity_kernels(system: OdeSystem, wrt: str = "params"):
    """``(event_jump, event_time_sensitivity)`` for forward sensitivities with columns ``wrt``."""
    n_p, n_y0 = sensitivity_blocks(system, wrt)
    key = f"{_event_cache_key(system)}_{wrt}"
    module = load_generated_module(key, lambda: event_sensitivity_module_source(system, n_p, n_y0))
    return module.event_jump, module.event_time_sensitivity
