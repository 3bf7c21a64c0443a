"""Generated kernels: values against the reference loader, layouts, elementary functions."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from pymc_odesens import OdeSystem
from pymc_odesens import math as om
from pymc_odesens.codegen import compile_kernels
from tests.conftest import MODELS_DIR, model_path

MODELS = ["linear2", "pka", "akar4", "robertson", "lotka_volterra", "chua"]


@pytest.fixture(scope="module")
def reference_loader():
    sys.path.insert(0, str(MODELS_DIR))
    try:
        import load_model
    finally:
        sys.path.remove(str(MODELS_DIR))
    return load_model


@pytest.mark.parametrize("name", MODELS)
def test_kernels_match_reference_derivatives(name, reference_system, reference_loader):
    system = reference_system(name)
    ref = reference_loader.load(str(model_path(name)))
    kernels = compile_kernels(system)
    rng = np.random.default_rng(1)
    t = 0.7
    y = rng.uniform(0.1, 2.0, system.n_states)
    p = system.p_nominal * rng.uniform(0.5, 1.5, system.n_params)
    lam = rng.normal(size=system.n_states)
    jac_y = ref.jac_y(t, y, p)
    jac_p = ref.jac_p(t, y, p)  # reference layout (N, P)

    def close(a, b):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(b).max()))

    close(kernels.evaluate("rhs", t, y, p), ref.rhs(t, y, p))
    close(kernels.evaluate("jac_y", t, y, p), jac_y)
    close(kernels.evaluate("jac_p", t, y, p), jac_p.T)  # ours: (P, N), J_p[k, i] = df_i/dp_k
    close(kernels.evaluate("vjp_y", t, y, p, lam), lam @ jac_y)
    close(kernels.evaluate("vjp_p", t, y, p, lam), lam @ jac_p)
    close(kernels.evaluate("jvp_y", t, y, p, lam), jac_y @ lam)


def _branchy(t, y, p):
    return [
        om.where(t < p[0], -y[0], om.maximum(y[0], y[1]) * p[1]),
        om.abs(y[0] - y[1]) + om.heaviside(y[1] - 0.5) * om.tanh(y[0]) + om.minimum(y[0], 2.0),
        om.exp(-y[2]) * om.sin(t) + om.sqrt(y[0] ** 2 + 1.0) / om.cosh(y[2]) + y[2] ** -3,
    ]


@pytest.mark.parametrize("t", [0.2, 1.5])
def test_elementary_functions_and_branches(t):
    system = OdeSystem(_branchy, 3, 2)
    kernels = compile_kernels(system)
    y = np.array([0.3, 0.9, 1.2])
    p = np.array([1.0, 2.0])
    expected = [
        -y[0] if t < p[0] else max(y[0], y[1]) * p[1],
        abs(y[0] - y[1]) + 1.0 * np.tanh(y[0]) + min(y[0], 2.0),
        np.exp(-y[2]) * np.sin(t) + np.sqrt(y[0] ** 2 + 1) / np.cosh(y[2]) + y[2] ** -3,
    ]
    np.testing.assert_allclose(kernels.evaluate("rhs", t, y, p), expected, rtol=1e-14)
    # Jacobian against central differences away from switching points
    jac = kernels.evaluate("jac_y", t, y, p)
    h = 1e-6
    for j in range(3):
        e = np.zeros(3)
        e[j] = h
        fd = (kernels.evaluate("rhs", t, y + e, p) - kernels.evaluate("rhs", t, y - e, p)) / (2 * h)
        np.testing.assert_allclose(jac[:, j], fd, rtol=1e-7, atol=1e-8)


def test_heaviside_value_at_zero_and_division_by_zero_gives_inf():
    system = OdeSystem(lambda t, y, p: [om.heaviside(y[0], 0.25), 1 / y[0]], 2, 0)
    out = compile_kernels(system).evaluate("rhs", 0.0, [0.0, 1.0], [])
    assert out[0] == 0.25
    assert np.isinf(out[1])  # numpy error model: no exception inside a cfunc
