"""Which branch each solver step took in a PBS / PBSR / Exp march."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PbsStepReport", "BRANCH_NAMES"]

BRANCH_PBS = 0  # one PBS step (or max_step sub-steps)
BRANCH_PBS_REFINED = 1  # PBSR: n_int > 1 PBS sub-steps
BRANCH_EXP_STEADY = 2  # PBSR: Jacobians near constant -> Exp step
BRANCH_EXP_SUBSTEP_LIMIT = 3  # PBSR: n_int > n_max -> Exp step
BRANCH_EXP = 4  # Exp algorithm
BRANCH_NAMES = ("pbs", "pbs_refined", "exp_steady", "exp_substep_limit", "exp")
"""Names of the branches, indexed by the codes above."""


@dataclass(frozen=True)
class PbsStepReport:
    """The solver steps of a PBS-family march and the branch each one took.

    Attributes
    ----------
    t : numpy.ndarray, shape (K+1,)
        The solver's accepted steps ``t_0 < ... < t_K`` (the recorded trajectory).
    y : numpy.ndarray, shape (K+1, N)
        The states the solver recorded there (``J_y``, ``J_p`` are evaluated at them).
    branch : numpy.ndarray of int, shape (K,)
        Branch of step ``[t_k, t_k+1]``, an index into :data:`BRANCH_NAMES`:
        0 ``"pbs"`` (PBS step: Algorithm 1, or PBSR with ``n_int = 1``),
        1 ``"pbs_refined"`` (PBSR: ``n_int > 1`` PBS sub-steps), 2 ``"exp_steady"``
        (PBSR: Jacobians near constant), 3 ``"exp_substep_limit"`` (PBSR:
        ``n_int > n_max``), 4 ``"exp"`` (Exp algorithm).
    substeps : numpy.ndarray of int, shape (K,)
        Sub-steps of each solver step (``n_int`` for refined PBS steps; more
        than 1 elsewhere only with ``max_step``).
    algorithm : str
        ``"pbs"``, ``"pbsr"`` or ``"exp"``.
    interpolation : str
        How states inside a step were obtained (in words).
    """

    t: np.ndarray
    y: np.ndarray
    branch: np.ndarray
    substeps: np.ndarray
    algorithm: str
    interpolation: str

    @property
    def names(self) -> list[str]:
        """Branch name of every solver step."""
        return [BRANCH_NAMES[b] for b in self.branch]

    def counts(self) -> dict[str, int]:
        """Number of solver steps per branch (every branch name, zeros included)."""
        found = np.bincount(self.branch, minlength=len(BRANCH_NAMES))
        return {name: int(found[i]) for i, name in enumerate(BRANCH_NAMES)}

    @property
    def exp_mask(self) -> np.ndarray:
        """True for the steps that took an Exp step."""
        return self.branch >= 2

    def __len__(self) -> int:
        return int(self.branch.size)
