"""SBML reactions: kinetic laws with their local parameters, and the stoichiometry of each
species they change.

A reaction's rate (its kinetic law) is an extent per time; a species' amount changes by
``sum_r nu_r * rate_r`` times its conversion factor. A stoichiometry ``nu`` is a number, or
(SBML Level 3) the value of its species reference's id, which rules, initial assignments
and events may set, or (SBML Level 2) a ``stoichiometryMath`` expression. Fast reactions are
refused (:mod:`pymc_odesens.model.sbml.refusals`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import libsbml
import sympy as sp

from pymc_odesens.model.sbml.mathml import float_number

__all__ = ["Reaction", "SpeciesReference", "read_reactions"]


@dataclass
class SpeciesReference:
    """A reactant or product of a reaction.

    Attributes
    ----------
    species : str
    sid : str or None
        The reference's own id (SBML Level 3: a symbol whose value is the stoichiometry).
    stoichiometry : float or None
        The number the file gives (None: unset).
    stoichiometry_math : libsbml.ASTNode or None
        SBML Level 2 ``stoichiometryMath``.
    constant : bool
    sign : int
        -1 for a reactant, +1 for a product.
    """

    species: str
    sid: str | None
    stoichiometry: float | None
    stoichiometry_math: object
    constant: bool
    sign: int


@dataclass
class Reaction:
    """A reaction.

    Attributes
    ----------
    sid : str
    kinetic_law : libsbml.ASTNode or None
    local_parameters : dict of str to sympy number
        The kinetic law's local parameters (they shadow global ids inside it).
    references : list of SpeciesReference
    """

    sid: str
    kinetic_law: object
    local_parameters: dict = field(default_factory=dict)
    references: list = field(default_factory=list)


def _reference(reference, sign: int, level: int) -> SpeciesReference:
    stoichiometry = reference.getStoichiometry() if reference.isSetStoichiometry() else None
    if stoichiometry is not None and math.isnan(stoichiometry):
        stoichiometry = None
    if stoichiometry is None and level < 3:
        stoichiometry = 1.0  # SBML Level 1 and 2 default
    stoichiometry_math = None
    if level < 3 and reference.isSetStoichiometryMath():
        stoichiometry_math = reference.getStoichiometryMath().getMath()
    sid = reference.getId() if reference.isSetId() else None
    constant = bool(reference.getConstant()) if level >= 3 else stoichiometry_math is None
    return SpeciesReference(
        species=reference.getSpecies(),
        sid=sid or None,
        stoichiometry=stoichiometry,
        stoichiometry_math=stoichiometry_math,
        constant=constant,
        sign=sign,
    )


def read_reactions(model: libsbml.Model) -> list[Reaction]:
    """The model's reactions, in document order."""
    level = model.getLevel()
    reactions = []
    for reaction in model.getListOfReactions():
        law = reaction.getKineticLaw() if reaction.isSetKineticLaw() else None
        local: dict[str, sp.Expr] = {}
        if law is not None:
            listed = law.getListOfLocalParameters() if level >= 3 else law.getListOfParameters()
            for parameter in listed:
                value = parameter.getValue() if parameter.isSetValue() else math.nan
                local[parameter.getId()] = float_number(value)
        references = [_reference(r, -1, level) for r in reaction.getListOfReactants()]
        references += [_reference(r, +1, level) for r in reaction.getListOfProducts()]
        reactions.append(
            Reaction(
                sid=reaction.getId(),
                kinetic_law=law.getMath() if law is not None and law.isSetMath() else None,
                local_parameters=local,
                references=references,
            )
        )
    return reactions
