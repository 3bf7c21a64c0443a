"""OdeSystem.from_json against the reference loader of ../shared/models."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import sympy as sp

from pymc_odesens import OdeSystem
from tests.conftest import MODELS_DIR, model_path

ALL_MODELS = ["linear2", "pka", "akar4", "robertson", "lotka_volterra", "chua", "bouncing_ball"]


@pytest.fixture(scope="module")
def reference_loader():
    sys.path.insert(0, str(MODELS_DIR))
    try:
        import load_model
    finally:
        sys.path.remove(str(MODELS_DIR))
    return load_model


@pytest.mark.parametrize("name", ALL_MODELS)
def test_attributes_match_the_json(name):
    system = OdeSystem.from_json(model_path(name))
    spec = json.loads(model_path(name).read_text())
    assert system.name == spec["name"]
    assert system.states == spec["states"] and system.params == spec["parameters"]
    assert system.n_states == len(spec["states"]) and system.n_params == len(spec["parameters"])
    np.testing.assert_array_equal(system.x0, spec["x0"])
    np.testing.assert_array_equal(system.p_nominal, spec["p_nominal"])
    assert system.t0 == float(spec.get("t0", 0.0)) and system.t_end == float(spec["t_end"])


@pytest.mark.parametrize("name", [m for m in ALL_MODELS if m != "bouncing_ball"])
def test_rhs_equals_reference_loader(name, reference_loader):
    system = OdeSystem.from_json(model_path(name))
    ref = reference_loader.load(str(model_path(name)))
    rng = np.random.default_rng(0)
    y = rng.uniform(0.1, 1.0, system.n_states)
    p = system.p_nominal * rng.uniform(0.5, 1.5, system.n_params)
    subs = {
        system.t: 0.3,
        **dict(zip(system.state_symbols, y)),
        **dict(zip(system.param_symbols, p)),
    }
    ours = np.array([float(e.evalf(subs=subs)) for e in system.rhs_expressions])
    np.testing.assert_allclose(ours, ref.rhs(0.3, y, p), rtol=1e-12, atol=1e-14)


def test_names_like_gamma_stay_symbols():
    system = OdeSystem.from_json(model_path("lotka_volterra"))
    assert "gamma" in system.params
    assert all(not e.has(sp.gamma) for e in system.rhs_expressions)


def test_akar4_outputs_and_experiments():
    system = OdeSystem.from_json(model_path("akar4"))
    assert set(system.outputs) == {"AKAR4pOUT"}
    assert len(system.experiments) == 3


def test_missing_file_and_missing_keys(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model file"):
        OdeSystem.from_json(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"states": ["x"], "parameters": []}))
    with pytest.raises(ValueError, match=r"lacks the key\(s\) \['rhs'\]"):
        OdeSystem.from_json(bad)
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"states": ["x"], "parameters": [], "rhs": ["-k*x"], "t_end": 1}))
    with pytest.raises(ValueError, match=r"rhs\[0\]: the name .k. is not defined"):
        OdeSystem.from_json(unknown)


_BASE = {
    "states": ["A", "B"],
    "parameters": ["k1", "k2"],
    "rhs": ["-k1 * A", "k1 * A - k2 * B"],
    "x0": [1.0, 0.0],
    "p_nominal": [0.5, 0.2],
    "t_end": 10,
}


def _write(tmp_path, spec, text=None):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(spec) if text is None else text)
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"states": ["A", "A"]}, r"model.json: states: duplicate names \['A'\]"),
        ({"parameters": ["k1", "k1"]}, r"model.json: parameters: duplicate names \['k1'\]"),
        ({"states": "AB"}, r"model.json: states: expected a list of state names, got a string"),
        ({"states": ["A", "2B"]}, r"model.json: states\[1\]: expected a name"),
        ({"rhs": ["-k1 * * A", "k1 * A"]}, r"rhs\[0\]: invalid syntax in .-k1 \* \* A."),
        ({"rhs": ["-k1 * A"]}, r"model.json: rhs: expected a list of 2 expressions"),
        ({"rhs": ["-k1 * A", None]}, r"model.json: rhs\[1\]: expected an expression"),
        ({"rhs": ["-k1 * A", "k1 * A - k3 * B"]}, r"rhs\[1\]: the name 'k3' is not defined"),
        ({"rhs": ["-k1 * A", "foo(B)"]}, r"rhs\[1\]: the function 'foo' is unknown"),
        ({"rhs": ["-k1 * A", "B.real"]}, r"rhs\[1\]: the construct Attribute is not arithmetic"),
        ({"rhs": ["-k1 * A", "k1 > A"]}, r"rhs\[1\]: expected an arithmetic expression"),
        ({"x0": [1.0]}, r"model.json: x0: expected 2 numbers \(one per state\), got 1"),
        ({"x0": [1.0, "0"]}, r"model.json: x0\[1\]: expected a number, got a string"),
        ({"x0": "1, 0"}, r"model.json: x0: expected a list of numbers"),
        ({"p_nominal": [0.5, 0.2, 1.0]}, r"p_nominal: expected 2 numbers \(one per parameter\)"),
        ({"p_nominal": [0.5, True]}, r"p_nominal\[1\]: expected a number, got a boolean"),
        ({"t_end": "10"}, r"model.json: t_end: expected a number, got a string"),
        ({"t0": 5, "t_end": 1}, r"model.json: t_end: must be after t0 = 5.0"),
        ({"p_nominl": [1, 2]}, r"top level: unknown key\(s\) \['p_nominl'\]"),
        ({"parameters": ["k1", "A"]}, r"names used for both a state and a parameter: \['A'\]"),
        ({"expressions": {"A": "k1"}}, r"expressions\['A'\]: the name is already a state"),
        ({"events": [{"kind": "implicit", "affect": {"A": "0"}}]},
         r"events\[0\]: an implicit event needs a 'condition'"),
        ({"events": [{"kind": "implicit", "condition": "A - 0.5", "direction": "upward"}]},
         r"events\[0\].direction: expected 'up', 'down' or 'both'"),
        ({"events": [{"kind": "explicit", "times": [1.0], "affect": {"C": "0"}}]},
         r"events\[0\].affect: 'C' is not a state"),
        ({"events": [{"kind": "sometimes", "times": [1.0]}]}, r"events\[0\].kind: expected"),
        ({"experiments": [{"id": "e", "times": [1, 2], "data": {"A": [1.0]}}]},
         r"experiments\[0\].data\['A'\]: expected 2 numbers \(one per time\), got 1"),
        ({"experiments": [{"id": "e", "x0_overrides": {"Z": 1.0}}]},
         r"experiments\[0\].x0_overrides: 'Z' is not a state"),
    ],
)  # fmt: skip
def test_invalid_model_files_name_the_field(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        OdeSystem.from_json(_write(tmp_path, {**_BASE, **change}))


def test_malformed_json_names_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"model.json: not valid JSON: Expecting"):
        OdeSystem.from_json(_write(tmp_path, None, text='{"states": ["A"], '))
    with pytest.raises(ValueError, match=r"model.json: expected a JSON object at the top level"):
        OdeSystem.from_json(_write(tmp_path, None, text="[1, 2]"))


def test_names_that_are_keywords_or_sympy_objects_parse(tmp_path):
    spec = {
        "states": ["lambda", "S"],
        "parameters": ["E", "I", "beta"],
        "rhs": ["-E * lambda + I", "beta * lambda - S"],
        "x0": [1.0, 0.0],
        "p_nominal": [0.5, 0.1, 2.0],
        "t_end": 1,
    }
    system = OdeSystem.from_json(_write(tmp_path, spec))
    lam, s = system.state_symbols
    e, i, beta = system.param_symbols
    assert system.rhs_expressions == (-e * lam + i, beta * lam - s)


def test_valid_file_with_every_optional_field_loads(tmp_path):
    spec = {
        **_BASE,
        "name": "chain",
        "source": "test",
        "expressions": {"flux": "k1 * A"},
        "rhs": ["-flux", "flux - k2 * B"],
        "t0": 0.0,
        "outputs": {"total": "A + B"},
        "experiments": [{"id": "e", "x0_overrides": {"A": 2.0}, "times": [1, 2],
                         "data": {"total": [1.0, 0.9]}, "stdv": {"total": [0.1, 0.1]},
                         "t0": 0.0, "comment": "c"}],
        "events": [{"kind": "explicit", "times": ["1 + k2"], "affect": {"A": "A + 1"},
                    "terminal": False, "name": "dose"}],
        "prior": {"anything": 1},
        "units": {"time": "s"},
        "exact": {},
        "checks": {},
    }  # fmt: skip
    system = OdeSystem.from_json(_write(tmp_path, spec))
    assert system.name == "chain" and len(system.events) == 1
    assert str(system.outputs["total"]) == "A + B"
