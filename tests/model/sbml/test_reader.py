"""Reading SBML: paths and strings, libsbml's errors, comp flattening."""

from __future__ import annotations

import pytest

from pymc_odesens import OdeSystem
from pymc_odesens.model.sbml import SbmlError
from pymc_odesens.model.sbml.reader import read_sbml
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
