"""Inputs that switch at given times (``piecewise(..., t < t_on, ...)``) as switch states.

SBML models of stimulation experiments switch inputs on and off with ``piecewise``
functions of time: ``Fsk_level * piecewise(0, Fsk_time - t > 0, 1)``. An integrator that
steps across such a switch sees a discontinuous right-hand side; a state that starts at
zero when the input switches on then has no relative accuracy to offer in the first step,
and with a small absolute tolerance the step size underflows. AMICI turns these
conditions into root-found events; here each condition ``c(t, p)`` that changes exactly
once, at a time ``tau(p)`` (it is ``t`` compared with an expression of the parameters,
``t`` entering linearly with a numeric coefficient), becomes a *switch state* ``s``:

- ``ds/dt = 0``, ``s(0) = 1`` if ``c(0, p)`` holds, else 0;
- an explicit event at ``tau(p)`` sets ``s`` to the value ``c`` takes after ``tau``;
- the condition in the right-hand side is replaced by ``s > 1/2``.

The integration then stops exactly at ``tau`` (the last step before it sees the old
branch) and restarts with the new one; sensitivities and adjoints include the event
(with the event-time correction when ``tau`` depends on estimated parameters). Conditions
of other forms are left to the integrator's step-size control.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

__all__ = ["TimeSwitch", "find_time_switches"]

_AFTER = {
    sp.StrictGreaterThan: lambda c: c > 0,
    sp.GreaterThan: lambda c: c > 0,
    sp.StrictLessThan: lambda c: c < 0,
    sp.LessThan: lambda c: c < 0,
}


@dataclass(frozen=True)
class TimeSwitch:
    """One condition of time that changes once.

    Attributes
    ----------
    condition : sympy.Rel
        As it appears in the right-hand side.
    time : sympy.Expr
        ``tau(p)``, when it changes.
    after : bool
        Its value after ``tau``.
    initial : sympy.Expr
        Its value at ``t = 0`` as 1 or 0, an expression of the parameters.
    """

    condition: sp.Rel
    time: sp.Expr
    after: bool
    initial: sp.Expr


def _switch(relation: sp.Rel, t: sp.Symbol) -> TimeSwitch | None:
    after_rule = _AFTER.get(type(relation))
    if after_rule is None:
        return None
    d = sp.expand(relation.lhs - relation.rhs)
    if not d.is_polynomial(t) or sp.degree(d, t) != 1:
        return None
    slope = d.coeff(t, 1)
    if not slope.is_Number or slope == 0:
        return None
    tau = sp.simplify(-d.coeff(t, 0) / slope)
    at_zero = relation.subs(t, 0)
    return TimeSwitch(
        condition=relation,
        time=tau,
        after=bool(after_rule(slope)),
        initial=sp.Piecewise((sp.S.One, at_zero), (sp.S.Zero, True)),
    )


def find_time_switches(expressions, t: sp.Symbol, state_symbols, param_symbols) -> list[TimeSwitch]:
    """The conditions in ``expressions`` that switch once at a time ``tau(p)``.

    Conditions that involve states, or ``t`` other than linearly with a numeric
    coefficient, or equalities, are not returned.
    """
    states, params = set(state_symbols), set(param_symbols)
    found: dict = {}
    for expr in expressions:
        for relation in sp.sympify(expr).atoms(sp.Rel):
            if relation in found or t not in relation.free_symbols:
                continue
            if relation.free_symbols & states or not relation.free_symbols <= params | {t}:
                continue
            switch = _switch(relation, t)
            if switch is not None:
                found[relation] = switch
    return list(found.values())
