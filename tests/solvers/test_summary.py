"""Short reprs of OdeSolution and SensitivityResult: one line, no arrays."""

from __future__ import annotations

import numpy as np

from pymc_odesens import OdeSystem, solve, solve_sensitivity
from pymc_odesens.solvers.summary import names_summary, times_summary


def _decay():
    return OdeSystem(
        lambda t, y, p: [-p.k * y.A, p.k * y.A], states=["A", "B"], params=["k"], name="decay"
    )


def test_solution_repr_is_one_short_line():
    times = np.linspace(0.0, 5.0, 1001)
    result = solve(_decay(), [1.0, 0.0], times, [0.7], method="rk45")
    text = repr(result)
    assert "\n" not in text and len(text) < 150
    assert text.startswith("OdeSolution(rk45, t=<1001 times in [0, 5]>, y=(1001, 2) [A, B], ")
    assert "rtol=1e-06, atol=1e-06" in text
    assert f"{result.stats['n_steps']} steps" in text


def test_sensitivity_repr_names_shapes_and_columns():
    result = solve_sensitivity(_decay(), [1.0, 0.0], np.linspace(0.0, 5.0, 11), [0.7], wrt="both")
    text = repr(result)
    assert text.startswith("SensitivityResult(bdf, forward, t=<11 times in [0, 5]>, ")
    assert "S=(11, 2, 1) dy/dp, S_y0=(11, 2, 2) dy/dy0" in text
    assert "rtol=1e-10" in text and "\n" not in text


def test_summaries_of_many_names_and_no_times():
    assert names_summary([f"x{i}" for i in range(10)]) == "x0, x1, x2, x3, ... (10 in all)"
    assert times_summary(np.array([])) == "<no times>"
    assert times_summary(np.array([2.0])) == "<1 time in [2, 2]>"
