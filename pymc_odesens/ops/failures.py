"""Solver failures inside a log-density: counted, warned about once, summarised once.

A failed solve inside a PyMC model rejects the proposal (its log-density is
``-inf``, see :func:`pymc_odesens.ode_solution`). The first failure in a
process is announced with a warning naming the exception; later ones are
only counted, and the total is printed once when the process ends (also in
the worker processes of ``pm.sample(cores=...)``, whose ``atexit`` hooks do
not run: a multiprocessing finaliser covers them).

Under :func:`pymc_odesens.sample` the sampler reports instead
(:func:`sampler_reports_failures`, :func:`count_draw_failures`): every draw carries the
failures of its trajectory as the sampler statistic ``ode_failures``, which PyMC sends from
the chains' worker processes to the parent like its other statistics; the parent prints
one line with the counts when sampling ends. Failures while the sampler initialises or
tunes are expected and print nothing else; the first failure after tuning in a process is
announced in full, since those are not expected. Such failures are left out of the
summary at the process's end (the sampler has reported them).

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
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "OdeSolverFailureWarning",
    "record_failure",
    "failure_counts",
    "reset_failure_counts",
    "failure_summary",
    "failure_total",
    "sampler_reports_failures",
    "count_draw_failures",
    "draws_failure_total",
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
_unreported: Counter = Counter()  # what the summary at the process's end still has to say
_first_messages: dict[str, str] = {}
_state = {
    "warned": False,
    "reported": False,
    "sampler": 0,  # depth of sampler_reports_failures and count_draw_failures
    "tuning": True,  # the sampler initialises or tunes: failures are expected
    "warned_after_tuning": False,
    "in_draws": 0,  # failures counted in draws' statistics in this process
}


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
        if _state["sampler"]:
            # the sampler reports the count; only the first one after tuning in full
            first_after_tuning = not _state["tuning"] and not _state["warned_after_tuning"]
            if first_after_tuning:
                _state["warned_after_tuning"] = True
            first = False
        else:
            _unreported[name] += 1
            first = not _state["warned"]
            _state["warned"] = True
            _state["reported"] = False
            first_after_tuning = False
    if first_after_tuning:
        warnings.warn(
            f"pymc_odesens: the ODE solver failed in {where} after tuning ({name}: {error}). "
            "The proposal is rejected (log-density -inf). Failures after tuning are not "
            "expected: many of them, or divergences, point to a prior that allows "
            "parameters where the ODE is stiff or blows up, or to too loose max_num_steps / "
            "tolerances. pymc_odesens.sample reports their count when sampling ends.",
            OdeSolverFailureWarning,
            stacklevel=2,
        )
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


def failure_total() -> int:
    """Number of solver failures in this process (all classes and phases)."""
    with _lock:
        return sum(_counts.values())


def reset_failure_counts() -> None:
    """Forget the failures counted so far (and warn again on the next one)."""
    with _lock:
        _counts.clear()
        _unreported.clear()
        _first_messages.clear()
        _state["warned"] = False
        _state["reported"] = False
        _state["warned_after_tuning"] = False
        _state["in_draws"] = 0


@contextmanager
def sampler_reports_failures() -> Iterator[None]:
    """While inside, the sampler reports this process's failures: no warning while it
    initialises or tunes, one in full for the first failure after tuning, none in the
    summary at the process's end.

    :func:`pymc_odesens.sample` runs ``pm.sample`` inside; in the chains' worker processes
    every draw runs in the same mode (:func:`count_draw_failures`).
    """
    with _lock:
        _state["sampler"] += 1
        tuning = _state["tuning"]
        _state["tuning"] = True
    try:
        yield
    finally:
        with _lock:
            _state["sampler"] -= 1
            _state["tuning"] = tuning


def count_draw_failures(draw, tuning: bool) -> tuple[object, int]:
    """``draw()`` (one draw of a sampler), and the number of failures during it.

    During the draw the process is in the sampler's mode (:func:`sampler_reports_failures`),
    with ``tuning`` telling whether failures are expected now; its failures are the
    sampler's to report (in the draw's statistics).
    """
    with _lock:
        saved = (_state["sampler"], _state["tuning"])
        _state["sampler"] += 1
        _state["tuning"] = tuning
        before = sum(_counts.values())
    try:
        result = draw()
    finally:
        with _lock:
            failures = sum(_counts.values()) - before
            _state["in_draws"] += failures
            _state["sampler"], _state["tuning"] = saved
    return result, failures


def draws_failure_total() -> int:
    """Failures of this process counted in draws' statistics (:func:`count_draw_failures`)."""
    with _lock:
        return _state["in_draws"]


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
    """The summary of the failures nobody has reported (a sampler reports its own)."""
    with _lock:
        if _state["reported"] or not +_unreported:
            return
        _state["reported"] = True
        lines = [
            f"{count} x {name} (first: {_first_messages[name]})"
            for name, count in sorted(_unreported.items())
            if count
        ]
        total = sum(_unreported.values())
    print(
        f"pymc_odesens: {total} ODE solver failure(s) rejected proposals in this process "
        f"(expected and harmless {_EXPECTED}):\n  " + "\n  ".join(lines),
        file=sys.stderr,
        flush=True,
    )


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
    _unreported.clear()
    _first_messages.clear()
    _state["warned"] = False
    _state["reported"] = False
    _state["warned_after_tuning"] = False
    _state["in_draws"] = 0


_fork_anchor = _ForkHook()
atexit.register(_report_at_exit)
_register_exit_report()
os.register_at_fork(after_in_child=_after_fork_in_child)
multiprocessing.util.register_after_fork(_fork_anchor, lambda _a: _register_exit_report())
