"""nutpie's chains start where ``initvals`` and ``init`` say, as PyMC's own NUTS does."""

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_odesens
from pymc_odesens.inference import nutpie_start as nutpie_start_module
from pymc_odesens.inference.nutpie_start import nutpie_start, single_initvals

nutpie = pytest.importorskip("nutpie")


def _model():
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 3.0)
        s = pm.Uniform("s", -8.0, 8.0)
        pm.Normal("y", a + s, 1.0, observed=np.array([0.3, -0.2, 0.5]))
    return model


START = {"a": 1.25, "s": 5.5}


def _transformed_start(model) -> np.ndarray:
    """The start on the sampler's (transformed) scale: a as is, s on its interval transform."""
    u = (START["s"] + 8.0) / 16.0
    return np.array([START["a"], np.log(u / (1.0 - u))])


def test_initial_point_is_the_start_without_jitter_and_near_it_with():
    model = _model()
    with nutpie_start(START, init="adapt_diag"):
        compiled = nutpie.compile_pymc_model(model)
    exact = [compiled.initial_point_func(seed) for seed in (1, 2, 3)]
    for point in exact:
        np.testing.assert_allclose(point, _transformed_start(model), rtol=1e-12)
    with nutpie_start(START, init="jitter+adapt_diag"):
        compiled = nutpie.compile_pymc_model(model)
    jittered = np.array([compiled.initial_point_func(seed) for seed in (1, 2, 3)])
    offsets = jittered - _transformed_start(model)
    assert np.all(np.abs(offsets) <= 1.0) and np.all(np.abs(offsets) > 0.0)
    assert len({tuple(p) for p in jittered}) == 3  # each chain's seed its own jitter


def test_the_context_restores_nutpie():
    original = nutpie.compile_pymc_model
    with pytest.raises(RuntimeError, match="inside"):
        with nutpie_start(START, init="adapt_diag"):
            assert nutpie.compile_pymc_model is not original
            raise RuntimeError("inside")
    assert nutpie.compile_pymc_model is original


def test_sample_passes_initvals_and_init_to_nutpie(monkeypatch):
    calls = []
    original = nutpie_start_module.compile_nutpie_model
    before = nutpie.compile_pymc_model

    def recording(model, **kwargs):
        calls.append(kwargs)
        return original(model, **kwargs)

    monkeypatch.setattr(nutpie_start_module, "compile_nutpie_model", recording)
    with _model(), warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # PyMC's "initvals are not passed"
        idata = pymc_odesens.sample(
            draws=20,
            tune=20,
            chains=2,
            nuts_sampler="nutpie",
            initvals=[START, dict(START)],
            init="adapt_diag",
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert len(calls) == 1
    assert calls[0]["initial_points"] == START and calls[0]["jitter_rvs"] == set()
    assert idata.posterior["a"].shape == (2, 20)
    assert nutpie.compile_pymc_model is before


def test_single_initvals():
    assert single_initvals(None) is None
    assert single_initvals(START) is START
    assert single_initvals([START, dict(START), {"a": 1.25, "s": np.float64(5.5)}]) is START
    with pytest.raises(ValueError, match="chain 1's differ from chain 0's"):
        single_initvals([START, {"a": 1.0, "s": 5.5}])
    with pytest.raises(TypeError, match="initvals must be a dict or a sequence of dicts"):
        single_initvals(3.0)
    with pytest.raises(TypeError, match="init must be a string"):
        with nutpie_start(START, init=None):
            pass
    with pytest.raises(ValueError, match="init='advi\\+adapt_diag': with nuts_sampler='nutpie'"):
        with nutpie_start(START, init="advi+adapt_diag"):
            pass
