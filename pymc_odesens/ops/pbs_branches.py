"""Which branch (PBS, refined PBS, Exp) the solver steps of a Peano-Baker solution took.

A solution built with ``ode_solution(..., sensitivity="pbs" | "pbsr" | "exp")``
also counts, at every evaluation, the solver steps of each experiment per
branch of the march (what ``solve_sensitivity(...).pbs_steps.counts()``
reports). :func:`pbs_branch_counts` exposes those counts as a tensor: wrapped
in a ``pm.Deterministic`` they are stored with every draw, in the default and
in the NUMBA mode (nutpie) alike, and :func:`pbs_branch_summary` totals them
after sampling.
"""

from __future__ import annotations

import numpy as np
from pytensor.graph.basic import Constant
from pytensor.tensor.subtensor import Subtensor

from pymc_odesens.ops.ode_ops import OdePbsOp
from pymc_odesens.sensitivity.pbs_report import BRANCH_NAMES

__all__ = ["BRANCH_NAMES", "pbs_branch_counts", "pbs_branch_summary"]


def _is_first_row(node) -> bool:
    """``node`` computes ``x[0]`` (one constant index, no slices)."""
    return (
        isinstance(node.op, Subtensor)
        and len(node.op.idx_list) == 1
        and len(node.inputs) == 2
        and isinstance(node.inputs[1], Constant)
        and node.inputs[1].data == 0
    )


def _pbs_node(solution):
    """The :class:`OdePbsOp` node behind ``solution`` and whether it was batched."""
    owner = getattr(solution, "owner", None)
    if owner is not None and isinstance(owner.op, OdePbsOp):
        return owner, True
    if owner is not None and _is_first_row(owner):
        # an unbatched solution is y[0] of the Op's (1, T, N) output
        inner = owner.inputs[0].owner
        if (
            inner is not None
            and isinstance(inner.op, OdePbsOp)
            and owner.inputs[0] is inner.outputs[0]
            and inner.op.spec.n_experiments == 1
        ):
            return inner, False
    raise TypeError(
        "solution must be the tensor returned by ode_solution(..., sensitivity='pbs', 'pbsr' "
        f"or 'exp'); got {solution!r}" + (f" computed by {owner.op}" if owner is not None else "")
    )


def pbs_branch_counts(solution):
    """Solver steps per branch of the Peano-Baker march behind ``solution``.

    Parameters
    ----------
    solution : TensorVariable
        The tensor returned by :func:`pymc_odesens.ode_solution` with
        ``sensitivity="pbs"``, ``"pbsr"`` or ``"exp"``.

    Returns
    -------
    TensorVariable of int64
        Shape ``(len(BRANCH_NAMES),)``, or ``(E, len(BRANCH_NAMES))`` for a
        batch of E experiments: the number of the solver's accepted steps that
        took each branch of :data:`BRANCH_NAMES` = ``("pbs", "pbs_refined",
        "exp_steady", "exp_substep_limit", "exp")`` at the parameter values the
        tensor is evaluated at (zeros for a failed solve). The same solve as
        the solution's (PyTensor merges them), so a ``pm.Deterministic`` of it
        records the counts of every draw.

    Raises
    ------
    TypeError
        If ``solution`` is not such a tensor.
    """
    node, batched = _pbs_node(solution)
    branches = node.outputs[-2]
    return branches if batched else branches[0]


def pbs_branch_summary(counts) -> dict[str, float]:
    """Fraction of solver steps per branch, totalled over draws (and experiments).

    Parameters
    ----------
    counts : array_like of int, last axis of length ``len(BRANCH_NAMES)``
        Values of :func:`pbs_branch_counts`, e.g. ``idata.posterior["branches"]``
        (chains, draws, [E,] 5).

    Returns
    -------
    dict
        ``{branch name: fraction of all steps}`` for every name of
        :data:`BRANCH_NAMES` (they sum to 1; all zero if no step was counted),
        and ``"steps_per_solve"``: the mean number of solver steps of a solve
        that succeeded.
    """
    counts = np.asarray(counts)
    if counts.ndim == 0 or counts.shape[-1] != len(BRANCH_NAMES):
        raise ValueError(
            f"counts must have a last axis of length {len(BRANCH_NAMES)} (one per branch "
            f"{BRANCH_NAMES}); got shape {counts.shape}"
        )
    rows = counts.reshape(-1, len(BRANCH_NAMES))
    totals = rows.sum(axis=0)
    all_steps = int(totals.sum())
    summary = {
        name: (float(total) / all_steps if all_steps else 0.0)
        for name, total in zip(BRANCH_NAMES, totals)
    }
    solved = rows.sum(axis=1) > 0
    summary["steps_per_solve"] = float(rows[solved].sum(axis=1).mean()) if solved.any() else 0.0
    return summary
