"""ode_solution's inputs are checked when the graph is built: errors name the argument."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_odesens import ode_solution, solve

TIMES = np.array([1.0, 2.0])


def _build(oscillator, y0=(1.0, 0.0), times=TIMES, params=None):
    theta = pt.dscalar("theta")
    params = [theta] if params is None else params
    return theta, ode_solution(oscillator, y0, times, params, method="rk45", on_failure="raise")


@pytest.mark.parametrize(
    ("argument", "value", "match"),
    [
        ("y0", "ab", r"y0 must be numbers or PyTensor tensors, got the text 'ab'"),
        ("y0", ["1", "0"], r"y0\[0\] must be numbers or PyTensor tensors, got the text '1'"),
        ("y0", np.array([1 + 2j, 0.0]), r"y0 must be real, got complex values"),
        ("y0", pt.zvector("z"), r"y0 must be a real tensor, got z of type .*complex128"),
        ("y0", [None, 1.0], r"y0\[0\] must be numbers or PyTensor tensors, got None"),
        ("params", [1 + 1j], r"params\[0\] must be real, got complex values"),
        ("times", "ab", r"times must be numbers, got the text 'ab'"),
        ("times", np.array([1 + 1j, 2.0]), r"times must be real, got complex values"),
        ("times", [1.0, "2"], r"times must be numbers, got \[1.0, '2'\]"),
        (
            "times",
            pt.dvector("ts"),
            r"times must be known when the graph is built .* got the symbolic variable ts",
        ),
        (
            "times",
            pytensor.shared(TIMES),
            r"times must be known .* got the shared variable .*\(times.get_value\(\)\)",
        ),
    ],
)
def test_bad_inputs_are_named(oscillator, argument, value, match):
    with pytest.raises(TypeError, match=match):
        _build(oscillator, **{argument: value})


def test_symbolic_and_shared_initial_states_and_constant_times_work(oscillator):
    expected = solve(oscillator, [1.0, 0.0], TIMES, [0.2], method="rk45").y
    close = dict(rtol=1e-5)  # forward sensitivities take other steps than the plain solve
    y0 = pt.dvector("y0")  # static length unknown: fine
    theta, y = _build(oscillator, y0=y0)
    np.testing.assert_allclose(
        pytensor.function([y0, theta], y)([1.0, 0.0], 0.2), expected, **close
    )
    shared = pytensor.shared(np.array([1.0, 0.0]))
    theta, y = _build(oscillator, y0=shared)
    np.testing.assert_allclose(pytensor.function([theta], y)(0.2), expected, **close)
    theta, y = _build(oscillator, times=pt.constant(TIMES))
    np.testing.assert_allclose(pytensor.function([theta], y)(0.2), expected, **close)
