"""`solve`: the state trajectory of an OdeSystem at requested times."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pymc_odesens.codegen import compile_event_kernels, compile_kernels
from pymc_odesens.model import OdeSystem
from pymc_odesens.solvers.controls import SolverControls, resolve_controls, validate_times
from pymc_odesens.solvers.errors import NonFiniteInputError
from pymc_odesens.solvers.integrate import (
    EventLog,
    integrate,
    integrate_events,
    newton_jacobian,
)
from pymc_odesens.solvers.status import new_stats, stats_dict
from pymc_odesens.solvers.summary import (
    names_summary,
    stats_summary,
    times_summary,
    tolerance_summary,
)

__all__ = ["OdeProblem", "OdeSolution", "prepare_problem", "solve", "validate_vector"]


@dataclass
class OdeSolution:
    """Result of :func:`solve`.

    Attributes
    ----------
    t : numpy.ndarray, shape (T,)
        Output times.
    y : numpy.ndarray, shape (T, N)
        State at the output times.
    stats : dict
        Solver statistics: ``n_steps``, ``n_rejected_steps``, ``n_rhs_evals``,
        ``n_jac_evals``, ``n_lu_decompositions``, ``n_newton_iterations``,
        ``n_newton_failures``.
    controls : SolverControls
        The controls used (Stan's defaults filled in).
    states : list of str
    events : EventLog or None
        For systems with events: the events that happened (``.times``,
        ``.names``, ``.index``, ``.before`` = the state just before each).
        Outputs at an event time hold the state just after it.
    system : OdeSystem or None
        The system solved (for reading its outputs off the solution).
    params : numpy.ndarray or None
        The parameters of the solve.

    Examples
    --------
    ``solution["S1"]`` is the state ``S1``, or the system's output of that name
    (for a system read from SBML: what the id's symbol denotes, a species'
    concentration unless it has only substance units);
    ``solution.amount("S1")`` and ``solution.concentration("S1")`` give a species
    of an SBML model in the unit asked.
    """

    t: np.ndarray
    y: np.ndarray
    stats: dict
    controls: SolverControls
    states: list = field(default_factory=list)
    events: EventLog | None = None
    system: OdeSystem | None = field(default=None, repr=False)
    params: np.ndarray | None = field(default=None, repr=False)

    def __getitem__(self, name: str) -> np.ndarray:
        """Trajectory of the output called ``name`` (``system.outputs``), else of the state."""
        outputs = getattr(self.system, "outputs", None) or {}
        if name in outputs:
            return self.evaluate([outputs[name]])[:, 0]
        try:
            return self.y[:, self.states.index(name)]
        except ValueError:
            extra = f"; outputs are {list(outputs)}" if outputs else ""
            raise KeyError(f"no state named {name!r}; states are {self.states}{extra}") from None

    def evaluate(self, expressions) -> np.ndarray:
        """Expressions of the system's ``t``, states and parameters at the output times.

        Parameters
        ----------
        expressions : sequence of sympy.Expr
            In ``system.t``, ``system.state_symbols`` and ``system.param_symbols``
            (for example values of ``system.outputs``).

        Returns
        -------
        numpy.ndarray, shape (T, M)
            Evaluated by a generated kernel, compiled once per set of expressions.
        """
        if self.system is None or self.params is None:
            raise ValueError("evaluate(): this solution does not know its system and parameters")
        from pymc_odesens.solvers.solution_variables import evaluate_along_solution

        return evaluate_along_solution(self.system, self.params, self.t, self.y, list(expressions))

    def _species_quantity(self, species: str, unit: str) -> np.ndarray:
        sbml = getattr(self.system, "sbml", None)
        if sbml is None:
            raise ValueError(f"{unit}(): the system was not read from SBML; it has no species")
        table = sbml.amounts if unit == "amount" else sbml.concentrations
        if species not in table:
            if species in sbml.amounts:
                raise ValueError(
                    f"concentration(): species {species!r} is in a 0-dimensional compartment; "
                    "it has an amount only"
                )
            known = ", ".join(sbml.amounts) or "none"
            raise KeyError(f"{unit}(): no species {species!r}; species are {known}")
        return self.evaluate([table[species]])[:, 0]

    def amount(self, species: str) -> np.ndarray:
        """Amount of the SBML species ``species`` at the output times."""
        return self._species_quantity(species, "amount")

    def concentration(self, species: str) -> np.ndarray:
        """Concentration of the SBML species ``species`` (amount / compartment size)."""
        return self._species_quantity(species, "concentration")

    def __repr__(self) -> str:
        events = "" if self.events is None else f", {len(self.events.times)} events"
        return (
            f"OdeSolution({self.controls.method}, t={times_summary(self.t)}, "
            f"y={self.y.shape} [{names_summary(self.states)}], "
            f"{tolerance_summary(self.controls)}, {stats_summary(self.stats)}{events})"
        )


def validate_vector(argument: str, value, size: int, what: str) -> np.ndarray:
    """``value`` as a finite float vector of length ``size``, else a ValueError naming it."""
    if np.iscomplexobj(value):
        raise TypeError(f"{argument} must be real ({what}), got complex values {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"{argument} must be an array of {size} floats ({what}), got {value!r}"
        ) from None
    if arr.ndim == 0 and size == 1:
        arr = arr.reshape(1)
    if arr.shape != (size,):
        raise ValueError(f"{argument} must have shape ({size},) ({what}); got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise NonFiniteInputError(f"{argument} must be finite; got {arr}")
    return np.array(arr, dtype=np.float64, order="C")  # a copy: results must not alias inputs


@dataclass(frozen=True)
class OdeProblem:
    """Validated inputs of one solve (shared by every solve and sensitivity route).

    Attributes
    ----------
    system : OdeSystem
    kernels : CompiledKernels
    y0 : numpy.ndarray, shape (N,)
    params : numpy.ndarray, shape (P,)
    t0 : float
    times : numpy.ndarray, shape (T,)
    controls : SolverControls
    y0_from_params : bool
        True when ``y0`` was computed from the system's ``y0(p)``.
    """

    system: OdeSystem
    kernels: object
    y0: np.ndarray
    params: np.ndarray
    t0: float
    times: np.ndarray
    controls: SolverControls
    y0_from_params: bool

    def newton_jacobian(self, method: str | None = None, *, transposed: bool = False) -> tuple:
        """``(jac, newton)`` of a run with ``method`` (default: the controls' method):
        the Jacobian kernel and the structure of its Newton matrices, dense or sparse by
        the control ``linear_solver`` (see :func:`pymc_odesens.solvers.integrate.newton_jacobian`).
        """
        return newton_jacobian(
            self.kernels,
            method or self.controls.method,
            self.controls.linear_solver,
            transposed=transposed,
        )


def prepare_problem(
    system,
    y0,
    times,
    params,
    t0,
    method,
    relative_tolerance,
    absolute_tolerance,
    max_num_steps,
    linear_solver=None,
) -> OdeProblem:
    """Check every argument (naming the culprit) and compile the system's kernels."""
    if not isinstance(system, OdeSystem):
        raise TypeError(f"system must be an OdeSystem, got {type(system).__name__}")
    n, p = system.n_states, system.n_params
    params = validate_vector("params", params, p, "one value per parameter")
    try:
        t0 = float(t0)
    except (TypeError, ValueError):
        raise TypeError(f"t0 must be a float, got {t0!r}") from None
    times = validate_times(times, t0)
    controls = resolve_controls(
        method, n, relative_tolerance, absolute_tolerance, max_num_steps, linear_solver
    )
    kernels = compile_kernels(system)
    from_params = y0 is None
    if from_params:
        if kernels.initial_state is None:
            raise ValueError("y0 is required: the system declares no initial_state y0(p)")
        y0 = kernels.evaluate("initial_state", t0, np.zeros(n), params)
    y0 = validate_vector("y0", y0, n, "one value per state")
    return OdeProblem(system, kernels, y0, params, t0, times, controls, from_params)


def solve(
    system: OdeSystem,
    y0,
    times,
    params,
    *,
    t0: float = 0.0,
    method: str = "rk45",
    relative_tolerance: float | None = None,
    absolute_tolerance=None,
    max_num_steps: int | None = None,
    linear_solver: str = "auto",
) -> OdeSolution:
    """Solve ``dy/dt = f(t, y, p)``, ``y(t0) = y0`` and return ``y`` at ``times``.

    Parameters
    ----------
    system : OdeSystem
    y0 : array_like, shape (N,), or None
        Initial state at ``t0``; None takes the system's ``y0(p)`` (see
        ``OdeSystem(initial_state=...)``).
    times : array_like, shape (T,)
        Output times, non-decreasing and >= ``t0`` (entries equal to ``t0``
        return ``y0``). The solver does not stop at them: values come from
        its dense output.
    params : array_like, shape (P,)
    t0 : float
        Initial time.
    method : {"rk45", "ckrk", "bdf", "adams"}
        As in Stan: ``rk45`` (Dormand–Prince) and ``ckrk`` (Cash–Karp) for
        non-stiff problems, ``bdf`` (variable order 1–5) for stiff ones,
        ``adams`` (variable-order Adams–Moulton, orders 1–12) for smooth
        non-stiff problems at tight tolerances.
    relative_tolerance, absolute_tolerance, max_num_steps
        Stan's controls with Stan's defaults: 1e-6 / 1e-6 / 1e6 for ``rk45``
        and ``ckrk``, 1e-10 / 1e-10 / 1e8 for ``bdf`` and ``adams``.
        ``absolute_tolerance`` may be one value per state. Local errors are
        kept below 1 in the weighted RMS norm
        ``sqrt(mean((e_i / (rtol |y_i| + atol_i))**2))``; ``max_num_steps``
        bounds the steps between consecutive output times.
    linear_solver : {"auto", "dense", "sparse"}
        How ``bdf`` and ``adams`` factorise their Newton matrices ``I - c J_y``:
        dense LU, or sparse LU on the sparsity pattern of ``J_y`` with a fill-reducing
        ordering (pathway-sized models); ``"auto"`` chooses by size and density (see
        docs/solvers.md). Explicit methods ignore it.

    Returns
    -------
    OdeSolution
        ``.t`` (T,), ``.y`` (T, N), ``.stats``.

    Raises
    ------
    ValueError, TypeError
        Bad arguments (named in the message).
    pymc_odesens.OdeSolverError
        ``MaxNumStepsError``, ``StepSizeTooSmallError``, ``NonFiniteRhsError``
        or ``NewtonConvergenceError`` with time, step size and state.
    """
    problem = prepare_problem(
        system,
        y0,
        times,
        params,
        t0,
        method,
        relative_tolerance,
        absolute_tolerance,
        max_num_steps,
        linear_solver,
    )
    n = system.n_states
    controls = problem.controls
    event_kernels = compile_event_kernels(system)
    jac, newton = problem.newton_jacobian()
    log = None
    if n == 0:  # nothing to integrate (an SBML model made of rules only)
        y_out, stats = np.zeros((problem.times.size, 0)), new_stats()
    elif event_kernels is None:
        y_out, stats = integrate(
            method,
            problem.kernels.rhs,
            jac,
            problem.t0,
            problem.y0,
            problem.params,
            problem.times,
            controls,
            n_state=n,
            n_err=n,
            atol=controls.absolute_tolerance,
            newton=newton,
            state_names=system.states,
        )
    else:
        y_out, stats, record = integrate_events(
            method,
            problem.kernels.rhs,
            jac,
            event_kernels.jump,
            event_kernels.time_sensitivity,
            event_kernels,
            problem.t0,
            problem.y0,
            problem.params,
            problem.times,
            controls,
            n_state=n,
            n_err=n,
            atol=controls.absolute_tolerance,
            newton=newton,
            state_names=system.states,
        )
        log = record.public(event_kernels.names)
    return OdeSolution(
        problem.times,
        y_out,
        stats_dict(stats),
        controls,
        list(system.states),
        events=log,
        system=system,
        params=problem.params,
    )
