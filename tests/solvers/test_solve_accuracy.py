"""`solve` against the ground truth of ../shared/models, and convergence as tolerances fall."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens import solve
from tests.conftest import load_truth
from tests.solvers.accuracy import scaled_error

ALL = ("rk45", "ckrk", "bdf", "adams")

# (model, methods, rtol, atol, bound): bound on scaled_error at these tolerances; the
# measured errors are 10-50x below it (see docs/solvers.md for the numbers).
CASES = [
    ("linear2", ALL, 1e-8, 1e-10, 1e-6),
    ("lotka_volterra", ALL, 1e-8, 1e-10, 1e-5),
    ("chua", ALL, 1e-8, 1e-10, 2e-5),
    ("pka", ("bdf", "adams"), 1e-8, 1e-12, 3e-5),
    ("robertson", ("bdf", "adams"), 1e-8, 1e-12, 1e-5),
    ("akar4", ("bdf", "adams"), 1e-8, 1e-10, 3e-5),
]


@pytest.mark.parametrize(
    ("name", "method", "rtol", "atol", "bound"),
    [(n, m, r, a, b) for n, ms, r, a, b in CASES for m in ms],
)
def test_matches_ground_truth(reference_system, name, method, rtol, atol, bound):
    system = reference_system(name)
    truth = load_truth(name)
    result = solve(
        system,
        truth["y"][0],
        truth["t"],
        system.p_nominal,
        t0=system.t0,
        method=method,
        relative_tolerance=rtol,
        absolute_tolerance=atol,
    )
    assert result.y.shape == truth["y"].shape
    np.testing.assert_array_equal(result.t, truth["t"])
    assert scaled_error(result.y, truth["y"]) < bound


def test_linear2_closed_form(reference_system):
    """linear2's truth file holds the exact solution; compare with the closed form itself."""
    system = reference_system("linear2")
    t = np.linspace(0.0, 5.0, 41)
    p0, p1 = system.p_nominal
    y1 = np.exp(-p1 * t)
    y0 = np.exp(-p0 * t) + p1 / (p0 - p1) * (np.exp(-p1 * t) - np.exp(-p0 * t))
    for method in ALL:
        result = solve(
            system,
            [1.0, 1.0],
            t,
            system.p_nominal,
            method=method,
            relative_tolerance=1e-10,
            absolute_tolerance=1e-12,
        )
        np.testing.assert_allclose(result.y[:, 0], y0, rtol=0, atol=1e-8)
        np.testing.assert_allclose(result.y[:, 1], y1, rtol=0, atol=1e-8)


CONVERGENCE = [
    ("lotka_volterra", "rk45"),
    ("lotka_volterra", "ckrk"),
    ("lotka_volterra", "bdf"),
    ("lotka_volterra", "adams"),
    ("pka", "bdf"),
    ("pka", "adams"),
    ("robertson", "bdf"),
]


@pytest.mark.parametrize(("name", "method"), CONVERGENCE)
def test_error_falls_with_tolerance(reference_system, name, method):
    system = reference_system(name)
    truth = load_truth(name)
    errors = []
    for tol in (1e-5, 1e-7, 1e-9):
        result = solve(
            system,
            truth["y"][0],
            truth["t"],
            system.p_nominal,
            t0=system.t0,
            method=method,
            relative_tolerance=tol,
            absolute_tolerance=tol * 1e-3,
        )
        errors.append(scaled_error(result.y, truth["y"]))
    # each 100x tighter tolerance must buy at least a 10x smaller error
    assert errors[1] < errors[0] / 10, errors
    assert errors[2] < errors[1] / 10, errors


@pytest.mark.slow
@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("name", ["linear2", "lotka_volterra", "chua"])
def test_convergence_sweep_nonstiff(reference_system, name, method):
    """Five tolerance levels: the error sequence decreases monotonically."""
    system = reference_system(name)
    truth = load_truth(name)
    errors = []
    for tol in (1e-4, 1e-6, 1e-8, 1e-10, 1e-12):
        result = solve(
            system,
            truth["y"][0],
            truth["t"],
            system.p_nominal,
            t0=system.t0,
            method=method,
            relative_tolerance=tol,
            absolute_tolerance=tol,
        )
        errors.append(scaled_error(result.y, truth["y"]))
    truth_floor = 1e-11  # the truth itself (Radau 1e-10 / 1e-12, or exact for linear2)
    for coarse, fine in zip(errors, errors[1:]):
        assert fine < coarse or fine < truth_floor, errors
    assert errors[-1] < 1e-4 * errors[0] or errors[-1] < truth_floor, errors
