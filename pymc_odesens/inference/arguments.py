"""Checks of arguments that several inference functions share (errors name the argument and
the expected value)."""

from __future__ import annotations

import numpy as np

__all__ = ["positive_int", "positive_number", "weight_threshold"]


def positive_int(name: str, value, minimum: int = 1) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) of at least ``minimum``.

    Raises
    ------
    ValueError
        ``"{name}: expected an integer >= {minimum}, got {value!r}"``.
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def weight_threshold(name: str, value) -> float:
    """``value`` as a ``float`` if it is a real number (not a bool) in [0, 1).

    Raises
    ------
    ValueError
        ``"{name}: expected a number in [0, 1), got {value!r}"``.
    """
    if not (_real(value) and 0.0 <= value < 1.0):
        raise ValueError(f"{name}: expected a number in [0, 1), got {value!r}")
    return float(value)


def positive_number(name: str, value, unit: str = "") -> float:
    """``value`` as a ``float`` if it is a positive finite real number (not a bool).

    Raises
    ------
    ValueError
        ``"{name}: expected a positive number{unit}, got {value!r}"``.
    """
    if not (_real(value) and np.isfinite(value) and value > 0):
        raise ValueError(f"{name}: expected a positive number{unit}, got {value!r}")
    return float(value)


def _real(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float | np.integer | np.floating)
