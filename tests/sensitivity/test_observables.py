"""Observables by name: an output of a state's name says what the name denotes."""

from __future__ import annotations

from pymc_odesens import OdeSystem
from pymc_odesens.sensitivity.observables import resolve_observables
from tests.model.sbml.sbml_text import build_sbml


def test_an_sbml_species_observable_is_its_concentration():
    """A species in a growing compartment is held as its amount; observing it by name gives
    what its SBML symbol denotes, the concentration (as OdeSolution[name] does)."""
    system = OdeSystem.from_sbml(
        build_sbml(
            compartments={"cell": (2.0, False)},
            species=[{"id": "A", "concentration": 3.0}],
            parameters={"r": 0.5},
            rate_rules={"cell": "r"},
        )
    )
    amount, size = system.state_symbols
    observables = resolve_observables(system, ["A", "cell"])
    assert observables.names == ("A", "cell")
    assert observables.expressions == (amount / size, size)
    assert resolve_observables(system, {"total": "2 * A"}).expressions == (2 * amount / size,)
