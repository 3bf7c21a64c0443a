"""pymc_odesens/inference/smc_target.py: the tempered target's evaluation of a point."""

from __future__ import annotations

import numpy as np

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
