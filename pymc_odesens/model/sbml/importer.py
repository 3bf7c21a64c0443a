"""An SBML model as an :class:`~pymc_odesens.model.system.OdeSystem` (``OdeSystem.from_sbml``).

The pieces: :mod:`.reader` (libsbml, checks, ``comp`` flattening, refusals),
:mod:`.mathml` (math to sympy), :mod:`.quantities` (species and compartments),
:mod:`.rules`, :mod:`.reactions`, :mod:`.initial_values`, :mod:`.symbol_values` (what each
id denotes) and :mod:`.events`. This module decides each id's role, builds the right-hand
side, the initial state ``y0(p)``, the stoichiometric matrix and the outputs, and assembles
the system.
"""

from __future__ import annotations

import os

import numpy as np
import sympy as sp

from pymc_odesens.model.expression_checks import non_finite_constants
from pymc_odesens.model.internal_symbols import time_symbol
from pymc_odesens.model.sbml.events import event_targets, sbml_events
from pymc_odesens.model.sbml.initial_values import file_values, read_initial_assignments
from pymc_odesens.model.sbml.mathml import MathConverter, SbmlSymbol, float_number
from pymc_odesens.model.sbml.quantities import (
    AMOUNT,
    CONCENTRATION,
    read_compartments,
    read_species,
)
from pymc_odesens.model.sbml.reactions import Reaction, SpeciesReference, read_reactions
from pymc_odesens.model.sbml.reader import read_sbml
from pymc_odesens.model.sbml.refusals import (
    SbmlError,
    SbmlUndefinedError,
    SbmlUnsupportedError,
)
from pymc_odesens.model.sbml.rules import read_rules
from pymc_odesens.model.sbml.symbol_values import SymbolValues
from pymc_odesens.model.sbml.variables import SbmlVariables
from pymc_odesens.model.symbol_vector import make_symbols

__all__ = ["load_sbml_model"]

_KIND_ORDER = ("species", "compartment", "parameter", "species reference")


class _SbmlImport:
    """One model's import: the tables read from the file and the expressions built from them."""

    def __init__(self, model, where: str) -> None:
        self.model = model
        self.where = where
        self.compartments = read_compartments(model)
        self.species = read_species(model, self.compartments)
        self.reactions = read_reactions(model)
        self.rules = read_rules(model, where)
        self.kinds: dict[str, str] = {}
        for sid in self.species:
            self.kinds[sid] = "species"
        for sid in self.compartments:
            self.kinds[sid] = "compartment"
        for parameter in model.getListOfParameters():
            self.kinds[parameter.getId()] = "parameter"
        for reaction in self.reactions:
            for reference in reaction.references:
                if reference.sid:
                    self.kinds[reference.sid] = "species reference"
            self.kinds[reaction.sid] = "reaction"
        self.time = time_symbol()
        self.converter = MathConverter(model, self.time, lambda sid: sid in self.kinds)
        self.initial_assignments = read_initial_assignments(model, self.converter)
        self.file_values = file_values(
            model, self.converter, self.species, self.compartments, self.reactions
        )
        self.parameter_values = {
            sid: self.file_values.get(sid) for sid, k in self.kinds.items() if k == "parameter"
        }
        self.event_targets = event_targets(model)
        self.roles: dict[str, str] = {}
        for sid, kind in self.kinds.items():  # compartments first: species depend on them
            if kind != "species":
                self.roles[sid] = self._role(sid, kind)
        for sid in self.species:
            self.roles[sid] = self._role(sid, "species")
        self.roles = {sid: self.roles[sid] for sid in self.kinds}
        for s in self.species.values():
            if self.roles[s.sid] == "state":
                varies = self.roles.get(s.compartment) in ("state", "assigned")
                s.state_unit = AMOUNT if s.meaning == AMOUNT or varies else CONCENTRATION
        self.state_ids = [
            sid
            for kind in _KIND_ORDER
            for sid, k in self.kinds.items()
            if k == kind and self.roles[sid] == "state"
        ]
        self.param_ids = [sid for sid, k in self.kinds.items() if self.roles[sid] == "parameter"]
        self.state_symbols = dict(zip(self.state_ids, make_symbols(self.state_ids)))
        self.param_symbols = dict(zip(self.param_ids, make_symbols(self.param_ids)))
        self.rate_rules = {
            sid: self.converter.expression(ast, f"rate rule for {sid!r}")
            for sid, ast in self.rules.rate.items()
        }
        self.values = SymbolValues(
            roles=self.roles,
            species=self.species,
            state_symbols=self.state_symbols,
            param_symbols=self.param_symbols,
            assignment_rules={
                sid: self.converter.expression(ast, f"assignment rule for {sid!r}")
                for sid, ast in self.rules.assignment.items()
            },
            initial_assignments=self.initial_assignments,
            kinetic_laws={
                r.sid: self.converter.expression(
                    r.kinetic_law, f"kinetic law of reaction {r.sid!r}", r.local_parameters
                )
                for r in self.reactions
                if r.kinetic_law is not None
            },
            file_values=self.file_values,
            time=self.time,
        )
        self.values.state_derivative = self._derivative
        self._coefficients: dict[tuple[str, str], sp.Expr] = {}

    # roles -------------------------------------------------------------------------------------
    def _role(self, sid: str, kind: str) -> str:
        if kind == "reaction":
            return "rate"
        if sid in self.rules.assignment:
            return "assigned"
        if sid in self.rules.rate or sid in self.event_targets:
            return "state"
        if kind == "species":
            # a constant species keeps its amount: in a compartment whose size varies its
            # concentration follows, so it is an (unchanging) amount state there
            species = self.species[sid]
            varies = self.roles.get(species.compartment) in ("state", "assigned")
            return "constant" if species.constant and not varies else "state"
        if kind == "parameter" and sid not in self.initial_assignments:
            value = self.parameter_values.get(sid)
            if value is not None and not value.is_finite:
                return "constant"  # inf or NaN: a constant of the model, never a parameter
            return "parameter"
        return "constant"

    # stoichiometry -------------------------------------------------------------------------
    def _stoichiometry(self, reference: SpeciesReference, reaction: Reaction) -> sp.Expr:
        if reference.stoichiometry_math is not None:
            where = f"stoichiometryMath of {reference.species!r} in reaction {reaction.sid!r}"
            return self.values.resolve(
                self.converter.expression(reference.stoichiometry_math, where)
            )
        if reference.sid:
            return self.values.value(reference.sid)
        if reference.stoichiometry is None:
            raise SbmlError(
                f"{self.where}: the stoichiometry of {reference.species!r} in reaction "
                f"{reaction.sid!r} is not set"
            )
        return float_number(reference.stoichiometry)

    def coefficient(self, sid: str, reaction: Reaction) -> sp.Expr:
        """How the state ``sid`` changes per unit of ``reaction``'s rate (0 if it does not)."""
        key = (sid, reaction.sid)
        found = self._coefficients.get(key)
        if found is not None:
            return found
        species = self.species.get(sid)
        total = sp.S.Zero
        if species is not None and not species.boundary and sid not in self.rules.rate:
            for reference in reaction.references:
                if reference.species == sid:
                    total += reference.sign * self._stoichiometry(reference, reaction)
            if total != 0:
                if species.conversion_factor:
                    total = total * self.values.value(species.conversion_factor)
                if species.state_unit == CONCENTRATION:
                    total = total / self.values.value(species.compartment)
        self._coefficients[key] = total
        return total

    # right-hand side -------------------------------------------------------------------------
    def _derivative(self, sid: str) -> sp.Expr:
        values = self.values
        if sid in self.rate_rules:
            rate = values.resolve(self.rate_rules[sid])
            species = self.species.get(sid)
            if species is not None and species.state_unit == AMOUNT and species.meaning != AMOUNT:
                # d(c V)/dt for a concentration's rate rule in a compartment whose size varies
                size = species.compartment
                return rate * values.value(size) + values.value(sid) * values.rate_of(size)
            return rate
        terms = []
        for reaction in self.reactions:
            c = self.coefficient(sid, reaction)
            if c != 0:
                terms.append(c * values.value(reaction.sid))
        return sp.Add(*terms)

    def stoichiometric_matrix(self, reaction_ids: list[str]) -> list | None:
        """``S`` (N x R numbers) with ``f = S v`` exactly, or None when no constant ``S`` exists
        (a rate rule drives a state, or a coefficient depends on parameters or states)."""
        by_id = {r.sid: r for r in self.reactions}
        rows = []
        for sid in self.state_ids:
            if sid in self.rate_rules:
                return None
            row = [self.coefficient(sid, by_id[rid]) for rid in reaction_ids]
            if not all(c.is_Number for c in row):
                return None
            rows.append(row)
        return rows

    # a rate of change without a finite value ------------------------------------------------
    def non_finite_rate(self, sid: str) -> SbmlError:
        """The error for a state ``sid`` whose right-hand side holds a constant without a
        finite value (nan, an infinity, a division by zero, a number beyond the double
        range), naming the element and the id it comes from."""
        values = self.values
        reason = f"the rate of change of {sid!r} is not finite"
        if sid in self.rate_rules:
            raw = self.rate_rules[sid]
            return self._non_finite_element(
                sid, f"rate rule for {sid!r}", raw, values.resolve(raw), reason
            )
        for reaction in self.reactions:
            c = self.coefficient(sid, reaction)
            if c == 0:
                continue
            if non_finite_constants(c):
                return self._non_finite_coefficient(sid, reaction, c, reason)
            raw = self.values.kinetic_laws.get(reaction.sid)
            if raw is not None and non_finite_constants(values.value(reaction.sid)):
                local = [
                    (name, value)
                    for name, value in reaction.local_parameters.items()
                    if non_finite_constants(sp.sympify(value))
                ]
                label = f"kinetic law of reaction {reaction.sid!r}"
                if local:
                    name, value = local[0]
                    return SbmlError(
                        f"{self.where}: {label} uses its local parameter {name!r} = "
                        f"{_shown(value)}: {reason}"
                    )
                return self._non_finite_element(sid, label, raw, values.value(reaction.sid), reason)
        return SbmlError(f"{self.where}: {reason}: {values.derivative(sid)}")

    def _non_finite_element(self, sid: str, label: str, raw, value, reason: str) -> SbmlError:
        for name in sorted(s.name for s in sp.sympify(raw).atoms(SbmlSymbol)):
            used = self.values.value(name)
            if non_finite_constants(used):
                kind = self.kinds.get(name, "id")
                return SbmlError(
                    f"{self.where}: {label} uses the {kind} {name!r}, whose value is "
                    f"{_shown(used)}: {reason}"
                )
        for piecewise in value.atoms(sp.Piecewise):
            if any(piece.expr is sp.nan for piece in piecewise.args):
                return SbmlUnsupportedError(
                    "piecewise without otherwise",
                    f"the rate of change of {sid!r}",
                    f"in the {label}, its pieces do not cover every case, and SBML leaves the "
                    "value undefined where none holds",
                )
        return SbmlError(
            f"{self.where}: {label} is {_shown(value)} (its math holds notanumber or "
            f"infinity, or an operation without a finite value such as 0/0): {reason}"
        )

    def _non_finite_coefficient(self, sid: str, reaction, coefficient, reason: str) -> SbmlError:
        label = f"the stoichiometry of {sid!r} in reaction {reaction.sid!r}"
        species = self.species[sid]
        for reference in reaction.references:
            if reference.species != sid:
                continue
            value = self._stoichiometry(reference, reaction)
            if non_finite_constants(value):
                return SbmlError(f"{self.where}: {label} is {_shown(value)}: {reason}")
        if species.conversion_factor:
            factor = self.values.value(species.conversion_factor)
            if non_finite_constants(factor):
                return SbmlError(
                    f"{self.where}: the conversion factor {species.conversion_factor!r} of "
                    f"{sid!r} is {_shown(factor)}: {reason}"
                )
        if species.state_unit == CONCENTRATION:
            size = self.values.value(species.compartment)
            if size == 0 or non_finite_constants(size):
                return SbmlError(
                    f"{self.where}: the compartment {species.compartment!r} of {sid!r} has "
                    f"size {_shown(size)}, and {sid!r} is a concentration (amount / size) "
                    f"that {label} changes: {reason}"
                )
        return SbmlError(
            f"{self.where}: {label} (times its conversion factor, over its compartment's "
            f"size) is {_shown(coefficient)}: {reason}"
        )

    # outputs ---------------------------------------------------------------------------------
    def _defined(self, sid: str) -> sp.Expr | None:
        """``sid``'s value, or None when the model leaves it undefined and nothing uses it."""
        try:
            return self.values.value(sid)
        except SbmlUndefinedError as err:
            if err.sid != sid:
                raise
            return None

    def outputs(self, reaction_ids: list[str]) -> dict[str, sp.Expr]:
        """Every defined id's value (reactions: those with a kinetic law)."""
        outputs = {}
        for sid, kind in self.kinds.items():
            if kind == "reaction" and sid not in reaction_ids:
                continue
            value = self._defined(sid)
            if value is not None:
                outputs[sid] = value
        return outputs

    def species_quantities(self) -> tuple[dict, dict]:
        """Each species' amount and concentration (where its compartment's size is defined)."""
        amounts, concentrations = {}, {}
        for sid, s in self.species.items():
            value = self._defined(sid)
            if value is None:
                continue
            size = self._defined(s.compartment)
            zero_dimensional = self.compartments[s.compartment].dimensions == 0
            if s.meaning == AMOUNT:
                amounts[sid] = value
                if size is not None and not zero_dimensional:
                    concentrations[sid] = value / size
            elif size is not None:
                amounts[sid] = value * size
                concentrations[sid] = value
        return amounts, concentrations


def _shown(value) -> str:
    """A value in a message: a number without a finite double value by its name."""
    value = sp.sympify(value)
    if value is sp.nan:
        return "NaN"
    if value is sp.zoo:
        return "a division by zero"
    if value in (sp.oo, sp.S.NegativeInfinity):
        return str(float(value))
    if value.is_Number:
        return str(sp.Float(value, 6))
    return str(value)


def _evaluate(expr: sp.Expr, numbers: dict, label: str) -> float:
    value = sp.sympify(expr).xreplace(numbers)
    try:
        number = float(value)
    except TypeError:
        number = float("nan")
    if not np.isfinite(number):
        raise SbmlError(f"{label} is not a finite number at the file's values: {value}")
    return number


def load_sbml_model(cls, source: str | os.PathLike, *, name: str | None = None):
    """Build ``cls`` (an OdeSystem class) from an SBML model (see ``OdeSystem.from_sbml``)."""
    document, model, where = read_sbml(source)
    imported = _SbmlImport(model, where)
    values = imported.values
    p_nominal = []
    for sid in imported.param_ids:
        value = imported.values.file_values.get(sid)
        if value is None or value is sp.nan:
            raise SbmlError(f"{where}: parameter {sid!r} has no value")
        p_nominal.append(float(value))
    rhs = [values.derivative(sid) for sid in imported.state_ids]
    for sid, expr in zip(imported.state_ids, rhs):
        if non_finite_constants(expr):
            raise imported.non_finite_rate(sid)
    y0 = [values.initial_state(sid) for sid in imported.state_ids]
    reaction_ids = [r.sid for r in imported.reactions if r.kinetic_law is not None]
    outputs = imported.outputs(reaction_ids)
    amounts, concentrations = imported.species_quantities()
    events = sbml_events(model, imported.converter, values, imported.species)
    system = cls.from_expressions(
        rhs,
        imported.time,
        [imported.state_symbols[s] for s in imported.state_ids],
        [imported.param_symbols[s] for s in imported.param_ids],
        name=name or model.getId() or where,
        allow_no_states=True,  # a model of rules only: its outputs are functions of time
    )
    system.set_initial_state(y0)
    numbers = {
        imported.param_symbols[sid]: sp.Float(v) for sid, v in zip(imported.param_ids, p_nominal)
    }
    system.p_nominal = np.array(p_nominal, dtype=float)
    system.x0 = np.array(
        [_evaluate(e, numbers, f"initial value of {s!r}") for s, e in zip(imported.state_ids, y0)],
        dtype=float,
    )
    system.t0 = 0.0
    system.outputs = outputs
    system.reaction_ids = reaction_ids
    system.stoichiometry = imported.stoichiometric_matrix(reaction_ids)
    system.sbml = SbmlVariables(
        kinds=dict(imported.kinds),
        roles=dict(imported.roles),
        state_units={
            sid: imported.species[sid].state_unit if sid in imported.species else "value"
            for sid in imported.state_ids
        },
        amounts=amounts,
        concentrations=concentrations,
        compartments={sid: s.compartment for sid, s in imported.species.items()},
        model_id=model.getId(),
        level=model.getLevel(),
        version=model.getVersion(),
    )
    system.source = where
    if events:
        system.set_events(events)
    del document
    return system
