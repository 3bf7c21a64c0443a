"""Compiled kernels of a system: generate once, cache on disk, load in any process."""

from __future__ import annotations

import ctypes
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from pymc_odesens.codegen.adjoint_source import adjoint_module_source
from pymc_odesens.codegen.cache import (
    GENERATION_LOCK,
    import_module_from_path,
    module_path,
    write_atomically,
)
from pymc_odesens.codegen.event_source import (
    EVENT_KERNELS_VERSION,
    event_module_source,
    event_sensitivity_module_source,
)
from pymc_odesens.codegen.event_tables import event_table
from pymc_odesens.codegen.kernel_source import CFUNC_OPTIONS, CODEGEN_VERSION, module_source
from pymc_odesens.codegen.sensitivity_source import sensitivity_blocks, sensitivity_module_source
from pymc_odesens.codegen.signature import KERNEL_NAMES, KERNEL_SIGNATURE
from pymc_odesens.model import OdeSystem

__all__ = [
    "CompiledKernels",
    "compile_kernels",
    "compile_sensitivity_kernel",
    "compile_adjoint_kernels",
    "compile_event_kernels",
    "compile_event_sensitivity_kernels",
    "EventKernels",
    "load_generated_module",
    "kernel_cache_key",
]

_LOADED: dict[str, CompiledKernels] = {}
_DOUBLE_PTR = ctypes.POINTER(ctypes.c_double)


def kernel_cache_key(system: OdeSystem) -> str:
    """Cache key: the system's fingerprint and the code generator's version."""
    return hashlib.sha256(f"{CODEGEN_VERSION}:{system.fingerprint}".encode()).hexdigest()[:24]


class CompiledKernels:
    """The numba cfuncs of one system (see :mod:`pymc_odesens.codegen.signature`).

    Each kernel is compiled when first used (and then loaded from numba's disk
    cache in later processes): a solve needs ``rhs`` and ``J_y`` only, so a new
    model does not wait for the compile of kernels it does not use.

    Attributes
    ----------
    rhs, jac_y, jac_p, vjp_y, vjp_p, jvp_y : numba CFunc
        ``f``; ``J_y`` (row-major N x N); ``J_p`` (P x N, ``out[k*N + i] =
        df_i/dp_k``); ``lambda^T J_y`` (N); ``lambda^T J_p`` (P); ``J_y v`` (N).
    initial_state, initial_state_jac : numba CFunc or None
        ``y0(p)`` (N) and ``dy0/dp`` (P x N) when the system declares ``y0(p)``
        (they read only ``p``).
    n_states, n_params : int
    path : pathlib.Path
        The generated source file.
    """

    _NAMES = (*KERNEL_NAMES, "initial_state", "initial_state_jac")

    def __init__(self, module, n_states: int, n_params: int, path: Path):
        self._module = module
        self._compiled: dict[str, object] = {}
        self.n_states = n_states
        self.n_params = n_params
        self.path = path

    def __getattr__(self, name: str):
        if name not in CompiledKernels._NAMES:
            raise AttributeError(name)
        compiled = self.__dict__["_compiled"]
        kernel = compiled.get(name)
        if kernel is None:
            function = getattr(self.__dict__["_module"], name, None)
            if function is None:  # initial_state kernels of a system without y0(p)
                return None
            with GENERATION_LOCK:
                kernel = compiled.get(name)
                if kernel is None:
                    kernel = numba.cfunc(KERNEL_SIGNATURE, **CFUNC_OPTIONS)(function)
                    compiled[name] = kernel
        return kernel

    def output_shape(self, name: str) -> tuple[int, ...]:
        """numpy shape of the output of kernel ``name``."""
        n, p = self.n_states, self.n_params
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
        name : {"rhs", "jac_y", "jac_p", "vjp_y", "vjp_p", "jvp_y"}
        t : float
        y : array_like, shape (N,)
        p : array_like, shape (P,)
        v : array_like, shape (N,), optional
            Cotangent (``vjp_*``) or direction (``jvp_y``).
        """
        if getattr(self, name, None) is None:
            raise ValueError(f"no kernel {name!r}; kernels are {KERNEL_NAMES} (+ initial_state)")
        y = np.ascontiguousarray(y, dtype=float).reshape(self.n_states)
        p = np.ascontiguousarray(p, dtype=float).reshape(self.n_params)
        v = np.zeros(self.n_states) if v is None else np.ascontiguousarray(v, dtype=float)
        out = np.zeros(self.output_shape(name))
        fn = getattr(self, name).ctypes
        ptr = [a.ctypes.data_as(_DOUBLE_PTR) for a in (y, p, v, out)]
        # empty arrays still need a valid pointer
        fn(float(t), *ptr)
        return out


def compile_kernels(system: OdeSystem) -> CompiledKernels:
    """Generate, cache and compile the kernels of ``system`` (once per process).

    The generated module is written to :func:`pymc_odesens.codegen.cache.cache_directory`
    under a key hashing the expressions; a later process imports it directly and
    numba loads the compiled kernels from its own cache.
    """
    cached = getattr(system, "_compiled_kernels", None)
    if cached is not None:
        return cached
    with GENERATION_LOCK:
        return _compile_kernels_locked(system)


def _compile_kernels_locked(system: OdeSystem) -> CompiledKernels:
    key = kernel_cache_key(system)
    kernels = _LOADED.get(key)
    if kernels is None:
        path = module_path(key)
        if not path.exists():
            write_atomically(path, module_source(system))
        module = import_module_from_path(path)
        kernels = CompiledKernels(module, system.n_states, system.n_params, path)
        _LOADED[key] = kernels
    system._compiled_kernels = kernels
    return kernels


_LOADED_MODULES: dict[str, object] = {}


def load_generated_module(key: str, make_source):
    """The generated module cached under ``key``: imported once per process, written once.

    ``make_source()`` is called only when the file is not on disk yet.
    """
    with GENERATION_LOCK:
        module = _LOADED_MODULES.get(key)
        if module is None:
            path = module_path(key)
            if not path.exists():
                write_atomically(path, make_source())
            module = import_module_from_path(path)
            _LOADED_MODULES[key] = module
        return module


def compile_sensitivity_kernel(system: OdeSystem, wrt: str = "params"):
    """The cfunc ``sens_rhs`` of the forward-sensitivity system (generated, cached, compiled).

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


def compile_adjoint_kernels(system: OdeSystem):
    """The cfuncs ``(adjoint_rhs, adjoint_jac)`` of the backward adjoint system.

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
time_gradient : numba CFunc
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
