"""Results never depend on what states and parameters are called.

Code generation uses symbols of its own (time, position-named canonical symbols, the
cotangent ``lambda_i`` and direction ``v_i`` of the Jacobian products, the locals of
generated code). A user name equal to one of those names (``v_0``, ``lambda_0``, ``_y0``,
``cse0``, ``yp0``) once aliased the library's symbol and gave wrong trajectories with no
error. Each test here solves one system twice, with plain names and with awkward ones, and
asks for bit-identical results on every route.
"""

from __future__ import annotations

import json
import keyword

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_odesens import (
    ImplicitEvent,
    OdeSystem,
    adjoint_gradient,
    ode_solution,
    solve,
    solve_sensitivity,
    stan,
)
from pymc_odesens import math as om

AWKWARD_NAMES = [
    # the library's own symbol names, old and new
    "v_0", "v_1", "lambda_0", "lambda_1", "_y0", "_y1", "_p0", "_v0", "_t", "cse0", "cse1",
    "yp0", "c1_0", "fm0", "gt", "den", "w0", "dtk", "slot", "e",
    # the arguments and modules of generated kernels
    "t", "y", "p", "v", "out", "math", "numba", "types", "buf", "data",
    # sympy's and mathematics' own names, as SBML models use them
    "time", "E", "I", "N", "S", "O", "Q", "pi", "beta", "gamma", "zeta", "exp", "sqrt",
    "Symbol", "Function", "oo", "nan", "inf",
    # Python keywords
    "lambda", "in", "is", "if", "def", "class", "return", "import", "None", "True", "False",
]  # fmt: skip
assert len(AWKWARD_NAMES) == len(set(AWKWARD_NAMES))
assert any(keyword.iskeyword(n) for n in AWKWARD_NAMES)


def _two_state_rhs(t, y, p):
    a, b = y
    k0, k1, k2 = p
    return [-k0 * a + k1 * b * om.exp(-k2 * t), k0 * a - k1 * b - k2 * b**2]


def _pair(states, params, **kwargs):
    plain = OdeSystem(_two_state_rhs, states=["a", "b"], params=["k0", "k1", "k2"], **kwargs)
    awkward = OdeSystem(_two_state_rhs, states=states, params=params, **kwargs)
    return plain, awkward


NAME_SETS = [
    (["v_0", "lambda_0"], ["v_1", "lambda_1", "_y0"]),
    (["t", "time"], ["_t", "_p0", "_v0"]),
    (["lambda", "E"], ["I", "N", "S"]),
    (["cse0", "yp0"], ["out", "math", "v"]),
    (["y", "p"], ["beta", "gamma", "pi"]),
    (["None", "in"], ["exp", "sqrt", "oo"]),
]

Y0 = np.array([1.0, 0.5])
P = np.array([0.7, 0.4, 0.3])
TIMES = np.linspace(0.5, 4.0, 8)


@pytest.mark.parametrize(("states", "params"), NAME_SETS)
def test_names_change_no_result(states, params):
    plain, awkward = _pair(states, params)
    assert awkward.fingerprint == plain.fingerprint
    for method in ("rk45", "ckrk", "bdf", "adams"):
        a = solve(plain, Y0, TIMES, P, method=method).y
        b = solve(awkward, Y0, TIMES, P, method=method).y
        np.testing.assert_array_equal(b, a)
    for method in ("rk45", "bdf"):
        a = solve_sensitivity(plain, Y0, TIMES, P, method=method, wrt="both")
        b = solve_sensitivity(awkward, Y0, TIMES, P, method=method, wrt="both")
        np.testing.assert_array_equal(b.S, a.S)
        np.testing.assert_array_equal(b.S_y0, a.S_y0)
    a = solve_sensitivity(plain, Y0, TIMES, P, sensitivity="exp")
    b = solve_sensitivity(awkward, Y0, TIMES, P, sensitivity="exp")
    np.testing.assert_array_equal(b.S, a.S)
    cotangent = np.linspace(-1.0, 1.0, TIMES.size * 2).reshape(TIMES.size, 2)
    for adjoint_method in ("continuous", "discrete"):
        a = adjoint_gradient(plain, Y0, TIMES, P, cotangent, adjoint_method=adjoint_method)
        b = adjoint_gradient(awkward, Y0, TIMES, P, cotangent, adjoint_method=adjoint_method)
        np.testing.assert_array_equal(b.params, a.params)
        np.testing.assert_array_equal(b.y0, a.y0)


def test_awkward_names_agree_with_a_reference_solution():
    """Not only equal to each other: right (scipy's solution of the same equations)."""
    from scipy.integrate import solve_ivp

    _, awkward = _pair(["v_0", "lambda_0"], ["v_1", "lambda_1", "_y0"])
    ours = solve(awkward, Y0, TIMES, P, method="rk45", relative_tolerance=1e-10,
                 absolute_tolerance=1e-12).y  # fmt: skip
    k0, k1, k2 = P

    def f(t, y):
        return [-k0 * y[0] + k1 * y[1] * np.exp(-k2 * t), k0 * y[0] - k1 * y[1] - k2 * y[1] ** 2]

    ref = solve_ivp(f, (0.0, TIMES[-1]), Y0, t_eval=TIMES, rtol=1e-12, atol=1e-14, method="DOP853")
    np.testing.assert_allclose(ours, ref.y.T, rtol=1e-7, atol=1e-10)


def test_events_and_initial_state_with_awkward_names():
    def bounce(t, y, p):
        return [y[1], -p[0]]

    kwargs = dict(initial_state=lambda p: [p[2], 0.0])
    events = lambda names: [  # noqa: E731
        ImplicitEvent(
            lambda t, y, p: y[names[0]],
            affect=lambda t, y, p: [y[names[0]], -p[1] * y[names[1]]],
            direction="down",
        )
    ]
    plain = OdeSystem(bounce, states=["z", "w"], params=["g", "r", "h"],
                      events=events(["z", "w"]), **kwargs)  # fmt: skip
    awkward = OdeSystem(bounce, states=["v_0", "lambda_0"], params=["yp0", "gt", "den"],
                        events=events(["v_0", "lambda_0"]), **kwargs)  # fmt: skip
    p = np.array([9.81, 0.7, 2.0])
    times = np.linspace(0.1, 2.5, 9)
    for method in ("rk45", "bdf"):
        a = solve_sensitivity(plain, None, times, p, method=method)
        b = solve_sensitivity(awkward, None, times, p, method=method)
        np.testing.assert_array_equal(b.y, a.y)
        np.testing.assert_array_equal(b.S, a.S)
        assert b.events.times.size == a.events.times.size >= 2


def test_ode_solution_value_and_gradient_with_awkward_names():
    plain, awkward = _pair(["lambda", "v_0"], ["_y0", "cse0", "t"])
    results = []
    for system in (plain, awkward):
        p = pt.dvector("p")
        y = ode_solution(system, Y0, TIMES, p, method="bdf", sensitivity="forward")
        loss = (y**2).sum()
        f = pytensor.function([p], [loss, pytensor.grad(loss, p)])
        results.append(f(P))
    np.testing.assert_array_equal(results[1][0], results[0][0])
    np.testing.assert_array_equal(results[1][1], results[0][1])


def test_stan_function_with_parameter_argument_named_v():
    """``f(t, y, v)`` names its parameters ``v_0, v_1``: once the direction symbols' names."""

    def shm(t, y, v):
        return [y[1], -v[0] * y[0] - v[1] * y[1]]

    def shm_plain(t, y, theta):
        return [y[1], -theta[0] * y[0] - theta[1] * y[1]]

    y0 = np.array([1.0, 0.0])
    ts = np.array([1.0, 5.0, 10.0])
    theta = np.array([1.0, 0.15])
    ours = stan.ode_rk45(shm, y0, 0.0, ts, theta).eval()
    plain = stan.ode_rk45(shm_plain, y0, 0.0, ts, theta).eval()
    np.testing.assert_array_equal(ours, plain)
    omega = np.sqrt(1.0 - 0.075**2)
    exact = np.exp(-0.075 * 10.0) * (np.cos(omega * 10.0) + 0.075 / omega * np.sin(omega * 10.0))
    np.testing.assert_allclose(ours[-1, 0], exact, rtol=1e-5)


def test_json_model_with_awkward_names(tmp_path):
    names = {"states": ["lambda", "E"], "parameters": ["v_0", "I", "S"]}
    spec = {
        **names,
        "expressions": {"flux": "v_0 * lambda"},
        "rhs": ["-flux + I * E * exp(-S * t)", "flux - I * E - S * E**2"],
        "x0": [1.0, 0.5],
        "p_nominal": [0.7, 0.4, 0.3],
        "t_end": 4.0,
    }
    path = tmp_path / "awkward.json"
    path.write_text(json.dumps(spec))
    system = OdeSystem.from_json(path)
    plain, _ = _pair(["a", "b"], ["c", "d", "f"])
    assert system.fingerprint == plain.fingerprint
    np.testing.assert_array_equal(solve(system, Y0, TIMES, P).y, solve(plain, Y0, TIMES, P).y)


def test_state_named_t_is_not_time():
    """``t`` and ``time`` are ordinary names; time stays the argument ``t``."""
    system = OdeSystem(lambda t_, y, p: [-p[0] * y.t, t_], states=["t", "time"], params=["k"])
    out = solve(system, [1.0, 0.0], [2.0], [0.5], relative_tolerance=1e-10,
                absolute_tolerance=1e-12).y[-1]  # fmt: skip
    np.testing.assert_allclose(out, [np.exp(-1.0), 2.0], rtol=1e-8)


def _random_system(rng: np.random.Generator, states: list[str], params: list[str]) -> OdeSystem:
    """A random small system: polynomial and exponential terms with random coefficients."""
    n, n_p = len(states), len(params)
    terms = []
    for _ in range(n):
        picks = rng.integers(0, n, size=3)
        ks = rng.integers(0, n_p, size=3)
        kind = int(rng.integers(0, 3))
        terms.append((int(picks[0]), int(picks[1]), int(picks[2]), *map(int, ks), kind))

    def rhs(t, y, p):
        out = []
        for i, (a, b, c, k0, k1, k2, kind) in enumerate(terms):
            decay = -p[k0] * y[i]
            if kind == 0:
                out.append(decay + p[k1] * y[a] * y[b] / (1 + y[c] ** 2))
            elif kind == 1:
                out.append(decay + p[k1] * om.exp(-p[k2] * t) * y[a] - 0.1 * y[b] ** 3)
            else:
                out.append(decay + p[k1] * om.tanh(y[a] - y[b]) + p[k2] * om.sqrt(1 + y[c] ** 2))
        return out

    return OdeSystem(rhs, states=states, params=params, name="random")


@pytest.mark.parametrize("seed", range(5))
def test_random_systems_do_not_depend_on_names(seed):
    rng = np.random.default_rng(seed)
    n, n_p = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    drawn = list(rng.choice(AWKWARD_NAMES, size=n + n_p, replace=False))
    plain = _random_system(np.random.default_rng(seed), [f"x{i}" for i in range(n)],
                           [f"k{i}" for i in range(n_p)])  # fmt: skip
    awkward = _random_system(np.random.default_rng(seed), drawn[:n], drawn[n:])
    y0 = rng.uniform(0.2, 1.0, n)
    p = rng.uniform(0.1, 1.0, n_p)
    times = np.linspace(0.2, 2.0, 5)
    a = solve_sensitivity(plain, y0, times, p, method="bdf")
    b = solve_sensitivity(awkward, y0, times, p, method="bdf")
    np.testing.assert_array_equal(b.y, a.y)
    np.testing.assert_array_equal(b.S, a.S)
