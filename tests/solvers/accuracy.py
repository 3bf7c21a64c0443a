"""Error measure used by the solver tests."""

from __future__ import annotations

import numpy as np


def scaled_error(y: np.ndarray, truth: np.ndarray) -> float:
    """Largest error of any state relative to that state's largest magnitude over time.

    States that are identically zero in the truth are measured in absolute terms
    against the overall scale of the solution.
    """
    scale = np.abs(truth).max(axis=0)
    floor = 1e-12 * max(1.0, scale.max())
    return float((np.abs(y - truth).max(axis=0) / np.maximum(scale, floor)).max())
