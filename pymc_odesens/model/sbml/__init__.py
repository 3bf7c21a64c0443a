"""SBML models as OdeSystems: ``OdeSystem.from_sbml(path_or_string)``.

See :mod:`pymc_odesens.model.sbml.importer` for how the pieces fit and docs/sbml.md for
what is supported, how SBML's symbols map onto states, parameters and outputs, and what
is refused.
"""

from pymc_odesens.model.sbml.importer import load_sbml_model
from pymc_odesens.model.sbml.refusals import (
    SbmlConsistencyError,
    SbmlError,
    SbmlUndefinedError,
    SbmlUnsupportedError,
)
from pymc_odesens.model.sbml.variables import SbmlVariables

__all__ = [
    "SbmlConsistencyError",
    "SbmlError",
    "SbmlUndefinedError",
    "SbmlUnsupportedError",
    "SbmlVariables",
    "load_sbml_model",
]
