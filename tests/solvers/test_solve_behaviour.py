"""Output handling, dense output, statistics, Stan's controls and compile-once solvers."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from pymc_odesens import OdeSystem, solve
from pymc_odesens.solvers.controls import resolve_controls

ALL = ("rk45", "ckrk", "bdf", "adams")


def exact_oscillator(t, theta=0.15):
    w = np.sqrt(1 - theta**2 / 4)
    a = theta / 2
    x = np.exp(-a * t) * (np.cos(w * t) + a / w * np.sin(w * t))
    v = -np.exp(-a * t) * (1 / w) * np.sin(w * t)
    return np.stack([x, v], axis=1)


@pytest.mark.parametrize("method", ALL)
def test_outputs_at_t0_duplicates_and_exact_values(oscillator, method):
    times = np.array([0.0, 0.0, 0.5, 0.5, 3.0, 10.0])
    result = solve(
        oscillator,
        [1.0, 0.0],
        times,
        [0.15],
        method=method,
        relative_tolerance=1e-9,
        absolute_tolerance=1e-11,
    )
    np.testing.assert_array_equal(result.y[:2], [[1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_array_equal(result.y[2], result.y[3])
    np.testing.assert_allclose(result.y, exact_oscillator(times), atol=2e-7)
    assert result["x"].shape == (6,)


@pytest.mark.parametrize("method", ALL)
def test_output_times_do_not_force_steps(oscillator, method):
    """Dense output: many output times leave the step sequence unchanged."""
    few = solve(
        oscillator,
        [1.0, 0.0],
        [0.0, 10.0],
        [0.15],
        method=method,
        relative_tolerance=1e-8,
        absolute_tolerance=1e-10,
    )
    many_times = np.linspace(0.0, 10.0, 1001)
    many = solve(
        oscillator,
        [1.0, 0.0],
        many_times,
        [0.15],
        method=method,
        relative_tolerance=1e-8,
        absolute_tolerance=1e-10,
    )
    assert many.stats["n_steps"] == few.stats["n_steps"]
    np.testing.assert_allclose(many.y[-1], few.y[-1], rtol=0, atol=1e-14)
    np.testing.assert_allclose(many.y, exact_oscillator(many_times), atol=1e-6)


def test_nonzero_t0_and_time_dependent_rhs():
    system = OdeSystem(lambda t, y, p: [p[0] * t * y[0]], 1, 1)
    t0 = 1.0
    times = np.array([1.0, 1.5, 2.0])
    for method in ALL:
        result = solve(
            system,
            [2.0],
            times,
            [0.5],
            t0=t0,
            method=method,
            relative_tolerance=1e-10,
            absolute_tolerance=1e-12,
        )
        exact = 2.0 * np.exp(0.25 * (times**2 - t0**2))
        np.testing.assert_allclose(result.y[:, 0], exact, rtol=1e-7)


@pytest.mark.parametrize("method", ["bdf", "adams"])
def test_steps_of_a_few_ulps_of_t(method):
    """An input switched on at t0 = 1800 (a restart at an SBML switching time, as in
    Chen_MSB2009): the product x starts at zero with x'' = 3.8e9, so at an absolute
    tolerance of 1e-16 the first steps are a few ulps of t (one ulp is 2.3e-13) long. A
    step t + h rounds to the ulp: unless h is the step t makes, f is evaluated up to half
    an ulp away from where the formula assumes, an error of h x'' ulp / 2 in x, above the
    tolerance (this underflowed at h = 1.6e-12, then the floor of 10 ulps)."""
    a, reservoir, t0 = 3.8e9, 1.2e9, 1800.0
    system = OdeSystem(
        lambda t, y, p: [p.a * (t - 1800.0), -p.a * (t - 1800.0)],
        states=["x", "r"],
        params=["a"],
    )
    times = t0 + np.array([1e-6, 1e-3, 1e-2])
    result = solve(
        system,
        [0.0, reservoir],
        times,
        [a],
        t0=t0,
        method=method,
        relative_tolerance=1e-8,
        absolute_tolerance=1e-16,
    )
    tau = times - t0
    np.testing.assert_allclose(result["x"], a * tau**2 / 2, rtol=1e-7)
    np.testing.assert_allclose(result["r"], reservoir - a * tau**2 / 2, rtol=1e-12)


@pytest.mark.parametrize("method", ["bdf", "adams"])
def test_a_ramp_whose_input_is_noisy_at_one_ulp_of_t(method):
    """Chen_MSB2009's inputs ramp up as ``sin(50 pi (t - 1799.99))`` after their switch-on
    at t0 = 1799.99, and sympy makes the expression ``sin(pi (50 t - 179999/2))`` (it
    distributes the 50). Evaluated so, ``50 t`` rounds to an ulp of 90000: the input was
    noise at the scale of one ulp of ``t`` (2.3e-13), and at an absolute tolerance of 1e-16
    the first steps failed the error test at every step size down to below an ulp
    (step-size underflow at h = 4.6e-14, also at 1e-14). The kernels compute it as
    ``50 (t - 1799.99)`` (codegen/time_offsets.py): the solution matches the closed form."""
    t, x, r, a = sp.Symbol("t", real=True), sp.Symbol("x"), sp.Symbol("r"), sp.Symbol("a")
    ramp = a * sp.sin(sp.pi * (50 * t - sp.Rational(179999, 2)))
    system = OdeSystem.from_expressions([ramp, -ramp], t, [x, r], [a], name="ulp_ramp")
    amplitude, reservoir, t0 = 2.4e7, 1.2e9, 1799.99
    times = t0 + np.array([1e-4, 1e-3, 1e-2])
    result = solve(
        system,
        [0.0, reservoir],
        times,
        [amplitude],
        t0=t0,
        method=method,
        relative_tolerance=1e-8,
        absolute_tolerance=1e-16,
    )
    # the closed form in exact arithmetic from the switch-on 1799.99 (t0 is its double)
    since = np.array([float(Fraction(u) - Fraction(179999, 100)) for u in times])
    start = float(Fraction(t0) - Fraction(179999, 100))
    omega = 50 * np.pi
    exact = amplitude / omega * (np.cos(omega * start) - np.cos(omega * since))
    np.testing.assert_allclose(result["x"], exact, rtol=1e-7)
    # the reservoir loses what x gains (to its own rounding, an ulp of 1.2e9 is 2.4e-7)
    np.testing.assert_allclose(result["r"] - reservoir, -exact, rtol=1e-7, atol=1e-6)


@pytest.mark.parametrize("method", ALL)
def test_statistics_are_counted(oscillator, method):
    stats = solve(oscillator, [1.0, 0.0], [10.0], [0.15], method=method).stats
    assert stats["n_steps"] > 0
    assert stats["n_rhs_evals"] >= stats["n_steps"]
    if method in ("bdf", "adams"):
        assert stats["n_jac_evals"] >= 1
        assert stats["n_lu_decompositions"] >= 1
        assert stats["n_newton_iterations"] >= stats["n_steps"]
    else:
        assert stats["n_jac_evals"] == 0 and stats["n_lu_decompositions"] == 0


def test_stan_defaults():
    for method in ("rk45", "ckrk"):
        c = resolve_controls(method, 2)
        assert (c.relative_tolerance, c.max_num_steps) == (1e-6, 1_000_000)
        np.testing.assert_array_equal(c.absolute_tolerance, [1e-6, 1e-6])
    for method in ("bdf", "adams"):
        c = resolve_controls(method, 3)
        assert (c.relative_tolerance, c.max_num_steps) == (1e-10, 100_000_000)
        np.testing.assert_array_equal(c.absolute_tolerance, [1e-10] * 3)


def test_tighter_tolerance_costs_more_steps(oscillator):
    loose = solve(oscillator, [1.0, 0.0], [10.0], [0.15], method="rk45")  # Stan default 1e-6
    tight = solve(
        oscillator,
        [1.0, 0.0],
        [10.0],
        [0.15],
        method="rk45",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-10,
    )
    assert tight.stats["n_steps"] > 3 * loose.stats["n_steps"]


def test_per_state_absolute_tolerance_is_used():
    """A large absolute tolerance on a state that dominates the error loosens the control."""
    system = OdeSystem(lambda t, y, p: [-y[0], -50.0 * y[1]], 2, 0)
    base = solve(
        system,
        [1.0, 1.0],
        [5.0],
        [],
        method="bdf",
        relative_tolerance=1e-6,
        absolute_tolerance=[1e-9, 1e-9],
    )
    loose = solve(
        system,
        [1.0, 1.0],
        [5.0],
        [],
        method="bdf",
        relative_tolerance=1e-6,
        absolute_tolerance=[1e-9, 1e-1],
    )
    assert loose.stats["n_steps"] < base.stats["n_steps"]


def test_solvers_compile_once_for_all_models():
    from pymc_odesens.solvers.multistep import run_multistep
    from pymc_odesens.solvers.runge_kutta import integrate_explicit_rk

    first = OdeSystem(lambda t, y, p: [-p[0] * y[0]], 1, 1)
    second = OdeSystem(lambda t, y, p: [y[1], -(y[0] ** 3) - p[0] * y[1], -y[2] + y[0]], 3, 1)
    for system, y0 in ((first, [1.0]), (second, [1.0, 0.0, 0.0])):
        solve(system, y0, [1.0], [0.3], method="bdf")
        solve(system, y0, [1.0], [0.3], method="adams")
        solve(system, y0, [1.0], [0.3], method="rk45")
    assert len(run_multistep.signatures) == 1  # bdf and adams share one compiled driver
    assert len(integrate_explicit_rk.signatures) == 1
