"""SBML events as :class:`~pymc_odesens.model.events.TriggerEvent` s.

Every SBML event without a delay maps one to one onto the event engine's trigger events
(docs/events.md has the semantics):

| SBML | TriggerEvent |
|---|---|
| ``<trigger>`` math | ``trigger``: the boolean expression, ids resolved |
| ``initialValue`` | ``initial_value`` (SBML Level 2: true) |
| ``persistent`` | ``persistent`` (SBML Level 2: true) |
| ``<priority>`` | ``priority``: its expression (none: after every event with one) |
| ``useValuesFromTriggerTime`` | ``use_values_from_trigger_time`` |
| ``<eventAssignment>`` s | ``affect``: ``{state: new value}`` |
| (equal priorities) | ``random_order=True``: ties drawn at random, as SBML says |

An event's assignments are computed from the values the engine hands them (at the trigger
time or at execution); whatever an event assigns is a state (a zero derivative unless a
rate rule drives it). A species' assignment sets what its symbol denotes; a species held as
its amount gets ``value * size`` with the size before the event (an assignment to that size
by the same event then keeps the amount, as SBML's test suite says). An event whose trigger
has no math never fires; one without assignments changes nothing and is left out. Events
with delays are refused (:mod:`pymc_odesens.model.sbml.refusals`).

SBML leaves the order of simultaneous events of equal priority (or without one) to chance,
and its test suite checks that a simulator draws it (``RandomEventExecution``): every SBML
event has ``random_order``, so such ties are drawn uniformly at each choice. When the order
changes the result, a solve is then one draw of the model's random process
(:func:`pymc_odesens.solvers.seed_event_order` makes it reproducible).
"""

from __future__ import annotations

from collections.abc import Mapping

import libsbml
import sympy as sp

from pymc_odesens.model.events import TriggerEvent
from pymc_odesens.model.sbml.mathml import MathConverter
from pymc_odesens.model.sbml.quantities import AMOUNT, Species
from pymc_odesens.model.sbml.refusals import element_label
from pymc_odesens.model.sbml.symbol_values import SymbolValues

__all__ = ["event_targets", "sbml_events"]


def event_targets(model: libsbml.Model) -> set[str]:
    """The ids some event assigns (they become states)."""
    return {
        assignment.getVariable()
        for event in model.getListOfEvents()
        for assignment in event.getListOfEventAssignments()
        if assignment.isSetMath() and event.isSetTrigger() and event.getTrigger().isSetMath()
    }


def _assignments(
    event, label: str, converter: MathConverter, values: SymbolValues, species: Mapping
) -> dict[str, sp.Expr]:
    """``{state id: new value in the state's unit}`` of an event's assignments."""
    affect = {}
    for assignment in event.getListOfEventAssignments():
        if not assignment.isSetMath():
            continue  # SBML Level 3 Version 2: an assignment without math does nothing
        sid = assignment.getVariable()
        value = values.resolve(
            converter.expression(assignment.getMath(), f"assignment to {sid!r} in {label}")
        )
        s: Species | None = species.get(sid)
        if s is not None and s.state_unit == AMOUNT and s.meaning != AMOUNT:
            value = value * values.value(s.compartment)
        affect[sid] = value
    return affect


def sbml_events(
    model: libsbml.Model,
    converter: MathConverter,
    values: SymbolValues,
    species: Mapping[str, Species],
) -> list[TriggerEvent]:
    """The model's events as TriggerEvents (see the module's docstring)."""
    level3 = model.getLevel() >= 3
    events = []
    for j, event in enumerate(model.getListOfEvents()):
        label = element_label(event, "event", j)
        trigger = event.getTrigger() if event.isSetTrigger() else None
        if trigger is None or not trigger.isSetMath():
            continue  # a trigger without math is never true
        affect = _assignments(event, label, converter, values, species)
        if not affect:
            continue
        condition = values.resolve(converter.condition(trigger.getMath(), f"trigger of {label}"))
        priority = None
        if event.isSetPriority() and event.getPriority().isSetMath():
            where = f"priority of {label}"
            priority = values.resolve(converter.expression(event.getPriority().getMath(), where))
        events.append(
            TriggerEvent(
                lambda t, y, p, c=condition: c,
                affect=lambda t, y, p, a=affect: a,
                initial_value=bool(trigger.getInitialValue()) if level3 else True,
                persistent=bool(trigger.getPersistent()) if level3 else True,
                priority=None if priority is None else (lambda t, y, p, q=priority: q),
                use_values_from_trigger_time=bool(event.getUseValuesFromTriggerTime()),
                name=event.getId() or f"event{j}",
                random_order=True,
            )
        )
    return events
