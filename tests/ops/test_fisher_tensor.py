"""`fisher_information_tensor`: the Fisher information as a PyTensor expression."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import NullTypeGradError

from pymc_odesens import fisher_information, fisher_information_tensor

TIMES = np.linspace(0.5, 5.0, 10)
TIGHT = {"relative_tolerance": 1e-10, "absolute_tolerance": 1e-12}


@pytest.fixture(scope="module")
def linear2(reference_system):
    return reference_system("linear2")


def test_tensor_equals_numeric_function(linear2):
    params = pt.vector("params", shape=(2,))
    sigma = pt.vector("sigma", shape=(2,))
    fisher = fisher_information_tensor(
        linear2, linear2.x0, TIMES, params, sigma, wrt="both", noise="multiplicative", **TIGHT
    )
    assert fisher.type.shape == (4, 4)
    f = pytensor.function([params, sigma], fisher)
    p, s = np.array([0.8, 0.3]), np.array([0.1, 0.2])
    expected = fisher_information(
        linear2, linear2.x0, TIMES, p, s, wrt="both", noise="multiplicative", **TIGHT
    ).matrix
    np.testing.assert_allclose(f(p, s), expected, rtol=1e-12)


def test_experiments_give_one_matrix_each(reference_system):
    """AKAR4's three experiments (one y0 row each, shared parameters): (3, 3, 3)."""
    akar4 = reference_system("akar4")
    y0 = np.array([akar4.x0, akar4.x0, akar4.x0])
    y0[:, 3] = [0.4, 0.1, 0.025]
    times = np.linspace(0.0, 600.0, 31)
    sigma = np.full((3, times.size, 1), 5.0)
    fisher = fisher_information_tensor(
        akar4,
        y0,
        times,
        akar4.p_nominal,
        sigma,
        t0=-15.0,
        observables=["AKAR4pOUT"],
        **TIGHT,
    )
    assert fisher.type.shape == (3, 3, 3)
    value = fisher.eval()
    for e in range(3):
        expected = fisher_information(
            akar4,
            y0[e],
            times,
            akar4.p_nominal,
            5.0,
            t0=-15.0,
            observables=["AKAR4pOUT"],
            **TIGHT,
        ).matrix
        np.testing.assert_allclose(value[e], expected, rtol=1e-12)


def test_inside_a_model_as_deterministic(linear2):
    with pm.Model() as model:
        p = pm.LogNormal("p", 0.0, 0.3, shape=2)
        pm.Deterministic("F", fisher_information_tensor(linear2, linear2.x0, TIMES, p, 0.1))
    point = {"p_log__": np.log([0.9, 0.4])}
    [f_values] = model.replace_rvs_by_values([model["F"]])
    value = model.compile_fn(f_values, inputs=model.value_vars)(point)
    expected = fisher_information(linear2, linear2.x0, TIMES, [0.9, 0.4], 0.1).matrix
    np.testing.assert_allclose(value, expected, rtol=1e-10)


def test_no_gradient(linear2):
    p = pt.vector("p", shape=(2,))
    fisher = fisher_information_tensor(linear2, linear2.x0, TIMES, p, 0.1)
    with pytest.raises(NullTypeGradError, match="second-order sensitivities"):
        pytensor.grad(fisher.sum(), p)


def test_argument_errors(linear2):
    args = (linear2, linear2.x0, TIMES, linear2.p_nominal)
    with pytest.raises(ValueError, match=r"sigma must have shape \(\), \(2,\), \(10, 2\)"):
        fisher_information_tensor(*args, np.ones(3))
    with pytest.raises(ValueError, match="noise must be one of"):
        fisher_information_tensor(*args, 0.1, noise="gamma")
    with pytest.raises(ValueError, match="params must have 2 entries"):
        fisher_information_tensor(linear2, linear2.x0, TIMES, [1.0, 2.0, 3.0], 0.1)
    with pytest.raises(TypeError, match="unknown control"):
        fisher_information_tensor(*args, 0.1, tolerance=1e-3)
    with pytest.raises(ValueError, match="relative_tolerance"):
        fisher_information_tensor(*args, 0.1, relative_tolerance=-1.0)
    with pytest.raises(ValueError, match="'z' is neither a state nor an output"):
        fisher_information_tensor(*args, 0.1, observables=["z"])
