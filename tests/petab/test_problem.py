"""PetabProblem on a problem with a closed-form solution: every feature the benchmark
collection does not exercise, log-likelihood, gradients on every route, errors."""

import math

import numpy as np
import pandas as pd
import pytest
from petab.v1.calculate import calculate_single_llh

from pymc_odesens.petab import (
    PetabError,
    PetabProblem,
    PetabUnsupportedError,
    SolverOptions,
    route_choice,
)
from tests.petab.turnover import (
    TURNOVER_PARAMETERS,
    edited_turnover_problem,
    turnover_observables,
    turnover_sbml,
    turnover_solution,
    write_turnover_problem,
)

TRANSFORMATION = {
    "obs_log10": "log10",
    "obs_laplace": "lin",
    "obs_log_laplace": "log10",
    "obs_log_b": "log",
}
DISTRIBUTION = {"obs_laplace": "laplace", "obs_log_laplace": "laplace"}


@pytest.fixture(scope="module")
def turnover_yaml(tmp_path_factory):
    return write_turnover_problem(tmp_path_factory.mktemp("turnover"))


@pytest.fixture(scope="module")
def turnover(turnover_yaml):
    return PetabProblem.from_yaml(turnover_yaml, relative_tolerance=1e-10, absolute_tolerance=1e-12)


def _expected_llh(problem, x) -> float:
    theta = dict(zip(problem.parameters.ids, problem.parameters.unscale(x)))
    measurements = problem.petab_problem.measurement_df
    h, sigma = turnover_observables(measurements, theta)
    return sum(
        calculate_single_llh(m, hi, TRANSFORMATION[o], DISTRIBUTION.get(o, "normal"), si)
        for m, hi, si, o in zip(measurements["measurement"], h, sigma, measurements["observableId"])
    )


def test_structure(turnover):
    assert turnover.parameters.ids == tuple(k for k, v in TURNOVER_PARAMETERS.items() if v[4])
    labels = [e.label for e in turnover.experiments]
    assert labels == ["set", "stim", "pre -> stim", "pre -> stim_set"]  # plain ones first
    # u, k and the model parameters b, c, d vary or are estimated; A's initial value is set
    # by a condition: it gets a parameter
    assert turnover.system.params == ["u", "k", "b", "c", "d", "A_initial_value"]
    assert turnover.system.states == ["A"]
    assert "turnover" in repr(turnover)


def test_simulation_equals_the_closed_form(turnover):
    simulated = turnover.simulate()
    theta = dict(zip(turnover.parameters.ids, turnover.parameters.unscale(None)))
    h, sigma = turnover_observables(turnover.petab_problem.measurement_df, theta)
    np.testing.assert_allclose(simulated["simulation"], h, rtol=1e-7)
    np.testing.assert_allclose(simulated["noise"], sigma, rtol=1e-7)  # one uses h


@pytest.mark.parametrize("shift", [0.0, 0.15])
def test_log_likelihood_equals_petabs_definition(turnover, shift):
    x = turnover.x_nominal + shift * np.linspace(-1, 1, len(turnover.parameters))
    expected = _expected_llh(turnover, x)
    assert turnover.log_likelihood(x) == pytest.approx(expected, rel=1e-8, abs=1e-6)


def test_gradient_against_central_differences(turnover):
    x = turnover.x_nominal + 0.1 * np.linspace(-1, 1, len(turnover.parameters))
    value, gradient = turnover.log_likelihood_and_gradient(x)
    assert value == pytest.approx(turnover.log_likelihood(x), abs=1e-7)
    h = 1e-5
    central = np.array(
        [
            (_expected_llh(turnover, x + h * e) - _expected_llh(turnover, x - h * e)) / (2 * h)
            for e in np.eye(len(x))
        ]
    )
    np.testing.assert_allclose(gradient, central, rtol=1e-5, atol=1e-5)


def test_routes_agree(turnover_yaml):
    gradients = {}
    for route in ("forward", "adjoint", "discrete_adjoint"):
        problem = PetabProblem.from_yaml(
            turnover_yaml,
            sensitivity=route,
            relative_tolerance=1e-10,
            absolute_tolerance=1e-12,
        )
        assert problem.gradient_route == route
        x = problem.x_nominal + 0.05
        gradients[route] = problem.log_likelihood_gradient(x)
    np.testing.assert_allclose(gradients["adjoint"], gradients["forward"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        gradients["discrete_adjoint"], gradients["forward"], rtol=1e-5, atol=1e-6
    )


def _with_a_copy_of_stim(folder, copy_initial_value: float) -> str:
    """The problem with a condition ``stim_copy`` (``stim``'s ``u``, the initial value of
    ``A`` given) that two groups of measurements use instead of ``stim``: ``obs_log_b`` at
    t = 1.5 and, after pre-equilibration, ``obs_log10`` at t = inf."""
    yaml = write_turnover_problem(folder)
    conditions = pd.read_csv(folder / "conditions.tsv", sep="\t")
    conditions.loc[len(conditions)] = {"conditionId": "stim_copy", "u": "u_stim", "A": math.nan}
    conditions.loc[len(conditions) - 1, "A"] = copy_initial_value
    conditions.to_csv(folder / "conditions.tsv", sep="\t", index=False)
    measurements = pd.read_csv(folder / "measurements.tsv", sep="\t")
    stim = measurements["simulationConditionId"] == "stim"
    moved = stim & (
        ((measurements["observableId"] == "obs_log_b") & (measurements["time"] == 1.5))
        | ((measurements["observableId"] == "obs_log10") & np.isinf(measurements["time"]))
    )
    assert moved.sum() == 3
    measurements.loc[moved, "simulationConditionId"] = "stim_copy"
    measurements.to_csv(folder / "measurements.tsv", sep="\t", index=False)
    return yaml


def test_conditions_with_equal_settings_share_one_simulation(turnover, tmp_path):
    options = dict(relative_tolerance=1e-10, absolute_tolerance=1e-12)
    copy = PetabProblem.from_yaml(_with_a_copy_of_stim(tmp_path / "same", math.nan), **options)
    assert [e.label for e in copy.experiments] == [
        "set",
        "stim = stim_copy",
        "pre -> stim = pre -> stim_copy",
        "pre -> stim_set",
    ]
    x = turnover.x_nominal + 0.1 * np.linspace(-1, 1, len(turnover.parameters))
    value, gradient = copy.log_likelihood_and_gradient(x)
    expected_value, expected_gradient = turnover.log_likelihood_and_gradient(x)
    assert value == pytest.approx(expected_value, rel=1e-12)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-10)
    np.testing.assert_allclose(
        copy.simulate(x)["simulation"], turnover.simulate(x)["simulation"], rtol=1e-12
    )
    # a different initial value is a different simulation: not merged, and it counts
    other = PetabProblem.from_yaml(_with_a_copy_of_stim(tmp_path / "other", 1.5), **options)
    assert [e.label for e in other.experiments] == [
        "set",
        "stim",
        "stim_copy",
        "pre -> stim",
        "pre -> stim_copy",
        "pre -> stim_set",
    ]
    assert other.log_likelihood(x) != pytest.approx(expected_value, rel=1e-3)


def test_x_is_checked(turnover):
    with pytest.raises(ValueError, match=r"x must have shape \(9,\)"):
        turnover.log_likelihood(np.zeros(3))


def test_options_are_checked(turnover_yaml):
    with pytest.raises(ValueError, match="sensitivity must be one of"):
        PetabProblem.from_yaml(turnover_yaml, sensitivity="pbs")
    with pytest.raises(TypeError, match="unknown solver option"):
        PetabProblem.from_yaml(turnover_yaml).build_model(tolerance=1.0)
    with pytest.raises(FileNotFoundError, match="no PEtab problem file"):
        PetabProblem.from_yaml(turnover_yaml.parent / "missing.yaml")


STEADY_STATE_CONTROLS = [
    {"method": "newton"},
    {"method": "integration"},
    {"relative_tolerance": 1e-11},
    {"absolute_tolerance": 1e-13},
    {"absolute_tolerance": np.full(1, 1e-13)},  # one per state (resized below)
    {"max_newton_iterations": 60},
    {"max_num_steps": 20_000},
    {"max_time": 1e10},
    {"nonnegative": True},
    {"linear_solver": "sparse"},
    {"sensitivity": "auto"},
    {"sensitivity": "implicit"},
    {"sensitivity": "integration"},
]


@pytest.mark.parametrize("controls", STEADY_STATE_CONTROLS, ids=lambda c: "-".join(map(str, c)))
def test_every_steady_state_control_is_usable(turnover, turnover_yaml, controls):
    """steady_state_controls are a cache key of the compiled functions: a dict there made
    every call raise "unhashable type: 'dict'". Each documented control, with the
    pre-equilibration and the steady-state measurements of the problem, gives the same
    log-likelihood and gradient."""
    if isinstance(controls.get("absolute_tolerance"), np.ndarray):
        controls = {"absolute_tolerance": np.full(turnover.system.n_states, 1e-13)}
    problem = PetabProblem.from_yaml(
        turnover_yaml,
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
        steady_state_controls=controls,
        sensitivity="forward",
    )
    hash(problem.options)
    assert set(problem.options.steady_state_controls) == set(controls)
    x = problem.x_nominal + 0.05
    # within the steady-state residual test (1e-10 by default) as conditioned here
    np.testing.assert_allclose(problem.log_likelihood(x), _expected_llh(turnover, x), rtol=1e-6)
    value, gradient = problem.log_likelihood_and_gradient(x)
    reference = PetabProblem.from_yaml(
        turnover_yaml, relative_tolerance=1e-10, absolute_tolerance=1e-12, sensitivity="forward"
    ).log_likelihood_gradient(x)
    np.testing.assert_allclose(gradient, reference, rtol=1e-5, atol=1e-6)


def test_steady_state_controls_are_checked_and_hash_by_content(turnover_yaml):
    with pytest.raises(TypeError, match=r"unknown steady-state control\(s\) \['tolerance'\]"):
        PetabProblem.from_yaml(turnover_yaml, steady_state_controls={"tolerance": 1e-8})
    with pytest.raises(TypeError, match="steady_state_controls must be a dict"):
        PetabProblem.from_yaml(turnover_yaml, steady_state_controls=[("method", "newton")])
    problem = PetabProblem.from_yaml(
        turnover_yaml, steady_state_controls={"sensitivity": "adjoint"}
    )
    with pytest.raises(ValueError, match="sensitivity must be one of 'auto', 'implicit'"):
        problem.log_likelihood()
    as_array = SolverOptions(steady_state_controls={"absolute_tolerance": np.array([1e-9, 1e-9])})
    as_list = SolverOptions(steady_state_controls={"absolute_tolerance": [1e-9, 1e-9]})
    assert as_array == as_list and hash(as_array) == hash(as_list)
    assert as_array != SolverOptions(steady_state_controls={"absolute_tolerance": [1e-9, 1e-8]})


def test_automatic_route_is_the_fastest_measured(turnover_yaml, monkeypatch):
    """sensitivity="auto" times every route at the nominal values and takes the fastest
    (when clearly faster than the rule's); its gradient is that route's (every route
    measured: the turnover problem is faster than the threshold below which the first
    route is kept)."""
    monkeypatch.setattr(route_choice, "MEASURE_ABOVE_SECONDS", 0.0)
    problem = PetabProblem.from_yaml(
        turnover_yaml, relative_tolerance=1e-10, absolute_tolerance=1e-12
    )
    route = problem.gradient_route
    choice = problem.route_choice
    assert choice.measured and set(choice.seconds) == {"forward", "adjoint", "discrete_adjoint"}
    first = problem.options.route(problem.sensitivity_columns)  # the rule's, measured first
    fastest = min(choice.seconds, key=choice.seconds.get)
    switch = choice.seconds[fastest] * route_choice.SWITCH_FACTOR <= choice.seconds[first]
    assert route == (fastest if switch else first)
    assert all(0.0 < s < math.inf for s in choice.seconds.values()), choice
    x = problem.x_nominal + 0.05
    by_route = PetabProblem.from_yaml(
        turnover_yaml, relative_tolerance=1e-10, absolute_tolerance=1e-12, sensitivity=route
    )
    np.testing.assert_array_equal(
        problem.log_likelihood_gradient(x), by_route.log_likelihood_gradient(x)
    )
    fixed = PetabProblem.from_yaml(turnover_yaml, sensitivity="adjoint")
    assert fixed.gradient_route == "adjoint" and not fixed.route_choice.measured


def _edited(turnover_yaml, tmp_path, table: str, edit) -> str:
    return edited_turnover_problem(tmp_path / "edited", table, edit)


def test_a_noise_distribution_petab_does_not_define_is_named(turnover_yaml, tmp_path):
    # not a PEtab v1 noise model: petab's check of the observable table refuses it
    def edit(df):
        df.loc[0, "noiseDistribution"] = "cauchy"

    with pytest.raises(PetabError) as info:
        PetabProblem.from_yaml(_edited(turnover_yaml, tmp_path, "observables.tsv", edit))
    assert type(info.value) is PetabError
    info.match(
        r"observable table, row 0 \(obs_log10\), column noiseDistribution = 'cauchy': "
        "expected one of normal, laplace"
    )


def test_unknown_name_in_a_formula_is_named(turnover_yaml, tmp_path):
    def edit(df):
        df.loc[1, "observableFormula"] = "A + unknown_thing"

    with pytest.raises(PetabError, match="'unknown_thing' is neither"):
        PetabProblem.from_yaml(_edited(turnover_yaml, tmp_path, "observables.tsv", edit))


def test_wrong_number_of_overrides_is_named(turnover_yaml, tmp_path):
    def edit(df):
        df.loc[0, "observableParameters"] = "scale;2.0"

    with pytest.raises(PetabError, match=r"row 0 \(obs_log10\), observableParameters: 2 value"):
        PetabProblem.from_yaml(_edited(turnover_yaml, tmp_path, "measurements.tsv", edit))


def test_compartment_in_the_condition_table_is_refused(turnover_yaml, tmp_path):
    def edit(df):
        df["cell"] = [1.0, 1.0, 2.0, 1.0]

    with pytest.raises(PetabUnsupportedError, match="'cell' sets the size of a compartment"):
        PetabProblem.from_yaml(_edited(turnover_yaml, tmp_path, "conditions.tsv", edit))


def test_time_switch_in_the_model(tmp_path):
    # production switched on at t_on: A(t) = u/k (1 - exp(-k (t - t_on))) after t_on, from
    # A = 0; at AMICI's tolerances (atol 1e-16) this only integrates because the switch is
    # an event
    sbml = turnover_sbml(
        a0=0.0, production="piecewise(0, time < t_on, u)", parameters={"t_on": 0.75}
    )
    yaml = write_turnover_problem(tmp_path / "switch", sbml)
    problem = PetabProblem.from_yaml(yaml)
    assert [str(s.condition) for s in problem.simulation.switches] == ["t < 0.75"]
    simulated = problem.simulate()
    row = (simulated["simulationConditionId"] == "stim") & (
        simulated["observableId"] == "obs_log_b"
    )
    theta = dict(zip(problem.parameters.ids, problem.parameters.unscale(None)))
    t = simulated.loc[row, "time"].to_numpy()
    k, u = theta["k"], theta["u_stim"]
    a = np.where(t > 0.75, u / k * (1 - np.exp(-k * (t - 0.75))), 0.0)
    expected = a * math.exp(theta["b"] * theta["c"]) + 0.4 * theta["d"]
    np.testing.assert_allclose(simulated.loc[row, "simulation"], expected, rtol=1e-7)


def _switched_turnover(t: float, a0: float, k: float, switches: list) -> float:
    """``A(t)`` of ``dA/dt = sum of rates switched on at their times - k A`` from ``A(0)``."""
    a, start, rate = a0, 0.0, 0.0
    for on, extra in sorted(switches) + [(math.inf, 0.0)]:
        stop = min(on, t)
        if stop > start:
            a = float(turnover_solution(stop - start, a, rate, k))
            start = stop
        if on > t:
            return a
        rate += extra
    return a


@pytest.mark.parametrize("route", ["forward", "adjoint", "discrete_adjoint"])
def test_time_switches_that_coincide_in_one_condition(tmp_path, route):
    # two inputs switched on at times the condition table fixes; in 'stim' both at 0.75,
    # so their events coincide (with an event time per parameter each the engine refused
    # the sensitivity as one-sided; Isensee_JCB2018 has such a pair at t = 60)
    sbml = turnover_sbml(
        a0=0.0,
        production="piecewise(0, time < t_a, u) + piecewise(0, time < t_b, 2 * u)",
        parameters={"t_a": 0.75, "t_b": 0.75},
    )
    yaml = write_turnover_problem(tmp_path / "switches", sbml)
    conditions = pd.read_csv(yaml.parent / "conditions.tsv", sep="\t")
    conditions["t_a"] = [0.75, 0.75, 1.5, 0.75]
    conditions["t_b"] = [0.75, 0.75, 0.75, 2.0]
    conditions.to_csv(yaml.parent / "conditions.tsv", sep="\t", index=False)
    problem = PetabProblem.from_yaml(
        yaml, sensitivity=route, relative_tolerance=1e-10, absolute_tolerance=1e-12
    )
    # the times are the table's numbers, constants of the events
    times = sorted(list(map(float, e.times)) for e in problem.system.events)
    assert times == [[0.75, 1.5], [0.75, 2.0]]
    theta = dict(zip(problem.parameters.ids, problem.parameters.unscale(None)))
    k, u = theta["k"], theta["u_stim"]
    simulated = problem.simulate()
    stim = simulated[
        (simulated["simulationConditionId"] == "stim") & (simulated["observableId"] == "obs_log_b")
    ]
    a = [_switched_turnover(t, 0.0, k, [(0.75, u), (0.75, 2 * u)]) for t in stim["time"]]
    expected = np.array(a) * math.exp(theta["b"] * theta["c"]) + 0.4 * theta["d"]
    np.testing.assert_allclose(stim["simulation"], expected, rtol=1e-7)
    later = simulated[simulated["simulationConditionId"] == "stim_set"]
    a = [_switched_turnover(t, 3.0, k, [(0.75, u), (2.0, 2 * u)]) for t in later["time"]]
    np.testing.assert_allclose(later["simulation"], theta["scale"] * np.array(a), rtol=1e-7)
    # the gradient across the coinciding events against central differences
    x = problem.x_nominal + 0.05
    gradient = problem.log_likelihood_gradient(x)
    h = 1e-5
    central = np.array(
        [
            (problem.log_likelihood(x + h * e) - problem.log_likelihood(x - h * e)) / (2 * h)
            for e in np.eye(len(x))
        ]
    )
    np.testing.assert_allclose(gradient, central, rtol=1e-6, atol=1e-4)
