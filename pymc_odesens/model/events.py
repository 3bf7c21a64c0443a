"""Events of a hybrid ODE: explicit (at given times), implicit (where a condition crosses 0)
and trigger events (when a boolean trigger switches from false to true).

An event maps the state just before it, ``y(tau-)``, to the state just after it,
``y(tau) = a(tau, y(tau-), p)`` (its *affect*: the assignments of the state
components it changes), and may end the integration (*terminal*: the state stays at
``y(tau)`` afterwards). Three kinds decide when an event happens:

- :class:`ExplicitEvent`: at given times, which may be expressions of the parameters
  (a dosing time, a stimulus onset);
- :class:`ImplicitEvent`: where a condition ``g(t, y, p)`` crosses zero in the selected
  direction (a ball hitting the ground);
- :class:`TriggerEvent`: when a *trigger*, a boolean expression of ``t``, ``y`` and
  ``p`` (comparisons combined with and / or / not / xor), switches from false to true,
  with SBML's event semantics: the trigger's value before ``t0``
  (``initial_value``), persistence, priorities among simultaneous events, assignments
  computed at the trigger time or at execution, and cascades of events at one time.

All are written like the right-hand side, as Python arithmetic over symbols, so that
their derivatives are exact and compiled. :class:`OdeSystem
<pymc_odesens.model.system.OdeSystem>` resolves them into :class:`SymbolicEvent`
objects (sympy expressions in the system's symbols); the relational atoms of their
conditions and triggers, which the solvers locate, are collected by
:mod:`pymc_odesens.model.event_atoms`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import sympy as sp

from pymc_odesens.model.derivatives import (
    clean_derivative,
    gradient,
    jacobian_wrt_params,
    jacobian_wrt_states,
)
from pymc_odesens.model.expression_checks import checked_expression, refuse_non_finite
from pymc_odesens.model.symbol_vector import SymbolVector
from pymc_odesens.model.tracing import traced

__all__ = [
    "DIRECTIONS",
    "ExplicitEvent",
    "ImplicitEvent",
    "SymbolicEvent",
    "TriggerEvent",
    "events_from_json",
    "resolve_events",
]

DIRECTIONS = {"up": 1, "down": -1, "both": 0}
"""Crossing directions of an implicit condition and their codes: ``"up"`` from negative to
positive, ``"down"`` from positive to negative, ``"both"`` either."""

_EVENT_CLASSES = "an ImplicitEvent, an ExplicitEvent or a TriggerEvent"


@dataclass(frozen=True)
class ImplicitEvent:
    """An event where ``condition(t, y, p)`` crosses zero.

    Parameters
    ----------
    condition : callable
        ``condition(t, y, p)`` returning one expression ``g``; the event happens
        at the times ``tau`` where ``g`` changes sign in ``direction``. ``y`` and
        ``p`` are indexable by position and by name, as in the right-hand side.
    affect : callable, optional
        ``affect(t, y, p)`` returning the new state in terms of the state just
        before the event (``y``): either the N new values, or a mapping from the
        names of the states it changes to their new values (the others keep
        theirs). None leaves the state unchanged (useful with ``terminal=True``).
    direction : {"both", "up", "down"}
        Which sign changes count: ``"up"`` (negative to positive), ``"down"``
        (positive to negative) or both.
    terminal : bool
        Stop the dynamics at the event: later outputs hold the state just after
        it (as if ``f = 0`` from then on).
    name : str, optional
        Name used in results and messages.

    Examples
    --------
    A ball bouncing with coefficient of restitution ``gamma``:

    >>> bounce = ImplicitEvent(
    ...     lambda t, y, p: y.z,
    ...     affect=lambda t, y, p: {"v": -p.gamma * y.v},
    ...     direction="down",
    ... )
    """

    condition: Callable
    affect: Callable | None = None
    direction: str = "both"
    terminal: bool = False
    name: str | None = None


@dataclass(frozen=True)
class ExplicitEvent:
    """An event at given times.

    Parameters
    ----------
    times : sequence or callable
        The event times: numbers or expressions of the parameters (for example
        ``[0, 12, 24]``, or ``lambda p: [p.t_lag + 12 * k for k in range(4)]``).
        The event fires once at each time inside the integration span.
    affect : callable, optional
        ``affect(t, y, p)`` returning the new state (N values, or a mapping from
        the names of the states it changes to their new values; a dose:
        ``lambda t, y, p: {"gut": y.gut + p.dose}``). None leaves the state
        unchanged.
    terminal : bool
        Stop the dynamics at the first of these times (see
        :class:`ImplicitEvent`).
    name : str, optional
        Name used in results and messages.
    """

    times: Sequence | Callable
    affect: Callable | None = None
    terminal: bool = False
    name: str | None = None


@dataclass(frozen=True)
class TriggerEvent:
    """An event that fires when its trigger switches from false to true (SBML's events).

    Parameters
    ----------
    trigger : callable
        ``trigger(t, y, p)`` returning a boolean expression: comparisons of
        expressions (``y.C < p.threshold``, ``t >= 24``, or
        :func:`pymc_odesens.math.greater`, ..., :func:`~pymc_odesens.math.equal`)
        combined with ``&`` (and), ``|`` (or), ``~`` (not), ``^`` (xor) or
        :func:`pymc_odesens.math.logical_and` and its siblings. Python's ``and``,
        ``or``, ``not`` and ``==`` cannot be traced and are refused.
    affect : callable, optional
        ``affect(t, y, p)``: the event's assignments, either a mapping from the names
        of the states it assigns to their new values, or the N new values (a value
        equal to the state itself leaves that state unassigned). None assigns
        nothing.
    initial_value : bool
        The trigger's value just before ``t0``: with False, a trigger that is true at
        ``t0`` fires there; with True (default) it does not.
    persistent : bool
        Whether the event still executes when, among events at the same time, an
        event executed before it makes its trigger false (True, default) or is
        cancelled then (False). With no delays this is the only effect.
    priority : callable or float, optional
        ``priority(t, y, p)`` (or a number), evaluated when the events of one time
        are about to execute: the higher first; events of equal priority, and events
        without one (which execute after every event with a priority), in
        declaration order.
    use_values_from_trigger_time : bool
        True (default): the assigned values are computed from the state when the
        trigger switched, before any event executed at that time; False: from the
        state when the event executes (after those before it).
    terminal : bool
        Stop the dynamics after the event (see :class:`ImplicitEvent`).
    name : str, optional
        Name used in results and messages.
    random_order : bool
        False (default): ties of priority are executed in declaration order. True: when
        this event and another one with ``random_order`` are pending at one time with
        equal priorities (or both without), which of them executes first is drawn
        uniformly at random, as SBML specifies (its test suite's
        ``RandomEventExecution`` cases check the draws' statistics). The draws come from
        numba's generator; :func:`pymc_odesens.solvers.seed_event_order` seeds it.

    Examples
    --------
    A dose when the concentration has fallen below a threshold after 24 h:

    >>> redose = TriggerEvent(
    ...     lambda t, y, p: (y.central < p.threshold) & (t > 24.0),
    ...     affect=lambda t, y, p: {"gut": y.gut + p.dose},
    ... )
    """

    trigger: Callable
    affect: Callable | None = None
    initial_value: bool = True
    persistent: bool = True
    priority: Callable | float | None = None
    use_values_from_trigger_time: bool = True
    terminal: bool = False
    name: str | None = None
    random_order: bool = False


@dataclass(frozen=True, eq=False)
class SymbolicEvent:
    """An event resolved into sympy expressions of a system's symbols.

    Attributes
    ----------
    kind : {"implicit", "explicit", "trigger"}
    name : str
    index : int
        Position among the system's events (declaration order).
    affect : tuple of sympy.Expr
        N expressions of ``t``, the state before the event and the parameters (the
        state symbol itself for a component the event does not assign).
    assigned : tuple of bool
        Which state components the event assigns.
    terminal : bool
    condition : sympy.Expr or None
        Implicit events: ``g(t, y, p)``.
    direction : int
        Implicit events: +1 up, -1 down, 0 both.
    times : tuple of sympy.Expr
        Explicit events: the times, expressions of the parameters only.
    trigger : sympy.logic.boolalg.Boolean or None
        Trigger events: the boolean trigger.
    initial_value, persistent, use_values_from_trigger_time, random_order : bool
        Trigger events' attributes (see :class:`TriggerEvent`); the other kinds behave
        as persistent events that compute their assignments when they execute, in
        declaration order among ties.
    priority : sympy.Expr or None
        Trigger events: the priority expression (None: no priority).
    """

    kind: str
    name: str
    index: int
    affect: tuple
    terminal: bool
    t: sp.Symbol = field(repr=False)
    states: tuple = field(repr=False)
    params: tuple = field(repr=False)
    assigned: tuple = ()
    condition: sp.Expr | None = None
    direction: int = 0
    times: tuple = ()
    trigger: object = None
    initial_value: bool = True
    persistent: bool = True
    priority: sp.Expr | None = None
    use_values_from_trigger_time: bool = False
    random_order: bool = False

    # derivatives ---------------------------------------------------------------
    @cached_property
    def affect_jacobian_y(self) -> sp.SparseMatrix:
        """``[i, j] = d a_i / d y_j`` (N x N)."""
        return jacobian_wrt_states(self.affect, self.states)

    @cached_property
    def affect_jacobian_p(self) -> sp.SparseMatrix:
        """``[k, i] = d a_i / d p_k`` (P x N, DESIGN's parameter layout)."""
        return jacobian_wrt_params(self.affect, self.params)

    @cached_property
    def affect_derivative_t(self) -> tuple:
        """``d a_i / d t`` (N): non-zero for affects that depend on the event time."""
        return tuple(clean_derivative(sp.diff(a, self.t)) for a in self.affect)

    @cached_property
    def condition_gradient(self) -> tuple:
        """``(dg/dt, (dg/dy_j)_j, (dg/dp_k)_k)`` of an implicit event's condition."""
        g = self.condition
        return (
            clean_derivative(sp.diff(g, self.t)),
            gradient(g, self.states),
            gradient(g, self.params),
        )

    @cached_property
    def time_gradients(self) -> tuple:
        """Explicit events: ``d tau_s / d p_k`` for each time ``s`` (tuples of P)."""
        return tuple(gradient(tau, self.params) for tau in self.times)

    def canonical_text(self, to_canonical: Callable) -> str:
        """Text identifying the event's mathematics (for the system's fingerprint)."""
        parts = [
            self.kind,
            str(self.direction),
            str(self.terminal),
            str(self.assigned),
            str(
                (
                    self.initial_value,
                    self.persistent,
                    self.use_values_from_trigger_time,
                    self.random_order,
                )
            ),
        ]
        if self.condition is not None:
            parts.append(sp.srepr(to_canonical(self.condition)))
        if self.trigger is not None:
            parts.append(sp.srepr(to_canonical(self.trigger)))
        if self.priority is not None:
            parts.append("priority:" + sp.srepr(to_canonical(self.priority)))
        parts += [sp.srepr(to_canonical(tau)) for tau in self.times]
        parts += [sp.srepr(to_canonical(a)) for a in self.affect]
        return "/".join(parts)


def _check_symbols(expr, label: str, allowed: set) -> None:
    refuse_non_finite(expr, label)
    if expr.has(sp.I):
        raise ValueError(f"{label} is complex: {expr}")
    unknown = expr.free_symbols - allowed
    if unknown:
        names = ", ".join(sorted(str(s) for s in unknown))
        raise ValueError(f"{label} uses undeclared symbol(s) {names}")


def _as_expression(raw, label: str, allowed: set) -> sp.Expr:
    expr = checked_expression(raw, label)
    _check_symbols(expr, label, allowed)
    return expr


_TRIGGER_HELP = (
    "build triggers from comparisons (y.x > 1, t >= p.t_on, pymc_odesens.math.equal(a, b)) "
    "combined with & (and), | (or), ~ (not), ^ (xor) or pymc_odesens.math.logical_and, "
    "logical_or, logical_not, logical_xor"
)


def _as_trigger(raw, label: str, allowed: set):
    """A trigger: a sympy boolean of relationals, And, Or, Not, Xor (and true / false)."""
    if isinstance(raw, (bool, np.bool_)):
        raise TypeError(
            f"{label} returned the Python bool {bool(raw)}: `==` on symbols compares their "
            f"structure, not their values; {_TRIGGER_HELP}"
        )
    if not isinstance(raw, sp.logic.boolalg.Boolean):
        raise TypeError(f"{label} must return a boolean expression, got {raw!r}; {_TRIGGER_HELP}")
    _check_trigger_structure(raw, label)
    _check_symbols(raw, label, allowed)
    return raw


def _check_trigger_structure(node, label: str) -> None:
    if isinstance(node, sp.logic.boolalg.BooleanAtom):
        return
    if isinstance(node, sp.core.relational.Relational):
        for side in node.args:
            if not isinstance(side, sp.Expr):
                raise TypeError(
                    f"{label}: the comparison {node} compares a non-numeric expression {side}"
                )
        return
    if isinstance(node, (sp.And, sp.Or, sp.Not, sp.Xor)):
        for child in node.args:
            _check_trigger_structure(child, label)
        return
    raise TypeError(
        f"{label}: {type(node).__name__} ({node}) is not supported in a trigger; {_TRIGGER_HELP}"
    )


def _as_sequence(values, label: str) -> list:
    if isinstance(values, (sp.MatrixBase, np.ndarray)):
        values = list(np.asarray(values, dtype=object).ravel())
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise TypeError(
            f"{label} must return a sequence of expressions (or a mapping from state names "
            f"to expressions), got {type(values).__name__}"
        )
    return list(values)


def _resolve_affect(system, affect, label: str, args: tuple, allowed: set) -> tuple:
    """``(affect expressions (N), assigned flags (N))`` of an event's ``affect``."""
    symbols = tuple(system.state_symbols)
    n = system.n_states
    if affect is None:
        return symbols, (False,) * n
    if not callable(affect):
        raise TypeError(f"{label}: affect must be a callable affect(t, y, p)")
    raw = traced(affect, args, f"{label} affect")
    if isinstance(raw, Mapping):
        unknown = [key for key in raw if key not in system.states]
        if unknown:
            raise ValueError(
                f"{label}: affect assigns unknown state(s) {', '.join(map(repr, unknown))} "
                f"(states: {', '.join(system.states)})"
            )
        exprs = list(symbols)
        assigned = [False] * n
        for key, value in raw.items():
            i = system.states.index(key)
            exprs[i] = _as_expression(value, f"{label}: affect[{key!r}]", allowed)
            assigned[i] = True
        return tuple(exprs), tuple(assigned)
    values = _as_sequence(raw, f"{label}: affect")
    if len(values) != n:
        raise ValueError(
            f"{label}: affect returned {len(values)} values but the system has {n} "
            f"states ({', '.join(system.states)})"
        )
    exprs = tuple(
        _as_expression(v, f"{label}: affect[{i}] ({system.states[i]})", allowed)
        for i, v in enumerate(values)
    )
    return exprs, tuple(e != s for e, s in zip(exprs, symbols))


def _check_flag(value, label: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{label} must be True or False, got {value!r}")
    return bool(value)


def resolve_events(system, events: Sequence) -> tuple[SymbolicEvent, ...]:
    """Trace user events against ``system``'s symbols and validate them.

    Parameters
    ----------
    system : OdeSystem
    events : sequence of ImplicitEvent, ExplicitEvent or TriggerEvent

    Returns
    -------
    tuple of SymbolicEvent
    """
    if isinstance(events, (ImplicitEvent, ExplicitEvent, TriggerEvent)):
        events = [events]
    if not isinstance(events, Sequence):
        raise TypeError(
            "events must be a sequence of ImplicitEvent / ExplicitEvent / TriggerEvent, "
            f"got {type(events).__name__}"
        )
    t = system.t
    y_vec = SymbolVector("y", system.states, system.state_symbols)
    p_vec = SymbolVector("p", system.params, system.param_symbols)
    args = (t, y_vec, p_vec)
    everything = {t, *system.state_symbols, *system.param_symbols}
    resolved = []
    names: set[str] = set()
    for index, event in enumerate(events):
        if not isinstance(event, (ImplicitEvent, ExplicitEvent, TriggerEvent)):
            raise TypeError(f"events[{index}] must be {_EVENT_CLASSES}, got {type(event).__name__}")
        name = event.name if event.name is not None else f"event{index}"
        if not isinstance(name, str) or not name:
            raise TypeError(f"events[{index}].name must be a non-empty string, got {name!r}")
        if name in names:
            raise ValueError(f"events[{index}]: duplicate event name {name!r}")
        names.add(name)
        label = f"event {name!r}"
        affect, assigned = _resolve_affect(system, event.affect, label, args, everything)
        common = dict(
            name=name,
            index=index,
            affect=affect,
            assigned=assigned,
            terminal=_check_flag(event.terminal, f"{label}: terminal"),
            t=t,
            states=tuple(system.state_symbols),
            params=tuple(system.param_symbols),
        )
        if isinstance(event, ImplicitEvent):
            resolved.append(_implicit(system, event, label, args, everything, common))
        elif isinstance(event, ExplicitEvent):
            resolved.append(_explicit(system, event, label, p_vec, common))
        else:
            resolved.append(_triggered(event, label, args, everything, common))
    return tuple(resolved)


def _implicit(system, event, label, args, everything, common) -> SymbolicEvent:
    if not callable(event.condition):
        raise TypeError(f"{label}: condition must be a callable condition(t, y, p)")
    if event.direction not in DIRECTIONS:
        raise ValueError(
            f"{label}: direction must be one of {sorted(DIRECTIONS)}, got {event.direction!r}"
        )
    raw = traced(event.condition, args, f"{label} condition")
    if isinstance(raw, (list, tuple)):
        raise TypeError(f"{label}: condition must return one expression, got {raw!r}")
    condition = _as_expression(raw, f"{label}: condition", everything)
    if not condition.free_symbols & (set(system.state_symbols) | {system.t}):
        raise ValueError(
            f"{label}: condition {condition} depends on neither t nor the state; "
            "it can never cross zero"
        )
    return SymbolicEvent(
        kind="implicit", condition=condition, direction=DIRECTIONS[event.direction], **common
    )


def _explicit(system, event, label, p_vec, common) -> SymbolicEvent:
    raw_times = event.times
    if callable(raw_times):
        raw_times = traced(raw_times, (p_vec,), f"{label} times")
    times = _as_sequence(raw_times, f"{label}: times")
    if not times:
        raise ValueError(f"{label}: times must hold at least one time")
    params_only = set(system.param_symbols)
    exprs = tuple(
        _as_expression(
            tau, f"{label}: times[{s}] (expressions of the parameters only)", params_only
        )
        for s, tau in enumerate(times)
    )
    return SymbolicEvent(kind="explicit", times=exprs, **common)


def _triggered(event, label, args, everything, common) -> SymbolicEvent:
    if not callable(event.trigger):
        raise TypeError(f"{label}: trigger must be a callable trigger(t, y, p)")
    try:
        raw = traced(event.trigger, args, f"{label} trigger")
    except TypeError as err:
        if "truth value" not in str(err):
            raise
        raise TypeError(
            f"{label}: the trigger uses Python's `and`, `or`, `not` or `if` on a comparison, "
            f"which cannot be traced; {_TRIGGER_HELP}"
        ) from err
    trigger = _as_trigger(raw, f"{label}: trigger", everything)
    priority = None
    if event.priority is not None:
        raw_priority = event.priority
        if callable(raw_priority):
            raw_priority = traced(raw_priority, args, f"{label} priority")
        priority = _as_expression(raw_priority, f"{label}: priority", everything)
    return SymbolicEvent(
        kind="trigger",
        trigger=trigger,
        initial_value=_check_flag(event.initial_value, f"{label}: initial_value"),
        persistent=_check_flag(event.persistent, f"{label}: persistent"),
        use_values_from_trigger_time=_check_flag(
            event.use_values_from_trigger_time, f"{label}: use_values_from_trigger_time"
        ),
        random_order=_check_flag(event.random_order, f"{label}: random_order"),
        priority=priority,
        **common,
    )


def events_from_json(
    system, specs: Sequence[dict], where: str, names: dict | None = None
) -> tuple[SymbolicEvent, ...]:
    """Events of the neutral JSON format (``events`` list; see shared/models/README.md).

    Each entry has ``kind`` ("implicit" or "explicit"), ``affect`` (a mapping from
    state names to expressions of the pre-event state; states not named keep their
    value), and ``condition`` + ``direction`` (implicit) or ``times`` (explicit);
    optional ``terminal`` and ``name``. ``names`` binds the names the expressions may use
    (default: states, parameters and ``t``); the entries are assumed validated
    (:func:`pymc_odesens.model.json_schema.validate_json_model`).
    """
    from pymc_odesens.model.expression_parser import parse_expression

    if names is None:
        names = {str(s): s for s in (*system.state_symbols, *system.param_symbols)}
        names.setdefault("t", system.t)

    def parse(text, label):
        text = text if isinstance(text, str) else repr(text)
        return parse_expression(text, names, f"{where}: {label}")

    events = []
    for j, spec in enumerate(specs):
        label = f"events[{j}]"
        affect_spec = spec.get("affect", {})
        unknown = set(affect_spec) - set(system.states)
        if unknown:
            raise ValueError(f"{where}: {label}: affect names unknown states {sorted(unknown)}")
        affect_exprs = {
            s: parse(affect_spec[s], f"{label}.affect[{s!r}]")
            for s in system.states
            if s in affect_spec
        }

        def affect(t, y, p, exprs=affect_exprs):
            return exprs

        kind = spec.get("kind")
        common = dict(
            affect=affect, terminal=bool(spec.get("terminal", False)), name=spec.get("name")
        )
        if kind == "implicit":
            condition_expr = parse(spec["condition"], f"{label}.condition")
            events.append(
                ImplicitEvent(
                    lambda t, y, p, g=condition_expr: g,
                    direction=spec.get("direction", "both"),
                    **common,
                )
            )
        elif kind == "explicit":
            times = [parse(tau, f"{label}.times") for tau in spec["times"]]
            events.append(ExplicitEvent(times, **common))
        else:
            raise ValueError(
                f"{where}: {label}: kind must be 'implicit' or 'explicit', got {kind!r}"
            )
    return resolve_events(system, events)
