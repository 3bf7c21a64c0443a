"""Multistart mode finding: local maximisations of the log-posterior from prior draws.

:func:`find_modes` draws ``n_starts`` starting points from the model's prior, maximises
the log-posterior from each (:mod:`pymc_odesens.inference.local_optimisers`) in parallel
worker processes, and ranks the optima (:class:`~pymc_odesens.inference.mode_search.
ModeSearchResult`).

The work unit (:class:`StartTask`) carries what a worker needs: the model factory
(:mod:`pymc_odesens.inference.model_source`), the start's index and seed, the method and
its options. A worker builds the model and compiles its log-posterior once per process
(kept in a per-process cache keyed by the factory's digest), draws its start from the
prior with its own seed, and returns a :class:`~pymc_odesens.inference.mode_search.
StartResult`; any exception in a start (a failed solve at the start, an optimiser error) is
reported in the result, and the other starts go on. Start ``i``'s seed is the ``i``-th of
``np.random.SeedSequence(random_seed).spawn(n_starts)``, so the result does not depend on
the number of workers or on the order in which they finish.
"""

from __future__ import annotations

import math
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pymc_odesens.inference.executor_choice import check_executor, work_executor
from pymc_odesens.inference.local_optimisers import LOCAL_METHODS, maximise_from
from pymc_odesens.inference.mode_objective import ModeObjective
from pymc_odesens.inference.mode_search import ModeSearchResult, StartResult
from pymc_odesens.inference.model_source import factory_key, model_source
from pymc_odesens.inference.smmala_metric import likelihood_terms

__all__ = ["StartTask", "find_modes", "run_start"]


@dataclass(frozen=True)
class StartTask:
    """One start of a multistart search: everything a worker needs, and nothing compiled.

    Attributes
    ----------
    factory : callable
        Picklable; returns the ``pymc.Model``.
    key : str
        The factory's digest (the worker's cache key for the compiled objective).
    index : int
        The start's index (0 to ``n_starts - 1``; given starts after them).
    seed : numpy.random.SeedSequence
        The start's seed (its draw from the prior).
    method : str
    max_iterations : int
    gradient_tolerance : float
    compile_kwargs : tuple of (str, value)
    x0 : numpy.ndarray, optional
        A given start (optimisation coordinates) instead of a draw from the prior.
    time_limit : float, optional
        Seconds of the local optimisation (after the worker's compile).
    """

    factory: Callable
    key: str
    index: int
    seed: np.random.SeedSequence
    method: str
    max_iterations: int
    gradient_tolerance: float
    compile_kwargs: tuple = field(default=())
    x0: np.ndarray | None = None
    time_limit: float | None = None


# per process: compiled objectives by (factory digest, compile_kwargs), shared by the
# threads of a thread-pool executor (each calls its own copy of the compiled functions)
_OBJECTIVES: dict[tuple, ModeObjective] = {}
_OBJECTIVES_LOCK = threading.Lock()


def _objective(task: StartTask) -> ModeObjective:
    key = (task.key, task.compile_kwargs)
    with _OBJECTIVES_LOCK:
        objective = _OBJECTIVES.get(key)
        if objective is None:
            objective = ModeObjective(task.factory(), dict(task.compile_kwargs))
            _OBJECTIVES[key] = objective
    return objective


def _start_of(objective: ModeObjective, task: StartTask) -> np.ndarray:
    """The task's start: given, or drawn from the prior with its seed."""
    return objective.draw_start(task.seed) if task.x0 is None else np.array(task.x0)


def run_start(task: StartTask) -> StartResult:
    """Run one start (in a worker): draw it from the prior, maximise, evaluate the end.

    Never raises for a failing start: the exception's type and message are the result's
    ``message`` with ``status="failed"``.
    """
    began = time.perf_counter()
    x0 = None
    try:
        objective = _objective(task)
        x0 = _start_of(objective, task)
        run = maximise_from(
            objective,
            x0,
            task.method,
            task.max_iterations,
            task.gradient_tolerance,
            time_limit=task.time_limit,
        )
        log_posterior, gradient, log_likelihood = objective.evaluate(run.x)
        if not math.isfinite(log_posterior):
            raise ValueError("the log-posterior is not finite where the optimiser ended")
        return StartResult(
            index=task.index,
            status="converged" if run.converged else "not converged",
            message=run.message,
            x=run.x,
            start=x0,
            parameters=objective.parameters(run.x),
            log_posterior=log_posterior,
            log_likelihood=log_likelihood,
            gradient=gradient,
            iterations=run.iterations,
            evaluations=run.evaluations,
            time=time.perf_counter() - began,
        )
    except Exception as error:  # a failing start is a result, not a crash of the search
        last = traceback.extract_tb(error.__traceback__)[-1:]
        where = f" ({last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
        return StartResult(
            index=task.index,
            status="failed",
            message=f"{type(error).__name__}: {error}{where}",
            x=None,
            start=x0,
            parameters=None,
            log_posterior=-math.inf,
            log_likelihood=-math.inf,
            gradient=None,
            iterations=0,
            evaluations=0,
            time=time.perf_counter() - began,
        )


FISHER_SIZE_LIMIT = 50
"""Above this many optimisation coordinates, ``method="auto"`` takes L-BFGS-B: the Fisher
information's graph (forward sensitivities of every condition wrt every parameter) then
takes too long to compile in every worker. Measured on Bachmann_MSB2011 (113 parameters, 36
conditions): each worker was still compiling it after 15 minutes of CPU, while Fujita's (19
parameters, 6 conditions) takes 14-17 s with its first evaluation."""


def _fisher_known(model) -> bool:
    """Whether the Fisher information of every observed variable is known."""
    try:
        likelihood_terms(model)
    except ValueError:
        return False
    return bool(model.observed_RVs)


def find_modes(
    problem_or_model,
    n_starts: int,
    random_seed: int | None = None,
    *,
    method: str = "auto",
    n_workers: int | None = None,
    executor=None,
    max_iterations: int = 2000,
    gradient_tolerance: float = 1e-6,
    objective_tolerance: float = 1e-3,
    parameter_tolerance: float = 1e-2,
    compile_kwargs: Mapping | None = None,
    initial_points: Sequence[Mapping] | None = None,
    start_time_limit: float | None = None,
) -> ModeSearchResult:
    """Multistart maximisation of the log-posterior from draws of the prior.

    Parameters
    ----------
    problem_or_model : PetabProblem, pymc.Model or callable
        The posterior: a PEtab problem (read by ``PetabProblem.from_yaml``), a PyMC model,
        or a picklable callable without arguments that returns one
        (:mod:`pymc_odesens.inference.model_source`).
    n_starts : int
        Number of starts, each drawn from the prior (for a PEtab problem: the parameter
        table's priors, uniform on each parameter's scale within its bounds where none is
        given). 0 is allowed when ``initial_points`` are given.
    random_seed : int, optional
        Start ``i`` uses the ``i``-th child of ``np.random.SeedSequence(random_seed)``.
    method : {"auto", "trust-region-fisher", "L-BFGS-B"}
        The local optimiser (:mod:`pymc_odesens.inference.local_optimisers`).
        ``"trust-region-fisher"`` needs observed Normal or LogNormal variables (PEtab's
        normal noise); ``"auto"`` takes it when every observed variable is one of them
        and there are at most :data:`FISHER_SIZE_LIMIT` coordinates, else ``"L-BFGS-B"``.
    n_workers : int, optional
        Local worker processes when ``executor`` is None; 1 runs the starts in this
        process. Default: the objective is compiled here and the first start runs here;
        the others run in as many worker processes as the machine has CPUs (at most one
        per start) only when that is expected to be faster from the first start's time,
        counting :data:`WORKER_START_SECONDS` for starting the workers (each imports PyMC,
        builds the model and compiles it); on a model whose starts take a second or two
        (Boehm_JProteomeRes2014) all run here.
    executor : None, concurrent.futures.Executor or dask.distributed.Client
        Where the starts run (:func:`~pymc_odesens.inference.executors.work_executor`):
        ``None``, local processes; any executor (a thread or process pool); a Dask client,
        the workers of its cluster. Each start is one work unit (the model's factory and
        the start's seed, never compiled code); the result is the same, bit for bit, for
        every executor. A worker lost during a start: the start runs again elsewhere.
    max_iterations : int
        Per start (2000).
    gradient_tolerance : float
        Convergence: the largest component of the projected gradient (1e-6).
    objective_tolerance, parameter_tolerance : float
        Two optima belong to one cluster when their log-posteriors differ by at most
        ``objective_tolerance`` and their optimisation vectors by at most
        ``parameter_tolerance`` in every component.
    compile_kwargs : dict, optional
        PyTensor's compile arguments of the log-posterior (default: PyTensor's default mode).
    initial_points : sequence of dict, optional
        Starts given by the user (pyPESTO's ``x_guesses``), in addition to the ``n_starts``
        drawn ones: each a dict of free variables' values on their own scale by name (for a
        PEtab problem, parameter ids on their ``parameterScale``; a variable left out takes
        the model's initial value, a PEtab parameter's nominal value). They are starts
        ``n_starts``, ``n_starts + 1``, ... of the result.
    start_time_limit : float, optional
        Seconds per start: a local optimisation still running then ends at the best point it
        evaluated, ``status="not converged"`` and a message that says so (starts drawn
        where the ODE is stiff can take minutes each). The worker's compile does not count;
        the evaluation in progress is not interrupted. Default: no limit. The result then
        depends on the machine's speed.

    Returns
    -------
    ModeSearchResult
        The starts ranked by log-posterior (best first; failed starts last), their clusters,
        the waterfall plot, and chain starts and mass matrices for sampling.

    Raises
    ------
    ValueError
        Invalid ``n_starts``, ``method``, ``n_workers``, tolerances or ``initial_points``
        (named); a model with discrete free variables.
    TypeError
        ``problem_or_model`` or ``executor`` of the wrong type.
    WorkerLostError, ClusterUnavailableError
        The workers kept dying, or the cluster is gone
        (:mod:`pymc_odesens.inference.executors`).
    """
    given = list(initial_points or ())
    if not all(isinstance(point, Mapping) for point in given):
        raise ValueError(
            f"initial_points: expected a sequence of dicts of values by name, got "
            f"{initial_points!r}"
        )
    least = 0 if given else 1
    if isinstance(n_starts, bool) or not isinstance(n_starts, int | np.integer) or n_starts < least:
        raise ValueError(
            f"n_starts: expected an integer >= {least}"
            + (" (0 only with initial_points)" if not given else "")
            + f", got {n_starts!r}"
        )
    if method != "auto" and method not in LOCAL_METHODS:
        raise ValueError(f"method: expected 'auto' or one of {LOCAL_METHODS}, got {method!r}")
    check_executor(executor)
    choose_workers = n_workers is None
    if n_workers is None:
        n_workers = min(n_starts + len(given), os.cpu_count() or 1)
    if not isinstance(n_workers, int | np.integer) or n_workers < 1:
        raise ValueError(f"n_workers: expected a positive integer, got {n_workers!r}")
    if start_time_limit is not None and not (
        isinstance(start_time_limit, int | float)
        and not isinstance(start_time_limit, bool)
        and start_time_limit > 0
    ):
        raise ValueError(
            f"start_time_limit: expected a positive number of seconds, got {start_time_limit!r}"
        )
    for name, value in (
        ("gradient_tolerance", gradient_tolerance),
        ("objective_tolerance", objective_tolerance),
        ("parameter_tolerance", parameter_tolerance),
    ):
        if not (isinstance(value, int | float) and value > 0 and math.isfinite(value)):
            raise ValueError(f"{name}: expected a positive finite number, got {value!r}")
    began = time.perf_counter()
    model, factory = model_source(problem_or_model)
    compile_items = tuple(sorted((compile_kwargs or {}).items()))
    key = factory_key(factory)
    objective = ModeObjective(model, dict(compile_items))
    # the factory builds this same model: its starts in this process use this objective
    # (as a worker would its own: the same graph, the same bits) instead of compiling again
    with _OBJECTIVES_LOCK:
        _OBJECTIVES.setdefault((key, compile_items), objective)
    if method == "auto":
        small = objective.size <= FISHER_SIZE_LIMIT
        method = "trust-region-fisher" if small and _fisher_known(model) else "L-BFGS-B"
    elif method == "trust-region-fisher":
        # an unsupported likelihood is an error of the call, not n_starts failed starts
        likelihood_terms(model)
    # the drawn starts' seeds do not depend on how many starts are given
    seeds = np.random.SeedSequence(random_seed).spawn(n_starts + len(given))
    starts = [None] * n_starts + [objective.start_vector(point) for point in given]
    tasks = [
        StartTask(
            factory,
            key,
            i,
            seed,
            method,
            max_iterations,
            gradient_tolerance,
            compile_items,
            x0,
            start_time_limit,
        )
        for i, (seed, x0) in enumerate(zip(seeds, starts))
    ]
    # n_workers=1 without an executor: in this process, on the model the factory builds (as
    # a worker would: the same graph, the same bits), compiled once per process
    results = []
    if choose_workers and executor is None and n_workers > 1:
        _compile_here(tasks[0])  # so that the first start's time is the start's alone
        first = time.perf_counter()
        with work_executor(None, n_workers=1) as runner:
            results = runner.map(run_start, tasks[:1], name="start")
        tasks = tasks[1:]
        n_workers = _workers_worth_it(time.perf_counter() - first, len(tasks), int(n_workers))
    if tasks:
        with work_executor(executor, n_workers=int(n_workers)) as runner:
            results += runner.map(run_start, tasks, name="start")
    return ModeSearchResult(
        results,
        objective,
        method=method,
        objective_tolerance=objective_tolerance,
        parameter_tolerance=parameter_tolerance,
        wall_time=time.perf_counter() - began,
        workers=0 if executor is not None else int(n_workers),
    )


def _compile_here(task: StartTask) -> None:
    """Compile this process's objective of ``task`` (log-posterior, gradient and, for the
    Fisher trust region, the Fisher information) at its start; a failure here is left for
    the start itself to report."""
    try:
        objective = _objective(task)
        x0 = _start_of(objective, task)
        if task.method == "trust-region-fisher":
            objective.fisher_information(x0)  # its function evaluates the starts' ends too
        objective.evaluate(x0)
    except Exception:  # noqa: BLE001  (run_start reports the start's failure)
        return


WORKER_START_SECONDS = 20.0
"""What starting local worker processes costs before their first start (spawn, import of
PyMC and PyTensor, building and compiling the model): 20-28 s on the 2-core development
machine for Boehm_JProteomeRes2014 (33 s for its 11 starts in 2 workers, 8.5-12 s in this
process)."""


def _workers_worth_it(first: float, remaining: int, workers: int) -> int:
    """``workers`` when ``remaining`` starts of ``first`` seconds each end sooner in them
    (after :data:`WORKER_START_SECONDS`) than here, one after another; else 1."""
    workers = min(workers, max(remaining, 1))
    here = remaining * first
    there = WORKER_START_SECONDS + here / workers
    return workers if there < here else 1
