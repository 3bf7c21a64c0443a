"""`PetabProblem`: a PEtab problem (v1 or v2) as log-likelihood, gradient and PyMC model."""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import petab.v1 as petab
import pymc as pm
import pytensor
import pytensor.tensor as pt
from petab.v1 import C
from pytensor.compile.mode import Mode
from pytensor.link.basic import PerformLinker

from pymc_odesens.model import OdeSystem
from pymc_odesens.ops.per_thread_function import PerThreadFunction
from pymc_odesens.petab.citation import publication
from pymc_odesens.petab.errors import PetabError, PetabUnsupportedError
from pymc_odesens.petab.experiments import Experiment, read_experiments
from pymc_odesens.petab.likelihood_graph import PetabGraph
from pymc_odesens.petab.likelihood_kernel import LikelihoodKernel
from pymc_odesens.petab.likelihood_op import (
    MeasurementLogLikelihood,
    MeasurementLogLikelihoodGradient,
)
from pymc_odesens.petab.marginalization import MarginalizationPlan, observation_analysis
from pymc_odesens.petab.measurements import (
    experiment_times,
    group_measurements,
    measurement_times,
)
from pymc_odesens.petab.model import build_pymc_model
from pymc_odesens.petab.observables import read_observables
from pymc_odesens.petab.parameters import EstimatedParameters, ParameterValues
from pymc_odesens.petab.priors import check_prior
from pymc_odesens.petab.problem_files import read_problem
from pymc_odesens.petab.route_choice import (
    STEP_BUDGET_FRACTION,
    RouteChoice,
    candidate_routes,
    measure_routes,
)
from pymc_odesens.petab.sbml_document import simulated_sbml
from pymc_odesens.petab.simulation_system import SimulationSystem
from pymc_odesens.petab.solver_options import SolverOptions
from pymc_odesens.petab.start_values import start_values
from pymc_odesens.petab.tolerance_choice import ToleranceChoice, choose_tolerances
from pymc_odesens.petab.validation import check_tables
from pymc_odesens.petab.wide_elemwise import SPLIT_POSITION, split_wide_sums

__all__ = ["PetabModelFactory", "PetabProblem"]


def python_mode() -> Mode:
    """The mode of the functions outside PyMC: each node's Python ``perform``, in order,
    after PyTensor's ``fast_compile`` rewrites.

    The graph is a few dozen nodes around the simulation and likelihood Ops, which do all
    the work. PyTensor's C backend would buy nothing per call and cost seconds per process
    (loading its compiled-module cache, probing the compiler); ``fast_run``'s rewrites and
    the virtual machine's linker cost ~0.3-0.4 s more in a new process (the first use of
    their rewrite passes; the linker imports setuptools) for the same time per call
    (measured on Boehm, Fujita and Isensee: benchmarks/README.md). A new linker each time:
    a linker holds on to the first graph it was given. Sums and products of more terms than a
    NumPy ufunc takes are split (:mod:`pymc_odesens.petab.wide_elemwise`).
    """
    mode = Mode(linker=PerformLinker(), optimizer="fast_compile")
    return mode.register((split_wide_sums, SPLIT_POSITION))


def _refuse_incomplete(problem: petab.Problem, where: str) -> None:
    model = problem.model
    if model is None or not hasattr(model, "sbml_model"):
        raise PetabUnsupportedError(f"{where}: only SBML models are supported")
    for table, df in (
        ("condition", problem.condition_df),
        ("observable", problem.observable_df),
        ("measurement", problem.measurement_df),
        ("parameter", problem.parameter_df),
    ):
        if df is None:
            raise PetabError(f"{where}: the problem has no {table} table")


def _refuse_unsupported(problem: petab.Problem, system: OdeSystem, where: str) -> None:
    if problem.mapping_df is not None and len(problem.mapping_df):
        raise PetabUnsupportedError(f"{where}: mapping tables are not supported")


def _simulated_end(problem: petab.Problem) -> float:
    """The last time any experiment is simulated to: the largest measurement time, ``inf``
    when a steady state is simulated (pre-equilibration or ``inf`` measurements)."""
    df = problem.measurement_df
    pre = df.get(C.PREEQUILIBRATION_CONDITION_ID)
    if pre is not None and pre.map(lambda v: isinstance(v, str) and bool(v)).any():
        return math.inf
    return max(measurement_times(df)) if len(df) else math.inf


@dataclasses.dataclass(frozen=True)
class PetabModelFactory:
    """What a worker process needs to build a problem's PyMC model: its YAML file and solver
    options (:meth:`PetabProblem.model_factory`); its call returns
    ``PetabProblem.from_yaml(yaml_path, **dict(options)).build_model()``.

    Multistart mode finding (:func:`pymc_odesens.inference.find_modes`) ships one to each
    worker: never compiled code, only what rebuilds the model there (the kernels come from
    the disk cache).

    Attributes
    ----------
    yaml_path : str
        The problem's YAML file (absolute).
    options : tuple of (str, value)
        The :class:`~pymc_odesens.petab.solver_options.SolverOptions` fields, sorted pairs.
    """

    yaml_path: str
    options: tuple

    def __call__(self) -> pm.Model:
        return PetabProblem.from_yaml(self.yaml_path, **dict(self.options)).build_model()


class PetabProblem:
    """A PEtab problem: its SBML model, experiments, observables and parameters.

    Build one with :meth:`from_yaml`. The estimated parameters ``x`` are those of the
    parameter table with ``estimate = 1``, in table order, on their ``parameterScale``.

    Attributes
    ----------
    name : str
    petab_problem : petab.v1.Problem
        The tables as read by the petab library.
    model_system : OdeSystem
        The SBML model as imported (:meth:`OdeSystem.from_sbml`).
    system : OdeSystem
        The simulated system: the model with the values PEtab fixes substituted
        (:class:`~pymc_odesens.petab.simulation_system.SimulationSystem`).
    parameters : EstimatedParameters
        ids, scales, bounds and nominal values of ``x``.
    experiments : list of Experiment
        The simulation conditions (with their pre-equilibration conditions).
    options : SolverOptions
    publication : str
        The model's publication (from the SBML annotation).
    format_version : int
        The problem file's major PEtab version (1 or 2).
    petab_v2_problem : petab.v2.Problem or None
        A v2 problem as the petab library read it (``petab_problem`` is its v1 form).
    yaml_path : pathlib.Path or None
        The YAML file the problem was read from (:meth:`from_yaml`; the problem file of a
        folder given), else None.
    """

    format_version: int = 1
    petab_v2_problem = None

    def __init__(self, petab_problem: petab.Problem, name: str, options: SolverOptions) -> None:
        self.petab_problem = petab_problem
        self.name = name
        self.options = options
        _refuse_incomplete(petab_problem, name)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"petab\.")
            check_tables(petab_problem)
        self.parameters = EstimatedParameters.from_table(petab_problem.parameter_df)
        for pid, position in zip(self.parameters.ids, self.parameters.positions):
            check_prior(self.parameters.table.loc[pid], pid, position)
        self.yaml_path: Path | None = None
        model = petab_problem.model
        sbml_text = simulated_sbml(petab_problem)
        self.model_system = OdeSystem.from_sbml(sbml_text, name=name)
        _refuse_unsupported(petab_problem, self.model_system, name)
        self.publication = publication(model.sbml_model)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"petab\.")
            self.experiments: list[Experiment] = read_experiments(petab_problem, self.model_system)
        self.simulation = SimulationSystem.build(
            self.model_system, self.experiments, name, _simulated_end(petab_problem)
        )
        self.system = self.simulation.system
        self._values = ParameterValues(petab_problem.parameter_df, self.parameters)
        self.observables = read_observables(
            petab_problem.observable_df, self.system, set(petab_problem.parameter_df.index)
        )
        self.graph = self._build_graph()
        # compiled functions by (kind, options), each called through a copy per thread
        self._functions: dict[tuple, PerThreadFunction] = {}
        # the gradient route measured for sensitivity="auto", per options
        self._route_choices: dict[SolverOptions, RouteChoice] = {}
        # the tolerances of gradients checked by gradient_check, per options
        self._tolerance_choices: dict[SolverOptions, ToleranceChoice] = {}
        self._likelihood_kernel: LikelihoodKernel | None = None
        self._observation_analysis = None
        self._marginal_model: pm.Model | None = None
        self._build_lock = threading.RLock()

    # construction ---------------------------------------------------------------------
    @classmethod
    def from_yaml(cls, path: str | os.PathLike, **options) -> PetabProblem:
        """Read a PEtab problem (v1 or v2, by its ``format_version``) from its YAML file.

        A v2 problem is read and checked by ``petab.v2`` and simulated in the v1 form it
        states (:mod:`pymc_odesens.petab.v2_reader`; docs/petab.md, "PEtab v2"):
        its parameters are on the linear scale, except those with a ``log-*`` prior (on the
        natural-log scale; :attr:`parameters` ``.scales`` says which).

        Parameters
        ----------
        path : str or path-like
            The problem's ``.yaml`` file (the tables are read relative to it), or a folder
            holding exactly one problem file
            (:func:`~pymc_odesens.petab.problem_files.problem_file`).
        **options
            :class:`~pymc_odesens.petab.solver_options.SolverOptions` (``method``,
            ``sensitivity``, ``relative_tolerance``, ``absolute_tolerance``,
            ``max_num_steps``, ``steady_state_controls``).

        Raises
        ------
        FileNotFoundError
            ``path`` names no file, or a folder without a problem file.
        PetabUnsupportedError
            The problem uses a feature the importer does not cover (named).
        PetabError
            The tables are inconsistent or hold an entry PEtab does not allow (petab's own
            checks, :func:`pymc_odesens.petab.validation.check_tables`, and the priors'
            and bounds', :func:`pymc_odesens.petab.priors.check_prior`; for v2 problems
            first petab's v2 checks): the message names the table, row, column and entry.
            Also: a folder with several problem files (named).
        """
        source = read_problem(path)
        options = SolverOptions(**options)
        try:
            problem = cls(source.petab_problem, source.name, options)
        except PetabError as error:
            explained = source.explained(error)
            if explained is error:
                raise
            raise explained from error
        problem.format_version = source.format_version
        problem.petab_v2_problem = source.petab_v2_problem
        problem.yaml_path = source.path.resolve()
        return problem

    def _build_graph(self) -> PetabGraph:
        problem, values = self.petab_problem, self._values
        times = experiment_times(problem.measurement_df, self.experiments)
        groups = group_measurements(
            problem.measurement_df, self.experiments, times, self.observables, values
        )
        sim = self.simulation
        parameters = np.array(
            [sim.parameter_indices(e, values, False) for e in self.experiments], dtype=np.int64
        ).reshape(len(self.experiments), self.system.n_params)
        pre = [e for e in self.experiments if e.preequilibration]
        pre_parameters = np.array(
            [sim.parameter_indices(e, values, True) for e in pre], dtype=np.int64
        ).reshape(len(pre), self.system.n_params)
        reinit = [sim.reinitialized(e, values) for e in pre]
        # with model events, steady states start where no event fires any more
        infinite = np.isinf(times).any(axis=1)
        settling = [
            sim.settling_time(e, False) if m else 0.0 for e, m in zip(self.experiments, infinite)
        ]
        pre_settling = [sim.settling_time(e, True) for e in pre]
        n = self.system.n_states
        table_parameters = {
            oid: {
                s: values.index(pid, f"observable {oid!r}") for s, pid in o.table_parameters.items()
            }
            for oid, o in self.observables.items()
        }
        return PetabGraph(
            simulation=sim,
            values=values,
            scales=self.parameters.scales,
            times=times,
            parameters=parameters,
            preequilibration_parameters=pre_parameters,
            reinitialize=np.array([m for m, _ in reinit], dtype=bool).reshape(len(pre), n),
            reinitial_values=np.array([i for _, i in reinit], dtype=np.int64).reshape(len(pre), n),
            groups=groups,
            table_parameters=table_parameters,
            settling=np.array(settling, dtype=float),
            preequilibration_settling=np.array(pre_settling, dtype=float),
        )

    # properties ---------------------------------------------------------------------------
    @property
    def x_nominal(self) -> np.ndarray:
        """The nominal values of the estimated parameters, on their scales."""
        return self.parameters.nominal.copy()

    @property
    def n_measurements(self) -> int:
        return len(self.petab_problem.measurement_df)

    @property
    def sensitivity_columns(self) -> int:
        """Parameters of the simulated system, plus its states if any experiment is
        pre-equilibrated (forward sensitivities then carry ``dy/dy0``)."""
        pre = any(e.preequilibration for e in self.experiments)
        return self.system.n_params + (self.system.n_states if pre else 0)

    @property
    def gradient_route(self) -> str:
        """The route gradients take with the current options.

        With ``sensitivity="auto"`` the first use measures the candidate routes at the
        nominal parameters (:mod:`pymc_odesens.petab.route_choice`: each route's
        log-likelihood and gradient, compiled, then timed) and takes the fastest;
        :attr:`route_choice` has the times.
        """
        return self.route_for(self.options)

    @property
    def route_choice(self) -> RouteChoice:
        """How :attr:`gradient_route` was chosen: the measured seconds per route and the
        errors of the routes that failed (measured on first use)."""
        self.route_for(self.options)
        return self._route_choices.get(self.options) or RouteChoice(
            route=self.options.sensitivity, measured=False
        )

    def route_for(self, options: SolverOptions) -> str:
        """The gradient route of ``options`` (measured once per options for ``"auto"``)."""
        if options.sensitivity != "auto":
            return options.sensitivity
        choice = self._route_choices.get(options)
        if choice is None:
            with self._build_lock:
                choice = self._route_choices.get(options)
                if choice is None:
                    choice = self._measure_routes(options)
                    self._route_choices[options] = choice
        return choice.route

    @property
    def tolerance_choice(self) -> ToleranceChoice:
        """The tolerances gradients are computed with, and the gradient differences the
        check measured (``gradient_check``, on the first gradient;
        :mod:`pymc_odesens.petab.tolerance_choice`)."""
        options = self.options
        if not options.gradient_check:
            return ToleranceChoice(
                options.relative_tolerance, options.absolute_tolerance, checked=False
            )
        self.gradient_options(options)
        return self._tolerance_choices[options]

    def gradient_options(self, options: SolverOptions | None = None) -> SolverOptions:
        """The options gradients are computed with: ``sensitivity="auto"`` resolved to the
        measured route (:attr:`gradient_route`) and, with ``gradient_check``, the tolerances
        checked at the nominal parameters (:attr:`tolerance_choice`; measured once per
        options). What the PyMC model, :meth:`model_factory` and distributed
        log-likelihoods simulate with.

        Raises
        ------
        GradientConvergenceError
            The gradient does not settle as the tolerances are tightened (named problem,
            tolerances and differences).
        """
        options = self.options if options is None else options
        route = self.route_for(options)
        resolved = options.updated(sensitivity=route, gradient_check=False)
        if not options.gradient_check:
            return resolved
        choice = self._tolerance_choices.get(options)
        if choice is None:
            with self._build_lock:
                choice = self._tolerance_choices.get(options)
                if choice is None:
                    choice = self._check_tolerances(resolved)
                    self._tolerance_choices[options] = choice
        return resolved.updated(
            relative_tolerance=choice.relative_tolerance,
            absolute_tolerance=choice.absolute_tolerance,
        )

    def _check_tolerances(self, options: SolverOptions) -> ToleranceChoice:
        try:
            x = self.parameters.check(None)
        except PetabError:  # no nominal values to check at
            return ToleranceChoice(
                options.relative_tolerance, options.absolute_tolerance, checked=False
            )

        def gradient(relative_tolerance, absolute_tolerance):
            function = self._function(
                "gradient",
                options.updated(
                    relative_tolerance=relative_tolerance, absolute_tolerance=absolute_tolerance
                ),
            )
            return function(x)[1]

        return choose_tolerances(
            self.name, options.relative_tolerance, options.absolute_tolerance, gradient
        )

    def _measure_routes(self, options: SolverOptions) -> RouteChoice:
        first = options.route(self.sensitivity_columns)
        candidates = candidate_routes(options.method, self.sensitivity_columns, first)
        try:
            x = self.parameters.check(None)
        except PetabError:  # no nominal values to measure at
            return RouteChoice(route=first, measured=False)
        if len(candidates) == 1:
            return RouteChoice(route=first, measured=False)
        budget = max(1, int(options.max_num_steps * STEP_BUDGET_FRACTION))

        def gradient_function(route: str, full_budget: bool):
            changes = {"sensitivity": route, "gradient_check": False}
            if not full_budget:
                changes["max_num_steps"] = min(options.max_num_steps, budget)
            function = self._function("gradient", options.updated(**changes))
            return lambda: function(x)

        return measure_routes(candidates, gradient_function)

    # the log-likelihood ----------------------------------------------------------------
    def log_likelihood_tensor(self, x, route: str = "none", options: SolverOptions | None = None):
        """PEtab's log-likelihood as a tensor of ``x`` (a tensor on the parameter scales).

        ``route`` is the gradient route of the simulations (``"none"``: no gradient). The
        measurements' log-densities are one generated kernel
        (:mod:`pymc_odesens.petab.likelihood_kernel`). Solver failures raise
        (``on_failure="raise"``) outside a PyMC model.
        """
        graph = self.graph
        z = graph.z(x)
        y = graph.states(z, options or self.options, route)
        return MeasurementLogLikelihood(self.likelihood_kernel)(y, z)

    @property
    def likelihood_kernel(self) -> LikelihoodKernel:
        """The generated kernel of the measurements' log-likelihood (built on first use)."""
        if self._likelihood_kernel is None:
            with self._build_lock:
                if self._likelihood_kernel is None:
                    self._likelihood_kernel = LikelihoodKernel(self.graph)
        return self._likelihood_kernel

    def _function(self, kind: str, options: SolverOptions | None = None) -> PerThreadFunction:
        """The compiled function ``kind`` ("value", "gradient" or "simulate") of ``options``
        (default: the current ones), compiled on first use; each thread calls its own copy
        (a compiled function's storage is shared by its calls), so the problem can be
        shared by threads."""
        options = self.options if options is None else options
        key = (kind, options)
        function = self._functions.get(key)
        if function is None:
            with self._build_lock:
                function = self._functions.get(key)
                if function is None:
                    if kind == "gradient" and options.gradient_check:
                        # the checked tolerances' own function (compiled while checking)
                        function = self._function(kind, self.gradient_options(options))
                    elif kind == "gradient" and options.sensitivity == "auto":
                        # the measured route's own function (compiled while measuring)
                        route = self.route_for(options)
                        function = self._function(kind, options.updated(sensitivity=route))
                    else:
                        function = PerThreadFunction(self._compile(kind, options))
                    self._functions[key] = function
        return function

    def _compile(
        self, kind: str, options: SolverOptions | None = None, graph: PetabGraph | None = None
    ):
        """The function ``kind`` of ``graph`` (default: the whole problem's) with ``options``
        (default: the current ones)."""
        options = self.options if options is None else options
        x = pt.vector("x", dtype="float64", shape=(len(self.parameters),))
        if graph is None:
            graph, kernel = self.graph, None
        else:
            kernel = LikelihoodKernel(graph)
        if kind == "value":
            z = graph.z(x)
            y = graph.states(z, options, "none")
            llh = MeasurementLogLikelihood(kernel or self.likelihood_kernel)(y, z)
            return pytensor.function([x], llh, mode=python_mode())
        z = graph.z(x)
        if kind == "simulate":
            y = graph.states(z, options, "none")
            observables = graph.observables(z, y)
            outputs = [t for o in observables for t in (o.h, o.sigma)]
            return pytensor.function([x], outputs, mode=python_mode())
        # value and gradient from one call of the gradient kernel
        y = graph.states(z, options, self.route_for(options))
        llh, dy, dz = MeasurementLogLikelihoodGradient(kernel or self.likelihood_kernel)(y, z)
        # the chain rule through the simulations: d/dx of <dy, y> + <dz, z>
        surrogate = pt.sum(dy * y) + pt.sum(dz * z)
        gradient = pytensor.grad(surrogate, x, consider_constant=[dy, dz])
        return pytensor.function([x], [llh, gradient], mode=python_mode())

    def log_likelihood(self, x=None) -> float:
        """PEtab's log-likelihood of the measurements.

        Parameters
        ----------
        x : array_like, shape (K,), optional
            The estimated parameters (``parameters.ids``) on their ``parameterScale``;
            default: their nominal values.

        Returns
        -------
        float
            The sum over measurements of the log-density of each measurement under its
            noise model (normal or laplace, on the ``observableTransformation`` scale, as
            the density of the measurement itself: normalising constants included, as in
            ``petab.v1.calculate``); priors excluded.

        Raises
        ------
        OdeSolverError
            A simulation failed.
        """
        return float(self._function("value")(self.parameters.check(x)))

    def log_likelihood_gradient(self, x=None) -> np.ndarray:
        """The gradient of :meth:`log_likelihood` with respect to ``x`` (on its scales),
        by :attr:`gradient_route`."""
        return np.asarray(self._function("gradient")(self.parameters.check(x))[1])

    def log_likelihood_and_gradient(self, x=None) -> tuple[float, np.ndarray]:
        """:meth:`log_likelihood` and its gradient from one simulation."""
        value, gradient = self._function("gradient")(self.parameters.check(x))
        return float(value), np.asarray(gradient)

    def experiments_log_likelihood(self, experiments, gradient: bool = True):
        """The log-likelihood of the measurements of some experiments alone, as a compiled
        function of ``x``: what a worker of a distributed log-likelihood evaluates.

        Each experiment is simulated exactly as in :meth:`log_likelihood` (the same system,
        output times and route), so the values of a partition of the experiments sum to the
        problem's log-likelihood (up to the order of the sum; with all experiments, bit for
        bit).

        Parameters
        ----------
        experiments : sequence of int
            Indices into :attr:`experiments`, increasing.
        gradient : bool
            Also return the gradient (by :attr:`gradient_route`, with the tolerances of
            :meth:`gradient_options`).

        Returns
        -------
        PerThreadFunction
            ``f(x)``: the log-likelihood, or ``[value, gradient]`` with ``gradient``.
        """
        graph = self.graph.restricted(experiments)
        if gradient:  # the gradients' route and checked tolerances (gradient_options)
            return PerThreadFunction(self._compile("gradient", self.gradient_options(), graph))
        return PerThreadFunction(self._compile("value", graph=graph))

    def likelihood_source(self):
        """The problem as the workers of a distributed log-likelihood rebuild it: its YAML
        file, solver options, the digests of its files and its kernels' cache key
        (:class:`~pymc_odesens.petab.likelihood_source.PetabLikelihoodSource`).

        Raises
        ------
        ValueError
            The problem was not read by :meth:`from_yaml` (there is no file to read again).
        """
        from pymc_odesens.petab.likelihood_source import PetabLikelihoodSource

        return PetabLikelihoodSource.of(self)

    def distributed_log_likelihood(self, executor=None, **kwargs):
        """The log-likelihood evaluated by the workers of ``executor``, each keeping its
        part of the experiments resident
        (:class:`~pymc_odesens.inference.DistributedLogLikelihood` of
        :meth:`likelihood_source`).

        Parameters
        ----------
        executor : None, concurrent.futures.Executor or dask.distributed.Client
            None: evaluated in this process, in the same chunks (the same bits).
        **kwargs
            ``n_chunks``, ``on_failure``, ``rebalance``, ``worker_timeout`` of
            :class:`~pymc_odesens.inference.DistributedLogLikelihood`.
        """
        from pymc_odesens.inference.distributed_likelihood import DistributedLogLikelihood

        return DistributedLogLikelihood(self.likelihood_source(), executor, **kwargs)

    # simulations ---------------------------------------------------------------------------
    def simulate(self, x=None) -> pd.DataFrame:
        """The simulated observables at the measurements, as a PEtab simulation table.

        Returns
        -------
        pandas.DataFrame
            The measurement table with ``measurement`` replaced by ``simulation`` (and a
            column ``noise``: each measurement's noise parameter).
        """
        outputs = self._function("simulate")(self.parameters.check(x))
        df = self.petab_problem.measurement_df.copy()
        simulation = np.full(len(df), np.nan)
        noise = np.full(len(df), np.nan)
        for k, group in enumerate(self.graph.groups):
            simulation[group.rows] = outputs[2 * k]
            noise[group.rows] = outputs[2 * k + 1]
        df = df.rename(columns={C.MEASUREMENT: C.SIMULATION})
        df[C.SIMULATION] = simulation
        df["noise"] = noise
        return df

    # the PyMC model --------------------------------------------------------------------------
    def start_values(self, spread: float = 0.1) -> dict:
        """Starting values for the chains: each uniform within ``spread`` of its nominal value.

        On each parameter's scale and inside its bounds; give the result as ``initvals``
        to :func:`pymc_odesens.sample` (with ``init="adapt_diag"``, so that PyMC's own
        jitter is not added) or ``pm.sample``. Each chain draws its own start. See
        :func:`pymc_odesens.petab.start_values.start_values`.

        Parameters
        ----------
        spread : float
            Half-width on the parameter scale (default 0.1); 0 for the nominal values.
        """
        return start_values(self.parameters, spread)

    def build_model(
        self, marginalize=None, marginal_priors=None, log_likelihood=None, **options
    ) -> pm.Model:
        """The problem as a PyMC model.

        One random variable per estimated parameter, named by its id, on its
        ``parameterScale``, with the prior of ``objectivePriorType`` /
        ``objectivePriorParameters`` (uniform on the bounds where none is given), truncated
        to the bounds; the simulations of all experiments (one batched ODE solution, and
        one more for the pre-equilibrated experiments); one observed random variable per
        observable, named by its id, holding its measurements (PEtab's noise model, see
        :mod:`pymc_odesens.petab.noise`), so that ``pm.sample_posterior_predictive``
        draws measurements.

        With ``log_likelihood`` (a :meth:`distributed_log_likelihood`), the simulations
        and measurements are instead one potential, ``log_likelihood``, evaluated by the
        workers of a cluster: the model then has no observed variables (no posterior
        predictive draws from it; use the model without it for those).

        Parameters
        ----------
        marginalize : "auto", sequence of str or None
            Observation parameters to integrate out in closed form (docs/petab.md,
            "Marginalised observation parameters"): ``"auto"`` every one that
            :meth:`marginalizable_parameters` lists as marginalizable, or these ids;
            ``None`` (default): none. Marginalised parameters have no random variable;
            the measurements that read them are one potential,
            ``"marginalized_measurements"``, their marginal likelihood under conjugate
            priors; :meth:`recover_marginalized` draws them after sampling.
        marginal_priors : dict, optional
            Conjugate-prior hyperparameters by id, replacing the defaults derived from
            the PEtab prior: ``{"mu": ..., "sigma": ...}`` for a scaling or offset (the
            normal prior of its marginalised variable), ``{"alpha": ..., "beta": ...}``
            for a noise parameter (the inverse-gamma prior of its square).
        log_likelihood : DistributedLogLikelihood, optional
            Made with ``on_failure="reject"`` (a failed solve rejects the proposal).
        **options
            Overrides of :attr:`options` for this model (``method``, ``sensitivity``,
            tolerances, ``steady_state_controls``); not with ``log_likelihood``, whose
            options are those of its source.

        Raises
        ------
        ValueError
            A parameter of ``marginalize`` that cannot be marginalised (the reason named),
            or hyperparameters that are not valid; ``log_likelihood`` raises solver
            failures (``on_failure="raise"``) or has another number of parameters, or
            comes with ``marginalize``.
        PetabError
            No default conjugate prior can be derived (named: give ``marginal_priors``).
        TypeError
            ``options`` with ``log_likelihood``.
        """
        if log_likelihood is not None:
            if marginalize is not None:
                raise ValueError(
                    "build_model: marginalize and a distributed log_likelihood cannot be "
                    "combined (the distributed log-likelihood holds every measurement)"
                )
            if options:
                raise TypeError(
                    f"build_model: options {sorted(options)} apply to the model's own "
                    "simulations; a distributed log_likelihood simulates with the options of "
                    "its source (problem.distributed_log_likelihood after setting them)"
                )
            if getattr(log_likelihood, "on_failure", None) != "reject":
                raise ValueError(
                    "build_model: log_likelihood must be made with on_failure='reject' (a "
                    "failed solve then rejects the proposal instead of ending the run)"
                )
            n = log_likelihood.source.n_parameters
            if n != len(self.parameters):
                raise ValueError(
                    f"build_model: log_likelihood has {n} parameters, the problem "
                    f"{len(self.parameters)}"
                )
        options = self.options.updated(**options) if options else self.options
        plan = None
        if marginalize is not None:
            plan = MarginalizationPlan(self.observation_analysis(), marginalize, marginal_priors)
        elif marginal_priors is not None:
            raise ValueError("marginal_priors given, but marginalize is None")
        if log_likelihood is None:
            options = self.gradient_options(options)
        model = build_pymc_model(self, options, plan, log_likelihood)
        if plan is not None:
            self._marginal_model = model
        return model

    # marginalised observation parameters ------------------------------------------------
    def observation_analysis(self):
        """Where each estimated parameter is read, and whether it can be marginalised
        (:class:`~pymc_odesens.petab.marginalization.ObservationAnalysis`; built once)."""
        if self._observation_analysis is None:
            with self._build_lock:
                if self._observation_analysis is None:
                    self._observation_analysis = observation_analysis(self)
        return self._observation_analysis

    def marginalizable_parameters(self) -> pd.DataFrame:
        """The observation parameters and whether ``build_model(marginalize="auto")``
        integrates them out.

        Returns
        -------
        pandas.DataFrame
            Indexed by ``parameterId``: every estimated parameter that an observable or
            noise formula reads, and the fixed ones they read; columns ``kind``
            (``"scaling"``, ``"offset"``, ``"noise_sd"`` or ``""``), ``marginalizable``,
            ``observables``, ``variable`` (what is integrated out: the value, its
            ``log``/``log10``, or the noise variance), ``prior`` (the default conjugate
            prior and where it comes from) and ``reason`` (why one is not marginalizable).
        """
        return self.observation_analysis().report()

    def recover_marginalized(
        self, idata, model: pm.Model | None = None, random_seed=None, scale: str = "parameter"
    ):
        """Draw the marginalised parameters from their conditional posterior, one draw per
        posterior draw, into ``idata.posterior`` (see
        :func:`pymc_odesens.inference.recover_marginalized`).

        Parameters
        ----------
        idata : arviz.InferenceData
            Draws of the marginalised model.
        model : pymc.Model, optional
            That model (default: the last one :meth:`build_model` built with
            ``marginalize``).
        random_seed : int or numpy.random.Generator, optional
        scale : {"parameter", "linear"}
            Report each parameter on its ``parameterScale`` (default; a ``log``/``log10``
            parameter whose linear value was drawn not positive is an error naming it) or
            on the linear scale.

        Returns
        -------
        arviz.InferenceData
            ``idata``, with a variable per marginalised parameter, named by its id.
        """
        from pymc_odesens.inference.marginal_recovery import recover_marginalized

        if scale not in ("parameter", "linear"):
            raise ValueError(f"scale must be 'parameter' or 'linear', got {scale!r}")
        if model is None:
            model = self._marginal_model
            if model is None:
                raise ValueError(
                    "recover_marginalized: no model given, and this problem has built none "
                    "with marginalize=... (pass the model that was sampled)"
                )
        return recover_marginalized(idata, model, random_seed=random_seed, linear=scale == "linear")

    def model_factory(self) -> PetabModelFactory:
        """A picklable object that builds :meth:`build_model` in another process.

        What :func:`pymc_odesens.inference.find_modes` ships to its workers: the YAML path
        and :attr:`options` (with ``sensitivity="auto"`` resolved to :attr:`gradient_route`,
        measured here once rather than in every worker), from which a worker reads the
        problem and builds the model (kernels from the disk cache), never compiled code.

        Raises
        ------
        ValueError
            The problem was not read by :meth:`from_yaml` (there is no file to read again).
        """
        if self.yaml_path is None:
            raise ValueError(
                f"{self.name}: model_factory needs the problem's YAML file; read the problem "
                "with PetabProblem.from_yaml"
            )
        # the route and tolerances measured here, so that the workers do not measure again
        options = self.gradient_options()
        fields = dataclasses.fields(options)
        return PetabModelFactory(
            str(self.yaml_path), tuple(sorted((f.name, getattr(options, f.name)) for f in fields))
        )

    def __repr__(self) -> str:
        pre = sum(1 for e in self.experiments if e.preequilibration)
        return (
            f"PetabProblem({self.name!r}: {self.system.n_states} states, "
            f"{len(self.parameters)} estimated parameters, {len(self.experiments)} experiments "
            f"({pre} pre-equilibrated), {self.n_measurements} measurements)"
        )
