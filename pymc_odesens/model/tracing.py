"""Calling user functions (right-hand sides, events, initial states) with sympy symbols.

The function runs once with symbols in place of numbers. What works on numbers but
not on symbols fails inside sympy or numpy with messages that do not say what to do:
``math.sin(y[0])`` ("Cannot convert expression to float"), ``np.exp(y[0])`` ("loop of
ufunc does not support argument 0 of type Symbol which has no callable exp method"),
``if y[0] > 0:`` or the builtin ``max(y[0], 0)`` ("cannot determine truth value of
Relational"). :func:`traced` names the user's line and the function of
:mod:`pymc_odesens.math` to use instead.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Callable

import numpy
import sympy

__all__ = ["traced", "symbolic_misuse_hint"]

# the package's own folder: two levels above this file (pymc_odesens/model/tracing.py)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARIES = tuple(
    [os.path.dirname(module.__file__) + os.sep for module in (sympy, numpy)]
    + [_PACKAGE_DIR + os.sep]
)
_UFUNC = re.compile(r"no callable (\w+) method")


def _user_line(error: BaseException) -> str:
    """`` at <file>:<line>: <source>`` of the innermost frame outside sympy, numpy and
    this package (the user's code), or ''."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if not frame.filename.startswith(_LIBRARIES):
            source = f": {frame.line.strip()}" if frame.line else ""
            return f" at {os.path.basename(frame.filename)}:{frame.lineno}{source}"
    return ""


def symbolic_misuse_hint(error: TypeError) -> str | None:
    """What to write instead, if ``error`` is one of the known symbol misuses; else None."""
    message = str(error)
    ufunc = _UFUNC.search(message)
    if ufunc is not None:
        name = ufunc.group(1)
        return (
            f"numpy.{name} cannot be applied to the symbolic states, parameters or time; "
            f"use pymc_odesens.math.{name} (import pymc_odesens.math as om; om.{name}(...))"
        )
    if "Cannot convert expression to float" in message or "Cannot convert complex" in message:
        return (
            "a function of the `math` module (math.exp, math.sin, ...) or float() was applied "
            "to a symbolic state, parameter or time; use the function of the same name in "
            "pymc_odesens.math (import pymc_odesens.math as om; om.exp(...), om.sin(...))"
        )
    if "truth value of Relational" in message:
        return (
            "a comparison of symbols was used as a Python truth value (if/else, and/or, while, "
            "or the builtins max/min); use pymc_odesens.math.where(condition, if_true, "
            "if_false), om.maximum / om.minimum or om.piecewise, or an event for a genuine "
            "discontinuity"
        )
    return None


def traced(function: Callable, args: tuple, label: str):
    """``function(*args)``; errors name ``label`` and, for misused symbols, the fix.

    Raises
    ------
    IndexError, KeyError, AttributeError
        Re-raised with ``label`` (a bad index or name).
    TypeError
        A known misuse of symbols (see :func:`symbolic_misuse_hint`), naming the user's
        line; other TypeErrors pass unchanged.
    """
    try:
        return function(*args)
    except (IndexError, KeyError, AttributeError) as err:
        raise type(err)(f"while tracing {label}: {str(err)}") from err
    except TypeError as err:
        hint = symbolic_misuse_hint(err)
        if hint is None:
            raise
        raise TypeError(
            f"while tracing {label}{_user_line(err)}: {hint} (the error was: {err})"
        ) from err
