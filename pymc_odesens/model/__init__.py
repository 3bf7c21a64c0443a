"""Layer 1: ODE systems as sympy expressions with exact derivatives."""

from pymc_odesens.model.conservation import ConservationLaws
from pymc_odesens.model.events import ExplicitEvent, ImplicitEvent, TriggerEvent
from pymc_odesens.model.symbol_vector import SymbolVector
from pymc_odesens.model.system import OdeSystem

__all__ = [
    "OdeSystem",
    "SymbolVector",
    "ImplicitEvent",
    "ExplicitEvent",
    "TriggerEvent",
    "ConservationLaws",
]
