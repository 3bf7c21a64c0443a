"""What :func:`pymc_odesens.sample` tells while and after it samples: phases, times, failures.

``pm.sample`` compiles the log-density and its gradient, initialises the chains, then each
chain tunes and draws; its progress bar appears only once sampling has started, and solver
failures in the chains' worker processes used to be warned about and summarised by every
process. :class:`SamplingReport` follows one call instead:

- **phases**, one short line each on stderr: compiling and initialising (from the call),
  then, when the chains start, how long that took; when a chain has tuned, that it is now
  drawing (a long compile is announced on its own, with a heartbeat:
  :mod:`pymc_odesens.caching.compile_notice`);
- **times**: ``setup_time`` (from the call to the chains' first step: compiling the
  log-density and gradient, initialising) next to PyMC's ``sampling_time`` (tuning and
  draws) in ``idata.sample_stats.attrs``;
- **solver failures**: every draw carries the failures during its trajectory as the
  sampler statistic ``ode_failures`` (:func:`count_failures_per_draw`), which PyMC sends
  from the worker processes to the parent with its other statistics; the parent counts
  them by phase and prints one line at the end. Failures while initialising or tuning are
  expected (early proposals reach extreme parameters); those after tuning are not, and
  the first one in each process is also warned about in full where it happens.
  ``idata.sample_stats.attrs`` keeps the counts (``ode_failures_initialising``,
  ``ode_failures_tuning``, ``ode_failures_after_tuning``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pymc.sampling.mcmc as pymc_mcmc
from pymc.step_methods.compound import CompoundStep, flat_statname

from pymc_odesens.ops.failures import (
    count_draw_failures,
    draws_failure_total,
    failure_total,
    sampler_reports_failures,
)

__all__ = [
    "FAILURE_STAT",
    "SamplingReport",
    "count_failures_per_draw",
    "sampling_times",
    "times_line",
]

FAILURE_STAT = "ode_failures"
"""The sampler statistic with the number of solver failures during a draw's trajectory."""

_PREFIX = "pymc_odesens.sample: "


class _CountedStep:
    """``step.step`` of a step method, with the draw's solver failures in its statistics.

    Picklable with the step method (PyMC sends it to worker processes started by ``spawn``
    or ``forkserver``): it holds the step method and calls its class's ``step``.
    """

    def __init__(self, step) -> None:
        self.owner = step
        self.methods = step.methods if isinstance(step, CompoundStep) else [step]

    def __call__(self, point):
        owner = self.owner
        tuning = any(bool(getattr(method, "tune", False)) for method in self.methods)
        (point, stats), failures = count_draw_failures(
            lambda: type(owner).step(owner, point), tuning
        )
        stats[0][FAILURE_STAT] = failures
        return point, stats


def count_failures_per_draw(step) -> None:
    """Give ``step`` (a PyMC step method, compound or not) the statistic ``ode_failures``.

    Its first method declares the statistic (an int64 scalar per draw) and every draw
    fills it with the solver failures counted in the process during that draw; the step
    method's other statistics are unchanged. Idempotent.
    """
    if isinstance(step.__dict__.get("step"), _CountedStep):
        return
    first = step.methods[0] if isinstance(step, CompoundStep) else step
    # the dicts are the step method's own (PyMC copies them per instance); a compound
    # step shares its methods' dicts in stats_dtypes and keeps flat names of its own
    first.stats_dtypes[0][FAILURE_STAT] = np.int64
    first.stats_dtypes_shapes[FAILURE_STAT] = (np.int64, [])
    if isinstance(step, CompoundStep):
        step.stats_dtypes_shapes[flat_statname(0, FAILURE_STAT)] = (np.int64, [])
    step.step = _CountedStep(step)


class SamplingReport:
    """One ``pm.sample`` call's phases, times and solver failures (see the module).

    Parameters
    ----------
    tune : int
        Tuning steps per chain.
    quiet : bool
        No phase lines and no failure line (the counts are still kept).
    callback : callable, optional
        The caller's ``callback(trace, draw)``, called after the report's own bookkeeping.
    """

    def __init__(self, tune: int, quiet: bool = False, callback: Callable | None = None) -> None:
        self.tune = int(tune)
        self.quiet = quiet
        self.user_callback = callback
        self.started = time.perf_counter()
        self.sampling_started: float | None = None
        self.tuned_chains: set[int] = set()
        self.failures = {"tuning": 0, "after_tuning": 0}
        self.after_tuning_draws: list[tuple[int, int]] = []
        self._total_before = failure_total()
        self._in_draws_before = draws_failure_total()
        self.initialising_failures = 0

    def say(self, text: str) -> None:
        if not self.quiet:
            print(f"{_PREFIX}{text}", file=sys.stderr, flush=True)

    # ----------------------------------------------------------------------- phases

    def chains_start(self) -> None:
        """PyMC is about to start the chains (its step methods and traces exist)."""
        self.sampling_started = time.perf_counter()
        setup = self.sampling_started - self.started
        self.say(
            f"log-density compiled and chains initialised in {setup:.1f} s; "
            + (f"each chain tunes {self.tune} steps, then draws" if self.tune else "drawing")
        )

    def callback(self, trace, draw) -> None:
        """PyMC's ``callback(trace, draw)``: counts the draw's failures, notes phases."""
        stats = draw.stats[0] if draw.stats else {}
        failures = int(stats.get(FAILURE_STAT, 0) or 0)
        if draw.tuning:
            self.failures["tuning"] += failures
        else:
            self.failures["after_tuning"] += failures
            if failures:
                self.after_tuning_draws.append((draw.chain, draw.draw_idx - self.tune))
            if self.tune and draw.chain not in self.tuned_chains:
                self.tuned_chains.add(draw.chain)
                elapsed = time.perf_counter() - (self.sampling_started or self.started)
                self.say(f"chain {draw.chain} tuned ({elapsed:.0f} s into sampling), drawing")
        if self.user_callback is not None:
            self.user_callback(trace=trace, draw=draw)

    # ----------------------------------------------------------------------- the end

    def finish(self, idata) -> None:
        """The failure line, and the times and counts in ``idata.sample_stats.attrs``."""
        total = failure_total() - self._total_before
        in_draws = draws_failure_total() - self._in_draws_before
        self.initialising_failures = max(total - in_draws, 0)
        self._report_failures()
        attrs = getattr(getattr(idata, "sample_stats", None), "attrs", None)
        if attrs is None:
            return
        if self.sampling_started is not None:
            attrs["setup_time"] = self.sampling_started - self.started
        attrs["ode_failures_initialising"] = self.initialising_failures
        attrs["ode_failures_tuning"] = self.failures["tuning"]
        attrs["ode_failures_after_tuning"] = self.failures["after_tuning"]

    def _report_failures(self) -> None:
        expected = self.initialising_failures + self.failures["tuning"]
        after = self.failures["after_tuning"]
        if not expected and not after:
            return
        parts = []
        if self.failures["tuning"]:
            parts.append(f"{self.failures['tuning']} while tuning")
        if self.initialising_failures:
            parts.append(f"{self.initialising_failures} while initialising")
        if after:
            where = ", ".join(f"chain {c} draw {d}" for c, d in self.after_tuning_draws[:5])
            more = ", ..." if len(self.after_tuning_draws) > 5 else ""
            parts.append(f"{after} after tuning ({where}{more}: not expected, see the warning)")
        note = (
            " (expected while a sampler initialises and tunes: early proposals reach extreme "
            "parameters)"
            if expected and not after
            else ""
        )
        self.say(
            f"the ODE solve failed for {expected + after} proposals, "
            f"{', '.join(parts)}; each was rejected{note}"
        )


@contextmanager
def reporting(report: SamplingReport) -> Iterator[SamplingReport]:
    """While inside, ``pm.sample`` tells ``report`` when its chains start (after PyMC's
    ``init_traces``, the last step before sampling, which compiles the function that
    records the draws), its step methods count the failures of each draw, and this
    process's solver failures are the sampler's to report."""
    original = pymc_mcmc.init_traces

    def init_traces(*args, **kwargs):
        step = kwargs.get("step")
        if step is not None:  # before the traces read the step's statistics
            count_failures_per_draw(step)
        traces = original(*args, **kwargs)
        report.chains_start()
        return traces

    pymc_mcmc.init_traces = init_traces
    try:
        with sampler_reports_failures():
            yield report
    finally:
        pymc_mcmc.init_traces = original


def sampling_times(idata) -> tuple[float | None, float | None]:
    """``(setup, sampling)`` seconds of a sample of :func:`pymc_odesens.sample`.

    ``setup`` is the time from the call to the chains' first step (compiling the
    log-density and gradient, initialising the chains; nutpie: its compile), ``sampling``
    PyMC's ``sampling_time`` (tuning and draws); None where ``idata`` does not tell.
    """
    times = []
    for key in ("setup_time", "sampling_time"):
        value = None
        for group in ("sample_stats", "posterior"):
            attrs = getattr(getattr(idata, group, None), "attrs", None) or {}
            if key in attrs:
                value = float(attrs[key])
                break
        times.append(value)
    return times[0], times[1]


def times_line(idata, started: float) -> str:
    """``time: ...``: compiling and initialising, sampling, and the whole run.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`pymc_odesens.sample`.
    started : float
        ``time.perf_counter()`` when the run started (the whole run is measured from it).
    """
    setup, sampling = sampling_times(idata)
    parts = []
    if setup is not None:
        parts.append(f"compiling and initialising {setup:.1f} s")
    if sampling is not None:
        parts.append(f"sampling (tuning and draws) {sampling:.1f} s")
    parts.append(f"in all {time.perf_counter() - started:.1f} s since the run started")
    return "time: " + ", ".join(parts)
