"""pymc_odesens.sample: pm.sample with the log-density compiled in NUMBA mode."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_odesens
from pymc_odesens import OdeSystem, ode_solution, solve
from pymc_odesens.inference import sampling


@pytest.fixture(scope="module")
def decay_model():
    system = OdeSystem(
        lambda t, y, p: [-p.k * y.A, p.k * y.A], states=["A", "B"], params=["k"], name="decay_s"
    )
    times = np.linspace(0.5, 5.0, 10)
    data = solve(system, [1.0, 0.0], times, [0.7], method="rk45").y
    data = data + np.random.default_rng(2).normal(0.0, 0.02, size=data.shape)
    with pm.Model() as model:
        k = pm.LogNormal("k", 0.0, 1.0)
        y = ode_solution(system, [1.0, 0.0], times, [k], method="rk45")
        pm.Normal("obs", y, 0.02, observed=data)
    return model


def test_the_numba_mode_is_added_for_pymc_nuts_only(decay_model, monkeypatch):
    seen = []
    monkeypatch.setattr(sampling.pm, "sample", lambda draws, **kwargs: seen.append(kwargs))
    with decay_model:
        pymc_odesens.sample(10)
        pymc_odesens.sample(10, compile_kwargs={})  # the user's choice stays
        pymc_odesens.sample(10, nuts_sampler="nutpie")  # nutpie compiles its own way
    assert seen[0]["compile_kwargs"] == {"mode": "NUMBA"}
    assert seen[0]["model"] is decay_model
    assert seen[1]["compile_kwargs"] == {}
    assert "compile_kwargs" not in seen[2]
    assert pymc_odesens.sampling_compile_kwargs(decay_model) == {"mode": "NUMBA"}


def test_sampling_without_a_model_names_it():
    with pytest.raises(TypeError, match="No model on context stack"):
        pymc_odesens.sample(10)


def test_a_short_run_recovers_the_rate(decay_model):
    with decay_model:
        idata = pymc_odesens.sample(
            100, tune=100, chains=1, cores=1, random_seed=4, progressbar=False
        )
    k = idata.posterior["k"].values
    assert k.shape == (1, 100)
    assert abs(k.mean() - 0.7) < 0.05


def _draws(model, **values):
    import arviz as az

    return az.from_dict(posterior={name: np.full((1, 4), v) for name, v in values.items()})


def test_posterior_predictive_is_quiet_about_the_failure_potential(decay_model):
    trace = _draws(decay_model, k=0.7)
    with decay_model:
        with pytest.warns(UserWarning, match="Potentials on other parameters is ignored"):
            pm.sample_posterior_predictive(trace, progressbar=False, random_seed=1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            predictive = pymc_odesens.sample_posterior_predictive(
                trace, progressbar=False, random_seed=1
            )
    obs = predictive.posterior_predictive["obs"].values
    assert obs.shape == (1, 4, 10, 2)
    # draws around the solution at k = 0.7 with the model's noise 0.02
    exact = solve(
        OdeSystem(
            lambda t, y, p: [-p.k * y.A, p.k * y.A], states=["A", "B"], params=["k"], name="decay_s"
        ),
        [1.0, 0.0],
        np.linspace(0.5, 5.0, 10),
        [0.7],
        method="rk45",
    ).y
    assert np.abs(obs - exact).max() < 0.02 * 6


def test_posterior_predictive_keeps_the_warning_for_a_users_potential(decay_model):
    with decay_model.copy() as model:
        pm.Potential("users_own", -((model["k"] - 0.7) ** 2))
        with pytest.warns(UserWarning, match="Potentials on other parameters is ignored"):
            pymc_odesens.sample_posterior_predictive(
                _draws(model, k=0.7), progressbar=False, random_seed=1
            )
