"""The multistep driver (bdf, adams): every retry after a failure is a shorter step.

A regression: on Fujita_SciSignal2010 at parameters on their bounds (a start of the
multistart), the forward sensitivities with bdf retried one step of a few ulps without end
(millions of error-test failures, no accepted step): the step shortened after each failure
was rounded back up to the time the failed step ended at. The solve must now end, with the
step size's underflow.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import PETAB_DIR

REPO = Path(__file__).resolve().parents[2]
FUJITA = PETAB_DIR / "Fujita_SciSignal2010" / "Fujita_SciSignal2010.yaml"

# the simulation system's initial state and parameters of the solve that never ended
# (experiment 5 of the Fisher information at a multistart's iterate)
BIG, SMALL = 1.0000000000000018e08, 9.9999999999999820e-09
Y0 = [BIG, 0.0, 0.0, BIG, 0.0, SMALL, 0.0, 0.0, 0.0]
PARAMS = [
    3.6921723844729111e-05,
    BIG,
    BIG,
    SMALL,
    4.9386794082447943e-01,
    2.6753311010830890e07,
    BIG,
    SMALL,
    BIG,
    6.7682296768588933e-03,
    BIG,
    SMALL,
    BIG,
    SMALL,
    SMALL,
    3.7378548017676342e-08,
    30.0,
]
TIMES = [60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0]

SOLVE = textwrap.dedent(
    """
    import json, sys
    import pymc_odesens as pos
    from pymc_odesens.petab import PetabProblem

    path, y0, params, times = json.loads(sys.argv[1])
    system = PetabProblem.from_yaml(path).system
    try:
        pos.solve_sensitivity(system, y0, times, params, method="bdf",
                              relative_tolerance=1e-8, absolute_tolerance=1e-16)
        outcome = "solved"
    except pos.OdeSolverError as error:
        outcome = f"{type(error).__name__}: {error}"
    print(json.dumps({"outcome": outcome}))
    """
)


def test_a_step_of_a_few_ulps_that_keeps_failing_ends_the_solve():
    arguments = json.dumps([str(FUJITA), Y0, PARAMS, TIMES])
    try:
        done = subprocess.run(
            [sys.executable, "-c", SOLVE, arguments],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=240,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the solve did not end within 240 s: a failed step is retried without end")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["outcome"].startswith("StepSizeTooSmallError: bdf: step size underflow at t = ")
