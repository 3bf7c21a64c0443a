"""Refused SBML features: each named with the element that uses it, never approximated."""

from __future__ import annotations

import pytest

from pymc_odesens import OdeSystem
from pymc_odesens.model.sbml import SbmlUnsupportedError
from tests.model.sbml.sbml_text import build_sbml

SPECIES = [{"id": "A", "concentration": 1.0}, {"id": "B", "concentration": 0.0}]


@pytest.mark.parametrize(
    ("model", "feature", "element"),
    [
        (
            dict(parameters={"T": (1.0, False)}, algebraic_rules=["T - A - B"]),
            "algebraic rule",
            "algebraic rule #0",
        ),
        (
            dict(reactions={"R1": dict(reactants=[("A", 1)], rate="A", fast=True)}),
            "fast reaction",
            "reaction 'R1'",
        ),
        (
            dict(reactions={"R1": dict(reactants=[("A", 1)], rate="delay(A, 2)")}),
            "delay()",
            "kinetic law of reaction 'R1'",
        ),
        (
            dict(parameters={"p": (0.0, False)}, rate_rules={"p": "delay(A, 1)"}),
            "delay()",
            "rate rule for 'p'",
        ),
        (
            dict(events=[dict(id="dose", trigger="time > 1", delay="0.5", assignments={"A": "2"})]),
            "event with a delay",
            "event 'dose'",
        ),
        (
            dict(events=[dict(id="E1", trigger="delay(A, 1) > 2", assignments={"A": "0"})]),
            "delay()",
            "trigger of event 'E1'",
        ),
        (
            dict(reactions={"R1": dict(reactants=[("A", 1)])}),
            "reaction without a kinetic law",
            "reaction 'R1'",
        ),
        (
            dict(reactions={"R1": dict(reactants=[("A", 1)], rate="piecewise(A, A > 0.5)")}),
            "piecewise without otherwise",
            "the rate of change of 'A'",
        ),
    ],
)
def test_refused_features_are_named(model, feature, element):
    text = build_sbml(species=SPECIES, **model)
    with pytest.raises(SbmlUnsupportedError) as info:
        OdeSystem.from_sbml(text)
    assert info.value.feature == feature
    assert info.value.element_id == element
    assert f"SBML {feature} is not supported ({element})" in str(info.value)


def test_required_packages_are_refused():
    text = build_sbml(species=SPECIES).replace(
        'level="3" version="2"',
        'xmlns:qual="http://www.sbml.org/sbml/level3/version1/qual/version1" qual:required="true" '
        'level="3" version="2"',
    )
    with pytest.raises(SbmlUnsupportedError, match=r"required SBML package .*'qual'"):
        OdeSystem.from_sbml(text)
