"""The result of a multistart search: ranked optima, their clusters, the waterfall plot.

:class:`ModeSearchResult` is what :func:`~pymc_odesens.inference.find_modes` returns: one
:class:`StartResult` per start, ranked by log-posterior (best first, failed starts last);
clusters of starts that reached the same optimum (:class:`ModeCluster`); the waterfall plot
(:meth:`ModeSearchResult.plot_waterfall`, as in pyPESTO); and the way to the sampler: a
Laplace approximation at the best mode gives chain starts and a dense mass matrix
(:meth:`ModeSearchResult.laplace`, :mod:`pymc_odesens.inference.laplace_start`).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pymc_odesens.inference.mode_connection import connected_groups

__all__ = ["ModeCluster", "ModeSearchResult", "StartResult"]


@dataclass(frozen=True)
class StartResult:
    """One start of a multistart search and where its local maximisation ended.

    Attributes
    ----------
    index : int
        The start's index (its seed is the ``index``-th child of the search's seed).
    status : {"converged", "not converged", "failed"}
        ``"failed"``: the start raised (``message`` names the error; a solver failure at the
        start, for example) and has no optimum.
    message : str
        The optimiser's message, or the error.
    x : numpy.ndarray or None
        The optimisation vector at the end (:mod:`~pymc_odesens.inference.mode_objective`).
    start : numpy.ndarray or None
        The start drawn from the prior (optimisation vector).
    parameters : dict or None
        Each free variable's value on its own scale (PEtab: by parameter id, on its
        ``parameterScale``).
    log_posterior, log_likelihood : float
        At the end (``-inf`` for a failed start). The log-posterior is the log-likelihood
        plus the priors' log-densities on the variables' own scale (no log-Jacobian).
    gradient : numpy.ndarray or None
        The log-posterior's gradient at the end.
    iterations, evaluations : int
    time : float
        Wall-clock seconds of the start in its worker (with the worker's first compile for
        its first start).
    """

    index: int
    status: str
    message: str
    x: np.ndarray | None
    start: np.ndarray | None
    parameters: dict | None
    log_posterior: float
    log_likelihood: float
    gradient: np.ndarray | None
    iterations: int
    evaluations: int
    time: float

    @property
    def failed(self) -> bool:
        return self.status == "failed"


@dataclass(frozen=True)
class ModeCluster:
    """Starts that reached one optimum (within the search's tolerances).

    Attributes
    ----------
    members : tuple of int
        The start indices, best first.
    best : StartResult
        The best of them.
    """

    members: tuple
    best: StartResult

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def log_posterior(self) -> float:
        return self.best.log_posterior

    @property
    def log_likelihood(self) -> float:
        return self.best.log_likelihood

    @property
    def parameters(self) -> dict:
        return self.best.parameters


def _rank_key(result: StartResult):
    value = result.log_posterior if not result.failed else -math.inf
    return (result.failed, -value if math.isfinite(value) else math.inf, result.index)


def cluster_starts(
    ranked: list[StartResult], objective_tolerance: float, parameter_tolerance: float
) -> list[ModeCluster]:
    """Group ranked starts: each joins the first cluster whose best start is within
    ``objective_tolerance`` in log-posterior and ``parameter_tolerance`` in every
    coordinate, else starts a new one (failed starts belong to none)."""
    clusters: list[list[StartResult]] = []
    for result in ranked:
        if result.failed:
            continue
        for members in clusters:
            head = members[0]
            if abs(head.log_posterior - result.log_posterior) <= objective_tolerance and (
                np.max(np.abs(head.x - result.x), initial=0.0) <= parameter_tolerance
            ):
                members.append(result)
                break
        else:
            clusters.append([result])
    return [ModeCluster(tuple(r.index for r in m), m[0]) for m in clusters]


class ModeSearchResult:
    """What :func:`~pymc_odesens.inference.find_modes` found.

    Attributes
    ----------
    starts : tuple of StartResult
        Ranked: highest log-posterior first, failed starts last (by index).
    clusters : tuple of ModeCluster
        Ranked by their best start.
    method : str
    wall_time : float
        Seconds of the whole search (with the compiles).
    workers : int
        The worker processes the starts ran in (1: this process; 0: an ``executor``).
    """

    def __init__(
        self,
        results: list[StartResult],
        objective,
        *,
        method: str,
        objective_tolerance: float,
        parameter_tolerance: float,
        wall_time: float,
        workers: int = 1,
    ) -> None:
        self.workers = workers
        self.starts = tuple(sorted(results, key=_rank_key))
        self.objective = objective
        self.method = method
        self.objective_tolerance = objective_tolerance
        self.parameter_tolerance = parameter_tolerance
        self.wall_time = wall_time
        self.clusters = tuple(
            cluster_starts(list(self.starts), objective_tolerance, parameter_tolerance)
        )

    @property
    def model(self):
        """The PyMC model (of this process) the search ran on."""
        return self.objective.model

    @property
    def failed(self) -> tuple[StartResult, ...]:
        return tuple(r for r in self.starts if r.failed)

    @property
    def best(self) -> StartResult:
        """The start with the highest log-posterior.

        Raises
        ------
        ValueError
            Every start failed (the message gives the first error).
        """
        if not self.starts or self.starts[0].failed:
            first = self.starts[0].message if self.starts else "no starts"
            raise ValueError(
                f"find_modes: all {len(self.starts)} starts failed (start "
                f"{self.starts[0].index if self.starts else '-'}: {first})"
            )
        return self.starts[0]

    def to_dataframe(self) -> pd.DataFrame:
        """One row per start, ranked: status, log-posterior, log-likelihood, iterations,
        evaluations, time, cluster (its rank; -1 for failed), message and each parameter."""
        cluster_of = {i: k for k, c in enumerate(self.clusters) for i in c.members}
        rows = []
        for r in self.starts:
            row = {
                "start": r.index,
                "status": r.status,
                "log_posterior": r.log_posterior,
                "log_likelihood": r.log_likelihood,
                "iterations": r.iterations,
                "evaluations": r.evaluations,
                "time": r.time,
                "cluster": cluster_of.get(r.index, -1),
                "message": r.message,
            }
            for name, value in (r.parameters or {}).items():
                row[name] = value
            rows.append(row)
        return pd.DataFrame(rows).set_index("start")

    def plot_waterfall(self, ax=None, path=None):
        """The waterfall plot: each start's final objective, sorted, against its rank.

        pyPESTO's plot: the objective is minus the log-posterior; the y axis shows its
        difference to the best start's on a log scale (starts at the best optimum, within
        ``objective_tolerance``, are drawn on the axis' floor), coloured by cluster; failed
        starts are counted in the title.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Default: a new figure.
        path : str or path-like, optional
            Also write the figure there.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from pymc_odesens.inference.waterfall import plot_waterfall

        return plot_waterfall(self, ax=ax, path=path)

    def join_connected(self, barrier: float = 1.0, points: int = 9) -> ModeSearchResult:
        """This result with the clusters that no valley separates joined (the hill-valley
        test, :mod:`~pymc_odesens.inference.mode_connection`).

        Two clusters are one mode when the log-posterior stays above the lower optimum's
        minus ``barrier`` at ``points`` interior points of the segment between their best
        starts: optima that a multistart left apart on one ridge become one cluster.

        Parameters
        ----------
        barrier : float
            Log-units (1): a valley shallower than this does not separate modes for a
            sampler either.
        points : int
            Interior points evaluated per segment tested (9; the midpoint first).

        Returns
        -------
        ModeSearchResult
            The same starts; ``clusters`` joined (at most ``C (C - 1) / 2 * points``
            log-posterior evaluations without gradient for ``C`` clusters).

        Raises
        ------
        ValueError
            ``barrier`` is not positive or ``points`` not a positive integer (named).
        """
        optima = [(c.best.x, c.best.log_posterior) for c in self.clusters]
        groups = connected_groups(optima, self.objective.log_posterior, barrier, points)
        joined = copy.copy(self)
        joined.clusters = tuple(
            ModeCluster(
                tuple(i for k in group for i in self.clusters[k].members),
                self.clusters[group[0]].best,
            )
            for group in groups
        )
        return joined

    def laplace(self, hessian: str = "fisher", cluster: int = 0, fd_step: float = 1e-3):
        """The Laplace approximation of the posterior, in the sampler's coordinates, at the
        sampler's mode next to the best start of ``cluster``
        (:func:`pymc_odesens.inference.laplace_start.laplace_approximation`): chain starts
        and mass matrices for ``pm.sample``, :func:`pymc_odesens.sample` and nutpie."""
        from pymc_odesens.inference.laplace_start import laplace_approximation

        if not 0 <= cluster < len(self.clusters):
            raise ValueError(f"cluster: expected 0 to {len(self.clusters) - 1}, got {cluster!r}")
        best = self.clusters[cluster].best
        return laplace_approximation(
            self.model, self.objective.sampler_point(best.x), hessian=hessian, fd_step=fd_step
        )

    def __repr__(self) -> str:
        ok = [r for r in self.starts if not r.failed]
        best = f"best log-posterior {ok[0].log_posterior:.6g}" if ok else "no optimum"
        return (
            f"ModeSearchResult({len(self.starts)} starts, {len(self.failed)} failed, "
            f"{len(self.clusters)} clusters, {best}, method {self.method!r})"
        )
