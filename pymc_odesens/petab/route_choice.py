"""The gradient route of ``sensitivity="auto"``, chosen from measured costs.

Which route computes a problem's gradient fastest depends on more than its number of
sensitivity columns: forward sensitivities take part in the error test (with AMICI's
absolute tolerance of 1e-16, columns that start at zero force small steps), the continuous
adjoint integrates a backward system with steps of its own, and the discrete adjoint replays
every step of the forward ``bdf`` run (one transposed solve and one Jacobian per step). On
SalazarCavazos_MBoC2020 (75 states, 7 columns) the rule by columns took the discrete adjoint
at 23 times the log-likelihood's cost. So the problem at hand decides: each candidate route
computes the log-likelihood and its gradient at the nominal parameters, once to compile
(and warm up) and then timed, and the fastest one that succeeded is taken
(:func:`fastest_route`) when it is at least :data:`SWITCH_FACTOR` times as fast as the
rule's route.

The measurement is bounded: the candidate of the rule by columns
(:meth:`~pymc_odesens.petab.solver_options.SolverOptions.route`) runs first with the
problem's options, and when its warm call takes less than :data:`MEASURE_ABOVE_SECONDS` it
is kept without measuring the others (their compiles, tens of seconds the first time on an
installation, would cost more than a faster route could save); the others run with a
tenth of its step budget (``max_num_steps``), so that a route that would need many more
steps (forward sensitivities that exceed 100000 steps) fails fast instead of running to the
end of its budget; and forward sensitivities are not measured above
:data:`FORWARD_MEASURE_LIMIT` columns (they were 45 times slower at 77).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pymc_odesens.solvers.errors import OdeSolverError

__all__ = [
    "RouteChoice",
    "candidate_routes",
    "fastest_route",
    "measure_routes",
    "FORWARD_MEASURE_LIMIT",
    "MEASURE_ABOVE_SECONDS",
    "MEASURED_REPEATS",
    "SWITCH_FACTOR",
    "STEP_BUDGET_FRACTION",
]

FORWARD_MEASURE_LIMIT = 40
"""Above this many sensitivity columns forward sensitivities are not measured."""

MEASURE_ABOVE_SECONDS = 0.05
"""The other routes are measured only when the first one's log-likelihood and gradient take
at least this long (seconds, warm)."""

MEASURED_REPEATS = 2
"""Timed calls per route after the first (compiling) one; the fastest counts."""

SWITCH_FACTOR = 1.5
"""Another route replaces the first (the rule's) only when it is at least this many times as
fast: timings on a shared machine vary, and a near tie chosen by noise would make the
gradient's route (and its last digits) change from one reading of a problem to the next."""

STEP_BUDGET_FRACTION = 0.1
"""The fraction of ``max_num_steps`` the candidates after the first are measured with."""


@dataclass(frozen=True)
class RouteChoice:
    """The route ``sensitivity="auto"`` chose, and why.

    Attributes
    ----------
    route : str
    seconds : dict of str to float
        Wall-clock seconds of one log-likelihood with gradient per measured route (the
        fastest of :data:`MEASURED_REPEATS` warm calls); ``inf`` for a route that failed.
    failures : dict of str to str
        The error of each route that failed (type and message).
    measured : bool
        False when nothing was measured (one candidate, or no point to measure at): the
        route is then the rule by columns. With only the first route in ``seconds``, it
        was faster than :data:`MEASURE_ABOVE_SECONDS` and kept.
    """

    route: str
    seconds: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)
    measured: bool = True


def candidate_routes(method: str, n_columns: int, first: str) -> tuple[str, ...]:
    """The routes worth measuring for ``method`` and ``n_columns`` sensitivity columns,
    ``first`` (the rule by columns) first."""
    routes = ["forward"]
    if method in ("bdf", "adams"):
        routes.append("adjoint")
    if method == "bdf":
        routes.append("discrete_adjoint")
    if n_columns > FORWARD_MEASURE_LIMIT and first != "forward":
        routes.remove("forward")
    if first in routes:
        routes.remove(first)
    return (first, *routes)


def fastest_route(seconds: Mapping[str, float]) -> str:
    """The route of the smallest finite time (the first listed of equal ones).

    Raises
    ------
    ValueError
        No route has a finite time (every one failed).
    """
    finite = {route: s for route, s in seconds.items() if math.isfinite(s)}
    if not finite:
        raise ValueError(f"no route succeeded: {dict(seconds)}")
    return min(finite, key=lambda route: (finite[route], list(finite).index(route)))


def measure_routes(
    candidates: tuple[str, ...],
    gradient_function: Callable[[str, bool], Callable[[], object]],
    clock: Callable[[], float] = time.perf_counter,
) -> RouteChoice:
    """Time ``candidates`` and choose the fastest.

    Parameters
    ----------
    candidates : tuple of str
        The first is measured with the full step budget, the others (only when the first
        took at least :data:`MEASURE_ABOVE_SECONDS`) with :data:`STEP_BUDGET_FRACTION` of
        it.
    gradient_function : callable
        ``gradient_function(route, full_budget)`` returns a callable of no arguments that
        computes the log-likelihood and gradient by ``route``.
    clock : callable
        Seconds (a monotonic clock).

    Returns
    -------
    RouteChoice
        The fastest route, or the first candidate's unless another was at least
        :data:`SWITCH_FACTOR` times as fast; the first candidate's when every route failed
        (its error is then the user's at the first call).
    """
    seconds: dict[str, float] = {}
    failures: dict[str, str] = {}
    for k, route in enumerate(candidates):
        try:
            evaluate = gradient_function(route, k == 0)
            evaluate()  # compiles the route's kernels and function
            best = math.inf
            for _ in range(MEASURED_REPEATS):
                start = clock()
                evaluate()
                best = min(best, clock() - start)
        except (OdeSolverError, FloatingPointError, ArithmeticError) as error:
            seconds[route] = math.inf
            failures[route] = f"{type(error).__name__}: {error}".split("\n")[0]
            continue
        seconds[route] = best
        if k == 0 and best < MEASURE_ABOVE_SECONDS:
            break
    try:
        route = fastest_route(seconds)
    except ValueError:
        route = candidates[0]
    first = seconds.get(candidates[0], math.inf)
    if math.isfinite(first) and seconds[route] * SWITCH_FACTOR > first:
        route = candidates[0]
    return RouteChoice(route=route, seconds=seconds, failures=failures)
