"""The SBML model's events in the simulated system, and what they do around steady states.

``OdeSystem.from_sbml`` maps every SBML event onto a
:class:`~pymc_odesens.model.TriggerEvent` (docs/events.md). The simulated system
(:mod:`pymc_odesens.petab.simulation_system`) carries them over with the values PEtab fixes
substituted; the parameters that vary between conditions stay symbols, so that a trigger or
an assignment reads each condition's own value (petab's parameter mapping gives it, as for
the right-hand side).

Around steady states the semantics are those of PEtab v2 (its specification, "Initialization
and parameter application" and the experiment table's ``-inf`` periods: "Any event triggers
defined in the model must also be checked during this pre-simulation") and of AMICI from
version 0.34 on ("Events are now also handled during pre-equilibration, presimulation, and
post-equilibration", AMICI's changelog; ``ForwardProblem::handle_main_simulation`` and
``Model::reinit_events`` in AMICI's ``forwardproblem.cpp`` and ``model.cpp``):

1. Pre-equilibration starts at ``t = 0`` from the model's initial state under the
   pre-equilibration condition; events whose trigger is true there fire if their
   ``initialValue`` is false (as at the start of any simulation).
2. Events fire during the approach to the steady state. Here this is exact for events whose
   triggers are functions of time (comparisons of ``t`` with expressions of the parameters,
   combined with and / or / not): the model is integrated with its events up to the last
   time at which such a trigger can switch (the *settling time*, a number per condition),
   and the steady state is found from there, where no trigger changes any more. An event
   whose trigger needs root finding (it depends on the state) could fire anywhere on the
   way and is refused when the problem computes steady states (pre-equilibration or
   measurements at ``time = inf``), as is a switching time that depends on an estimated
   parameter (it has no settling time that holds for every value).
3. The main simulation starts at ``t = 0`` from the steady state (with the species the
   simulation condition sets re-initialised). A trigger's value "before" that start is its
   value at the end of pre-equilibration, not its ``initialValue``: an event fires at
   ``t = 0`` when its trigger is true there and was false at the end of pre-equilibration
   (AMICI's ``reinit_events`` with the Heaviside values of the pre-equilibration). For a
   trigger of time, that value is the one it takes for ``t -> inf``.
4. Measurements at ``time = inf`` are the steady state reached after the events of the
   simulation: integrated with events up to the simulation condition's settling time,
   then to the steady state.

AMICI's Newton solver, which it tries first, does not integrate and so fires no event after
the first instant of pre-equilibration (only its integration does): where Newton succeeds,
AMICI's pre-equilibration ignores time-triggered events that PEtab v2 says fire. Here they
always fire.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy as sp

from pymc_odesens.model import ExplicitEvent, ImplicitEvent, OdeSystem, TriggerEvent
from pymc_odesens.petab.errors import PetabUnsupportedError

__all__ = ["EventTiming", "carried_events", "event_timings", "settling_time"]

_DIRECTION_NAMES = {1: "up", -1: "down", 0: "both"}
_HOLDS = {
    ">": lambda side: side > 0,
    ">=": lambda side: side >= 0,
    "<": lambda side: side < 0,
    "<=": lambda side: side <= 0,
    "==": lambda side: side == 0,
    "!=": lambda side: side != 0,
}


def carried_events(
    model_system: OdeSystem,
    substitution: dict,
    switches: dict,
    initial_values: dict | None = None,
) -> list:
    """The events of ``model_system`` as declarations for the simulated system.

    Parameters
    ----------
    model_system : OdeSystem
        The SBML model as imported; its state and parameter symbols are those of the
        simulated system (which may add states after them).
    substitution : dict
        Parameter symbols -> numbers: the values PEtab fixes.
    switches : dict
        Comparisons of time -> their switch state's reading (``s > 1/2``), replaced in the
        triggers (:mod:`pymc_odesens.petab.time_switches`).
    initial_values : dict of str to bool, optional
        A trigger's value before ``t = 0`` by event name, replacing its ``initialValue``
        (after pre-equilibration: its value at the end of pre-equilibration).

    Returns
    -------
    list of TriggerEvent, ImplicitEvent or ExplicitEvent
    """
    initial_values = initial_values or {}
    states = model_system.states
    declarations = []
    for event in model_system.events:
        affect = {
            name: sp.sympify(a).xreplace(substitution)
            for name, a, assigned in zip(states, event.affect, event.assigned)
            if assigned
        }
        assign = (lambda t, y, p, a=affect: a) if affect else None
        common = dict(affect=assign, terminal=event.terminal, name=event.name)
        if event.kind == "trigger":
            priority = event.priority
            if priority is not None:
                priority = sp.sympify(priority).xreplace(substitution)
            trigger = event.trigger.xreplace(substitution).xreplace(switches)
            declarations.append(
                TriggerEvent(
                    lambda t, y, p, c=trigger: c,
                    initial_value=initial_values.get(event.name, event.initial_value),
                    persistent=event.persistent,
                    priority=None if priority is None else (lambda t, y, p, q=priority: q),
                    use_values_from_trigger_time=event.use_values_from_trigger_time,
                    random_order=event.random_order,
                    **common,
                )
            )
        elif event.kind == "implicit":
            condition = event.condition.xreplace(substitution)
            declarations.append(
                ImplicitEvent(
                    lambda t, y, p, g=condition: g,
                    direction=_DIRECTION_NAMES[event.direction],
                    **common,
                )
            )
        else:
            times = [sp.sympify(tau).xreplace(substitution) for tau in event.times]
            declarations.append(ExplicitEvent(lambda p, times=times: times, **common))
    return declarations


@dataclass(frozen=True)
class EventTiming:
    """When one event of the simulated system can happen.

    Attributes
    ----------
    name : str
    times : tuple of sympy.Expr or None
        The times (expressions of the parameters) at which its trigger can switch, or its
        explicit times; None if it is located by root finding (its trigger or condition
        depends on the state).
    value_at_end : bool or None
        A trigger event's value for ``t -> inf`` when its trigger is a function of time
        (None otherwise).
    """

    name: str
    times: tuple | None
    value_at_end: bool | None

    @property
    def of_time(self) -> bool:
        """Whether the event happens only at times known from the parameters."""
        return self.times is not None


def _atoms(node):
    if node[0] == "atom":
        yield node[2]
    elif node[0] in ("and", "or", "xor"):
        for child in node[1]:
            yield from _atoms(child)
    elif node[0] == "not":
        yield from _atoms(node[1])


def _value(node, side) -> bool:
    """A trigger formula (:class:`~pymc_odesens.model.event_atoms.EventAtoms`) with every
    atom on the side ``side(a)``."""
    kind = node[0]
    if kind == "const":
        return node[1]
    if kind == "atom":
        return _HOLDS[node[1]](side(node[2]))
    if kind == "not":
        return not _value(node[1], side)
    values = [_value(child, side) for child in node[1]]
    if kind == "and":
        return all(values)
    if kind == "or":
        return any(values)
    return sum(values) % 2 == 1  # xor


def event_timings(system: OdeSystem) -> tuple[EventTiming, ...]:
    """The timing of each event of ``system`` (the model as imported: its triggers as the
    SBML file writes them)."""
    atoms = system.event_atoms
    n_roots = len(atoms.roots)
    timings = []
    for event in system.events:
        if event.kind == "explicit":
            timings.append(EventTiming(event.name, tuple(event.times), None))
        elif event.kind == "implicit":
            timings.append(EventTiming(event.name, None, None))
        else:
            formula = atoms.formulas[event.index]
            used = sorted(set(_atoms(formula)))
            if any(a < n_roots for a in used):
                timings.append(EventTiming(event.name, None, None))
                continue
            times = tuple(atoms.time_atoms[a - n_roots] for a in used)
            # time atoms are stored as t - tau: positive once t has passed tau
            timings.append(EventTiming(event.name, times, _value(formula, lambda a: 1)))
    return tuple(timings)


def settling_time(timings, values: dict, where: str) -> float:
    """The last time at which an event of ``timings`` can happen (0 if none after ``t = 0``).

    Parameters
    ----------
    timings : sequence of EventTiming
    values : dict
        Parameter symbol -> the condition's value: a number, or the id (str) of an estimated
        parameter.
    where : str
        The condition, for messages.

    Raises
    ------
    PetabUnsupportedError
        An event is located by root finding, or a time depends on an estimated parameter.
    """
    end = 0.0
    for timing in timings:
        if not timing.of_time:
            raise PetabUnsupportedError(
                f"{where}: event {timing.name!r} depends on the state (it is located by "
                "root finding); a steady state is computed here (pre-equilibration or a "
                "measurement at time inf), and events during the approach to a steady state "
                "are supported only when their triggers are functions of time"
            )
        for tau in timing.times:
            numbers = {}
            for symbol in sorted(sp.sympify(tau).free_symbols, key=str):
                value = values.get(symbol)
                if isinstance(value, str) or value is None:
                    raise PetabUnsupportedError(
                        f"{where}: the time of event {timing.name!r} ({tau}) depends on "
                        f"{value if isinstance(value, str) else symbol!s}, which is "
                        "estimated; a steady state is computed here, and the events before "
                        "it need times that the conditions fix"
                    )
                numbers[symbol] = sp.Float(float(value))
            time = float(sp.sympify(tau).xreplace(numbers))
            if not math.isfinite(time):
                raise PetabUnsupportedError(
                    f"{where}: event {timing.name!r} has the time {time}; the events before "
                    "a steady state need finite times"
                )
            end = max(end, time)
    return end
