"""Symbols the library creates for itself, kept apart from every user name.

A user's state or parameter may be called anything that is an identifier: ``v_0``,
``lambda_0``, ``t``, ``time``, ``E``, ``I``, ``N``, ``S``, ``pi``, ``beta``, ``cse0``, a
Python keyword. The library's own symbols (time, the position-named symbols that code
generation prints as ``y[i]``, the cotangent and direction vectors of the Jacobian products,
the locals of generated code) are :class:`InternalSymbol` instances. sympy compares and
hashes symbols by class as well as by name and assumptions, so an internal symbol never
equals a user's :class:`sympy.Symbol`, whatever the two are called.
"""

from __future__ import annotations

from collections.abc import Iterator

import sympy as sp

__all__ = ["InternalSymbol", "internal_symbols", "time_symbol"]


class InternalSymbol(sp.Symbol):
    """A sympy symbol owned by the library: never equal to a user's ``sympy.Symbol``.

    sympy compares symbols by type identity, so equality never mixes the two. sympy also
    orders the terms of sums and products, and chooses common subexpressions, partly by
    the class *name* (``Basic.compare``, sort keys); the class therefore carries the plain
    symbol's ``__name__`` (its ``__qualname__`` stays, for pickling), so that expressions
    in internal symbols order, and generated code evaluates, exactly as with plain ones.
    """


InternalSymbol.__name__ = "Symbol"


def time_symbol() -> InternalSymbol:
    """The time symbol ``t`` handed to right-hand sides and used by the model readers.

    Being internal, it leaves ``t`` and ``time`` free as state or parameter names.
    """
    return InternalSymbol("t", real=True)


def internal_symbols(prefix: str) -> Iterator[InternalSymbol]:
    """``prefix0, prefix1, ...`` as internal symbols (for common-subexpression names)."""
    return sp.numbered_symbols(prefix, cls=InternalSymbol)
