"""One OdeSystem solved and differentiated from several threads at once: every call gives
the bits of one thread (solve, solve_sensitivity, adjoint gradients, one shared adjoint
forward pass, steady states, Fisher information)."""

import numpy as np
import pytest

from pymc_odesens import (
    adjoint_forward,
    adjoint_gradient,
    fisher_information,
    solve,
    solve_sensitivity,
    steady_state,
)
from tests.sensitivity.test_steady_state import BINDING_P, BINDING_Y0, binding_system
from tests.threads import CALLS, THREADS, assert_same_bits, in_threads

LV_Y0 = np.array([1.0, 1.0])
LV_P = np.array([1.5, 1.0, 1.0, 3.0])
LV_TIMES = np.linspace(0.5, 10.0, 20)
TIGHT = {"relative_tolerance": 1e-9, "absolute_tolerance": 1e-11}
TIGHT_ADJOINT = {"relative_tolerance_forward": 1e-9, "absolute_tolerance_forward": 1e-11}


@pytest.fixture(scope="module")
def lotka_volterra(reference_system):
    return reference_system("lotka_volterra")


def _perturbed(base: np.ndarray, count: int, seed: int, scale: float = 0.02) -> list:
    rng = np.random.default_rng(seed)
    return [base * (1.0 + scale * rng.standard_normal(base.size)) for _ in range(count)]


def _same_in_threads(call, arguments) -> None:
    alone = [call(a) for a in arguments]
    assert_same_bits(alone, in_threads(call, arguments))


@pytest.mark.parametrize("method", ["rk45", "bdf"])
def test_solve(lotka_volterra, method):
    _same_in_threads(
        lambda p: solve(lotka_volterra, LV_Y0, LV_TIMES, p, method=method, **TIGHT).y,
        _perturbed(LV_P, THREADS * CALLS, seed=0),
    )


def test_forward_sensitivities(lotka_volterra):
    def call(p):
        result = solve_sensitivity(lotka_volterra, LV_Y0, LV_TIMES, p, wrt="both", **TIGHT)
        return result.y, result.S, result.S_y0

    _same_in_threads(call, _perturbed(LV_P, THREADS * CALLS, seed=1))


def test_peano_baker_sensitivities(lotka_volterra):
    def call(p):
        result = solve_sensitivity(lotka_volterra, LV_Y0, LV_TIMES, p, sensitivity="pbsr")
        return result.y, result.S

    _same_in_threads(call, _perturbed(LV_P, THREADS * 10, seed=2))


@pytest.mark.parametrize("adjoint_method", ["continuous", "discrete"])
def test_adjoint_gradients(lotka_volterra, adjoint_method):
    cotangent = np.random.default_rng(3).normal(size=(LV_TIMES.size, 2))
    calls = THREADS * (CALLS if adjoint_method == "continuous" else 10)

    def call(p):
        gradient = adjoint_gradient(
            lotka_volterra,
            LV_Y0,
            LV_TIMES,
            p,
            cotangent,
            adjoint_method=adjoint_method,
            **TIGHT_ADJOINT,
        )
        return gradient.params, gradient.y0, gradient.y

    _same_in_threads(call, _perturbed(LV_P, calls, seed=4))


def test_backward_passes_of_one_shared_forward_pass(lotka_volterra):
    checkpoints = adjoint_forward(lotka_volterra, LV_Y0, LV_TIMES, LV_P, **TIGHT_ADJOINT)
    rng = np.random.default_rng(5)
    cotangents = [rng.normal(size=(LV_TIMES.size, 2)) for _ in range(THREADS * CALLS)]

    def call(cotangent):
        gradient = checkpoints.backward(cotangent)
        return gradient.params, gradient.y0

    _same_in_threads(call, cotangents)


def test_events(reference_system):
    ball = reference_system("bouncing_ball")
    y0, p, times = np.array([5.0, -0.1]), np.array([10.0, 0.8]), np.linspace(0.1, 1.9, 10)

    def call(p):
        result = solve_sensitivity(ball, y0, times, p, **TIGHT)
        return result.y, result.S, result.event_time_sensitivity

    _same_in_threads(call, _perturbed(p, THREADS * 20, seed=6))


def test_steady_states():
    binding = binding_system()

    def call(p):
        result = steady_state(binding, BINDING_Y0, p)
        return result.y, result.S, result.S_y0

    _same_in_threads(call, _perturbed(BINDING_P, THREADS * 20, seed=7))


def test_fisher_information(lotka_volterra):
    def call(p):
        return fisher_information(lotka_volterra, LV_Y0, LV_TIMES, p, 0.1, **TIGHT).matrix

    _same_in_threads(call, _perturbed(LV_P, THREADS * 10, seed=8))
