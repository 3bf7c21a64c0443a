"""Observables ``h(t, y, p)`` of a system: what the data measure.

:func:`resolve_observables` turns the forms a user may give (nothing, state
names or indices, names of the system's JSON ``outputs``, sympy expressions or
strings, a dict of them, or a function ``h(t, y, p)`` traced like the
right-hand side) into named sympy expressions in the system's symbols, whose
exact Jacobians are generated as numba kernels by
:mod:`pymc_odesens.codegen.observable_kernels`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp

from pymc_odesens.model import OdeSystem, SymbolVector
from pymc_odesens.model.expression_checks import checked_expression
from pymc_odesens.model.expression_parser import parse_expression
from pymc_odesens.model.tracing import traced

__all__ = ["Observables", "resolve_observables"]


@dataclass(frozen=True)
class Observables:
    """Named observables of a system.

    Attributes
    ----------
    names : tuple of str
    expressions : tuple of sympy.Expr
        In the system's symbols ``t``, ``state_symbols``, ``param_symbols``.
    """

    names: tuple
    expressions: tuple

    def __len__(self) -> int:
        return len(self.names)


def _locals(system: OdeSystem) -> dict:
    names = {str(s): s for s in (*system.state_symbols, *system.param_symbols)}
    names.setdefault("t", system.t)
    names.update(getattr(system, "outputs", {}) or {})
    return names


def _check_expression(system: OdeSystem, label: str, raw) -> sp.Expr:
    if isinstance(raw, str):
        raw = parse_expression(raw, _locals(system), label)
    expr = checked_expression(raw, label)
    if expr.has(sp.I):
        raise ValueError(f"{label} is complex: {expr}")
    allowed = {system.t, *system.state_symbols, *system.param_symbols}
    unknown = expr.free_symbols - allowed
    if unknown:
        names = ", ".join(sorted(str(s) for s in unknown))
        raise ValueError(
            f"{label} uses {names}, which is neither a state, a parameter nor t "
            f"(states: {', '.join(system.states)}; parameters: {', '.join(system.params)})"
        )
    return expr


def _by_name(system: OdeSystem, label: str, name: str) -> tuple[str, sp.Expr]:
    # an output of a state's name says what the name denotes (a species of an SBML model
    # held as its amount: the output is its concentration), as in OdeSolution[name]
    outputs = getattr(system, "outputs", {}) or {}
    if name in outputs:
        return name, _check_expression(system, label, outputs[name])
    if name in system.states:
        return name, system.state_symbols[system.states.index(name)]
    known = ", ".join(system.states)
    extra = f"; outputs: {', '.join(outputs)}" if outputs else ""
    raise ValueError(f"{label}: {name!r} is neither a state nor an output (states: {known}{extra})")


def _traced(system: OdeSystem, function: Callable) -> list:
    y = SymbolVector("y", system.states, system.state_symbols)
    p = SymbolVector("p", system.params, system.param_symbols)
    values = traced(function, (system.t, y, p), "observables")
    if isinstance(values, (sp.MatrixBase, np.ndarray)):
        values = list(values)
    if isinstance(values, sp.Expr):
        values = [values]
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise TypeError(
            "observables(t, y, p) must return a sequence of expressions, "
            f"got {type(values).__name__}"
        )
    return list(values)


def resolve_observables(system: OdeSystem, observables=None) -> Observables:
    """The observables of ``system`` as named sympy expressions.

    Parameters
    ----------
    system : OdeSystem
    observables : None, sequence, mapping or callable
        - ``None``: every state, in order.
        - a sequence whose items are names of the system's ``outputs`` (JSON
          models; every id of an SBML model, as what its symbol denotes) or of its
          states (an output of the same name wins), state indices (int), or expressions
          (sympy or strings in the state, parameter and output names and ``t``);
        - a mapping ``{name: expression}``;
        - a function ``h(t, y, p)`` returning a sequence of expressions, called
          once with symbols like the right-hand side (``y.AKAR4p``, ``p[0]``).

    Returns
    -------
    Observables

    Raises
    ------
    TypeError, ValueError
        Unknown names, out-of-range indices, expressions in undeclared
        symbols, duplicate names, an empty list.
    """
    if observables is None:
        return Observables(tuple(system.states), tuple(system.state_symbols))
    names: list[str] = []
    expressions: list[sp.Expr] = []
    if callable(observables) and not isinstance(observables, (sp.Basic, Mapping)):
        for m, raw in enumerate(_traced(system, observables)):
            expressions.append(_check_expression(system, f"observables[{m}]", raw))
            names.append(f"h{m}")
    elif isinstance(observables, Mapping):
        for name, raw in observables.items():
            label = f"observables[{name!r}]"
            if not isinstance(name, str):
                raise TypeError(f"{label}: observable names must be str, got {type(name).__name__}")
            expressions.append(_check_expression(system, label, raw))
            names.append(name)
    elif isinstance(observables, str) or not isinstance(observables, Sequence):
        what = f"the string {observables!r}" if isinstance(observables, str) else repr(observables)
        raise TypeError(
            "observables must be None, a sequence of state / output names, indices or "
            f"expressions, a dict {{name: expression}} or a function h(t, y, p); got {what}"
            + (f" (use [{observables!r}])" if isinstance(observables, str) else "")
        )
    else:
        for m, item in enumerate(observables):
            label = f"observables[{m}]"
            if isinstance(item, str) and item.isidentifier():
                name, expr = _by_name(system, label, item)
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                if not 0 <= int(item) < system.n_states:
                    raise ValueError(
                        f"{label}: state index {int(item)} is out of range "
                        f"(the system has {system.n_states} states)"
                    )
                name, expr = system.states[int(item)], system.state_symbols[int(item)]
            else:
                name, expr = f"h{m}", _check_expression(system, label, item)
            names.append(name)
            expressions.append(expr)
    if not names:
        raise ValueError("observables: at least one observable is needed, got none")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"observables: duplicate names {duplicates}")
    return Observables(tuple(names), tuple(expressions))
