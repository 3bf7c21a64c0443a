"""Observables by name: an output of a state's name says what the name denotes."""

from __future__ import annotations

from pymc_odesens import OdeSystem
from pymc_odesens.sensitivity.observables import resolve_observables
from tests.model.sbml.sbml_text import GROWING_COMPARTMENT


def test_an_sbml_species_observable_is_its_concentration():
    """A species in a growing compartment is held as its amount; observing it by name gives
    what its SBML symbol denotes, the concentration (as OdeSolution[name] does)."""
    system = OdeSystem.from_sbml(GROWING_COMPARTMENT)
    amount, size = system.state_symbols
    observables = resolve_observables(system, ["A", "cell"])
    assert observables.names == ("A", "cell")
    assert observables.expressions == (amount / size, size)
    assert resolve_observables(system, {"total": "2 * A"}).expressions == (2 * amount / size,)
