"""Checks of the inputs of :func:`pymc_odesens.ode_solution` when its graph is built.

``y0`` and ``params`` may be symbolic (random variables, transforms, shared
variables) but must be real numbers; ``times`` must be known when the graph is built
(they fix the Op: output shapes, the compiled solver's targets).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable

from pymc_odesens.model import OdeSystem
from pymc_odesens.solvers.controls import validate_times

__all__ = [
    "real_tensor",
    "known_times",
    "as_matrix",
    "experiment_count",
    "experiment_times",
    "experiment_inputs",
]


def real_tensor(argument: str, value):
    """``value`` as a float64 tensor, or a TypeError naming ``argument`` when it is text,
    complex or not numeric (a complex value is never cast: that would drop its imaginary
    part)."""
    if isinstance(value, Variable):
        dtype = getattr(value.type, "dtype", None)
        if dtype is None or not (dtype.startswith(("float", "int", "uint")) or dtype == "bool"):
            raise TypeError(f"{argument} must be a real tensor, got {value} of type {value.type}")
        return pt.as_tensor_variable(value, dtype="float64")
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{argument} must be numbers or PyTensor tensors, got the text {value!r}")
    array = np.asarray(value)
    if array.dtype.kind == "c":
        raise TypeError(f"{argument} must be real, got complex values {array}")
    if array.dtype.kind not in "fiub":
        raise TypeError(
            f"{argument} must be numbers or PyTensor tensors, got {value!r} "
            f"(numpy dtype {array.dtype})"
        )
    return pt.as_tensor_variable(array, dtype="float64")


def known_times(times) -> np.ndarray:
    """The output times as a float array; a TypeError when they are symbolic, shared, text
    or complex."""
    if isinstance(times, SharedVariable):
        raise TypeError(
            "times must be known when the graph is built (a numpy array, a list of numbers or "
            "a PyTensor constant), got the shared variable "
            f"{times}; pass its value (times.get_value()) and build the model again for "
            "other times"
        )
    if isinstance(times, Variable) and not isinstance(times, Constant):
        raise TypeError(
            "times must be known when the graph is built (a numpy array, a list of numbers or "
            f"a PyTensor constant), got the symbolic variable {times} of type {times.type}"
        )
    if isinstance(times, Constant):
        times = times.data
    if isinstance(times, (str, bytes)):
        raise TypeError(f"times must be numbers, got the text {times!r}")
    try:
        array = np.asarray(times)
    except ValueError as err:  # ragged lists
        raise TypeError(f"times must be a rectangular array of numbers: {err}") from None
    if array.dtype.kind == "c":
        raise TypeError(f"times must be real, got complex values {array}")
    if array.dtype.kind not in "fiu":
        raise TypeError(f"times must be numbers, got {times!r} (numpy dtype {array.dtype})")
    return array.astype(float)


def as_matrix(argument: str, value, width: int, what: str):
    """``(x, batched)``: ``value`` as a float64 tensor of shape (E, width), E = 1 for a vector."""
    if isinstance(value, (list, tuple)):
        if len(value) == 0 and width == 0:
            value = np.zeros(0)
        else:
            value = pt.stack(
                [real_tensor(f"{argument}[{i}]", v) for i, v in enumerate(value)], axis=-1
            )
    x = real_tensor(argument, value)
    if x.ndim not in (1, 2):
        raise ValueError(
            f"{argument} must have shape ({width},) or (E, {width}) ({what}); got {x.ndim} dims"
        )
    if x.type.shape[-1] is not None and x.type.shape[-1] != width:
        raise ValueError(
            f"{argument} must have {width} entries ({what}) in its last axis; "
            f"got shape {x.type.shape}"
        )
    if x.ndim == 1:
        return x[None, :], False
    return x, True


def experiment_count(sizes: dict) -> tuple[bool, int]:
    """``(batched, E)`` from the experiment-axis lengths ``sizes``: they must agree and be known."""
    known = {k: v for k, v in sizes.items() if v is not None}
    if len(set(known.values())) > 1:
        raise ValueError(f"the experiment axes disagree: {known}")
    batched = bool(sizes)
    if batched and not known:
        raise ValueError(
            "the number of experiments must be known when the graph is built; give y0 or "
            "params a static leading dimension (e.g. pt.as_tensor(np.array(...)))"
        )
    return batched, (next(iter(known.values())) if batched else 1)


def experiment_times(times, t0: float) -> np.ndarray:
    """The validated output times: shape (T,), or (E, T) with one row per experiment."""
    times_arr = known_times(times)
    if times_arr.ndim == 2:
        return np.ascontiguousarray(np.stack([validate_times(row, t0) for row in times_arr]))
    if times_arr.ndim <= 1:
        return validate_times(times_arr, t0)
    raise ValueError(f"times must have shape (T,) or (E, T); got shape {times_arr.shape}")


def experiment_inputs(system: OdeSystem, y0, params, times_arr: np.ndarray, needs_y0: bool = True):
    """``(params_m, y0_m, sizes)``: ``params`` and ``y0`` as (E, width) tensors.

    ``y0_m`` is None when ``y0`` is None (the system's ``y0(p)``, or, with ``needs_y0``
    False, a state that comes from elsewhere: pre-equilibration); ``sizes`` maps
    each input with an experiment axis (params, y0, times) to its length
    (None where not known when the graph is built).
    """
    params_m, params_batched = as_matrix(
        "params", params, system.n_params, "one value per parameter"
    )
    if y0 is None:
        if needs_y0 and system.initial_state_expressions is None:
            raise ValueError("y0 is required: the system declares no initial_state y0(p)")
        y0_m, y0_batched = None, False
    else:
        y0_m, y0_batched = as_matrix("y0", y0, system.n_states, "one value per state")
    sizes = {}
    if params_batched:
        sizes["params"] = params_m.type.shape[0]
    if y0_batched:
        sizes["y0"] = y0_m.type.shape[0]
    if times_arr.ndim == 2:
        sizes["times"] = times_arr.shape[0]
    return params_m, y0_m, sizes
