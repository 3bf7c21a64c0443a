"""`pbs_branch_counts` / `pbs_branch_summary`: the branch report of `solve_sensitivity`, per
evaluation and per draw of a PyMC model."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_odesens import (
    ode_solution,
    pbs_branch_counts,
    pbs_branch_summary,
    solve_sensitivity,
)
from pymc_odesens.ops.pbs_branches import BRANCH_NAMES

TIMES = np.linspace(0.5, 10.0, 12)
CONTROLS = {"relative_tolerance": 1e-6, "absolute_tolerance": 1e-8}


def _report_counts(oscillator, y0, theta, times, route, method):
    result = solve_sensitivity(
        oscillator, y0, times, [theta], method=method, sensitivity=route, **CONTROLS
    )
    return [result.pbs_steps.counts()[name] for name in BRANCH_NAMES]


@pytest.mark.parametrize("route, method", [("pbsr", "bdf"), ("exp", "rk45"), ("pbs", "adams")])
def test_counts_are_those_of_solve_sensitivity(oscillator, route, method):
    theta = pt.dscalar("theta")
    y = ode_solution(
        oscillator,
        [1.0, -0.3],
        TIMES,
        [theta],
        sensitivity=route,
        method=method,
        on_failure="raise",
        **CONTROLS,
    )
    counts = pbs_branch_counts(y)
    assert counts.type.shape == (len(BRANCH_NAMES),)
    got = pytensor.function([theta], counts)(0.2)
    want = _report_counts(oscillator, [1.0, -0.3], 0.2, TIMES, route, method)
    np.testing.assert_array_equal(got, want)
    assert got.sum() > 0


def test_counts_of_a_batch(oscillator):
    theta = pt.dscalar("theta")
    starts = np.array([[1.0, -0.3], [0.2, 0.4]])
    times = np.stack([TIMES, 2.0 * TIMES])
    y = ode_solution(
        oscillator,
        starts,
        times,
        [theta],
        sensitivity="pbsr",
        method="bdf",
        on_failure="raise",
        **CONTROLS,
    )
    got = pytensor.function([theta], pbs_branch_counts(y))(0.3)
    assert got.shape == (2, len(BRANCH_NAMES))
    for e in range(2):
        want = _report_counts(oscillator, starts[e], 0.3, times[e], "pbsr", "bdf")
        np.testing.assert_array_equal(got[e], want)


def test_counts_of_every_draw_in_a_model(oscillator):
    """A Deterministic of the counts stores them per draw; the summary totals them."""
    with pm.Model():
        theta = pm.HalfNormal("theta", 1.0)
        y = ode_solution(
            oscillator,
            [1.0, 0.0],
            TIMES,
            [theta],
            sensitivity="pbsr",
            method="bdf",
            **CONTROLS,
        )
        pm.Normal("obs", y, 0.1, observed=np.zeros((TIMES.size, 2)))
        pm.Deterministic("branches", pbs_branch_counts(y))
        idata = pm.sample(
            draws=10,
            tune=10,
            chains=1,
            progressbar=False,
            random_seed=1,
            compute_convergence_checks=False,
        )
    branches = idata.posterior["branches"].values  # (chains, draws, 5)
    assert branches.shape == (1, 10, len(BRANCH_NAMES))
    theta_last = float(idata.posterior["theta"].values[0, -1])
    want = _report_counts(oscillator, [1.0, 0.0], theta_last, TIMES, "pbsr", "bdf")
    np.testing.assert_array_equal(branches[0, -1], want)
    summary = pbs_branch_summary(branches)
    assert set(summary) == {*BRANCH_NAMES, "steps_per_solve"}
    assert sum(summary[name] for name in BRANCH_NAMES) == pytest.approx(1.0)
    totals = branches.reshape(-1, len(BRANCH_NAMES)).sum(axis=0)
    assert summary["pbs_refined"] == pytest.approx(totals[1] / totals.sum())
    assert summary["steps_per_solve"] == pytest.approx(totals.sum() / 10)


def test_summary_ignores_failed_solves_and_checks_its_argument():
    counts = np.array([[3, 1, 0, 0, 0], [0, 0, 0, 0, 0], [1, 1, 2, 0, 0]])
    summary = pbs_branch_summary(counts)
    assert summary["pbs"] == pytest.approx(4 / 8)
    assert summary["exp_steady"] == pytest.approx(2 / 8)
    assert summary["steps_per_solve"] == pytest.approx(4.0)
    assert pbs_branch_summary(np.zeros((2, 5), dtype=int))["steps_per_solve"] == 0.0
    with pytest.raises(ValueError, match="last axis of length 5"):
        pbs_branch_summary(np.zeros((2, 4)))


def test_only_a_pbs_solution_has_counts(oscillator):
    theta = pt.dscalar("theta")
    forward = ode_solution(
        oscillator, [1.0, 0.0], TIMES, [theta], sensitivity="forward", on_failure="raise"
    )
    with pytest.raises(TypeError, match="returned by ode_solution.*'pbs', 'pbsr' or 'exp'"):
        pbs_branch_counts(forward)
    pbs = ode_solution(
        oscillator, [1.0, 0.0], TIMES, [theta], sensitivity="exp", on_failure="raise"
    )
    with pytest.raises(TypeError, match="returned by ode_solution"):
        pbs_branch_counts(pbs[:, 0])
    batch = ode_solution(
        oscillator, np.ones((2, 2)), TIMES, [theta], sensitivity="exp", on_failure="raise"
    )
    assert pbs_branch_counts(batch).type.shape == (2, len(BRANCH_NAMES))
    for part in (batch[0], batch[:, 0]):  # one experiment's, or one time's, solution
        with pytest.raises(TypeError, match="returned by ode_solution"):
            pbs_branch_counts(part)
    with pytest.raises(TypeError, match="returned by ode_solution"):
        pbs_branch_counts(np.zeros(3))
