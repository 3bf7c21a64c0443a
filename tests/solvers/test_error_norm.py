"""The error norm and the finiteness guards every integrator run relies on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.error_norm import (
    checked_status,
    grouped_rms_norm,
    larger_norm,
    non_finite_output,
)


@pytest.mark.parametrize("bad_block", [0, 1, 2])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_grouped_norm_is_not_finite_when_any_block_is(bad_block, bad):
    """The root cause of NaN sensitivities accepted by rk45/ckrk: the blocks were combined
    with the builtin ``max``, and ``max(0.0, nan)`` is ``0.0``, so a NaN block after a finite
    one vanished from the norm (the step was accepted)."""
    e = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    e[2 * bad_block + 1] = bad
    norm = grouped_rms_norm(e, np.ones(6), 2, 6, 6)
    assert not math.isfinite(norm)
    assert max(0.0, math.nan) == 0.0  # why the plain max was wrong
    assert math.isnan(larger_norm(0.0, math.nan)) and math.isnan(larger_norm(math.nan, 0.0))


def test_grouped_norm_quadrature_group_keeps_a_nan():
    e = np.array([0.1, 0.2, math.nan])  # one block of 2, one quadrature
    assert math.isnan(grouped_rms_norm(e, np.ones(3), 2, 2, 3))
    assert grouped_rms_norm(e, np.ones(3), 2, 2, 2) == pytest.approx(math.sqrt(0.025))


def test_finite_grouped_norm_is_the_largest_block_norm():
    e = np.array([3.0, 4.0, 0.0, 1.0])
    assert grouped_rms_norm(e, np.ones(4), 2, 4, 4) == pytest.approx(math.sqrt(12.5))


def test_outputs_are_checked_before_success():
    y_out = np.array([[1.0, 2.0], [3.0, math.inf], [math.nan, 0.0]])
    times = np.array([0.5, 1.5, 2.5])
    info = np.zeros(st.INFO_SIZE)
    assert not non_finite_output(y_out, 1, times, info)
    assert checked_status(st.SUCCESS, y_out, 1, times, info) == st.SUCCESS
    assert checked_status(st.EVENT, y_out, 3, times, info) == st.NON_FINITE_RHS
    assert info[0] == 1.5 and info[2] == 1  # the output time and the component
