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
    with pytest.raises(ValueError, match=r"undeclared symbol\(s\) k"):
        OdeSystem.from_json(unknown)
