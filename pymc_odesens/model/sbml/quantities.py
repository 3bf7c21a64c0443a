"""SBML's species and compartments: what a species' symbol denotes, and in which unit it
is integrated.

SBML Level 3 Version 2 (section 4.6): a species' quantity is an amount of substance in a
compartment of some size. Its symbol in the model's math denotes its *concentration*
(amount / size) unless ``hasOnlySubstanceUnits`` is true, when it denotes the *amount*
(also in a 0-dimensional compartment, whose size means nothing). Reactions change
amounts: a reaction's rate is an extent per time.

The importer integrates

- a species in a compartment of constant size as the quantity its symbol denotes
  (the concentration ``c`` with ``dc/dt = sum_r nu_r v_r / V``, or the amount);
- a species in a compartment whose size varies (a rule or an event changes it) as its
  amount ``n`` (``dn/dt = sum_r nu_r v_r``): when the size changes, the amount stays and
  the concentration ``n / V`` follows, as SBML says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import libsbml

__all__ = [
    "AMOUNT",
    "CONCENTRATION",
    "Compartment",
    "Species",
    "read_compartments",
    "read_species",
]

AMOUNT = "amount"
CONCENTRATION = "concentration"


def _optional(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


@dataclass
class Compartment:
    """An SBML compartment.

    Attributes
    ----------
    sid : str
    dimensions : float
        ``spatialDimensions`` (3 when unset).
    size : float or None
        The size the file gives (None: unset).
    constant : bool
    """

    sid: str
    dimensions: float
    size: float | None
    constant: bool


@dataclass
class Species:
    """An SBML species.

    Attributes
    ----------
    sid, compartment : str
    meaning : {"amount", "concentration"}
        What the species' symbol denotes in the model's math.
    boundary : bool
        ``boundaryCondition``: reactions do not change it.
    constant : bool
    conversion_factor : str or None
        The id of the parameter converting reaction extents into this species' substance
        (the species' own ``conversionFactor``, else the model's).
    initial_amount, initial_concentration : float or None
        What the file gives (at most one is set).
    state_unit : {"amount", "concentration"} or None
        The unit of its state, when it is one (set by the importer).
    """

    sid: str
    compartment: str
    meaning: str
    boundary: bool
    constant: bool
    conversion_factor: str | None
    initial_amount: float | None
    initial_concentration: float | None
    state_unit: str | None = None


def read_compartments(model: libsbml.Model) -> dict[str, Compartment]:
    """The model's compartments by id."""
    compartments = {}
    for c in model.getListOfCompartments():
        dims = c.getSpatialDimensionsAsDouble() if c.isSetSpatialDimensions() else 3.0
        if model.getLevel() < 3 and not c.isSetSpatialDimensions():
            dims = 3.0
        size = _optional(c.getSize()) if c.isSetSize() else None
        if size is None and model.getLevel() < 3 and c.isSetVolume():
            size = _optional(c.getVolume())
        if size is None and model.getLevel() < 3 and dims != 0:
            size = 1.0  # SBML Level 1 and 2: an unset size defaults to 1
        compartments[c.getId()] = Compartment(
            sid=c.getId(), dimensions=float(dims), size=size, constant=bool(c.getConstant())
        )
    return compartments


def read_species(model: libsbml.Model, compartments: dict[str, Compartment]) -> dict[str, Species]:
    """The model's species by id."""
    model_factor = model.getConversionFactor() if model.isSetConversionFactor() else None
    species = {}
    for s in model.getListOfSpecies():
        compartment = compartments.get(s.getCompartment())
        only_substance = bool(s.getHasOnlySubstanceUnits())
        zero_dimensional = compartment is not None and compartment.dimensions == 0
        own_factor = s.getConversionFactor() if s.isSetConversionFactor() else None
        species[s.getId()] = Species(
            sid=s.getId(),
            compartment=s.getCompartment(),
            meaning=AMOUNT if only_substance or zero_dimensional else CONCENTRATION,
            boundary=bool(s.getBoundaryCondition()),
            constant=bool(s.getConstant()),
            conversion_factor=own_factor or model_factor,
            initial_amount=_optional(s.getInitialAmount()) if s.isSetInitialAmount() else None,
            initial_concentration=(
                _optional(s.getInitialConcentration()) if s.isSetInitialConcentration() else None
            ),
        )
    return species
