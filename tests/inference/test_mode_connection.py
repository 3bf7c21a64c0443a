"""The hill-valley test: optima on one ridge are joined, optima a valley separates are not."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from pymc_odesens import OdeSystem, ode_solution
from pymc_odesens.inference import find_modes
from pymc_odesens.inference.mode_connection import connected_groups
from tests.inference.test_smc import symmetric_decay_model


def ring(x: np.ndarray) -> float:
    """Every point of the unit circle is a maximum (0); the centre is 50 below."""
    return -50.0 * (float(x @ x) - 1.0) ** 2


def test_optima_on_a_ring_join_where_the_chord_stays_on_the_ridge():
    optima = [(np.array([np.cos(a), np.sin(a)]), 0.0) for a in np.deg2rad([0.0, 20.0, 180.0])]
    calls = []

    def counted(x):
        calls.append(x)
        return ring(x)

    # 0 and 20 degrees: the chord's midpoint is at radius cos(10) (0.046 below); 0 and 180:
    # through the centre, 50 below, which the midpoint, evaluated first, shows at once
    assert connected_groups(optima, counted, barrier=1.0, points=9) == [[0, 1], [2]]
    assert len(calls) == 9 + 1
    np.testing.assert_allclose(calls[9], [0.0, 0.0], atol=1e-15)
    assert connected_groups(optima, ring, barrier=0.01, points=9) == [[0], [1], [2]]
    failing = connected_groups(optima, lambda x: -np.inf, barrier=1.0, points=3)
    assert failing == [[0], [1], [2]]  # a failed solve on the segment separates
    with pytest.raises(ValueError, match="barrier: expected a positive number of log-units"):
        connected_groups(optima, ring, barrier=0.0)
    with pytest.raises(ValueError, match="points: expected an integer >= 1, got 0"):
        connected_groups(optima, ring, points=0)


PRODUCT = OdeSystem(
    lambda t, y, p: [-p.k1 * p.k2 * y.x], states=["x"], params=["k1", "k2"], name="product"
)
TIMES = np.array([0.5, 1.0, 2.0, 3.0])


def ridge_model() -> pm.Model:
    """x' = -k1 k2 x: the data fix log10 k1 + log10 k2 only, and the uniform priors leave
    every point of that line an optimum."""
    with pm.Model() as model:
        u = pm.Uniform("log10_k1", -2.0, 2.0)
        v = pm.Uniform("log10_k2", -2.0, 2.0)
        x = ode_solution(PRODUCT, [1.0], TIMES, [10.0**u, 10.0**v], method="rk45")
        pm.Normal("y", x[:, 0], 0.02, observed=np.exp(-0.5 * TIMES))
    return model


def test_starts_that_stop_on_one_ridge_are_one_mode_and_two_signs_stay_two():
    search = find_modes(ridge_model(), 6, random_seed=3, n_workers=1, method="L-BFGS-B")
    assert len(search.clusters) > 1  # apart by the parameter tolerance
    ends = np.array([s.x for s in search.starts])
    on_line = ends[np.abs(ends.sum(axis=1) - np.log10(0.5)) < 1e-3]
    assert len(on_line) >= 3 and np.ptp(on_line[:, 0]) > 0.5
    # the others stalled where x has decayed before the first time (k1 k2 near 1e4): the
    # log-posterior falls monotonically from the line to there, no valley, one basin
    (joined,) = search.join_connected().clusters
    assert sorted(joined.members) == sorted(s.index for s in search.starts)
    assert joined.best is search.best
    # the value without sensitivities, as the gradient's solve gives it
    x = search.best.x
    assert search.objective.log_posterior(x) == pytest.approx(search.best.log_posterior, abs=1e-6)
    signs = find_modes(symmetric_decay_model(), 6, random_seed=1, n_workers=1)
    assert sorted(np.sign(c.best.x[0]) for c in signs.clusters) == [-1.0, 1.0]
    assert len(signs.join_connected().clusters) == 2
