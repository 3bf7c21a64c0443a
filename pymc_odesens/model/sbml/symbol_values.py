"""What each SBML id denotes, as an expression of the system's time, states and parameters.

Every id of a model (species, compartment, parameter, species reference, reaction) has a
*role*:

- ``"state"``: integrated (species that are not constant; anything with a rate rule or
  changed by an event);
- ``"parameter"``: a global parameter whose value stays what it is, one of the system's
  parameters;
- ``"constant"``: constant in time, a number or (through initial assignments) an
  expression of the parameters (compartments of constant size, constant species, species
  references' stoichiometries, initially assigned parameters);
- ``"assigned"``: set by an assignment rule (substituted wherever it is used);
- ``"rate"``: a reaction, whose id denotes its kinetic law.

:class:`SymbolValues` resolves the file's math, written in
:class:`~pymc_odesens.model.sbml.mathml.SbmlSymbol` s, into the system's symbols: along
the trajectory (:meth:`SymbolValues.value`) and at the initial time
(:meth:`SymbolValues.initial`, with initial assignments), ``rateOf`` as the time derivative
along the flow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sympy as sp

from pymc_odesens.model.sbml.mathml import RateOf, SbmlSymbol
from pymc_odesens.model.sbml.quantities import AMOUNT, Species
from pymc_odesens.model.sbml.refusals import (
    SbmlError,
    SbmlUndefinedError,
    SbmlUnsupportedError,
)

__all__ = ["ROLES", "SymbolValues"]

ROLES = ("state", "parameter", "constant", "assigned", "rate")


class SymbolValues:
    """Resolution of SBML ids into expressions of ``t``, the states and the parameters.

    Parameters
    ----------
    roles : mapping of str to str
        The role of each id (see the module's docstring).
    species : mapping of str to Species
    state_symbols, param_symbols : mapping of str to sympy.Symbol
        The system's symbol of each state and parameter id.
    assignment_rules, initial_assignments, kinetic_laws : mapping of str to sympy.Expr
        The file's math, in SbmlSymbols.
    file_values : mapping of str to sympy.Expr
        Each id's value as the file states it, in what its symbol denotes (a species'
        concentration unless it has only substance units), in SbmlSymbols (a species given
        as an amount whose symbol denotes its concentration is ``amount / compartment``).
    time : sympy.Symbol
    t0 : float
        The initial time (SBML's time starts at 0).
    """

    def __init__(
        self,
        *,
        roles: Mapping[str, str],
        species: Mapping[str, Species],
        state_symbols: Mapping[str, sp.Symbol],
        param_symbols: Mapping[str, sp.Symbol],
        assignment_rules: Mapping[str, sp.Expr],
        initial_assignments: Mapping[str, sp.Expr],
        kinetic_laws: Mapping[str, sp.Expr],
        file_values: Mapping[str, sp.Expr],
        time: sp.Symbol,
        t0: float = 0.0,
    ) -> None:
        self.roles = roles
        self.species = species
        self.state_symbols = state_symbols
        self.param_symbols = param_symbols
        self.assignment_rules = assignment_rules
        self.initial_assignments = initial_assignments
        self.kinetic_laws = kinetic_laws
        self.file_values = file_values
        self.time = time
        self.t0 = sp.Integer(int(t0)) if float(t0).is_integer() else sp.Float(t0)
        self._state_by_symbol = {s: sid for sid, s in state_symbols.items()}
        self.state_derivative: Callable[[str], sp.Expr] | None = None
        self._values: dict[str, sp.Expr] = {}
        self._initials: dict[str, sp.Expr] = {}
        self._initial_states: dict[str, sp.Expr] = {}
        self._rates: dict[str, sp.Expr] = {}
        self._derivatives: dict[str, sp.Expr] = {}
        self._active: list[str] = []

    # cycle guard ----------------------------------------------------------------------------
    def _enter(self, key: str) -> None:
        if key in self._active:
            chain = " -> ".join([*self._active[self._active.index(key) :], key])
            raise SbmlError(f"circular definition: {chain}")
        self._active.append(key)

    def _leave(self) -> None:
        self._active.pop()

    def _memo(self, cache: dict, key: str, label: str, compute: Callable[[], sp.Expr]):
        found = cache.get(key)
        if found is not None:
            return found
        self._enter(f"{label}({key})")
        try:
            found = compute()
        finally:
            self._leave()
        cache[key] = found
        return found

    # along the trajectory ----------------------------------------------------------------------
    def value(self, sid: str) -> sp.Expr:
        """What ``sid``'s symbol denotes at time ``t``."""
        return self._memo(self._values, sid, "value", lambda: self._value(sid))

    def _value(self, sid: str) -> sp.Expr:
        role = self.roles[sid]
        if role == "parameter":
            return self.param_symbols[sid]
        if role == "constant":
            return self.initial(sid)
        if role == "assigned":
            return self.resolve(self.assignment_rules[sid])
        if role == "rate":
            law = self.kinetic_laws.get(sid)
            if law is None:
                raise SbmlUnsupportedError(
                    "reaction without a kinetic law",
                    f"reaction {sid!r}",
                    "its rate is used but the model does not define it",
                )
            return self.resolve(law)
        state = self.state_symbols[sid]
        species = self.species.get(sid)
        if species is not None and species.state_unit == AMOUNT and species.meaning != AMOUNT:
            return state / self.value(species.compartment)
        return state

    def resolve(self, expr: sp.Expr) -> sp.Expr:
        """``expr`` with every SbmlSymbol replaced by its value and ``rateOf`` evaluated."""
        expr = sp.sympify(expr)
        replacements = {r: self.rate_of(r.args[0].name) for r in expr.atoms(RateOf)}
        for symbol in expr.atoms(SbmlSymbol):
            replacements.setdefault(symbol, self.value(symbol.name))
        return expr.xreplace(replacements) if replacements else expr

    def rate_of(self, sid: str) -> sp.Expr:
        """``d/dt`` of what ``sid`` denotes, along the flow (SBML's ``rateOf``)."""
        return self._memo(self._rates, sid, "rateOf", lambda: self.time_derivative(self.value(sid)))

    def time_derivative(self, expr: sp.Expr) -> sp.Expr:
        """``d expr / dt = expr_t + sum_j expr_{y_j} f_j`` for an expression of t, y, p."""
        total = sp.diff(expr, self.time)
        for symbol in expr.free_symbols:
            sid = self._state_by_symbol.get(symbol)
            if sid is not None:
                total += sp.diff(expr, symbol) * self.derivative(sid)
        return total

    def derivative(self, sid: str) -> sp.Expr:
        """The right-hand side of the state ``sid``."""
        return self._memo(self._derivatives, sid, "derivative", lambda: self.state_derivative(sid))

    # at the initial time ---------------------------------------------------------------------
    def initial(self, sid: str) -> sp.Expr:
        """What ``sid``'s symbol denotes at ``t0``: an expression of the parameters."""
        return self._memo(self._initials, sid, "initial value", lambda: self._initial(sid))

    def _initial(self, sid: str) -> sp.Expr:
        role = self.roles[sid]
        if role == "parameter":
            return self.param_symbols[sid]
        if role == "assigned":
            return self.resolve_initial(self.assignment_rules[sid])
        if role == "rate":
            return self.resolve_initial(self.value(sid))
        if sid in self.initial_assignments:
            return self.resolve_initial(self.initial_assignments[sid])
        if sid not in self.file_values:
            raise SbmlUndefinedError(
                sid,
                f"{sid!r} has no value: the file gives none and no initial assignment or "
                "rule sets it",
            )
        return self.resolve_initial(self.file_values[sid])

    def resolve_initial(self, expr: sp.Expr) -> sp.Expr:
        """``expr`` at ``t0``: SbmlSymbols by their initial values, states by theirs."""
        expr = sp.sympify(expr)
        replacements = {r: self._initial_rate(r.args[0].name) for r in expr.atoms(RateOf)}
        for symbol in expr.atoms(SbmlSymbol):
            replacements.setdefault(symbol, self.initial(symbol.name))
        expr = expr.xreplace(replacements) if replacements else expr
        return self._at_initial_state(expr)

    def _at_initial_state(self, expr: sp.Expr) -> sp.Expr:
        replacements = {self.time: self.t0}
        for symbol in expr.free_symbols:
            sid = self._state_by_symbol.get(symbol)
            if sid is not None:
                replacements[symbol] = self.initial_state(sid)
        return expr.xreplace(replacements)

    def _initial_rate(self, sid: str) -> sp.Expr:
        return self._at_initial_state(self.rate_of(sid))

    def initial_state(self, sid: str) -> sp.Expr:
        """The initial value of the state ``sid`` in its state unit."""
        return self._memo(
            self._initial_states, sid, "initial state", lambda: self._initial_state(sid)
        )

    def _initial_state(self, sid: str) -> sp.Expr:
        species = self.species.get(sid)
        if species is None or species.state_unit == species.meaning:
            return self.initial(sid)
        # an amount state of a species whose symbol denotes its concentration
        if sid not in self.initial_assignments and species.initial_amount is not None:
            return sp.sympify(species.initial_amount)
        return self.initial(sid) * self.initial(species.compartment)
