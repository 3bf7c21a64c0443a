"""The data layout of the ``bdf``/``adams`` driver, without the driver.

:mod:`pymc_odesens.solvers.multistep` compiles its driver when it is imported (minutes on a
new installation); callers that only need its formula codes or the shapes of its step log
and history snapshots (the NUMBA-mode Ops, the adjoints' set-up) read them here, so that a
model solved with ``rk45`` never compiles the multistep driver.
"""

from __future__ import annotations

import numpy as np

from pymc_odesens.solvers import adams_formula, bdf_formula

__all__ = [
    "BDF",
    "ADAMS",
    "OP_INIT",
    "OP_RESAMPLE",
    "OP_STEP",
    "OP_WIDTH",
    "NO_STEP_LOG",
    "table_rows",
    "snapshot_width",
]

BDF = 0
ADAMS = 1
# The step log of a run (for the discrete adjoint): one row [kind, order, value, t] per
# operation on the history, in order. OP_INIT: value h0, t t0; OP_RESAMPLE: the table
# re-sampled at ``order`` for a step ``value`` times larger; OP_STEP: an accepted step of
# ``order`` and size ``value`` ending at ``t``. Replaying the log from a snapshot of the
# history reproduces the run without error control.
OP_INIT = 0
OP_RESAMPLE = 1
OP_STEP = 2
OP_WIDTH = 4
NO_STEP_LOG = (np.zeros((0, OP_WIDTH)), np.zeros((0, 0)), np.zeros(2, dtype=np.int64))
"""``op_log, snapshots, op_count`` of a run without a step log."""


def table_rows(family: int) -> int:
    """Rows of the difference table of ``family``."""
    return (bdf_formula.MAX_ORDER if family == BDF else adams_formula.MAX_ORDER) + 3


def snapshot_width(family: int, n: int) -> int:
    """Width of a snapshot row: log position, ``y_cur`` (n) and the table."""
    return 1 + n + table_rows(family) * n
