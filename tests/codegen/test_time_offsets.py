"""Linear functions of time printed as offsets from their zero (codegen/time_offsets.py)."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from pymc_odesens.codegen.printer import KernelPrinter
from pymc_odesens.codegen.time_offsets import TimeSince, exact_time_offsets
from pymc_odesens.model.internal_symbols import InternalSymbol

T = InternalSymbol("_t", real=True)
Y = InternalSymbol("_y0")


def test_a_linear_function_of_time_becomes_an_offset_from_its_zero():
    # Chen_MSB2009's input: sympy distributes 50 over (t - 1799.99)
    (rewritten,) = exact_time_offsets([sp.sin(sp.pi * (50 * T - sp.Rational(179999, 2)))])
    assert rewritten.has(TimeSince(T, sp.Rational(179999, 100)))
    (negative,) = exact_time_offsets([-3 * T + 6])
    assert negative.has(TimeSince(T, 2))
    # left alone: t + b (already one subtraction), a*t, sums of more terms, no time
    for expr in (T + 5, 7 * T, 2 * T + 3 + Y, 2 * Y + 3):
        assert exact_time_offsets([expr]) == [expr]


def test_the_offset_is_exact_near_its_zero():
    """At t = 1799.99 + k ulps the printed argument is exactly 50 k ulps (t - tau is a
    difference of nearby doubles); the distributed ``50 t - 89999.5`` rounds to an ulp of
    90000, noise of about one ulp of t."""
    argument = 50 * T - sp.Rational(179999, 2)
    printer = KernelPrinter()
    (rewritten,) = exact_time_offsets([argument])
    offset_code, distributed_code = printer.doprint(rewritten), printer.doprint(argument)
    assert "(t - (179999.0/100.0))" in offset_code
    tau = 179999.0 / 100.0
    ulp = math.ulp(tau)
    ks = np.arange(0, 40)
    times = tau + ks * ulp
    exact = 50.0 * ks * ulp  # exact in doubles: k < 2**46
    offset = np.array([eval(offset_code, {"math": math, "t": t}) for t in times])
    distributed = np.array([eval(distributed_code, {"math": math, "t": t}) for t in times])
    np.testing.assert_array_equal(offset, exact)
    # what the rewrite is for: the distributed form is off by up to half an ulp of 90000
    assert np.max(np.abs(distributed - exact)) > 0.2 * ulp
