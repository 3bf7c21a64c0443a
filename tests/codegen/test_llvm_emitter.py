"""The LLVM emitter's splitting of oversized expressions into temporaries."""

from __future__ import annotations

import ast
import math

import pytest

from pymc_odesens.codegen.llvm_emitter import (
    EXPRESSION_OPERATIONS,
    _size,
    _split_expressions,
    _Temporaries,
)


def _deep_sum(terms: int) -> str:
    # a left-nested sum as sympy prints a long rate law: depth grows with the terms
    return " + ".join(
        f"{k + 1}.0*math.sin(x*{k % 7 + 1}.0)/(1.0 + x*x*{k + 1}.0)" for k in range(terms)
    )


@pytest.mark.parametrize("terms", [5, 60, 900])
def test_split_expressions_keep_the_value_and_bound_every_statement(terms):
    source = f"out = {_deep_sum(terms)}"
    body = ast.parse(source).body
    split = _split_expressions(body, _Temporaries())
    for statement in split:
        assert _size(statement.value) <= EXPRESSION_OPERATIONS
    if terms == 5:
        assert len(split) == 1  # small enough: left alone
    else:
        assert len(split) > 1
    program = ast.Module(body=split, type_ignores=[])
    ast.fix_missing_locations(program)
    for x in (0.3, -1.7):
        expected, scope = {"x": x, "math": math}, {"x": x, "math": math}
        exec(source, expected)
        exec(compile(program, "<split>", "exec"), scope)
        assert scope["out"] == expected["out"]  # the same operations in the same order
