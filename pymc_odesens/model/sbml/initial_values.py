"""Initial values: what the file states for each id, and its initial assignments.

SBML's initial state is the file's values (a species' ``initialAmount`` or
``initialConcentration``, a compartment's ``size``, a parameter's ``value``, a species
reference's ``stoichiometry``), overridden by initial assignments, with assignment rules
holding at ``t0`` too; all are evaluated at ``t0`` from each other
(:meth:`pymc_odesens.model.sbml.symbol_values.SymbolValues.initial`). The system's initial
state ``y0(p)`` is therefore an expression of the parameters, differentiable in them.
"""

from __future__ import annotations

import libsbml
import sympy as sp

from pymc_odesens.model.sbml.mathml import MathConverter, SbmlSymbol, float_number
from pymc_odesens.model.sbml.quantities import AMOUNT, Compartment, Species
from pymc_odesens.model.sbml.reactions import Reaction

__all__ = ["file_values", "read_initial_assignments"]


def read_initial_assignments(model: libsbml.Model, converter: MathConverter) -> dict:
    """The initial assignments with math, by symbol, converted to sympy."""
    assignments = {}
    for assignment in model.getListOfInitialAssignments():
        if not assignment.isSetMath():
            continue  # SBML Level 3 Version 2: an initial assignment without math does nothing
        symbol = assignment.getSymbol()
        assignments[symbol] = converter.expression(
            assignment.getMath(), f"initial assignment for {symbol!r}"
        )
    return assignments


def _species_value(species: Species, compartment: SbmlSymbol) -> sp.Expr | None:
    """The file's initial quantity of a species in what its symbol denotes."""
    if species.initial_concentration is not None:
        value = float_number(species.initial_concentration)
        return value if species.meaning != AMOUNT else value * compartment
    if species.initial_amount is not None:
        value = float_number(species.initial_amount)
        return value if species.meaning == AMOUNT else value / compartment
    return None


def file_values(
    model: libsbml.Model,
    converter: MathConverter,
    species: dict[str, Species],
    compartments: dict[str, Compartment],
    reactions: list[Reaction],
) -> dict[str, sp.Expr]:
    """Each id's value as the file states it (ids without one are absent).

    Values are in what the id's symbol denotes, written in SbmlSymbols where they depend on
    another id (a species given as an amount whose symbol is its concentration:
    ``amount / compartment``).
    """
    values: dict[str, sp.Expr] = {}
    for sid, compartment in compartments.items():
        if compartment.size is not None:
            values[sid] = float_number(compartment.size)
    for sid, s in species.items():
        value = _species_value(s, converter.symbol(s.compartment))
        if value is not None:
            values[sid] = value
    for parameter in model.getListOfParameters():
        if parameter.isSetValue():
            values[parameter.getId()] = float_number(parameter.getValue())
    for reaction in reactions:
        for reference in reaction.references:
            if reference.sid and reference.stoichiometry is not None:
                values[reference.sid] = float_number(reference.stoichiometry)
    return values
