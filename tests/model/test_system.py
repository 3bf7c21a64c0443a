"""OdeSystem construction: tracing, names, derivatives and the errors that name the culprit."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from pymc_odesens import OdeSystem
from pymc_odesens import math as om


def lotka_volterra(t, y, p):
    prey, predator = y
    return [
        p.alpha * prey - p["beta"] * prey * predator,
        p.delta * prey * predator - p.gamma * predator,
    ]


def test_names_and_sizes():
    system = OdeSystem(
        lotka_volterra, states=["prey", "predator"], params=["alpha", "beta", "delta", "gamma"]
    )
    assert system.n_states == 2 and system.n_params == 4
    assert system.states == ["prey", "predator"]
    assert system.params == ["alpha", "beta", "delta", "gamma"]
    alpha, beta = system.param_symbols[:2]
    prey, predator = system.state_symbols
    assert sp.simplify(system.rhs_expressions[0] - (alpha * prey - beta * prey * predator)) == 0


def test_sizes_inferred_by_tracing_positional_access():
    system = OdeSystem(lambda t, y, p: [-p[0] * y[0] + p[2] * y[1], -p[1] * y[1]])
    assert (system.n_states, system.n_params) == (2, 3)
    assert system.states == ["y0", "y1"] and system.params == ["p0", "p1", "p2"]


def test_jacobian_layouts_follow_design():
    system = OdeSystem(lambda t, y, p: [-p[0] * y[0] + p[1] * y[1], -p[1] * y[1]], 2, 2)
    y0, y1 = system.state_symbols
    p0, p1 = system.param_symbols
    # J_y[i, j] = df_i/dy_j ; J_p[k, i] = df_i/dp_k
    assert system.J_y == sp.Matrix([[-p0, p1], [0, -p1]])
    assert system.J_p == sp.Matrix([[-y0, 0], [y1, -y1]])
    lam = system.cotangent_symbols
    assert sp.expand(system.vjp_p[1] - (lam[0] * y1 - lam[1] * y1)) == 0
    assert sp.expand(system.vjp_y[0] - (-p0 * lam[0])) == 0


def test_fingerprint_ignores_names_but_not_expressions():
    a = OdeSystem(lambda t, y, p: [-p[0] * y[0]], states=["x"], params=["k"])
    b = OdeSystem(lambda t, y, p: [-p[0] * y[0]], states=["z"], params=["rate"])
    c = OdeSystem(lambda t, y, p: [-p[0] * y[0] ** 2], states=["x"], params=["k"])
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != c.fingerprint


def test_math_namespace_builds_expressions():
    def rhs(t, y, p):
        return [
            om.exp(-t) * om.tanh(y[0]) + om.sqrt(p[0]) * om.log(1 + y[1] ** 2),
            om.where(t < p[1], om.maximum(y[0], 0.0), om.minimum(y[1], 1.0)) + om.heaviside(y[0]),
        ]

    system = OdeSystem(rhs, 2, 2)
    assert system.rhs_expressions[1].has(sp.Piecewise)
    assert system.rhs_expressions[1].has(sp.Heaviside)
    # derivative of the step is dropped (no DiracDelta in J_y)
    assert not any(e.has(sp.DiracDelta) for e in system.J_y)


@pytest.mark.parametrize(
    ("kwargs", "rhs", "error", "match"),
    [
        ({"n_states": 2}, lambda t, y, p: [y[0]], ValueError, r"returned 1 expressions.*2 states"),
        ({}, lambda t, y, p: [y[0] * sp.Symbol("k")], ValueError, r"undeclared symbol\(s\) k"),
        ({}, lambda t, y, p: [y[0] * float("nan")], ValueError, "non-finite constant"),
        ({}, lambda t, y, p: [y[0] + sp.oo], ValueError, "non-finite constant"),
        ({"states": ["a"]}, lambda t, y, p: [y["b"]], KeyError, r"no entry named 'b'.*a"),
        ({"n_states": 1}, lambda t, y, p: [y[3]], IndexError, r"y\[3\] is out of range"),
        ({}, lambda t, y, p: y[0], TypeError, "must return a sequence"),
        ({}, lambda t, y, p: ["hello world"], TypeError, "not an expression"),
        ({"states": ["x", "x"]}, lambda t, y, p: [y[0], y[1]], ValueError, "duplicate names"),
        (
            {"states": ["k"], "params": ["k"]},
            lambda t, y, p: [p[0]],
            ValueError,
            "both a state and a parameter",
        ),
        ({"n_states": 2, "states": ["a"]}, lambda t, y, p: [y[0]], ValueError, "disagrees"),
        ({}, lambda t, y, p: [y[0] * sp.I], ValueError, "complex"),
    ],
)
def test_construction_errors_name_the_culprit(kwargs, rhs, error, match):
    with pytest.raises(error, match=match):
        OdeSystem(rhs, **kwargs)


def test_rhs_must_be_callable():
    with pytest.raises(TypeError, match="rhs must be a callable"):
        OdeSystem([1, 2])


def test_where_rejects_non_conditions():
    with pytest.raises(TypeError, match="condition must be a comparison"):
        om.where(sp.Symbol("x") + 1, 1, 2)


def test_piecewise_requires_default():
    x = sp.Symbol("x")
    with pytest.raises(ValueError, match="last piece must be"):
        om.piecewise((1, x < 0), (2, x > 1))
    assert om.piecewise((1, x < 0), (2, True)).subs(x, 3) == 2


def test_matrix_output_is_accepted():
    system = OdeSystem(lambda t, y, p: np.array([y[1], -y[0]]), 2, 0)
    assert system.n_params == 0
    assert system.rhs_expressions[1] == -system.state_symbols[0]
