"""What a system imported from SBML keeps of the model: each id's meaning and expressions."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SbmlVariables"]


@dataclass(frozen=True, eq=False)
class SbmlVariables:
    """The SBML ids of an imported system and what they denote (``system.sbml``).

    Attributes
    ----------
    kinds : dict of str to str
        ``"species"``, ``"compartment"``, ``"parameter"``, ``"species reference"`` or
        ``"reaction"``, by id.
    roles : dict of str to str
        ``"state"``, ``"parameter"``, ``"constant"``, ``"assigned"`` or ``"rate"``
        (see :mod:`pymc_odesens.model.sbml.symbol_values`), by id.
    state_units : dict of str to str
        For each state: ``"amount"`` or ``"concentration"`` (species), else ``"value"``.
    amounts, concentrations : dict of str to sympy.Expr
        Each species' amount and concentration as expressions of the system's ``t``,
        states and parameters (no concentration for a species in a 0-dimensional
        compartment).
    compartments : dict of str to str
        Each species' compartment.
    model_id : str
    level, version : int
        The SBML level and version of the file.
    """

    kinds: dict
    roles: dict
    state_units: dict
    amounts: dict
    concentrations: dict
    compartments: dict
    model_id: str = ""
    level: int = 3
    version: int = 2
