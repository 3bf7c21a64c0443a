"""Result of a sensitivity solve."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_odesens.solvers.controls import SolverControls
from pymc_odesens.solvers.summary import (
    names_summary,
    stats_summary,
    times_summary,
    tolerance_summary,
)

__all__ = ["SensitivityResult"]


@dataclass
class SensitivityResult:
    """States and sensitivities at the output times.

    Attributes
    ----------
    t : numpy.ndarray, shape (T,)
    y : numpy.ndarray, shape (T, N)
    S : numpy.ndarray
        ``wrt="params"`` or ``"both"``: shape (T, N, P), ``S[t, i, k] = dy_i(t)/dp_k``.
        ``wrt="y0"``: the state-transition matrix, shape (T, N, N),
        ``S[t, i, j] = dy_i(t)/dy0_j``.
    S_y0 : numpy.ndarray or None
        With ``wrt="both"``: the state-transition matrix (T, N, N).
    stats : dict
        Solver statistics (steps, rejected steps, rhs / Jacobian evaluations,
        LU factorisations, Newton iterations and failures).
    controls : SolverControls
    method, sensitivity, wrt : str
    states, params : list of str
    events : EventLog or None
        For systems with events: the events that happened (``.times``,
        ``.names``, ``.index``, ``.before``). Outputs at an event time hold the
        right limit.
    event_time_sensitivity : numpy.ndarray or None
        With events: ``d tau_k / d p`` of each event time, shape (K, P) (for
        ``wrt="y0"``: ``d tau_k / d y0``, (K, N)).
    event_time_sensitivity_y0 : numpy.ndarray or None
        With ``wrt="both"`` and events: ``d tau_k / d y0``, (K, N).
    pbs_steps : PbsStepReport or None
        With ``sensitivity="pbs"``, ``"pbsr"`` or ``"exp"``: the solver's
        accepted steps and the branch (PBS, refined PBS with its sub-step
        count, Exp) each one took.
    """

    t: np.ndarray
    y: np.ndarray
    S: np.ndarray
    S_y0: np.ndarray | None
    stats: dict
    controls: SolverControls
    method: str
    sensitivity: str
    wrt: str
    states: list
    params: list
    events: object = None
    event_time_sensitivity: np.ndarray | None = None
    event_time_sensitivity_y0: np.ndarray | None = None
    pbs_steps: object = None

    def __repr__(self) -> str:
        columns = {"params": "dy/dp", "y0": "dy/dy0", "both": "dy/dp"}[self.wrt]
        extra = f", S_y0={self.S_y0.shape} dy/dy0" if self.S_y0 is not None else ""
        events = "" if self.events is None else f", {len(self.events.times)} events"
        return (
            f"SensitivityResult({self.method}, {self.sensitivity}, t={times_summary(self.t)}, "
            f"y={self.y.shape} [{names_summary(self.states)}], S={self.S.shape} {columns}"
            f"{extra}, {tolerance_summary(self.controls)}, {stats_summary(self.stats)}{events})"
        )
