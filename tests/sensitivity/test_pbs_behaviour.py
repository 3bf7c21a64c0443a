"""Behaviour of the PBS methods: options and their messages, the branch report, statistics,
independence of the march from the output times, failures."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pymc_odesens import OdeSystem, solve_sensitivity
from pymc_odesens.codegen import compile_kernels
from pymc_odesens.sensitivity import PbsOptions, PbsStepReport
from pymc_odesens.sensitivity.pbs_report import BRANCH_NAMES
from tests.conftest import load_truth, model_path


@pytest.fixture(scope="module")
def decay():
    return OdeSystem(lambda t, y, p: [-p[0] * y[0]], states=["x"], params=["k"], name="pbs_decay")


def pka_inputs():
    spec = json.loads(model_path("pka").read_text())
    return np.array(spec["x0"], float), np.array(spec["p_nominal"], float)


# ---------------------------------------------------------------- options
@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"c": 0.0}, ValueError, r"c must be a positive finite number, got 0.0"),
        ({"c": math.inf}, ValueError, r"c must be a positive finite number, got inf"),
        ({"c": "10"}, TypeError, r"c must be a positive number, got '10'"),
        ({"c": True}, TypeError, r"c must be a positive number, got True"),
        ({"eps": -1e-4}, ValueError, r"eps must be a non-negative finite number, got -0.0001"),
        ({"eps": math.nan}, ValueError, r"eps must be a non-negative finite number, got nan"),
        ({"n_max": 0}, ValueError, r"n_max must be a positive integer or None, got 0"),
        ({"n_max": 2.5}, TypeError, r"n_max must be a positive integer or None, got 2.5"),
        ({"n_max": True}, TypeError, r"n_max must be a positive integer or None, got True"),
        ({"norm": "nuc"}, ValueError, r"norm must be one of 2, 1, inf or 'fro', got 'nuc'"),
        ({"norm": 3}, ValueError, r"norm must be one of 2, 1, inf or 'fro', got 3"),
        (
            {"steady_state_test": "states"},
            ValueError,
            r"steady_state_test must be one of \('jacobians', 'state_jacobian'\), got 'states'",
        ),
        (
            {"interpolation": "cubic"},
            ValueError,
            r"interpolation must be one of \('dense', 'hermite', 'linear'\), got 'cubic'",
        ),
        (
            {"exp_step": "mid"},
            ValueError,
            r"exp_step must be one of \('start', 'trapezoid'\) or None, got 'mid'",
        ),
        ({"max_step": 0.0}, ValueError, r"max_step must be a positive number \(inf allowed\)"),
        ({"max_step": -1.0}, ValueError, r"max_step must be a positive number \(inf allowed\)"),
    ],
)
def test_invalid_options_name_the_option(options, error, match):
    with pytest.raises(error, match=match):
        PbsOptions(**options)


def test_valid_options_and_defaults():
    default = PbsOptions()
    assert (default.c, default.eps, default.n_max, default.norm) == (10.0, 1e-4, 10, 2)
    assert default.exp_step_for("exp") == "start"
    assert default.exp_step_for("pbsr") == "trapezoid"
    assert PbsOptions(exp_step="start").exp_step_for("pbsr") == "start"
    for norm in (1, 2, math.inf, np.inf, "fro", 2.0):
        PbsOptions(norm=norm)
    assert PbsOptions(n_max=None).compiled_controls()[2] == math.inf
    assert PbsOptions(n_max=np.int64(5)).n_max == 5
    with pytest.raises(Exception, match="cannot assign|frozen"):
        default.c = 5.0


def test_interpolation_per_solver():
    dense = PbsOptions()
    assert "Dormand-Prince" in dense.describe_interpolation("rk45")
    assert "Cash-Karp" in dense.describe_interpolation("ckrk")
    assert "Hermite" in dense.describe_interpolation("bdf")
    assert "Hermite" in dense.describe_interpolation("adams")
    assert "linear" in PbsOptions(interpolation="linear").describe_interpolation("rk45")
    assert "Hermite" in PbsOptions(interpolation="hermite").describe_interpolation("rk45")


def test_pbs_options_through_solve_sensitivity(decay):
    with pytest.raises(ValueError, match=r"pbs_options: unknown option\(s\) \['cc'\]"):
        solve_sensitivity(decay, [1.0], [1.0], [0.5], sensitivity="pbsr", pbs_options={"cc": 1})
    with pytest.raises(TypeError, match="pbs_options must be a PbsOptions, a dict or None"):
        solve_sensitivity(decay, [1.0], [1.0], [0.5], sensitivity="pbsr", pbs_options=[1])
    with pytest.raises(
        ValueError, match="pbs_options applies to sensitivity='pbs', 'pbsr' or 'exp', not 'forward'"
    ):
        solve_sensitivity(decay, [1.0], [1.0], [0.5], pbs_options=PbsOptions())
    with pytest.raises(ValueError, match="n_max must be a positive integer or None, got -1"):
        solve_sensitivity(decay, [1.0], [1.0], [0.5], sensitivity="exp", pbs_options={"n_max": -1})


def test_systems_with_events_are_refused(reference_system):
    ball = reference_system("bouncing_ball")
    spec = json.loads(model_path("bouncing_ball").read_text())
    with pytest.raises(ValueError, match="does not support systems with events .*'forward'"):
        solve_sensitivity(
            ball, spec["x0"], [0.5, 1.0], spec["p_nominal"], method="rk45", sensitivity="pbsr"
        )


# ---------------------------------------------------------------- branch report
def test_report_shapes_and_counts(decay):
    times = np.linspace(0.0, 5.0, 11)
    for sensitivity, branch in [("pbs", 0), ("exp", 4)]:
        result = solve_sensitivity(decay, [1.0], times, [0.7], sensitivity=sensitivity)
        report = result.pbs_steps
        assert isinstance(report, PbsStepReport)
        assert report.t.shape == (len(report) + 1,) and report.y.shape == (len(report) + 1, 1)
        assert report.t[0] == 0.0 and report.t[-1] == 5.0 and np.all(np.diff(report.t) > 0)
        assert len(report) == result.stats["n_steps"]
        assert np.all(report.branch == branch) and np.all(report.substeps == 1)
        assert report.counts()[BRANCH_NAMES[branch]] == len(report)
        assert sum(report.counts().values()) == len(report)
        assert report.names == [BRANCH_NAMES[branch]] * len(report)
        assert report.algorithm == sensitivity
    forward = solve_sensitivity(decay, [1.0], times, [0.7])
    assert forward.pbs_steps is None


def test_pbsr_branches_follow_the_paper_rule(reference_system):
    """n_int = ceil(c dt ||J_y(t_k)||_2); Exp if n_int > n_max or both Jacobians change by
    less than eps (relative, 2-norm); else n_int PBS sub-steps. Checked with numpy's SVD."""
    system = reference_system("pka")
    y0, p = pka_inputs()
    result = solve_sensitivity(
        system,
        y0,
        np.linspace(0.0, 600.0, 61),
        p,
        sensitivity="pbsr",
        relative_tolerance=1e-5,
        absolute_tolerance=1e-6,
    )
    report = result.pbs_steps
    kernels = compile_kernels(system)
    jy = [kernels.evaluate("jac_y", t, y, p) for t, y in zip(report.t, report.y)]
    jp = [kernels.evaluate("jac_p", t, y, p) for t, y in zip(report.t, report.y)]
    checked = 0
    for k in range(len(report)):
        dt = report.t[k + 1] - report.t[k]
        x = 10.0 * dt * np.linalg.norm(jy[k], 2)
        change_y = np.linalg.norm(jy[k + 1] - jy[k], 2) / np.linalg.norm(jy[k], 2)
        change_p = np.linalg.norm(jp[k + 1] - jp[k], 2) / np.linalg.norm(jp[k], 2)
        if abs(x - round(x)) < 1e-5 * max(x, 1.0) or min(abs(change_y / 1e-4 - 1.0), 1.0) < 0.01:
            continue  # too close to a decision boundary for the power-iteration estimate
        n_int = max(1, math.ceil(x))
        if n_int > 10:
            expected, substeps = "exp_substep_limit", 1
        elif change_y < 1e-4 and change_p < 1e-4:
            expected, substeps = "exp_steady", 1
        else:
            expected, substeps = ("pbs_refined" if n_int > 1 else "pbs"), n_int
        assert report.names[k] == expected, k
        assert report.substeps[k] == substeps, k
        checked += 1
    assert checked > 0.9 * len(report)
    counts = report.counts()
    assert counts["pbs_refined"] > 0 and counts["exp_substep_limit"] > 0 and counts["pbs"] > 0
    assert result.stats["n_pbs_substeps"] >= report.substeps[report.branch <= 1].sum()


def test_n_max_none_never_switches_on_the_substep_count(decay):
    result = solve_sensitivity(
        decay,
        [1.0],
        [20.0],
        [3.0],
        method="rk45",
        sensitivity="pbsr",
        pbs_options={"n_max": None, "eps": 0.0},
    )
    report = result.pbs_steps
    assert not np.any(report.exp_mask)
    j = 3.0  # ||J_y|| of y' = -3 y
    expected = np.maximum(1, np.ceil(10.0 * np.diff(report.t) * j - 1e-9))
    np.testing.assert_array_equal(report.substeps, expected)


def test_eps_zero_disables_the_steady_state_switch(decay):
    # J_y and J_p of y' = -k y: J_y constant, J_p = -y changes; "state_jacobian" sees J_y only
    common = dict(method="rk45", relative_tolerance=1e-6, absolute_tolerance=1e-9)
    steady = solve_sensitivity(
        decay,
        [1.0],
        [1.0],
        [0.01],
        sensitivity="pbsr",
        pbs_options={"steady_state_test": "state_jacobian"},
        **common,
    )
    assert steady.pbs_steps.counts()["exp_steady"] == len(steady.pbs_steps)
    never = solve_sensitivity(
        decay,
        [1.0],
        [1.0],
        [0.01],
        sensitivity="pbsr",
        pbs_options={"steady_state_test": "state_jacobian", "eps": 0.0},
        **common,
    )
    assert never.pbs_steps.counts()["exp_steady"] == 0
    both = solve_sensitivity(decay, [1.0], [1.0], [0.01], sensitivity="pbsr", **common)
    assert both.pbs_steps.counts()["exp_steady"] < len(both.pbs_steps)


def test_max_step_splits_steps(decay):
    result = solve_sensitivity(
        decay, [1.0], [2.0], [0.5], method="rk45", sensitivity="exp", pbs_options={"max_step": 0.05}
    )
    report = result.pbs_steps
    np.testing.assert_array_equal(report.substeps, np.ceil(np.diff(report.t) / 0.05 - 1e-12))
    assert result.stats["n_exp_steps"] == report.substeps.sum()


# ---------------------------------------------------------------- march and outputs
@pytest.mark.parametrize("sensitivity", ["pbs", "pbsr", "exp"])
def test_values_at_solver_steps_do_not_depend_on_other_output_times(reference_system, sensitivity):
    system = reference_system("chua")
    truth = load_truth("chua")
    spec = json.loads(model_path("chua").read_text())
    kwargs = dict(
        method="rk45",
        sensitivity=sensitivity,
        relative_tolerance=1e-8,
        absolute_tolerance=1e-10,
    )
    last = solve_sensitivity(system, spec["x0"], [10.0], spec["p_nominal"], **kwargs)
    steps = last.pbs_steps.t
    on_steps = np.append(steps[:-1:7], steps[-1])
    at_steps = solve_sensitivity(system, spec["x0"], on_steps, spec["p_nominal"], **kwargs)
    mixed_times = np.unique(np.concatenate([on_steps, truth["t"]]))
    mixed = solve_sensitivity(system, spec["x0"], mixed_times, spec["p_nominal"], **kwargs)
    # the solver's steps do not depend on the output times, and neither does the march
    np.testing.assert_array_equal(at_steps.pbs_steps.t, steps)
    np.testing.assert_array_equal(mixed.pbs_steps.t, steps)
    np.testing.assert_array_equal(mixed.S[np.searchsorted(mixed_times, on_steps)], at_steps.S)
    np.testing.assert_array_equal(last.S[-1], at_steps.S[-1])
    assert mixed.stats["n_output_side_steps"] > 0 and at_steps.stats["n_output_side_steps"] == 0


def test_outputs_at_t0_and_repeated_times(decay):
    result = solve_sensitivity(decay, [2.0], [0.0, 0.0, 1.0, 1.0, 3.0], [0.5], sensitivity="pbsr")
    np.testing.assert_array_equal(result.S[:2], 0.0)
    np.testing.assert_array_equal(result.S[2], result.S[3])
    exact = -3.0 * 2.0 * np.exp(-1.5)
    assert result.S[4, 0, 0] == pytest.approx(exact, rel=1e-3)


def test_statistics(reference_system):
    system = reference_system("pka")
    y0, p = pka_inputs()
    result = solve_sensitivity(
        system,
        y0,
        [300.0, 600.0],
        p,
        sensitivity="pbsr",
        relative_tolerance=1e-5,
        absolute_tolerance=1e-6,
    )
    stats = result.stats
    for name in (
        "n_steps",
        "n_rhs_evals",
        "n_jac_y_evals",
        "n_jac_p_evals",
        "n_pbs_substeps",
        "n_exp_steps",
        "n_matrix_products",
        "n_interpolations",
        "n_output_side_steps",
    ):
        assert name in stats and stats[name] >= 0
    assert stats["n_jac_y_evals"] == stats["n_jac_p_evals"] >= stats["n_steps"] + 1
    assert stats["n_matrix_products"] > stats["n_exp_steps"]


def test_explicit_pbs_on_stiff_problems_diverges(reference_system):
    """Algorithm 1 on the solver's own steps is an explicit scheme: on pka's long BDF steps
    it diverges (PBSR's refinement and Exp switch exist for this)."""
    system = reference_system("pka")
    y0, p = pka_inputs()
    truth = load_truth("pka")
    kwargs = dict(relative_tolerance=1e-5, absolute_tolerance=1e-6)
    pbs = solve_sensitivity(system, y0, truth["t"], p, sensitivity="pbs", **kwargs)
    pbsr = solve_sensitivity(system, y0, truth["t"], p, sensitivity="pbsr", **kwargs)
    scale = np.abs(truth["S"]).max()
    assert not np.abs(pbs.S - truth["S"]).max() < 1e3 * scale  # NaN or huge
    assert np.abs(pbsr.S - truth["S"]).max() < 1e-2 * scale


def test_overflowing_pbs_warns():
    fast = OdeSystem(
        lambda t, y, p: [-p[0] * y[0] + 1.0], states=["x"], params=["k"], name="pbs_fast"
    )
    with pytest.warns(RuntimeWarning, match="not finite .*'pbsr' or a smaller PbsOptions.max_step"):
        result = solve_sensitivity(fast, [0.0], [1e8], [1e7], sensitivity="pbs")
    assert not np.all(np.isfinite(result.S))
    fine = solve_sensitivity(fast, [0.0], [1e8], [1e7], sensitivity="pbsr")
    assert fine.S[0, 0, 0] == pytest.approx(-1e-14, rel=1e-6)  # d(1/k)/dk
