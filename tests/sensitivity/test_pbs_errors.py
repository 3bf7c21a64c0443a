"""`NonFiniteSensitivityError`: a march whose S is not finite, raised where a sampler needs S
(``pbs_sensitivities(..., non_finite="raise")``), a warning for `solve_sensitivity`."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens import (
    NonFiniteRhsError,
    NonFiniteSensitivityError,
    OdeSolverError,
    OdeSystem,
    solve_sensitivity,
)
from pymc_odesens import math as odemath
from pymc_odesens.sensitivity.pbs import pbs_sensitivities
from pymc_odesens.sensitivity.pbs_errors import non_finite_sensitivity_error
from pymc_odesens.sensitivity.pbs_options import PbsOptions
from pymc_odesens.solvers.solve import prepare_problem


def _problem(system, y0, times, params, method):
    return prepare_problem(system, y0, times, params, 0.0, method, None, None, None)


def test_overflowing_march_raises_with_the_first_bad_time():
    fast = OdeSystem(
        lambda t, y, p: [-p[0] * y[0] + 1.0], states=["x"], params=["k"], name="pbs_fast_raise"
    )
    problem = _problem(fast, [0.0], [1.0, 1e8], [1e7], "bdf")
    with pytest.raises(NonFiniteSensitivityError, match=r"'pbs': S is not finite .*explicit"):
        pbs_sensitivities(problem, "params", "pbs", PbsOptions(), non_finite="raise")
    try:
        pbs_sensitivities(problem, "params", "pbs", PbsOptions(), non_finite="raise")
    except NonFiniteSensitivityError as error:
        assert isinstance(error, OdeSolverError)
        assert error.t in (1.0, 1e8)
        assert error.method == "pbs"
    # PBSR's Exp steps stay finite: no error, the same S as solve_sensitivity's
    y, s_params, _, _, _ = pbs_sensitivities(
        problem, "params", "pbsr", PbsOptions(), non_finite="raise"
    )
    want = solve_sensitivity(fast, [0.0], [1.0, 1e8], [1e7], sensitivity="pbsr")
    np.testing.assert_array_equal(s_params, want.S)


def test_non_finite_jacobian_raises_or_warns():
    """-k sqrt(x) stays at x = 0, where J_y = -k / (2 sqrt(x)) is infinite."""
    kink = OdeSystem(
        lambda t, y, p: [-p[0] * odemath.sqrt(y[0])], states=["x"], params=["k"], name="pbs_kink"
    )
    problem = _problem(kink, [0.0], [1.0, 2.0], [1.0], "rk45")
    with pytest.raises(NonFiniteSensitivityError, match=r"t = 1 on \(a Jacobian is not finite"):
        pbs_sensitivities(problem, "params", "exp", PbsOptions(), non_finite="raise")
    # solve_sensitivity raises (main's reliability rule: a non-finite J_y or df/dp is a
    # NonFiniteRhsError at the time it happened, never a NaN S)
    with pytest.raises(NonFiniteRhsError, match=r"J_y or df/dp\) is not finite .* at t = 0"):
        solve_sensitivity(kink, [0.0], [1.0, 2.0], [1.0], sensitivity="exp", method="rk45")


@pytest.mark.parametrize(
    "algorithm, jacobian, match",
    [
        ("pbs", False, "PBS step is explicit"),
        ("exp", False, "the march overflowed"),
        ("pbsr", True, "a Jacobian is not finite"),
    ],
)
def test_messages_name_the_method_time_and_cause(algorithm, jacobian, match):
    error = non_finite_sensitivity_error(algorithm, 2.5, jacobian)
    assert error.t == 2.5
    assert f"sensitivity={algorithm!r}: S is not finite from t = 2.5 on" in str(error)
    assert match in str(error)
