"""Basic-block breaks in long generated functions, so that numba compiles them in linear time.

numba's lowering decides, for every variable of a basic block, whether it is assigned
once by scanning all the assignments of that block
(``numba.core.lowering.Lower._find_singly_assigned_variable``): the cost is the
number of variables times the number of statements of the block, quadratic in the
length of straight-line code. Generated kernels of large dense systems are exactly
that (the right-hand side of a dense linear system with N = 40 has 1600 products
in one block: 21 s to compile, 12 s of it in that scan).

A statement ``if t != t: pass`` ends a basic block at no run-time cost (LLVM
removes the empty branch) and numba cannot prune it, because the condition is
not a compile-time constant. Inserted every :data:`BLOCK_BREAK_CHARACTERS`
characters of generated source, it bounds the size of every block.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["BLOCK_BREAK_CHARACTERS", "with_block_breaks"]

BLOCK_BREAK_CHARACTERS = 2000
"""Generated source characters (about 100 arithmetic operations) per basic block."""


def with_block_breaks(
    statements: Iterable[str],
    scalar: str,
    indent: str,
    budget: int | None = None,
) -> list[str]:
    """``statements`` with a block break after every ``budget`` characters.

    Parameters
    ----------
    statements : iterable of str
        Straight-line statements of one block of a function body, each a
        complete line (with its indentation).
    scalar : str
        Name of a float64 variable bound before the statements (the time
        argument): the break compares it with itself.
    indent : str
        Indentation of the statements.
    budget : int, optional
        Characters of source between two breaks; default
        :data:`BLOCK_BREAK_CHARACTERS` (read at each call).

    Returns
    -------
    list of str
    """
    if budget is None:
        budget = BLOCK_BREAK_CHARACTERS
    if budget < 1:
        raise ValueError(f"budget must be a positive number of characters, got {budget!r}")
    lines: list[str] = []
    size = 0
    for statement in statements:
        if size >= budget:
            lines.append(f"{indent}if {scalar} != {scalar}:  # basic-block break (block_breaks)")
            lines.append(f"{indent}    pass")
            size = 0
        lines.append(statement)
        size += len(statement)
    return lines
