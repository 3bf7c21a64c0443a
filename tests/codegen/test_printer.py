"""The kernel printer (codegen/printer.py): canonical symbols, numbers as doubles."""

from __future__ import annotations

import pytest
import sympy as sp

from pymc_odesens.codegen.printer import KernelPrinter
from pymc_odesens.model.internal_symbols import InternalSymbol


def test_numbers_print_as_doubles():
    y0 = InternalSymbol("_y0")
    printer = KernelPrinter()
    assert printer.doprint(3 * y0) == "3.0*y[0]"
    assert printer.doprint(sp.Float(1e308) * y0) == "1e+308*y[0]"
    assert "(1.0/3.0)" in printer.doprint(sp.Rational(1, 3) * y0)


@pytest.mark.parametrize(
    "number", [sp.Float("2e308"), sp.Integer(10) ** 400, sp.Rational(10**400, 3)]
)
def test_numbers_beyond_the_double_range_are_refused(number):
    # printed as 'inf', they ended in the kernel language's "'inf' is read before any
    # assignment"; a derivative of 1e308 * y**2 makes one from finite constants
    with pytest.raises(
        ValueError,
        match=r"code generation met the number .*E\+\d+, beyond "
        r"the range of a double",
    ):
        KernelPrinter().doprint(number * InternalSymbol("_y0"))
