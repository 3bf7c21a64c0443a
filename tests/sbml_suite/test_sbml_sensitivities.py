"""Sensitivities through SBML models: on 30 SBML Test Suite cases with parameters (initial
assignments, assignment and rate rules, events, varying compartments, function definitions,
stoichiometryMath, conversion factors, local parameters, rateOf, variable stoichiometry,
comp submodels, amounts, compartments of size other than one, boundary species), forward
sensitivities of the states (with ``S(t0) = dy0/dp`` from the initial assignments) agree
with central differences of the solution, and the adjoint gradient of a weighted sum of the
states agrees with the forward sensitivities."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens import OdeSystem, adjoint_gradient, solve, solve_sensitivity
from tests.sbml_suite.suite import _model_file, case_info, suite_directory

pytestmark = [pytest.mark.slow, pytest.mark.sbml_suite]

CASES = {
    "InitialAssignment": ["00036", "00037"],
    "AssignmentRule": ["00038", "00078"],
    "EventNoDelay": ["00026", "00041"],
    "NonConstantCompartment": ["00051", "00052"],
    "RateRule": ["00032", "00066"],
    "FunctionDefinition": ["00025", "00034"],
    "StoichiometryMath": ["00068", "00069"],
    "ConversionFactors": ["00975", "00976"],
    "LocalParameters": ["00058", "00059"],
    "CSymbolRateOf": ["01402", "01405"],
    "AssignedVariableStoichiometry": ["00972", "00973"],
    "comp:Submodel": ["01127", "01139"],
    "HasOnlySubstanceUnits": ["00060", "00061"],
    "NonUnityCompartment": ["00021", "00022"],
    "BoundaryCondition": ["00007", "00008"],
}
"""Two cases per feature, each with parameters that enter its right-hand side or y0(p)."""

RTOL, ATOL = 1e-11, 1e-14
RTOL_DIFFERENCES, ATOL_DIFFERENCES = 1e-13, 1e-20


def _system_and_times(case: str):
    info = case_info(case)
    system = OdeSystem.from_sbml(_model_file(suite_directory() / case, case))
    # output times off the case's grid, so that no output falls on an event time
    times = np.linspace(0.0, info.duration, 6)[1:] * 0.9731
    return system, times


@pytest.mark.parametrize(("feature", "case"), [(f, c) for f, cases in CASES.items() for c in cases])
def test_forward_sensitivities_match_central_differences(feature, case):
    system, times = _system_and_times(case)
    p = system.p_nominal
    result = solve_sensitivity(
        system, None, times, p, method="bdf", relative_tolerance=RTOL, absolute_tolerance=ATOL
    )
    for k in range(system.n_params):
        step = 1e-4 * max(abs(p[k]), 1e-3)
        up, down = p.copy(), p.copy()
        up[k] += step
        down[k] -= step
        y_up, y_down = (
            solve(
                system,
                None,
                times,
                q,
                method="bdf",
                relative_tolerance=RTOL_DIFFERENCES,
                absolute_tolerance=ATOL_DIFFERENCES,
            ).y
            for q in (up, down)
        )
        central = (y_up - y_down) / (2 * step)
        # the differences' truncation error (relative 1e-8) and their rounding by the
        # solver's global error (a few hundred times its relative tolerance)
        noise = 1e3 * RTOL_DIFFERENCES * np.max(np.abs(result.y)) / step
        np.testing.assert_allclose(
            result.S[:, :, k],
            central,
            atol=1e-6 * np.max(np.abs(central)) + noise,
            rtol=1e-5,
            err_msg=f"{case} ({feature}): d/d{system.params[k]}",
        )


@pytest.mark.parametrize(("feature", "case"), [(f, c) for f, cases in CASES.items() for c in cases])
def test_adjoint_gradient_matches_forward(feature, case):
    system, times = _system_and_times(case)
    p = system.p_nominal
    weights = np.random.default_rng(int(case)).normal(size=(times.size, system.n_states))
    forward = solve_sensitivity(
        system, None, times, p, method="bdf", relative_tolerance=RTOL, absolute_tolerance=ATOL
    )
    expected = np.einsum("ti,tik->k", weights, forward.S)
    tolerances = {
        f"{kind}_tolerance_{phase}": value
        for phase in ("forward", "backward", "quadrature")
        for kind, value in (("relative", RTOL), ("absolute", ATOL))
    }
    gradient = adjoint_gradient(system, None, times, p, weights, **tolerances)
    scale = np.max(np.abs(expected)) + 1e-12
    np.testing.assert_allclose(
        gradient.params, expected, atol=1e-6 * scale, rtol=1e-6, err_msg=f"{case} ({feature})"
    )
