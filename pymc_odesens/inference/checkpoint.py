"""Writing a trace while it is sampled, so that a long run stopped from outside keeps its draws.

A run of hours (Bachmann_MSB2011 in docs/petab.md: about 6 s per iteration) that is stopped
before :func:`pymc.sample` returns loses every draw: PyMC builds the result only at the end.
:class:`TraceCheckpoint` is a ``pm.sample`` callback that writes the draws after tuning that
every chain has, every ``every`` of them, to a NetCDF file (written beside it and then
renamed, so the file is always a whole trace), which :func:`~pymc_odesens.resume_pooled_metric`
can continue.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import arviz as az
import pymc as pm
from pymc.backends.base import MultiTrace

from pymc_odesens.caching.disk_cache import write_atomically

__all__ = ["TraceCheckpoint", "checked_every", "write_trace"]


def write_trace(idata: az.InferenceData, path: str | os.PathLike) -> None:
    """Write ``idata`` to the NetCDF file ``path`` through a file beside it, renamed when
    whole (:func:`~pymc_odesens.caching.disk_cache.write_atomically`): a process stopped
    while writing leaves ``path`` as it was."""
    write_atomically(Path(path), lambda partial: idata.to_netcdf(str(partial)))


def checked_every(every: int, name: str = "every") -> int:
    """``every`` as an int, or a ValueError naming ``name`` unless it is a positive count."""
    if isinstance(every, bool) or int(every) != every or every < 1:
        raise ValueError(f"{name}: expected a positive number of draws, got {every!r}")
    return int(every)


class TraceCheckpoint:
    """A :func:`pymc.sample` callback that writes the draws so far every ``every`` draws.

    Parameters
    ----------
    path : str or os.PathLike
        The NetCDF file written (replaced at every checkpoint).
    every : int
        Draws after tuning per chain between two writes (positive).
    tune : int
        The run's tuning steps per chain (not written).
    chains : int
        The run's number of chains: a checkpoint holds the draws that all of them have.
    model : pymc.Model, optional
        Default: the model in context.
    join : callable, optional
        Applied to the draws so far (an ``arviz.InferenceData``) before writing, e.g. to put
        the draws of an earlier run in front of them.
    then : callable, optional
        Another callback (``then(trace=..., draw=...)``), called after this one.

    Notes
    -----
    Chains sampled one after another (``cores=1``) are written only once the last chain
    has ``every`` draws. The written ``sample_stats`` has the attribute
    ``checkpoint_draws``: the draws per chain of the run so far.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        every: int,
        *,
        tune: int,
        chains: int,
        model: pm.Model | None = None,
        join: Callable[[az.InferenceData], az.InferenceData] | None = None,
        then: Callable | None = None,
    ):
        if tune < 0:
            raise ValueError(f"tune: expected a count of at least 0, got {tune!r}")
        if chains < 1:
            raise ValueError(f"chains: expected at least 1, got {chains!r}")
        self.path = Path(path)
        self.every = checked_every(every)
        self.tune = int(tune)
        self.chains = int(chains)
        self.model = pm.modelcontext(model)
        self.join = join
        self.then = then
        self.written = 0
        self._traces: dict[int, object] = {}

    def __call__(self, trace, draw) -> None:
        self._traces[draw.chain] = trace
        if not draw.tuning and len(self._traces) == self.chains:
            done = min(len(t) for t in self._traces.values()) - self.tune
            if done >= self.written + self.every:
                self.write(done)
        if self.then is not None:
            self.then(trace=trace, draw=draw)

    def write(self, draws: int) -> None:
        """Write the first ``draws`` draws after tuning of every chain."""
        chains = [self._traces[c][self.tune : self.tune + draws] for c in sorted(self._traces)]
        idata = pm.to_inference_data(MultiTrace(chains), model=self.model, log_likelihood=False)
        idata.sample_stats.attrs["checkpoint_draws"] = draws
        if self.join is not None:
            idata = self.join(idata)
        write_trace(idata, self.path)
        self.written = draws
