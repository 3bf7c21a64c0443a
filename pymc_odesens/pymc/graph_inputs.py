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

__all__ = ["real_tensor", "known_times"]


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
