"""Solver failures inside a log-density: counted, warned about once, summarised once.

A failed solve inside a PyMC model rejects the proposal (its log-density is
``-inf``, see :func:`pymc_odesens.ode_solution`). The first failure in a
process is announced with a warning naming the exception; later ones are
only counted, and the total is printed once when the process ends (also in
the worker processes of ``pm.sample(cores=...)``, whose ``atexit`` hooks do
not run: a multiprocessing finaliser covers them).

Failures of the solve itself are counted under the exception's class name
(``"MaxNumStepsError"``); failures while computing a gradient after a
successful solve under the class name and the phase (``"MaxNumStepsError in
the adjoint backward solve"``, ``"... in the adjoint re-integration"``, ``"... in the
discrete adjoint replay"``).
"""

from __future__ import annotations

import atexit
import multiprocessing.util
import os
import sys
import threading
import warnings
from collections import Counter

__all__ = [
    "OdeSolverFailureWarning",
    "record_failure",
    "failure_counts",
    "reset_failure_counts",
    "failure_summary",
]


class OdeSolverFailureWarning(UserWarning):
    """An ODE solve failed inside a model; the proposal was rejected."""


_EXPECTED = (
    "while a sampler tunes (early proposals reach extreme parameters, where the ODE is "
    "stiff or blows up); many failures after tuning, or divergences, point to a prior that "
    "allows such parameters or to too loose max_num_steps / tolerances"
)

_lock = threading.Lock()
_counts: Counter = Counter()
_first_messages: dict[str, str] = {}
_state = {"warned": False, "reported": False}


def failure_key(error: Exception, phase: str | None = None) -> str:
    """The name ``error`` is counted under: its class, and the gradient ``phase`` if any."""
    name = type(error).__name__
    return name if phase is None else f"{name} in the {phase}"


def record_failure(error: Exception, where: str, phase: str | None = None) -> None:
    """Count ``error`` (raised while solving ``where``); warn on the first one.

    ``phase`` names the gradient computation that failed after a successful solve
    (``"adjoint backward solve"``, ``"adjoint re-integration"``, ``"discrete adjoint
    replay"``); None for the solve itself.
    """
    name = failure_key(error, phase)
    with _lock:
        _counts[name] += 1
        _first_messages.setdefault(name, str(error))
        first = not _state["warned"]
        _state["warned"] = True
        _state["reported"] = False
    if first:
        warnings.warn(
            f"pymc_odesens: the ODE solver failed in {where} ({name}: {error}). The proposal "
            "is rejected (log-density -inf) and sampling goes on: this is expected and "
            f"harmless {_EXPECTED}. Further failures are counted and summarised once when the "
            "process ends (pymc_odesens.failure_counts() gives the counts now).",
            OdeSolverFailureWarning,
            stacklevel=2,
        )


def failure_counts() -> dict[str, int]:
    """Number of solver failures in this process, by exception class (and gradient phase).

    Keys are class names (``"NonFiniteRhsError"``) for failed solves and
    ``"<class> in the <phase>"`` for a gradient computation that failed after the solve
    (``"MaxNumStepsError in the adjoint backward solve"``); every one was a rejected
    proposal.
    """
    with _lock:
        return dict(_counts)


def reset_failure_counts() -> None:
    """Forget the failures counted so far (and warn again on the next one)."""
    with _lock:
        _counts.clear()
        _first_messages.clear()
        _state["warned"] = False
        _state["reported"] = False


def failure_summary() -> str:
    """One line per exception class: count and the first message; empty if none."""
    with _lock:
        lines = [
            f"{count} x {name} (first: {_first_messages[name]})"
            for name, count in sorted(_counts.items())
        ]
        total = sum(_counts.values())  # with the lines: another thread may be counting
    if not lines:
        return ""
    return (
        f"pymc_odesens: {total} ODE solver failure(s) rejected proposals in this process "
        f"(expected and harmless {_EXPECTED}):\n  " + "\n  ".join(lines)
    )


def _report_at_exit() -> None:
    with _lock:
        if _state["reported"] or not _counts:
            return
        _state["reported"] = True
    print(failure_summary(), file=sys.stderr, flush=True)


def _register_exit_report() -> None:
    multiprocessing.util.Finalize(None, _report_at_exit, exitpriority=10)


class _ForkHook:
    """Weak-referenceable anchor for :func:`multiprocessing.util.register_after_fork`."""


def _after_fork_in_child(_anchor: object = None) -> None:
    """A forked worker counts its own failures and reports them when it ends.

    ``multiprocessing`` clears the finaliser registry in a new process, so the
    report is registered again; the lock is replaced in case another thread
    held it at the fork.
    """
    global _lock
    _lock = threading.Lock()
    _counts.clear()
    _first_messages.clear()
    _state["warned"] = False
    _state["reported"] = False


_fork_anchor = _ForkHook()
atexit.register(_report_at_exit)
_register_exit_report()
os.register_at_fork(after_in_child=_after_fork_in_child)
multiprocessing.util.register_after_fork(_fork_anchor, lambda _a: _register_exit_report())
