"""SBML events inside PEtab problems: per-condition parameters in triggers and assignments,
the trigger's value at the start of a simulation, events during and after
pre-equilibration (PEtab v2 / AMICI >= 0.34), steady states after events, and gradients on
every route. Expected values are the turnover model's closed form, event by event."""

from __future__ import annotations

import math

import numpy as np
import pytest
from petab.v1.calculate import calculate_single_llh

from pymc_odesens.petab import PetabProblem, PetabUnsupportedError
from tests.petab.turnover import turnover_solution
from tests.petab.turnover_events import (
    CUT,
    DOSE,
    REFILL,
    SIGMA,
    TIGHT,
    WINDOW,
    write_problem,
)


def piecewise_turnover(t: float, a0: float, k: float, segments: list) -> float:
    """``A(t)`` of ``dA/dt = rate - k A`` from ``A(0) = a0``; ``segments``: ``(time, rate,
    jump)`` in time order, from each ``time`` on the production is ``rate`` and at it ``A``
    jumps by ``jump`` (the first at time 0). ``t = inf``: the last segment's steady state."""
    a, start, rate = a0, 0.0, 0.0
    for time, new_rate, jump in segments:
        if time > t:
            break
        a = float(turnover_solution(time - start, a, rate, k)) + jump
        start, rate = time, new_rate
    return float(turnover_solution(t - start, a, rate, k)) if math.isfinite(t) else rate / k


def _theta(problem, x=None) -> dict:
    return dict(zip(problem.parameters.ids, problem.parameters.unscale(x)))


def _llh(problem, expected: np.ndarray) -> float:
    measured = problem.petab_problem.measurement_df["measurement"]
    return sum(
        calculate_single_llh(m, h, "lin", "normal", SIGMA) for m, h in zip(measured, expected)
    )


def _central(problem, x, h=1e-5) -> np.ndarray:
    return np.array(
        [
            (problem.log_likelihood(x + h * e) - problem.log_likelihood(x - h * e)) / (2 * h)
            for e in np.eye(len(x))
        ]
    )


# events in the main simulation ----------------------------------------------------------
MAIN_TIMES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0]
MAIN_CONDITIONS = {
    # the first dose at an estimated time, the cut at 2
    "early": {"u": "u_stim", "t_dose": "t_first", "dose": "dose_amount", "t_cut": 2.0, "th": 0.0},
    # t_dose = 0: the dose's trigger is true at t = 0 and its initialValue false: it fires
    "start": {"u": "u_stim", "t_dose": 0.0, "dose": 1.5, "t_cut": 1.5, "th": 0.0},
    # no production: A decays, and is refilled by 1 each time it falls below 0.3
    "decay": {"u": 0.0, "t_dose": 10.0, "dose": 0.0, "t_cut": 10.0, "th": 0.3},
}


def _refill_times(a0: float, k: float, th: float, end: float) -> list:
    times, a, t = [], a0, 0.0
    while True:
        t += math.log(a / th) / k
        if t > end:
            return times
        times.append(t)
        a = th + 1.0


def main_expected(problem, x=None) -> np.ndarray:
    theta = _theta(problem, x)
    k, u, frac = theta["k"], theta["u_stim"], theta["frac"]
    segments = {
        "early": [(0.0, u, 0.0), (theta["t_first"], u, theta["dose_amount"]), (2.0, u * frac, 0.0)],
        "start": [(0.0, u, 1.5), (1.5, u * frac, 0.0)],
        "decay": [(0.0, 0.0, 0.0)]
        + [(t, 0.0, 1.0) for t in _refill_times(1.0, k, 0.3, max(MAIN_TIMES))],
    }
    df = problem.petab_problem.measurement_df
    return np.array(
        [
            piecewise_turnover(t, 1.0, k, segments[c])
            for c, t in zip(df["simulationConditionId"], df["time"])
        ]
    )


@pytest.fixture(scope="module")
def main_yaml(tmp_path_factory):
    folder = tmp_path_factory.mktemp("main_events")
    measurements = [("", c, MAIN_TIMES) for c in MAIN_CONDITIONS]
    return write_problem(folder, [DOSE, CUT, REFILL], MAIN_CONDITIONS, measurements)


@pytest.fixture(scope="module")
def main_problem(main_yaml):
    return PetabProblem.from_yaml(main_yaml, **TIGHT)


def test_events_reach_the_simulated_system(main_problem):
    system = main_problem.system
    # the model's events first, then the switches of their comparisons of time
    assert [e.name for e in system.events] == ["dosing", "cut", "refill", "switch_0", "switch_1"]
    # v, assigned by an event, is a state; t >= t_dose and t >= t_cut are switch states
    assert system.states == ["A", "v", "time_switch_0", "time_switch_1"]
    triggers = {e.name: str(e.trigger) for e in system.events if e.kind == "trigger"}
    assert triggers == {
        "dosing": "time_switch_0 > 1/2",
        "cut": "time_switch_1 > 1/2",
        "refill": "A < th",
    }
    # the per-condition amounts and thresholds stay parameters of the simulated system
    assert {"t_dose", "dose", "t_cut", "th"} <= set(system.params)
    # t_cut: numbers in every condition, constant event times; t_dose: estimated in one
    switch_times = {e.name: e.times for e in system.events if e.kind == "explicit"}
    assert [float(t) for t in switch_times["switch_1"]] == [1.5, 2.0]
    assert len(switch_times["switch_0"]) == 1 and switch_times["switch_0"][0].free_symbols


def test_main_simulation_equals_the_closed_form(main_problem):
    simulated = main_problem.simulate()
    np.testing.assert_allclose(simulated["simulation"], main_expected(main_problem), rtol=1e-7)
    x = main_problem.x_nominal + 0.05 * np.sin(np.arange(len(main_problem.parameters)))
    assert main_problem.log_likelihood(x) == pytest.approx(
        _llh(main_problem, main_expected(main_problem, x)), rel=1e-9
    )


@pytest.mark.parametrize("initial_value", [False, True])
def test_a_trigger_true_at_the_start_fires_unless_its_initial_value_is_true(
    tmp_path, initial_value
):
    # SBML's initialValue (as AMICI's Model::initialize_events): with false, a trigger true
    # at t = 0 fires there; with true it does not
    dose = {**DOSE, "initial_value": initial_value}
    conditions = {"start": MAIN_CONDITIONS["start"]}
    yaml = write_problem(tmp_path, [dose, CUT], conditions, [("", "start", [0.0, 1.0])])
    problem = PetabProblem.from_yaml(yaml, **TIGHT)
    k, u = _theta(problem)["k"], _theta(problem)["u_stim"]
    jump = 0.0 if initial_value else 1.5
    expected = [piecewise_turnover(t, 1.0, k, [(0.0, u, jump)]) for t in (0.0, 1.0)]
    np.testing.assert_allclose(problem.simulate()["simulation"], expected, rtol=1e-8)


@pytest.mark.parametrize("route", ["forward", "adjoint", "discrete_adjoint"])
def test_main_gradient_against_central_differences(main_yaml, main_problem, route):
    # the estimated dose time moves an event; the refills are located by root finding
    problem = PetabProblem.from_yaml(main_yaml, sensitivity=route, **TIGHT)
    x = problem.x_nominal + 0.05 * np.sin(np.arange(len(problem.parameters)))
    central = _central(main_problem, x)
    np.testing.assert_allclose(problem.log_likelihood_gradient(x), central, rtol=1e-5, atol=1e-4)


# events and pre-equilibration -------------------------------------------------------------
PRE_CONDITIONS = {
    # pre-equilibration: a dose at 0.5 and the cut at 1 (v = frac) before the steady state
    "pre": {"u": "u_pre", "t_dose": 0.5, "dose": "dose_amount", "t_cut": 1.0, "t_window": 0.2},
    # t_dose = 0: true at the start; t <= 1: true at the start, false for t -> inf
    "sim": {"u": "u_stim", "t_dose": 0.0, "dose": "dose_amount", "t_cut": 2.0, "t_window": 1.0},
}
PRE_TIMES = [0.0, 1.0, 2.5, math.inf]


def pre_expected(problem, x=None) -> np.ndarray:
    """By hand: pre-equilibration from A = 1, v = 1 with u_pre: the dose at 0.5 and the cut
    at 1 fire, the steady state is A* = u_pre frac / k, v* = frac. After it, the dose's
    trigger (t >= 0) was true at the end of pre-equilibration and is true at t = 0: no dose;
    the window's (t <= 1) was false and is true: A* + w at t = 0; the cut at t = 2 makes
    v = frac^2. Without pre-equilibration: the dose fires at t = 0 (initialValue false), the
    window does not (initialValue true), the cut at 2 makes v = frac."""
    theta = _theta(problem, x)
    k, u, frac, u_pre = theta["k"], theta["u_stim"], theta["frac"], 1.0
    after_pre = [(0.0, u * frac, theta["w"]), (2.0, u * frac**2, 0.0)]
    plain = [(0.0, u, theta["dose_amount"]), (2.0, u * frac, 0.0)]
    df = problem.petab_problem.measurement_df
    values = []
    for pre, t in zip(df["preequilibrationConditionId"].fillna(""), df["time"]):
        if pre:
            values.append(piecewise_turnover(t, u_pre * frac / k, k, after_pre))
        else:
            values.append(piecewise_turnover(t, 1.0, k, plain))
    return np.array(values)


@pytest.fixture(scope="module")
def pre_yaml(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pre_events")
    measurements = [("pre", "sim", PRE_TIMES), ("", "sim", PRE_TIMES)]
    return write_problem(folder, [DOSE, CUT, WINDOW], PRE_CONDITIONS, measurements)


@pytest.fixture(scope="module")
def pre_problem(pre_yaml):
    return PetabProblem.from_yaml(pre_yaml, **TIGHT)


def test_events_with_preequilibration_follow_petab_v2(pre_problem):
    simulated = pre_problem.simulate()
    np.testing.assert_allclose(simulated["simulation"], pre_expected(pre_problem), rtol=1e-7)

    # the main simulation after pre-equilibration starts each trigger from its value there
    def initial_values(system):
        return {e.name: e.initial_value for e in system.events if e.kind == "trigger"}

    after_pre = initial_values(pre_problem.simulation.preequilibrated_system)
    assert after_pre == {"dosing": True, "cut": True, "window": False}
    assert initial_values(pre_problem.system) == {"dosing": False, "cut": True, "window": True}
    graph = pre_problem.graph
    np.testing.assert_array_equal(graph.preequilibration_settling, [1.0])
    np.testing.assert_array_equal(graph.settling, [2.0, 2.0])  # both measure at inf


@pytest.mark.parametrize("route", ["forward", "adjoint", "discrete_adjoint"])
def test_preequilibration_gradient_against_central_differences(pre_yaml, pre_problem, route):
    problem = PetabProblem.from_yaml(pre_yaml, sensitivity=route, **TIGHT)
    x = problem.x_nominal + 0.05 * np.sin(np.arange(len(problem.parameters)))
    value, gradient = problem.log_likelihood_and_gradient(x)
    assert value == pytest.approx(_llh(problem, pre_expected(problem, x)), rel=1e-9)
    np.testing.assert_allclose(gradient, _central(pre_problem, x), rtol=1e-5, atol=1e-4)


def test_an_event_located_by_root_finding_is_refused_with_preequilibration(tmp_path):
    measurements = [("pre", "sim", [1.0])]
    yaml = write_problem(tmp_path, [CUT, REFILL], PRE_CONDITIONS, measurements)
    with pytest.raises(
        PetabUnsupportedError,
        match=r"pre-equilibration condition 'pre': event 'refill' depends on the state",
    ):
        PetabProblem.from_yaml(yaml)


def test_an_event_located_by_root_finding_is_refused_before_a_steady_state(tmp_path):
    yaml = write_problem(tmp_path, [REFILL], MAIN_CONDITIONS, [("", "decay", [1.0, math.inf])])
    with pytest.raises(
        PetabUnsupportedError,
        match=r"simulation condition 'decay': event 'refill' depends on the state",
    ):
        PetabProblem.from_yaml(yaml)


def test_an_estimated_event_time_is_refused_in_preequilibration(tmp_path):
    conditions = {**PRE_CONDITIONS, "pre": {**PRE_CONDITIONS["pre"], "t_cut": "t_first"}}
    yaml = write_problem(tmp_path, [CUT], conditions, [("pre", "sim", [1.0])])
    with pytest.raises(
        PetabUnsupportedError,
        match=r"pre-equilibration condition 'pre': the time of event 'cut' \(t_cut\) depends "
        r"on t_first, which is estimated",
    ):
        PetabProblem.from_yaml(yaml)
