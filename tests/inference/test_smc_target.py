"""pymc_odesens/inference/smc_target.py: the tempered target's evaluation of a point."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens.inference.smc_target import TemperedTarget
from tests.inference.smc_models import linear_model


def test_an_unaligned_read_only_point_is_evaluated_as_an_aligned_one():
    """Dask delivers a batch's positions in buffers that may be unaligned and read-only; the
    PyTensor function refuses such an input ("not aligned"), the target must not."""
    target = TemperedTarget(linear_model())
    x = np.linspace(-0.4, 0.3, target.layout.size)
    raw = np.zeros(8 * x.size + 1, dtype=np.uint8)
    unaligned = np.ndarray(x.shape, np.float64, raw.data, offset=1)
    unaligned[:] = x
    unaligned.flags.writeable = False
    assert not unaligned.flags.aligned
    expected = target.evaluate(x)
    got = target.evaluate(unaligned)
    assert np.isfinite(expected.log_likelihood) and np.isfinite(expected.log_prior)
    assert got.log_prior == expected.log_prior
    assert got.log_likelihood == expected.log_likelihood
    assert np.array_equal(got.grad_log_prior, expected.grad_log_prior)
    assert np.array_equal(got.grad_log_likelihood, expected.grad_log_likelihood)


def test_a_trajectory_model_gives_the_gradients_and_the_model_the_terms():
    """With a trajectory model (here the linear model with noise 1.0 instead of 0.5),
    ``evaluate`` is the model's log-prior and log-likelihood with the trajectory model's
    gradients, and ``trajectory`` the trajectory model's terms and gradients."""
    own, guide = TemperedTarget(linear_model()), TemperedTarget(linear_model(noise=1.0))
    target = TemperedTarget(linear_model(), trajectory_model=linear_model(noise=1.0))
    assert target.has_trajectory_model and not own.has_trajectory_model
    x = np.array([0.2, -0.7])
    got, mine, theirs = target.evaluate(x), own.evaluate(x), guide.evaluate(x)
    assert got.log_prior == mine.log_prior and got.log_likelihood == mine.log_likelihood
    assert np.array_equal(got.grad_log_likelihood, theirs.grad_log_likelihood)
    assert np.array_equal(got.grad_log_prior, theirs.grad_log_prior)
    assert not np.allclose(mine.grad_log_likelihood, theirs.grad_log_likelihood)
    inner = target.trajectory(x)
    assert inner.log_likelihood == theirs.log_likelihood
    assert np.array_equal(inner.grad_log_likelihood, theirs.grad_log_likelihood)
    # without one, the two are the same function
    assert own.trajectory(x).log_likelihood == mine.log_likelihood


def test_a_trajectory_model_with_other_variables_is_refused_by_name():
    with pytest.raises(ValueError, match=r"trajectory_model must have the model's value variables"):
        TemperedTarget(linear_model(), trajectory_model=linear_model(slope=False))
