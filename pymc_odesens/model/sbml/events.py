"""SBML events onto the library's events (:mod:`pymc_odesens.model.events`).

An SBML event fires when its trigger goes from false to true; its assignments set
variables from the values just before it (a variable an event assigns is a state, with a
zero derivative unless a rate rule drives it). A species' assignment sets what its symbol
denotes; a species held as its amount gets ``value * size`` (the size after the event).

Mapped exactly today:

- a trigger that is one comparison ``a < b``, ``a <= b``, ``a > b``, ``a >= b``: an
  :class:`~pymc_odesens.model.events.ImplicitEvent` on ``a - b`` crossing zero in the
  direction that makes it true; when ``a - b = +-(t - c(p))`` the trigger is a time, and
  the event an :class:`~pymc_odesens.model.events.ExplicitEvent` at ``c``, hit exactly;
- ``initialValue="false"`` with a trigger true at ``t0``: the event also fires at ``t0``
  (an explicit event there), when whether it is true at ``t0`` does not depend on the
  parameters.

Refused (by name) until the event engine expresses them: triggers that are not a single
comparison (``and``, ``or``, ``not``, ``==``), priorities, events whose assignments can
change another event's trigger (cascades) and events that can fire at the same time
(both make ``persistent``, ``useValuesFromTriggerTime`` and the order of simultaneous
events matter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import libsbml
import sympy as sp

from pymc_odesens.model.events import ExplicitEvent, ImplicitEvent
from pymc_odesens.model.sbml.mathml import MathConverter
from pymc_odesens.model.sbml.quantities import AMOUNT, Species
from pymc_odesens.model.sbml.refusals import SbmlUnsupportedError, element_label
from pymc_odesens.model.sbml.symbol_values import SymbolValues

__all__ = ["event_targets", "sbml_events"]

_RISING = {libsbml.AST_RELATIONAL_GT: 1, libsbml.AST_RELATIONAL_GEQ: 1}
_FALLING = {libsbml.AST_RELATIONAL_LT: -1, libsbml.AST_RELATIONAL_LEQ: -1}
_RELATION = {
    libsbml.AST_RELATIONAL_GT: sp.Gt,
    libsbml.AST_RELATIONAL_GEQ: sp.Ge,
    libsbml.AST_RELATIONAL_LT: sp.Lt,
    libsbml.AST_RELATIONAL_LEQ: sp.Le,
}


def event_targets(model: libsbml.Model) -> set[str]:
    """The ids some event assigns (they become states)."""
    return {
        assignment.getVariable()
        for event in model.getListOfEvents()
        for assignment in event.getListOfEventAssignments()
        if assignment.isSetMath() and event.isSetTrigger() and event.getTrigger().isSetMath()
    }


@dataclass
class _Mapped:
    name: str
    label: str
    targets: set
    condition: sp.Expr | None = None
    direction: int = 0
    time: sp.Expr | None = None
    at_t0: bool = False


def _state_affect(
    assignments: list[tuple[str, sp.Expr]],
    values: SymbolValues,
    species: Mapping[str, Species],
    state_ids: list[str],
) -> tuple[list[sp.Expr], set[str]]:
    affect = {}
    for sid, expr in assignments:
        value = values.resolve(expr)
        s = species.get(sid)
        if s is not None and s.state_unit == AMOUNT and s.meaning != AMOUNT:
            # the concentration assigned holds in the compartment as it was before the
            # event; an assignment to the size in the same event keeps the amount
            value = value * values.value(s.compartment)
        affect[sid] = value
    return [affect.get(sid, values.state_symbols[sid]) for sid in state_ids], set(affect)


def _time_of(g: sp.Expr, time: sp.Symbol) -> tuple[int, sp.Expr] | None:
    """``(k, c)`` with ``g = k (t - c)`` and ``k = +-1``, else None."""
    slope = sp.diff(g, time)
    if slope not in (sp.S.One, sp.S.NegativeOne):
        return None
    rest = sp.expand(g - slope * time)
    if rest.has(time):
        return None
    return int(slope), -rest / slope


def sbml_events(
    model: libsbml.Model,
    converter: MathConverter,
    values: SymbolValues,
    species: Mapping[str, Species],
    state_ids: list[str],
) -> list:
    """The model's events as ImplicitEvent / ExplicitEvent objects (see the module's docstring).

    Raises
    ------
    SbmlUnsupportedError
        For the events the module's docstring lists as refused.
    """
    states = set(values.state_symbols.values())
    t0 = values.t0
    mapped: list[_Mapped] = []
    events: list = []
    for j, event in enumerate(model.getListOfEvents()):
        label = element_label(event, "event", j)
        name = event.getId() or f"event{j}"
        trigger = event.getTrigger() if event.isSetTrigger() else None
        if trigger is None or not trigger.isSetMath():
            continue  # a trigger without math is never true
        assignments = [
            (
                a.getVariable(),
                converter.expression(a.getMath(), f"assignment to {a.getVariable()!r} in {label}"),
            )
            for a in event.getListOfEventAssignments()
            if a.isSetMath()
        ]
        if not assignments:
            continue  # nothing to do when it fires
        if event.isSetPriority() and event.getPriority().isSetMath():
            raise SbmlUnsupportedError("event priority", label, "not supported yet")
        ast = trigger.getMath()
        kind = ast.getType()
        if kind not in _RELATION or ast.getNumChildren() != 2:
            raise SbmlUnsupportedError(
                "event trigger that is not a single comparison",
                label,
                f"trigger {libsbml.formulaToL3String(ast)!r} is not supported yet",
            )
        where = f"trigger of {label}"
        lhs = converter.expression(ast.getChild(0), where)
        rhs = converter.expression(ast.getChild(1), where)
        relation = _RELATION[kind]
        g = values.resolve(lhs - rhs)
        direction = _RISING.get(kind) or _FALLING[kind]
        initial_value = bool(trigger.getInitialValue()) if model.getLevel() >= 3 else True
        affect, targets = _state_affect(assignments, values, species, state_ids)
        item = _Mapped(name=name, label=label, targets=targets)
        timed = None if g.free_symbols & states else _time_of(g, values.time)
        if timed is not None and timed[0] == direction and not timed[1].is_Number:
            # becomes true at a time c(p): hit exactly, at t0 if c(p) is earlier
            item.time = timed[1] if initial_value else sp.Max(timed[1], t0)
        else:
            strict = kind in (libsbml.AST_RELATIONAL_GT, libsbml.AST_RELATIONAL_LT)
            if timed is not None and timed[0] == direction:
                c = timed[1]
                if bool(c > t0) or (c == t0 and strict):
                    item.time = c
            elif g.free_symbols & states or g.has(values.time):
                if timed is None:
                    item.condition = g
                    item.direction = direction
            at_t0 = relation(values.resolve_initial(lhs), values.resolve_initial(rhs))
            if item.time is None and not initial_value:
                if at_t0 not in (sp.true, sp.false):
                    raise SbmlUnsupportedError(
                        "event with initialValue=false whose trigger at t0 depends on the "
                        "parameters",
                        label,
                        "not supported yet",
                    )
                item.at_t0 = at_t0 is sp.true
        mapped.append(item)
        common = dict(affect=lambda t, y, p, a=tuple(affect): list(a))
        if item.at_t0:
            t0_name = f"{name}@t0" if item.condition is not None else name
            events.append(ExplicitEvent([t0], name=t0_name, **common))
        if item.time is not None:
            events.append(ExplicitEvent([item.time], name=name, **common))
        if item.condition is not None:
            events.append(
                ImplicitEvent(
                    lambda t, y, p, g=g: g,
                    direction="up" if direction > 0 else "down",
                    name=name,
                    **common,
                )
            )
    _refuse_interacting(mapped, values)
    return events


def _refuse_interacting(mapped: list[_Mapped], values: SymbolValues) -> None:
    """Refuse events that may fire at the same time or set off one another."""
    symbols = values.state_symbols
    for item in mapped:
        assigned = {symbols[sid] for sid in item.targets}
        for other in mapped:
            if other is item or other.condition is None:
                continue
            if other.condition.free_symbols & assigned:
                raise SbmlUnsupportedError(
                    "events that set off one another",
                    f"{item.label} and {other.label}",
                    f"{item.label} assigns a variable of the trigger of {other.label}; not "
                    "supported yet",
                )
    seen: dict = {}
    for item in mapped:
        keys = []
        if item.condition is not None:
            keys.append(("condition", item.condition, item.direction))
        if item.time is not None:
            keys.append(("time", item.time))
        if item.at_t0:
            keys.append(("time", values.t0))
        for key in keys:
            if key in seen:
                raise SbmlUnsupportedError(
                    "simultaneous events",
                    f"{seen[key].label} and {item.label}",
                    "they fire at the same time; not supported yet",
                )
            seen[key] = item
