"""The relational atoms of a system's events: what the solvers locate, and how triggers read them.

Every comparison ``a R b`` in a trigger (``R`` one of ``> >= < <= == !=``) is an
*atom* ``g = a - b`` with a relation on its sign. Atoms are shared: the same ``g`` in
several triggers (or in an implicit event's condition) is located once, so that every
event it drives sees the same crossing.

- *Root atoms* depend on the state (or on ``t`` other than linearly): the solvers
  evaluate them along each step and locate their sign changes on the dense output
  (:mod:`pymc_odesens.solvers.event_location`). An implicit event's condition is a root
  atom too.
- *Time atoms* are ``c t - h(p)`` with a constant ``c`` (``t >= 5``, ``t > p.t_lag``):
  their crossing time ``tau = h(p) / c`` is known, so they are scheduled like explicit
  event times and hit exactly, with no root finding.

A trigger is then a boolean formula over the *sides* of its atoms (-1, 0, +1: the sign
of ``g``), generated as a kernel (:mod:`pymc_odesens.codegen.event_source`). Each atom is
stored with a canonical sign (``1 - x`` becomes ``x - 1`` with the relation flipped) so
that ``x > 1`` and ``1 < x`` share one atom.

The schedule of *slots* holds every known time: the explicit events' times (declaration
order) and the time atoms'. *Causes* name what set an event time, for its sensitivity:
``-1`` the initial time ``t0`` (fixed), ``j`` (``0 <= j < R``) root atom ``j``, ``R + s``
slot ``s``; causes of one *class* move identically with the parameters (``t0`` and the
constant times are class 0; slots with the same time expression share a class).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp

from pymc_odesens.model.derivatives import clean_derivative, gradient

__all__ = [
    "CAUSE_INITIAL",
    "RELATION_CODES",
    "EventAtoms",
    "event_atoms",
    "flipped_relation",
]

CAUSE_INITIAL = -1
"""Cause code of the events that fire at ``t0`` (their time does not move)."""

RELATION_CODES = {
    sp.StrictGreaterThan: ">",
    sp.GreaterThan: ">=",
    sp.StrictLessThan: "<",
    sp.LessThan: "<=",
    sp.Equality: "==",
    sp.Unequality: "!=",
}
"""The relation of a comparison ``a R b`` on the side of its atom ``g = a - b``."""

_FLIPPED = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "==", "!=": "!="}


def flipped_relation(relation: str) -> str:
    """The relation on ``-g`` equivalent to ``relation`` on ``g``."""
    return _FLIPPED[relation]


@dataclass(frozen=True)
class EventAtoms:
    """Atoms, trigger formulas, schedule slots and cause classes of a system's events.

    Attributes
    ----------
    roots : tuple of sympy.Expr
        Root atoms ``g_j(t, y, p)`` (R), located by the solvers.
    root_directions : tuple of int
        Sign changes of each root atom that stop an integrator run: 0 both (any atom
        used by a trigger), else the implicit events' direction (+1 up, -1 down).
    time_atoms : tuple of sympy.Expr
        Time atoms as their crossing times ``tau_m(p)`` (M); the atom is ``t - tau_m``.
    formulas : dict
        Trigger event index -> formula: ``("atom", relation, a)`` (``a`` the atom index,
        root atoms first, then ``R + m`` for time atom ``m``), ``("const", bool)``,
        ``("and" | "or" | "xor", children)``, ``("not", child)``.
    crossing_atom : dict
        Implicit event index -> ``(root atom index, direction on that atom)``.
    slots : tuple
        ``(owner, position, time)``: ``owner`` an explicit event's index (``position``
        within its times) or ``-1 - m`` for time atom ``m``; ``time`` the expression.
    cause_classes : numpy.ndarray of int64
        Class of each cause code ``c`` at index ``c + 1`` (length ``1 + R + S``).
    cause_events : numpy.ndarray of int64
        An event that the cause can set off (for messages), at ``c + 1``; -1 if none.
    """

    roots: tuple
    root_directions: tuple
    time_atoms: tuple
    formulas: dict
    crossing_atom: dict
    slots: tuple
    cause_classes: np.ndarray
    cause_events: np.ndarray

    @property
    def n_atoms(self) -> int:
        """Root and time atoms together (the sides a trigger kernel reads)."""
        return len(self.roots) + len(self.time_atoms)

    def root_gradient(self, j: int, t, states, params) -> tuple:
        """``(dg/dt, (dg/dy_i)_i, (dg/dp_k)_k)`` of root atom ``j``."""
        g = self.roots[j]
        return (
            clean_derivative(sp.diff(g, t)),
            gradient(g, states),
            gradient(g, params),
        )

    def slot_time_gradient(self, s: int, params) -> tuple:
        """``d tau_s / d p_k`` of slot ``s`` (P)."""
        return gradient(self.slots[s][2], params)


def _canonical_sign(g: sp.Expr, relation: str) -> tuple[sp.Expr, str]:
    if g.could_extract_minus_sign():
        return -g, flipped_relation(relation)
    return g, relation


def _time_atom(g: sp.Expr, t, states: set):
    """``(tau, sign of the t coefficient)`` if ``g = c t + h(p)`` with a constant ``c``."""
    if t not in g.free_symbols or g.free_symbols & states:
        return None
    c = sp.diff(g, t)
    if not c.is_number or c == 0 or not c.is_real:
        return None
    return -g.subs(t, 0) / c, (1 if c > 0 else -1)


class _Collector:
    def __init__(self, system) -> None:
        self.t = system.t
        self.states = set(system.state_symbols)
        self.roots: list = []
        self.root_index: dict = {}
        self.root_users: list = []  # per root atom: set of directions (None: trigger)
        self.times: list = []
        self.time_index: dict = {}

    def root(self, g: sp.Expr, direction) -> int:
        if g not in self.root_index:
            self.root_index[g] = len(self.roots)
            self.roots.append(g)
            self.root_users.append(set())
        j = self.root_index[g]
        self.root_users[j].add(direction)
        return j

    def time(self, tau: sp.Expr) -> int:
        if tau not in self.time_index:
            self.time_index[tau] = len(self.times)
            self.times.append(tau)
        return self.time_index[tau]

    def formula(self, node):
        if node is sp.true or node is sp.false:
            return ("const", bool(node))
        if isinstance(node, sp.core.relational.Relational):
            relation = RELATION_CODES[type(node)]
            g, relation = _canonical_sign(node.lhs - node.rhs, relation)
            timed = _time_atom(g, self.t, self.states)
            if timed is not None:
                tau, sign = timed
                if sign < 0:
                    relation = flipped_relation(relation)
                return ("time", relation, self.time(tau))
            return ("atom", relation, self.root(g, None))
        if isinstance(node, sp.Not):
            return ("not", self.formula(node.args[0]))
        kind = {sp.And: "and", sp.Or: "or", sp.Xor: "xor"}[type(node)]
        return (kind, tuple(self.formula(child) for child in node.args))


def _number_atoms(node, n_roots: int):
    """Time atoms ``("time", r, m)`` become ``("atom", r, R + m)``."""
    if node[0] == "time":
        return ("atom", node[1], n_roots + node[2])
    if node[0] in ("and", "or", "xor"):
        return (node[0], tuple(_number_atoms(c, n_roots) for c in node[1]))
    if node[0] == "not":
        return ("not", _number_atoms(node[1], n_roots))
    return node


def _formula_atoms(node):
    if node[0] == "atom":
        yield node[2]
    elif node[0] in ("and", "or", "xor"):
        for child in node[1]:
            yield from _formula_atoms(child)
    elif node[0] == "not":
        yield from _formula_atoms(node[1])


def _cause_events(n_roots: int, slots, formulas: dict, crossing: dict) -> np.ndarray:
    events = np.full(1 + n_roots + len(slots), -1, dtype=np.int64)
    slot_of_time_atom = {-1 - owner: s for s, (owner, _, _) in enumerate(slots) if owner < 0}
    for e in sorted(set(formulas) | set(crossing) | {o for o, _, _ in slots if o >= 0}):
        if e in crossing:
            code = crossing[e][0]
            events[1 + code] = events[1 + code] if events[1 + code] >= 0 else e
        for a in _formula_atoms(formulas.get(e, ("const", False))):
            code = a if a < n_roots else n_roots + slot_of_time_atom[a - n_roots]
            events[1 + code] = events[1 + code] if events[1 + code] >= 0 else e
    for s, (owner, _, _) in enumerate(slots):
        if owner >= 0:
            events[1 + n_roots + s] = owner
    return events


def event_atoms(system) -> EventAtoms:
    """Collect the atoms, formulas, slots and cause classes of ``system.events``."""
    collect = _Collector(system)
    formulas: dict = {}
    crossing: dict = {}
    for event in system.events:
        if event.kind == "trigger":
            formulas[event.index] = collect.formula(event.trigger)
        elif event.kind == "implicit":
            g, flipped = event.condition, False
            if g.could_extract_minus_sign():
                g, flipped = -g, True
            direction = -event.direction if flipped else event.direction
            crossing[event.index] = (collect.root(g, direction), direction)
    n_roots = len(collect.roots)
    formulas = {e: _number_atoms(f, n_roots) for e, f in formulas.items()}
    directions = []
    for users in collect.root_users:
        if None in users or len(users) != 1:
            directions.append(0)
        else:
            directions.append(next(iter(users)))
    slots = [
        (event.index, s, tau)
        for event in system.events
        if event.kind == "explicit"
        for s, tau in enumerate(event.times)
    ]
    slots += [(-1 - m, 0, tau) for m, tau in enumerate(collect.times)]
    # cause classes: t0 and constant times 0; each root atom its own; equal time expressions
    classes = [0] + [1 + j for j in range(n_roots)]
    expression_class: dict = {}
    canon = system.to_canonical
    for _, _, tau in slots:
        if not sp.sympify(tau).free_symbols:
            classes.append(0)
            continue
        key = sp.srepr(canon(tau))
        expression_class.setdefault(key, 1 + n_roots + len(expression_class))
        classes.append(expression_class[key])
    return EventAtoms(
        roots=tuple(collect.roots),
        root_directions=tuple(directions),
        time_atoms=tuple(collect.times),
        formulas=formulas,
        crossing_atom=crossing,
        slots=tuple(slots),
        cause_classes=np.array(classes, dtype=np.int64),
        cause_events=_cause_events(n_roots, slots, formulas, crossing),
    )
