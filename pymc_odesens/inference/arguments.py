"""Checks of arguments that several inference functions share (errors name the argument and
the expected value)."""

from __future__ import annotations

import numpy as np

__all__ = ["positive_int"]


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
