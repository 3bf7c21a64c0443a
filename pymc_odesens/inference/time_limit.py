"""Stopping a sampling run at a wall-clock limit, keeping its draws.

A run of hours is easier to fit into a session by its time than by its number of draws
(Bachmann_MSB2011's chains in docs/petab.md take 6 to 7 s per iteration, and the slower
chain sets the pace). :class:`TimeLimit` is a ``pm.sample`` callback that, once the limit
has passed, raises ``KeyboardInterrupt`` in the callback, the way PyMC documents for
interrupting a run: ``pm.sample`` then returns the draws so far, as after Ctrl-C (where
chains have different lengths, it keeps the chains and the length that give the most
draws).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["TimeLimit"]


class TimeLimit:
    """A :func:`pymc.sample` callback that stops sampling ``seconds`` after it was made.

    Parameters
    ----------
    seconds : float
        Wall-clock seconds from the callback's construction (positive).
    then : callable, optional
        Another callback (``then(trace=..., draw=...)``), called first for every draw.

    Notes
    -----
    The run is not stopped during tuning: stopped there it would have no draws. The limit
    thus bounds the sampling after tuning, not the tuning itself. ``stopped`` tells whether
    the limit ended the run. PyMC ends only the current chain on an interrupt when chains
    run one after another (``cores=1``); every later chain is therefore stopped at its
    first step, and PyMC leaves it out of the result (it has no draws).
    """

    def __init__(self, seconds: float, *, then: Callable | None = None):
        if not seconds > 0:
            raise ValueError(f"seconds: expected a positive number of seconds, got {seconds!r}")
        self.seconds = float(seconds)
        self.then = then
        self.started = time.monotonic()
        self.stopped = False

    def __call__(self, trace, draw) -> None:
        if self.then is not None:
            self.then(trace=trace, draw=draw)
        if self.stopped or (not draw.tuning and time.monotonic() - self.started > self.seconds):
            # once stopped, a chain that starts later (cores=1) stops at its first step
            self.stopped = True
            raise KeyboardInterrupt(f"the time limit of {self.seconds:.0f} s has passed")
