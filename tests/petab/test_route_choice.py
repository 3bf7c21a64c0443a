"""The gradient route of sensitivity="auto": the rule that picks it from measured costs."""

import math

import pytest

from pymc_odesens.petab.route_choice import (
    FORWARD_MEASURE_LIMIT,
    MEASURE_ABOVE_SECONDS,
    MEASURED_REPEATS,
    SWITCH_FACTOR,
    candidate_routes,
    fastest_route,
    measure_routes,
)
from pymc_odesens.solvers.errors import MaxNumStepsError


def test_fastest_route_takes_the_smallest_finite_time():
    assert fastest_route({"discrete_adjoint": 2.5, "adjoint": 0.2, "forward": math.inf}) == (
        "adjoint"
    )
    assert fastest_route({"discrete_adjoint": 1.0, "adjoint": 1.0}) == "discrete_adjoint"
    with pytest.raises(ValueError, match="no route succeeded"):
        fastest_route({"forward": math.inf, "adjoint": math.inf})


def test_candidates_start_with_the_rule_by_columns():
    assert candidate_routes("bdf", 7, "discrete_adjoint") == (
        "discrete_adjoint",
        "forward",
        "adjoint",
    )
    assert candidate_routes("bdf", 3, "forward") == ("forward", "adjoint", "discrete_adjoint")
    assert candidate_routes("adams", 9, "forward") == ("forward", "adjoint")
    assert candidate_routes("rk45", 9, "forward") == ("forward",)
    many = FORWARD_MEASURE_LIMIT + 1
    assert candidate_routes("bdf", many, "discrete_adjoint") == ("discrete_adjoint", "adjoint")


class FakeClock:
    """Each route's calls take the seconds it is given (no real time is measured)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_measure_routes_times_warm_calls_and_skips_failures():
    clock = FakeClock()
    cost = {"discrete_adjoint": 2.5, "forward": 0.3, "adjoint": 0.11}
    calls, budgets = [], {}

    def gradient_function(route, full_budget):
        budgets[route] = full_budget

        def evaluate():
            calls.append(route)
            if route == "forward":
                raise MaxNumStepsError("bdf: more than max_num_steps = 10000 steps", t=6.2)
            clock.now += cost[route] * (10.0 if calls.count(route) == 1 else 1.0)

        return evaluate

    choice = measure_routes(("discrete_adjoint", "forward", "adjoint"), gradient_function, clock)
    assert choice.route == "adjoint"
    assert choice.seconds == {
        "discrete_adjoint": pytest.approx(2.5),
        "forward": math.inf,
        "adjoint": pytest.approx(0.11),
    }
    assert choice.failures["forward"].startswith("MaxNumStepsError: bdf: more than")
    # the first (compiling) call is not timed; only the rule's route has the full budget
    assert calls.count("adjoint") == 1 + MEASURED_REPEATS
    assert budgets == {"discrete_adjoint": True, "forward": False, "adjoint": False}


def test_measure_routes_keeps_the_first_candidate_when_every_route_fails():
    def gradient_function(route, full_budget):
        def evaluate():
            raise FloatingPointError(f"{route}: the noise parameter is not positive")

        return evaluate

    choice = measure_routes(("discrete_adjoint", "adjoint"), gradient_function, FakeClock())
    assert choice.route == "discrete_adjoint"
    assert set(choice.failures) == {"discrete_adjoint", "adjoint"}


def test_a_fast_first_route_is_kept_without_measuring_the_others():
    """Below MEASURE_ABOVE_SECONDS the other routes' compiles would cost more than they
    could save: they are not even built."""
    clock = FakeClock()
    built = []

    def gradient_function(route, full_budget):
        built.append(route)

        def evaluate():
            clock.now += MEASURE_ABOVE_SECONDS / 10

        return evaluate

    choice = measure_routes(("forward", "adjoint", "discrete_adjoint"), gradient_function, clock)
    assert choice.route == "forward" and choice.measured
    assert built == ["forward"]
    assert choice.seconds == {"forward": pytest.approx(MEASURE_ABOVE_SECONDS / 10)}


def test_a_near_tie_keeps_the_first_route():
    """Another route must be SWITCH_FACTOR times as fast to replace the rule's: a near tie
    decided by timing noise would change the gradient's route from one reading to the
    next."""
    for adjoint, expected in ((4.9 / SWITCH_FACTOR * 1.01, "discrete_adjoint"), (1.0, "adjoint")):
        clock = FakeClock()
        cost = {"discrete_adjoint": 4.9, "adjoint": adjoint}

        def gradient_function(route, full_budget, clock=clock, cost=cost):
            def evaluate():
                clock.now += cost[route]

            return evaluate

        choice = measure_routes(("discrete_adjoint", "adjoint"), gradient_function, clock)
        assert choice.route == expected, (adjoint, choice)
