"""Inputs that switch at given times (``piecewise(..., t < t_on, ...)``) as switch states.

SBML models of stimulation experiments switch inputs on and off with ``piecewise``
functions of time: ``Fsk_level * piecewise(0, Fsk_time - t > 0, 1)``. An integrator that
steps across such a switch sees a discontinuous right-hand side; a state that starts at
zero when the input switches on then has no relative accuracy to offer in the first step,
and with a small absolute tolerance the step size underflows. AMICI turns these
conditions into root-found events; here each condition ``c(t, p)`` that changes exactly
once, at a time ``tau(p)`` (it is ``t`` compared with an expression of the parameters,
``t`` entering linearly with a numeric coefficient), becomes a *switch state* ``s``:

- ``ds/dt = 0``; ``s(0)`` is the value ``c`` takes just after ``t = 0`` (1 or 0): its
  value before ``tau`` if ``tau > 0``, else its value after ``tau``;
- an explicit event at ``tau(p)`` sets ``s`` to the value ``c`` takes after ``tau``; it
  fires only where ``tau > 0`` (its time is ``-1``, before the start, otherwise);
- the condition in the right-hand side is replaced by ``s > 1/2``.

The integration then stops exactly at ``tau`` (the last step before it sees the old
branch) and restarts with the new one; sensitivities and adjoints include the event
(with the event-time correction when ``tau`` depends on estimated parameters). A
switching time at ``t = 0`` (PEtab conditions often set the time of a second stimulus to
0 when there is none) does not fire: an event there would coincide with the start, whose
time does not move with the parameters, and the derivative with respect to ``tau`` would
be one-sided (the event engine refuses it). The derivative given there is the one from
below, zero, as for every ``tau <= 0``. A condition whose switching time is a number at
or before ``t = 0`` is settled (:attr:`TimeSwitch.settled`): the simulated system takes
its value after the switch instead of a switch state; one whose switching time is a number
at or after the last output time, where the condition still has its value before the
switch (``t <= 3600`` with measurements up to 3600), never switches while simulated
(:meth:`TimeSwitch.unchanged_through`) and keeps that value, unless a steady state is
simulated (pre-equilibration, ``inf`` measurements), which takes every switch after its
time. A switching time that every condition fixes as a number fires at those numbers,
constant times (:mod:`pymc_odesens.petab.simulation_system`), so that switches that
coincide in one condition share a time that does not move with the parameters.
Conditions of other forms are left to the integrator's step-size control.
"""

from __future__ import annotations

import math
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
        Its value just after ``t = 0`` as 1 or 0, an expression of the parameters.
    """

    condition: sp.Rel
    time: sp.Expr
    after: bool
    initial: sp.Expr

    @property
    def event_time(self) -> sp.Expr:
        """``tau`` where ``tau > 0``, else ``-1`` (before the start: no event)."""
        return sp.Piecewise((self.time, self.time > 0), (sp.S.NegativeOne, True))

    @property
    def settled(self) -> bool:
        """Whether the switching time is a number at or before ``t = 0``: the condition
        then keeps its value after the switch throughout ``t > 0``."""
        return bool(self.time.is_Number and self.time <= 0)

    def unchanged_through(self, t: sp.Symbol, end: float) -> bool:
        """Whether the switching time is a number and the condition keeps its value before
        the switch on all of ``[0, end]`` (``end`` included): it never switches while
        simulated."""
        if not self.time.is_Number or not math.isfinite(end) or self.time < end:
            return False
        before = not self.after
        return self.time > end or bool(self.condition.subs(t, end)) == before


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
    after = bool(after_rule(slope))
    before, later = (sp.S.Zero, sp.S.One) if after else (sp.S.One, sp.S.Zero)
    return TimeSwitch(
        condition=relation,
        time=tau,
        after=after,
        initial=sp.Piecewise((before, tau > 0), (later, True)),
    )


def find_time_switches(expressions, t: sp.Symbol, state_symbols, param_symbols) -> list[TimeSwitch]:
    """The conditions in ``expressions`` that switch once at a time ``tau(p)``.

    Conditions that involve states, or ``t`` other than linearly with a numeric
    coefficient, or equalities, are not returned.
    """
    states, params = set(state_symbols), set(param_symbols)
    found: dict = {}
    for expr in expressions:
        # sorted: a set's order follows the symbols' hashes, which vary between processes
        for relation in sorted(sp.sympify(expr).atoms(sp.Rel), key=sp.default_sort_key):
            if relation in found or t not in relation.free_symbols:
                continue
            if relation.free_symbols & states or not relation.free_symbols <= params | {t}:
                continue
            switch = _switch(relation, t)
            if switch is not None:
                found[relation] = switch
    return list(found.values())
