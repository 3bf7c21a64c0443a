"""Reading SBML: paths and strings, libsbml's errors, comp flattening."""

from __future__ import annotations

import pytest

from pymc_odesens import OdeSystem
from pymc_odesens.model.sbml import SbmlConsistencyError, SbmlError, SbmlUnsupportedError
from pymc_odesens.model.sbml.reader import read_sbml
from tests.conftest import SBML_SUITE_DIR
from tests.model.sbml.sbml_text import build_sbml

DECAY = build_sbml(
    species=[{"id": "A", "concentration": 2.0}],
    parameters={"k": 0.5},
    reactions={"R": dict(reactants=[("A", 1)], rate="k * A * c")},
)

COMP_MODEL = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1"
      xmlns:comp="http://www.sbml.org/sbml/level3/version1/comp/version1" comp:required="true">
  <model id="outer">
    <listOfCompartments>
      <compartment id="c" size="1" constant="true" spatialDimensions="3"/>
    </listOfCompartments>
    <comp:listOfSubmodels>
      <comp:submodel comp:id="sub" comp:modelRef="decay"/>
    </comp:listOfSubmodels>
  </model>
  <comp:listOfModelDefinitions>
    <comp:modelDefinition id="decay">
      <listOfCompartments>
        <compartment id="c" size="1" constant="true" spatialDimensions="3"/>
      </listOfCompartments>
      <listOfSpecies>
        <species id="A" compartment="c" initialConcentration="2" hasOnlySubstanceUnits="false"
                 boundaryCondition="false" constant="false"/>
      </listOfSpecies>
      <listOfParameters>
        <parameter id="k" value="0.5" constant="true"/>
      </listOfParameters>
      <listOfRules>
        <rateRule variable="A">
          <math xmlns="http://www.w3.org/1998/Math/MathML">
            <apply><times/><cn>-1</cn><ci>k</ci><ci>A</ci></apply>
          </math>
        </rateRule>
      </listOfRules>
    </comp:modelDefinition>
  </comp:listOfModelDefinitions>
</sbml>
"""


def test_path_and_string_give_the_same_system(tmp_path):
    path = tmp_path / "decay.xml"
    path.write_text(DECAY)
    from_path = OdeSystem.from_sbml(path)
    from_string = OdeSystem.from_sbml(DECAY)
    assert from_path.fingerprint == from_string.fingerprint
    assert from_path.source == "decay.xml"
    assert from_string.source == "<string>"
    assert from_path.name == "test_model"


def test_missing_file_and_bad_documents():
    with pytest.raises(FileNotFoundError, match="no SBML file at 'nowhere.xml'"):
        OdeSystem.from_sbml("nowhere.xml")
    with pytest.raises(SbmlError, match="libsbml reports errors"):
        OdeSystem.from_sbml("<sbml><model></sbml>")
    with pytest.raises(TypeError, match="source must be a path or an SBML string"):
        read_sbml(3.0)


def test_comp_models_are_flattened():
    system = OdeSystem.from_sbml(COMP_MODEL)
    assert system.states == ["sub__A"]
    assert system.params == ["sub__k"]
    assert system.x0.tolist() == [2.0]
    assert str(system.rhs_expressions[0]) == "-sub__A*sub__k"


def test_documents_with_consistency_errors_are_refused_naming_the_element():
    # two species with id 'A': the second one silently won
    text = DECAY.replace(
        "</listOfSpecies>",
        '<species id="A" compartment="c" initialConcentration="5" hasOnlySubstanceUnits="false"'
        ' boundaryCondition="false" constant="false"/></listOfSpecies>',
    )
    with pytest.raises(SbmlConsistencyError) as info:
        OdeSystem.from_sbml(text)
    info.match(
        r"<string>: libsbml's consistency check finds 1 error\(s\) in the document: line \d+: "
        r"Duplicate 'id' attribute value: The <species> id 'A' conflicts with the previously "
        r"defined <species> id 'A'"
    )
    assert [error_id for _, error_id, _ in info.value.findings] == [10301]


def test_two_rules_for_one_variable_are_refused():
    text = build_sbml(
        species=[{"id": "A", "concentration": 2.0}],
        parameters={"k": 0.5, "x": (1.0, False)},
        assignment_rules={"x": "2 * k"},
        rate_rules={"x": "k"},
    )
    with pytest.raises(SbmlConsistencyError, match=r"'x'") as info:
        OdeSystem.from_sbml(text)
    assert 10304 in [error_id for _, error_id, _ in info.value.findings]


def test_unit_references_do_not_matter():
    # suite case 00959 names an undefined unit 'area' (libsbml's DanglingUnitReference): the
    # importer reads no units, and the suite counts the case as valid
    path = SBML_SUITE_DIR / "cases" / "semantic" / "00959" / "00959-sbml-l3v2.xml"
    system = OdeSystem.from_sbml(path)
    assert "P1" in system.outputs


@pytest.mark.parametrize(
    "namespace",
    [
        "http://www.example.org/foo/version1",  # libsbml does not see a package here
        "http://www.sbml.org/sbml/level3/version1/foo/version1",  # libsbml: error 99107
    ],
)
def test_required_unknown_packages_are_refused(namespace):
    text = DECAY.replace("<sbml ", f'<sbml xmlns:foo="{namespace}" foo:required="true" ', 1)
    with pytest.raises(SbmlUnsupportedError) as info:
        OdeSystem.from_sbml(text)
    assert info.value.feature == "required SBML package"
    assert info.value.element_id == "package 'foo'"
    info.match(f"the document declares the namespace {namespace} required")
    # not required: nothing in it changes the model's meaning
    optional = DECAY.replace("<sbml ", f'<sbml xmlns:foo="{namespace}" foo:required="false" ', 1)
    assert OdeSystem.from_sbml(optional).states == ["A"]


@pytest.mark.parametrize("source", ["", "   \n"])
def test_an_empty_source_is_named(source):
    with pytest.raises(
        SbmlError, match="from_sbml: the source is an empty string; expected a path"
    ):
        OdeSystem.from_sbml(source)
