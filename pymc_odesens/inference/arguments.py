"""Checks of arguments that several inference functions share (errors name the argument and
the expected value)."""

from __future__ import annotations

import numpy as np

__all__ = ["positive_int", "weight_threshold"]


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
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name}: expected a number in [0, 1), got {value!r}")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name}: expected a number in [0, 1), got {value!r}")
    return float(value)
