"""Events of a hybrid ODE: explicit (at given times) and implicit (where a condition crosses 0).

An event maps the state just before it, ``y(tau-)``, to the state just after it,
``y(tau) = a(tau, y(tau-), p)`` (its *affect*), and may end the integration
(*terminal*: the state stays at ``y(tau)`` afterwards). Explicit events happen at
given times, which may be expressions of the parameters (a dosing time, a
stimulus onset); implicit events happen where a condition ``g(t, y, p)`` crosses
zero in the selected direction (a ball hitting the ground, a threshold). Both
are written like the right-hand side, as Python arithmetic over symbols, so that
their derivatives are exact and compiled.

The user-facing classes are :class:`ImplicitEvent` and :class:`ExplicitEvent`;
:class:`OdeSystem <pymc_odesens.model.system.OdeSystem>` resolves them into
:class:`SymbolicEvent` objects (sympy expressions in the system's symbols) with
the derivatives the sensitivity jumps need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import sympy as sp

from pymc_odesens.model.derivatives import clean_derivative
from pymc_odesens.model.symbol_vector import SymbolVector
from pymc_odesens.model.tracing import traced

__all__ = [
    "DIRECTIONS",
    "ExplicitEvent",
    "ImplicitEvent",
    "SymbolicEvent",
    "events_from_json",
    "resolve_events",
]

DIRECTIONS = {"up": 1, "down": -1, "both": 0}
"""Crossing directions of an implicit condition and their codes: ``"up"`` from negative to
positive, ``"down"`` from positive to negative, ``"both"`` either."""

_NON_FINITE = (sp.nan, sp.zoo, sp.oo, sp.S.NegativeInfinity)


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
        ``affect(t, y, p)`` returning the N new state values in terms of the
        state just before the event (``y``). None leaves the state unchanged
        (useful with ``terminal=True``).
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
    ...     affect=lambda t, y, p: [y.z, -p.gamma * y.v],
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
        ``affect(t, y, p)`` returning the N new state values (a dose:
        ``lambda t, y, p: [y.gut + p.dose, y.central]``). None leaves the state
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


@dataclass(frozen=True, eq=False)
class SymbolicEvent:
    """An event resolved into sympy expressions of a system's symbols.

    Attributes
    ----------
    kind : {"implicit", "explicit"}
    name : str
    index : int
        Position among the system's events.
    affect : tuple of sympy.Expr
        N expressions of ``t``, the state before the event and the parameters.
    terminal : bool
    condition : sympy.Expr or None
        Implicit events: ``g(t, y, p)``.
    direction : int
        Implicit events: +1 up, -1 down, 0 both.
    times : tuple of sympy.Expr
        Explicit events: the times, expressions of the parameters only.
    """

    kind: str
    name: str
    index: int
    affect: tuple
    terminal: bool
    t: sp.Symbol = field(repr=False)
    states: tuple = field(repr=False)
    params: tuple = field(repr=False)
    condition: sp.Expr | None = None
    direction: int = 0
    times: tuple = ()

    # derivatives ---------------------------------------------------------------
    @cached_property
    def affect_jacobian_y(self) -> sp.Matrix:
        """``[i, j] = d a_i / d y_j`` (N x N)."""
        n = len(self.states)
        return sp.Matrix(
            n, n, lambda i, j: clean_derivative(sp.diff(self.affect[i], self.states[j]))
        )

    @cached_property
    def affect_jacobian_p(self) -> sp.Matrix:
        """``[k, i] = d a_i / d p_k`` (P x N, DESIGN's parameter layout)."""
        n, p = len(self.states), len(self.params)
        return sp.Matrix(
            p, n, lambda k, i: clean_derivative(sp.diff(self.affect[i], self.params[k]))
        )

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
            tuple(clean_derivative(sp.diff(g, s)) for s in self.states),
            tuple(clean_derivative(sp.diff(g, s)) for s in self.params),
        )

    @cached_property
    def time_gradients(self) -> tuple:
        """Explicit events: ``d tau_s / d p_k`` for each time ``s`` (tuples of P)."""
        return tuple(
            tuple(clean_derivative(sp.diff(tau, s)) for s in self.params) for tau in self.times
        )

    def canonical_text(self, to_canonical: Callable) -> str:
        """Text identifying the event's mathematics (for the system's fingerprint)."""
        parts = [self.kind, str(self.direction), str(self.terminal)]
        if self.condition is not None:
            parts.append(sp.srepr(to_canonical(self.condition)))
        parts += [sp.srepr(to_canonical(tau)) for tau in self.times]
        parts += [sp.srepr(to_canonical(a)) for a in self.affect]
        return "/".join(parts)


def _as_expression(raw, label: str, allowed: set) -> sp.Expr:
    try:
        expr = sp.sympify(raw)
    except (sp.SympifyError, TypeError) as err:
        raise TypeError(f"{label} is not an expression: {raw!r}") from err
    if not isinstance(expr, sp.Expr):
        raise TypeError(f"{label} must be a scalar expression, got {expr!r}")
    if any(expr.has(bad) for bad in _NON_FINITE):
        raise ValueError(f"{label} contains a non-finite constant (nan or inf): {expr}")
    if expr.has(sp.I):
        raise ValueError(f"{label} is complex: {expr}")
    unknown = expr.free_symbols - allowed
    if unknown:
        names = ", ".join(sorted(str(s) for s in unknown))
        raise ValueError(f"{label} uses undeclared symbol(s) {names}")
    return expr


def _as_sequence(values, label: str) -> list:
    if isinstance(values, (sp.MatrixBase, np.ndarray)):
        values = list(np.asarray(values, dtype=object).ravel())
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise TypeError(
            f"{label} must return a sequence of expressions, got {type(values).__name__}"
        )
    return list(values)


def resolve_events(system, events: Sequence) -> tuple[SymbolicEvent, ...]:
    """Trace user events against ``system``'s symbols and validate them.

    Parameters
    ----------
    system : OdeSystem
    events : sequence of ImplicitEvent or ExplicitEvent

    Returns
    -------
    tuple of SymbolicEvent
    """
    if isinstance(events, (ImplicitEvent, ExplicitEvent)):
        events = [events]
    if not isinstance(events, Sequence):
        raise TypeError(
            "events must be a sequence of ImplicitEvent / ExplicitEvent, "
            f"got {type(events).__name__}"
        )
    n = system.n_states
    t = system.t
    y_vec = SymbolVector("y", system.states, system.state_symbols)
    p_vec = SymbolVector("p", system.params, system.param_symbols)
    everything = {t, *system.state_symbols, *system.param_symbols}
    params_only = set(system.param_symbols)
    resolved = []
    names: set[str] = set()
    for index, event in enumerate(events):
        if not isinstance(event, (ImplicitEvent, ExplicitEvent)):
            raise TypeError(
                f"events[{index}] must be an ImplicitEvent or an ExplicitEvent, "
                f"got {type(event).__name__}"
            )
        kind = "implicit" if isinstance(event, ImplicitEvent) else "explicit"
        name = event.name if event.name is not None else f"event{index}"
        if not isinstance(name, str) or not name:
            raise TypeError(f"events[{index}].name must be a non-empty string, got {name!r}")
        if name in names:
            raise ValueError(f"events[{index}]: duplicate event name {name!r}")
        names.add(name)
        label = f"event {name!r}"
        if not isinstance(event.terminal, (bool, np.bool_)):
            raise TypeError(f"{label}: terminal must be True or False, got {event.terminal!r}")
        if event.affect is None:
            affect = tuple(system.state_symbols)
        else:
            if not callable(event.affect):
                raise TypeError(f"{label}: affect must be a callable affect(t, y, p)")
            values = _as_sequence(
                traced(event.affect, (t, y_vec, p_vec), f"{label} affect"), f"{label}: affect"
            )
            if len(values) != n:
                raise ValueError(
                    f"{label}: affect returned {len(values)} values but the system has {n} "
                    f"states ({', '.join(system.states)})"
                )
            affect = tuple(
                _as_expression(v, f"{label}: affect[{i}] ({system.states[i]})", everything)
                for i, v in enumerate(values)
            )
        common = dict(
            name=name,
            index=index,
            affect=affect,
            terminal=bool(event.terminal),
            t=t,
            states=tuple(system.state_symbols),
            params=tuple(system.param_symbols),
        )
        if kind == "implicit":
            if not callable(event.condition):
                raise TypeError(f"{label}: condition must be a callable condition(t, y, p)")
            if event.direction not in DIRECTIONS:
                raise ValueError(
                    f"{label}: direction must be one of {sorted(DIRECTIONS)}, "
                    f"got {event.direction!r}"
                )
            raw = traced(event.condition, (t, y_vec, p_vec), f"{label} condition")
            if isinstance(raw, (list, tuple)):
                raise TypeError(f"{label}: condition must return one expression, got {raw!r}")
            condition = _as_expression(raw, f"{label}: condition", everything)
            if not condition.free_symbols & (set(system.state_symbols) | {t}):
                raise ValueError(
                    f"{label}: condition {condition} depends on neither t nor the state; "
                    "it can never cross zero"
                )
            resolved.append(
                SymbolicEvent(
                    kind=kind, condition=condition, direction=DIRECTIONS[event.direction], **common
                )
            )
        else:
            raw_times = event.times
            if callable(raw_times):
                raw_times = traced(raw_times, (p_vec,), f"{label} times")
            times = _as_sequence(raw_times, f"{label}: times")
            if not times:
                raise ValueError(f"{label}: times must hold at least one time")
            exprs = tuple(
                _as_expression(
                    tau, f"{label}: times[{s}] (expressions of the parameters only)", params_only
                )
                for s, tau in enumerate(times)
            )
            resolved.append(SymbolicEvent(kind=kind, times=exprs, **common))
    return tuple(resolved)


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
        affect_exprs = [
            parse(affect_spec[s], f"{label}.affect[{s!r}]") if s in affect_spec else sym
            for s, sym in zip(system.states, system.state_symbols)
        ]

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
