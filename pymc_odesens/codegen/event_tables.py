"""Static integer tables of a system's events, read by the compiled hybrid driver.

One row per event (declaration order), the columns named below: what decides when the
event happens (its kind and, for an implicit event, its root atom and direction), and
SBML's attributes of trigger events (implicit and explicit events behave as persistent
events without priority that compute their assignments when they execute, in declaration
order among ties).
"""

from __future__ import annotations

import numpy as np

from pymc_odesens.model import OdeSystem

__all__ = [
    "EVENT_TABLE_WIDTH",
    "KIND_CROSSING",
    "KIND_SCHEDULED",
    "KIND_TRIGGER",
    "COL_ATOM",
    "COL_DIRECTION",
    "COL_HAS_PRIORITY",
    "COL_INITIAL_VALUE",
    "COL_KIND",
    "COL_PERSISTENT",
    "COL_RANDOM_ORDER",
    "COL_TERMINAL",
    "COL_TRIGGER_TIME_VALUES",
    "event_table",
]

KIND_CROSSING, KIND_SCHEDULED, KIND_TRIGGER = 0, 1, 2
"""Kinds: an implicit event (a root atom's crossing), an explicit event (its scheduled
times), a trigger event (its trigger switching from false to true)."""

(
    COL_KIND,
    COL_ATOM,
    COL_DIRECTION,
    COL_TERMINAL,
    COL_PERSISTENT,
    COL_INITIAL_VALUE,
    COL_TRIGGER_TIME_VALUES,
    COL_HAS_PRIORITY,
    COL_RANDOM_ORDER,
) = range(9)
EVENT_TABLE_WIDTH = 9


def event_table(system: OdeSystem) -> np.ndarray:
    """The (E, EVENT_TABLE_WIDTH) int64 table of ``system.events``."""
    atoms = system.event_atoms
    table = np.zeros((len(system.events), EVENT_TABLE_WIDTH), dtype=np.int64)
    kinds = {"implicit": KIND_CROSSING, "explicit": KIND_SCHEDULED, "trigger": KIND_TRIGGER}
    for event in system.events:
        row = table[event.index]
        row[COL_KIND] = kinds[event.kind]
        row[COL_ATOM], row[COL_DIRECTION] = atoms.crossing_atom.get(event.index, (-1, 0))
        row[COL_TERMINAL] = int(event.terminal)
        row[COL_PERSISTENT] = int(event.persistent)
        row[COL_INITIAL_VALUE] = int(event.initial_value)
        row[COL_TRIGGER_TIME_VALUES] = int(event.use_values_from_trigger_time)
        row[COL_HAS_PRIORITY] = int(event.priority is not None)
        row[COL_RANDOM_ORDER] = int(event.random_order)
    return table
