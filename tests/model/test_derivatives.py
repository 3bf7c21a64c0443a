"""Exact derivatives: powers with a symbolic exponent stay finite where the base is zero."""

from __future__ import annotations

import pytest
import sympy as sp

from pymc_odesens.model.derivatives import (
    gradient,
    jacobian_wrt_params,
    jacobian_wrt_states,
)


def test_hill_kinetics_with_a_parameter_exponent_at_zero():
    x, k, n = sp.symbols("x k n", real=True)
    hill = (x / k) ** n / (1 + (x / k) ** n)
    (dx,) = jacobian_wrt_states([hill], [x])
    dk, dn = jacobian_wrt_params([hill], [k, n])
    # the same derivative as sympy's, written without 0/0 at x = 0
    for ours, theirs in ((dx, sp.diff(hill, x)), (dk, sp.diff(hill, k)), (dn, sp.diff(hill, n))):
        at = {x: sp.Rational(3, 7), k: sp.Rational(1, 2), n: sp.Rational(5, 2)}
        assert abs(float(ours.subs(at)) - float(theirs.subs(at))) < 1e-14
    # numerically, as generated code evaluates them, at x = 0 with n = 1 and n = 2
    ours_dx, theirs_dx, ours_dn = (
        sp.lambdify([x, k, n], e, "math") for e in (dx, sp.diff(hill, x), dn)
    )
    assert ours_dx(0.0, 0.5, 1.0) == 2.0  # d/dx (2x / (1 + 2x)) at 0
    assert ours_dx(0.0, 0.5, 2.0) == 0.0
    assert ours_dn(0.0, 0.5, 2.0) == 0.0  # (x/k)**n log(x/k) -> 0
    with pytest.raises(ZeroDivisionError):
        theirs_dx(0.0, 0.5, 1.0)  # sympy's own form divides by x


def test_event_derivatives_equal_sympys_dense_ones():
    # events differentiate their assignments and conditions through jacobian_nonzeros:
    # only the symbols an expression contains, zeros elsewhere
    y = sp.symbols("y0:6")
    p = sp.symbols("p0:3")
    exprs = [y[0], y[1] * p[0] + sp.exp(y[2]), sp.Integer(3), p[1] * p[2], sp.sin(y[5]) * y[5]]
    dense_y = sp.Matrix([[sp.diff(e, s) for s in y] for e in exprs])  # [i, j] = d e_i / d y_j
    dense_p = sp.Matrix([[sp.diff(e, s) for e in exprs] for s in p])  # [k, i] = d e_i / d p_k
    assert sp.Matrix(jacobian_wrt_states(exprs, y)) == dense_y
    assert sp.Matrix(jacobian_wrt_params(exprs, p)) == dense_p
    for i, expr in enumerate(exprs):
        assert gradient(expr, y) == tuple(dense_y[i, :])
        assert gradient(expr, p) == tuple(dense_p[:, i])
    assert gradient(y[3], []) == ()
