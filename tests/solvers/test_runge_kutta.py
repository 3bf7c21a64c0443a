"""rk45 and ckrk: step-size control at the stability boundary of a stiff problem."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens import solve
from tests.conftest import load_truth


@pytest.mark.parametrize("method", ["rk45", "ckrk"])
def test_robertson_at_the_stability_boundary(reference_system, method):
    """Robertson at rtol = atol = 1e-6 to t = 1, where scipy's RK45 needs 690 steps.

    rk45 used to stop with a step-size underflow at t = 0.11. Cause: the integral step-size
    controller ``h_new = 0.9 h err^(-1/5)``. On this stiff problem the steps of an explicit
    method are limited by stability (``h |lambda|`` near 3.3 on the real axis for
    Dormand-Prince, ``lambda ~ -2 k2 y2 ~ -2200``); after a step with a small error estimate
    the controller doubles ``h``, and an accepted step then reached ``h |lambda| = 5.8``
    (the stiff component grows 35-fold in it). That threw the fast species ``y2`` below the
    unstable root ``-3.65e-5`` of ``k1 y1 - k2 y2^2 - k3 y2 y3``, from where the exact
    solution itself escapes to ``-inf`` in finite time: every later step failed its error
    test and the step size underflowed. Whether this happens is a matter of luck in the step
    sequence: a Python replica of the loop failed from 5 of 30 initial step sizes between
    1e-7 and 1e-2 (scipy's RK45, the same controller, fails at 1e-5). Gustafsson's PI
    controller with DOPRI5's constants (``h err^(-0.17) err_prev^0.04``) damps the growth:
    accepted steps stay below ``h |lambda| = 4`` and the replica reached t = 1 from all 30
    initial steps, with about 65 rejections instead of about 200.
    """
    system = reference_system("robertson")
    truth = load_truth("robertson")
    keep = truth["t"] <= 1.0
    result = solve(
        system,
        system.x0,
        truth["t"][keep],
        system.p_nominal,
        method=method,
        relative_tolerance=1e-6,
        absolute_tolerance=1e-6,
    )
    np.testing.assert_allclose(result.y, truth["y"][keep], rtol=0, atol=1e-5)
    assert 500 < result.stats["n_steps"] < 900  # stability-limited, as scipy's 690
    assert result.stats["n_rejected_steps"] < 150
