"""The progress display of tempered SMC: one line per temperature stage of each run."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from pymc_odesens.inference.smc_run import StageRecord

__all__ = ["StageProgress", "SLOW_STAGE_SECONDS"]

SLOW_STAGE_SECONDS = 30.0
"""A stage that has taken this long shows a line after each of its moves."""


class StageProgress:
    """Prints each stage of each run as it ends (safe to call from the runs' threads).

    Parameters
    ----------
    runs : int
    draws : int
        Particles per run.
    enabled : bool
    stream : text stream, optional
        Default ``sys.stderr``.
    """

    def __init__(self, runs: int, draws: int, enabled: bool = True, stream: TextIO | None = None):
        self.runs = runs
        self.draws = draws
        self.enabled = enabled
        self.stream = stream
        self._lock = threading.Lock()

    def _print(self, text: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            print(text, file=self.stream or sys.stderr, flush=True)

    def stage(self, run: int, stage: int, record: StageRecord) -> None:
        """One line: run, stage, beta, ESS, acceptance, step size, leapfrog steps, moves,
        jumps (with jump moves), failures, time."""
        self._print(
            f"SMC run {run + 1}/{self.runs} stage {stage:3d}: beta {record.beta:.4g}  "
            f"ESS {record.ess:.0f}/{self.draws}{' (resampled)' if record.resampled else ''}  "
            f"acceptance {record.acceptance_rate:.2f}  step {record.step_size:.3g}  "
            f"leapfrog {record.n_leapfrog}  moves {record.moves}"
            f"{' (independent)' if record.independent else ''}  "
            + (
                f"jumps {record.jumped} (acceptance {record.jump_acceptance:.2f})  "
                if record.jump_moves
                else ""
            )
            + f"failed {record.failed_evaluations}  "
            f"{record.seconds:.1f} s"
        )

    def move(
        self, run: int, stage: int, moves: int, acceptance: float, failed: int, seconds: float
    ) -> None:
        """A line per move once the stage has taken :data:`SLOW_STAGE_SECONDS` (a stage of
        a hard model can take many minutes)."""
        if seconds < SLOW_STAGE_SECONDS:
            return
        self._print(
            f"SMC run {run + 1}/{self.runs} stage {stage:3d}: move {moves}  acceptance "
            f"{acceptance:.2f}  failed {failed}  {seconds:.1f} s"
        )

    def finished(self, run: int, log_evidence: float, stages: int, seconds: float) -> None:
        """The run's last line: its log evidence, stages and wall time."""
        self._print(
            f"SMC run {run + 1}/{self.runs} done: log evidence {log_evidence:.4f}, "
            f"{stages} stages, {seconds:.1f} s"
        )

    def resumed(self, run: int, stage: int, beta: float, seconds: float, moves: int = 0) -> None:
        """A run continued from its checkpoint (``moves``: of the stage after ``stage``)."""
        within = f", {moves} moves of stage {stage + 1} done" if moves else ""
        self._print(
            f"SMC run {run + 1}/{self.runs} continues from its checkpoint: stage {stage}, "
            f"beta {beta:.4g}{within}, {seconds:.1f} s so far"
        )

    def stopped(self, run: int, beta: float, stages: int, seconds: float, moves: int = 0) -> None:
        """A run stopped by the time limit (``moves``: of the stage after ``stages``)."""
        within = f" and {moves} moves of stage {stages + 1}" if moves else ""
        self._print(
            f"SMC run {run + 1}/{self.runs} stopped by the time limit at beta {beta:.4g}, "
            f"{stages} stages{within}, {seconds:.1f} s"
        )
