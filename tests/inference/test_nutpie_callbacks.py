"""nutpie's compiled model with its callbacks cached across processes: the same draws as
nutpie's own, a later process loads the callbacks instead of compiling them, and a cached
callback that is damaged or does not reproduce the model is compiled again."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pymc as pm
import pytest

from pymc_odesens.caching.disk_cache import KernelCacheWarning
from pymc_odesens.inference import nutpie_callbacks
from pymc_odesens.inference.nutpie_callbacks import compile_nutpie_model

nutpie = pytest.importorskip("nutpie")

REPO = Path(__file__).resolve().parents[2]


def _model(scale: float = 1.0) -> pm.Model:
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, scale, shape=3)
        s = pm.HalfNormal("s", 1.0)
        d = pm.Data("d", np.ones(3))
        pm.Normal("y", a * d, s, observed=np.array([0.3, -0.2, 0.5]))
        pm.Deterministic("b", 2.0 * a + s)
    return model


def _logp(compiled, x: np.ndarray) -> tuple[int, float, np.ndarray]:
    """The compiled logp callback called as nutpie calls it."""
    pointer = ctypes.POINTER(ctypes.c_double)
    x = np.ascontiguousarray(x, dtype=float)
    gradient, value = np.zeros(compiled.n_dim), np.zeros(())
    code = compiled.compiled_logp_func.ctypes(
        compiled.n_dim,
        x.ctypes.data_as(pointer),
        gradient.ctypes.data_as(pointer),
        value.ctypes.data_as(pointer),
        compiled.user_data.ctypes.data,
    )
    return code, float(value), gradient


def test_same_draws_as_nutpie_and_shared_data_follows(tmp_path, monkeypatch):
    monkeypatch.setenv("PYMC_ODESENS_CACHE_DIR", str(tmp_path))
    model = _model()
    ours = compile_nutpie_model(model)
    theirs = nutpie.compile_pymc_model(model)
    kwargs = dict(draws=50, tune=50, chains=2, progress_bar=False, seed=7)
    a, b = nutpie.sample(ours, **kwargs), nutpie.sample(theirs, **kwargs)
    for name in ("a", "s", "b"):
        np.testing.assert_array_equal(a.posterior[name].values, b.posterior[name].values)
    b_values = a.posterior["b"].values
    expected = 2.0 * a.posterior["a"].values + a.posterior["s"].values[..., None]
    np.testing.assert_allclose(b_values, expected, rtol=1e-12)

    # with other data the callback computes the model's log-density at that data
    x = np.array([0.1, -0.4, 0.7, 0.2])  # a, log s
    doubled = ours.with_data(d=np.full(3, 2.0))
    code, value, gradient = _logp(doubled, x)
    with pm.Model() as reference:
        a = pm.Normal("a", 0.0, 1.0, shape=3)
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", 2.0 * a, s, observed=np.array([0.3, -0.2, 0.5]))
    point = {"a": x[:3], "s_log__": x[3]}
    assert code == 0
    assert value == pytest.approx(float(reference.compile_logp()(point)), rel=1e-12)
    dlogp = reference.compile_dlogp()(point)
    np.testing.assert_allclose(gradient, dlogp, rtol=1e-10, atol=1e-12)


def _cached_model() -> pm.Model:
    """The model whose callbacks the processes below cache and load."""
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 1.0, shape=3)
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", a, s, observed=np.array([0.3, -0.2, 0.5]))
        pm.Deterministic("b", 2.0 * a + s)
    return model


def _cache_hits(compiled) -> list[int]:
    """Whether each callback was loaded from the cache (1) or compiled (0)."""
    return [compiled.compiled_logp_func._cache_hits, compiled.compiled_expand_func._cache_hits]


CHILD = textwrap.dedent(
    """
    import json, warnings
    from pymc_odesens.inference.nutpie_callbacks import compile_nutpie_model
    from tests.inference.test_nutpie_callbacks import _cache_hits, _cached_model

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = compile_nutpie_model(_cached_model())
    print(json.dumps({
        "hits": _cache_hits(compiled),
        "warnings": [[w.category.__name__, str(w.message)] for w in caught
                     if w.category.__name__ == "KernelCacheWarning"],
    }))
    """
)


def _child(cache: Path) -> dict:
    env = {**os.environ, "PYMC_ODESENS_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, f"return code {done.returncode}: {done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_later_process_loads_the_callbacks_and_a_damaged_file_is_compiled_again(tmp_path):
    assert _child(tmp_path) == {"hits": [0, 0], "warnings": []}
    files = sorted((tmp_path / "nutpie").glob("*.nbc"))
    assert len(files) == 2 and all(".sha256." in f.name for f in files)  # verified files

    # the next process loads the intact callback and compiles the damaged one again
    logp_file = next(f for f in files if "nutpie_logp" in f.name)
    damaged = bytearray(logp_file.read_bytes())
    damaged[len(damaged) // 2] ^= 0x01  # in the pickled object code
    logp_file.write_bytes(bytes(damaged))
    again = _child(tmp_path)
    assert again["hits"] == [0, 1]
    assert len(again["warnings"]) == 1 and "does not verify" in again["warnings"][0][1]
    # the file was replaced: this process, a third one, loads both callbacks
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
        patch.setenv("PYMC_ODESENS_CACHE_DIR", str(tmp_path))
        warnings.simplefilter("error", KernelCacheWarning)
        assert _cache_hits(compile_nutpie_model(_cached_model())) == [1, 1]


def test_a_cached_callback_of_another_model_is_compiled_again(tmp_path, monkeypatch):
    """Two models under one key (as if the key missed a difference): the second process's
    load is checked against its model, found wrong, and compiled again."""
    monkeypatch.setenv("PYMC_ODESENS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(nutpie_callbacks, "_key", lambda kind, *rest: f"{kind}{'0' * 60}")
    first = compile_nutpie_model(_model(1.0))
    assert first.compiled_logp_func._cache_hits == 0
    with pytest.warns(KernelCacheWarning, match="does not reproduce the model's compiled"):
        second = compile_nutpie_model(_model(3.0))
    x = np.array([0.5, -1.0, 2.0, 0.1])
    expected = second.logp_func(x)
    code, value, gradient = _logp(second, x)
    assert code == 0
    assert value == pytest.approx(float(expected[0]), rel=1e-12)
    np.testing.assert_allclose(gradient, expected[1], rtol=1e-12)
    assert value != pytest.approx(_logp(first, x)[1], rel=1e-6)


def test_other_nutpie_internals_fall_back_to_nutpie_with_a_notice(monkeypatch, capsys):
    monkeypatch.setattr(nutpie_callbacks, "_nutpie_internals", lambda: None)
    monkeypatch.setattr(nutpie_callbacks, "_SAID", set())
    compiled = compile_nutpie_model(_model())
    assert "its callbacks are compiled again in every process" in capsys.readouterr().err
    x = np.array([0.5, -1.0, 2.0, 0.1])
    code, value, _ = _logp(compiled, x)
    assert code == 0 and value == pytest.approx(float(compiled.logp_func(x)[0]), rel=1e-12)


def test_gradient_backend_must_be_pytensor_with_numba():
    with pytest.raises(ValueError, match="gradient_backend: expected 'pytensor'"):
        compile_nutpie_model(_model(), gradient_backend="jax")


def test_this_nutpies_internals_are_recognised():
    """The helpers and fields this module builds on are those of the installed nutpie (else
    every compile would fall back to nutpie's own, uncached)."""
    assert nutpie_callbacks._nutpie_internals() is not None
