"""`steady_state`: ``f(t, y*, p) = 0`` with sensitivities, for pre-equilibration and
steady-state measurements.

The compiled routine (:mod:`~pymc_odesens.sensitivity.steady_state_core`) tries damped
Newton and falls back to integration; conservation laws
(:attr:`pymc_odesens.OdeSystem.conservation_laws`) pin the steady state to the totals of
the initial state. Sensitivities come from the implicit function theorem at the steady
state (:mod:`~pymc_odesens.sensitivity.steady_state_implicit`), or, on request, from
forward sensitivities integrated along with the state until they are steady too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pymc_odesens.codegen import compile_kernels, compile_sensitivity_kernel
from pymc_odesens.model import OdeSystem
from pymc_odesens.model.conservation import ConservationLaws
from pymc_odesens.sensitivity import steady_state_status as ss
from pymc_odesens.sensitivity.steady_state_errors import (
    SteadyStateNotReachedError,
    SteadyStateSingularError,
)
from pymc_odesens.sensitivity.steady_state_linear import MIN_RECIPROCAL_CONDITION
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.compiled_entry import compiled_entry
from pymc_odesens.solvers.controls import resolve_controls
from pymc_odesens.solvers.errors import OdeSolverError
from pymc_odesens.solvers.solve import validate_vector

__all__ = [
    "steady_state",
    "SteadyStateResult",
    "SteadyStateGradient",
    "SteadyStateControls",
    "resolve_steady_state_controls",
    "STEADY_STATE_METHODS",
    "STEADY_STATE_SENSITIVITIES",
    "check_steady_state_system",
    "raise_for_steady_state",
]

STEADY_STATE_METHODS = tuple(ss.MODES)
STEADY_STATE_SENSITIVITIES = ("implicit", "integration", "none")
DEFAULT_MAX_NEWTON_ITERATIONS = 40
DEFAULT_MAX_NUM_STEPS = 10_000
DEFAULT_MAX_TIME = 1e12


@dataclass(frozen=True)
class SteadyStateControls:
    """Validated controls of a steady-state computation.

    Attributes
    ----------
    method : {"auto", "newton", "integration"}
    relative_tolerance : float
    absolute_tolerance : numpy.ndarray, shape (N,)
    max_newton_iterations : int
    max_num_steps : int
        Integration steps over all horizons together.
    max_time : float
        Longest integrated time.
    nonnegative : bool
    """

    method: str
    relative_tolerance: float
    absolute_tolerance: np.ndarray
    max_newton_iterations: int
    max_num_steps: int
    max_time: float
    nonnegative: bool

    @property
    def mode(self) -> int:
        return ss.MODES[self.method]


def resolve_steady_state_controls(
    n_states: int,
    method: str = "auto",
    relative_tolerance=None,
    absolute_tolerance=None,
    max_newton_iterations: int | None = None,
    max_num_steps: int | None = None,
    max_time: float | None = None,
    nonnegative: bool = False,
) -> SteadyStateControls:
    """Fill the defaults and validate the controls (errors name the argument)."""
    if not isinstance(method, str) or method not in ss.MODES:
        raise ValueError(
            f"method must be one of {', '.join(map(repr, STEADY_STATE_METHODS))}; got {method!r}"
        )
    base = resolve_controls(
        "bdf",
        n_states,
        relative_tolerance,
        absolute_tolerance,
        DEFAULT_MAX_NUM_STEPS if max_num_steps is None else max_num_steps,
    )
    iterations = (
        DEFAULT_MAX_NEWTON_ITERATIONS if max_newton_iterations is None else (max_newton_iterations)
    )
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)):
        raise TypeError(f"max_newton_iterations must be an int >= 1, got {iterations!r}")
    if iterations < 1:
        raise ValueError(f"max_newton_iterations must be >= 1, got {iterations}")
    horizon = DEFAULT_MAX_TIME if max_time is None else max_time
    try:
        horizon = float(horizon)
    except (TypeError, ValueError):
        raise TypeError(f"max_time must be a positive float, got {max_time!r}") from None
    if not horizon > 0.0:
        raise ValueError(f"max_time must be positive, got {max_time!r}")
    if not isinstance(nonnegative, (bool, np.bool_)):
        raise TypeError(f"nonnegative must be True or False, got {nonnegative!r}")
    return SteadyStateControls(
        method=method,
        relative_tolerance=base.relative_tolerance,
        absolute_tolerance=base.absolute_tolerance,
        max_newton_iterations=int(iterations),
        max_num_steps=base.max_num_steps,
        max_time=horizon,
        nonnegative=bool(nonnegative),
    )


def check_steady_state_system(system: OdeSystem) -> None:
    """Raise if ``system`` is not an OdeSystem or has events (a steady state ignores them)."""
    if not isinstance(system, OdeSystem):
        raise TypeError(f"system must be an OdeSystem, got {type(system).__name__}")
    if system.events:
        raise ValueError(
            f"steady states of systems with events are not supported: {system.name!r} declares "
            f"{', '.join(e.name for e in system.events)}"
        )


@dataclass
class SteadyStateGradient:
    """``dL/dp`` and ``dL/dy0`` of a scalar ``L`` of the steady state.

    Attributes
    ----------
    params : numpy.ndarray, shape (P,)
        Including the path through ``y0(p)`` when the system declares it and no ``y0`` was
        given.
    y0 : numpy.ndarray, shape (N,)
        Through the conserved totals (zero without conservation laws).
    """

    params: np.ndarray
    y0: np.ndarray


@dataclass
class SteadyStateResult:
    """A steady state, its sensitivities and how it was found.

    Attributes
    ----------
    y : numpy.ndarray, shape (N,)
        The steady state ``y*``.
    S : numpy.ndarray, shape (N, P), or None
        ``S[i, k] = dy*_i/dp_k`` (with the path through ``y0(p)`` when used); None with
        ``sensitivity="none"``.
    S_y0 : numpy.ndarray, shape (N, N), or None
        ``S_y0[i, j] = dy*_i/dy0_j``: nonzero only through conservation laws (the totals
        ``C y0`` fix the steady state).
    t : float
        Time at which the steady state was reached (``t0`` when Newton's method found it
        directly).
    route : {"newton", "integration", "integration+newton"}
        What succeeded: Newton from ``y0``; integration until the residual test held; or
        integration for a while and then Newton from the state reached.
    residual_norm : float
        Weighted RMS norm of ``f(t, y*)`` (below 1).
    reciprocal_condition : float
        Estimate of ``1/cond_1`` of the equilibrated bordered Jacobian at ``y*``.
    stats : dict
        ``n_newton_iterations``, ``n_damping_steps``, ``n_newton_attempts``,
        ``n_integration_steps``, ``n_horizons``, ``n_rhs_evals``, ``n_jac_evals``,
        ``n_lu_decompositions``.
    conservation_laws : ConservationLaws
    sensitivity : {"implicit", "integration", "none"}
    controls : SteadyStateControls
    states, params : list of str
    """

    y: np.ndarray
    S: np.ndarray | None
    S_y0: np.ndarray | None
    t: float
    route: str
    residual_norm: float
    reciprocal_condition: float
    stats: dict
    conservation_laws: ConservationLaws
    sensitivity: str
    controls: SteadyStateControls
    states: list
    params: list
    _vjp_data: tuple | None = field(default=None, repr=False)

    def vjp(self, cotangent) -> SteadyStateGradient:
        """The adjoint: ``dL/dp`` and ``dL/dy0`` for ``cotangent = dL/dy*`` (shape (N,)).

        With implicit-function sensitivities this is one transposed solve with the factors
        of the bordered Jacobian (no P x N matrix); with integrated sensitivities it
        contracts them.
        """
        n = self.y.size
        w = validate_vector("cotangent", cotangent, n, "dL/dy*, one value per state")
        if self.sensitivity == "none":
            raise ValueError("this steady state was computed with sensitivity='none'")
        if self.sensitivity == "integration":
            return SteadyStateGradient(params=self.S.T @ w, y0=self.S_y0.T @ w)
        from pymc_odesens.sensitivity.steady_state_implicit import implicit_vjp

        kernels, p_kernel, laws, factors, initial_jac = self._vjp_data
        grad_p = np.zeros(len(self.params))
        grad_y0 = np.zeros(n)
        implicit_vjp(
            kernels.vjp_p, self.t, self.y, p_kernel, laws.matrix, laws.dependent,
            *factors, w, grad_p, grad_y0,
        )  # fmt: skip
        if initial_jac is not None:
            grad_p += initial_jac @ grad_y0
        return SteadyStateGradient(params=grad_p, y0=grad_y0)


def raise_for_steady_state(
    status: int, info: np.ndarray, stats: dict, system: OdeSystem, controls: SteadyStateControls
) -> None:
    """Raise the exception that matches a status of :func:`find_steady_state` (or nothing)."""
    if status == ss.CONVERGED:
        return
    residual = float(info[ss.INFO_RESIDUAL])
    t = float(info[ss.INFO_TIME])
    newton = ss.NEWTON_OUTCOMES.get(int(info[ss.INFO_NEWTON]), "unknown")
    message = (
        f"no steady state of {system.name!r} reached (method {controls.method!r}): residual "
        f"norm {residual:.3g} (needs < 1) at time {t:.6g} after "
        f"{stats['n_newton_iterations']} Newton iterations and "
        f"{stats['n_integration_steps']} integration steps; Newton: {newton}"
    )
    solver_status = int(info[ss.INFO_SOLVER_STATUS])
    solver_info = np.asarray(info[ss.INFO_SOLVER : ss.INFO_SOLVER + st.INFO_SIZE])
    cause = None
    if solver_status == st.MAX_NUM_STEPS:
        message += (
            f"; integration used its budget of max_num_steps = {controls.max_num_steps} steps "
            f"(at t = {solver_info[0]:.6g})"
        )
    elif solver_status != st.SUCCESS:
        try:
            st.raise_for_status(solver_status, solver_info, "bdf", system.states)
        except OdeSolverError as error:
            cause = error
            message += f"; integration failed: {error}"
    elif stats["n_horizons"]:
        message += f"; integration reached max_time = {controls.max_time:g}"
    raise SteadyStateNotReachedError(message, residual_norm=residual, t=t, stats=stats) from cause


def _singular_message(system: OdeSystem, result_t: float, rcond: float) -> str:
    laws = system.conservation_laws
    hint = (
        f" J_y has {laws.unresolved} left null vector(s) at random points that are not "
        "provable conservation laws (coefficients that depend on parameters, such as "
        "compartment volumes?)"
        if laws.unresolved
        else " The steady state is not isolated, or a conservation law was not found"
    )
    return (
        f"the steady state of {system.name!r} (reached at t = {result_t:.6g}) has a singular "
        f"Jacobian on its {laws.n_laws} conservation law(s) (reciprocal condition "
        f"{rcond:.2g} < {MIN_RECIPROCAL_CONDITION:g}), so the implicit function theorem "
        f"gives no sensitivities.{hint}; sensitivity='integration' integrates them instead."
    )


def steady_state(
    system: OdeSystem,
    y0,
    params,
    *,
    t0: float = 0.0,
    method: str = "auto",
    sensitivity: str = "implicit",
    relative_tolerance: float | None = None,
    absolute_tolerance=None,
    max_newton_iterations: int | None = None,
    max_num_steps: int | None = None,
    max_time: float | None = None,
    nonnegative: bool = False,
) -> SteadyStateResult:
    """The steady state ``y*`` reached from ``y0`` (``f(t, y*, p) = 0``) and its sensitivities.

    Parameters
    ----------
    system : OdeSystem
        Without events. Its :attr:`~pymc_odesens.OdeSystem.conservation_laws` hold the
        totals ``C y0`` fixed: the steady state is the one on the initial state's
        compatibility class.
    y0 : array_like, shape (N,), or None
        Initial state (Newton's starting point and the start of the integration); None
        takes the system's ``y0(p)``.
    params : array_like, shape (P,)
    t0 : float
        Start time. Newton solves ``f(t0, y, p) = 0``; the integration starts at ``t0``
        (for a right-hand side that depends on ``t`` the steady state is that of ``f`` at
        the time reached).
    method : {"auto", "newton", "integration"}
        ``"newton"``: damped Newton from ``y0`` only. ``"integration"``: ``bdf`` over
        horizons of growing length until the residual test holds. ``"auto"``: Newton from
        ``y0``; if it fails, integration, retrying Newton from the end of every horizon.
    sensitivity : {"implicit", "integration", "none"}
        ``"implicit"``: the implicit function theorem at ``y*`` (one factorisation, P + N
        solves; exact for the computed ``y*``). ``"integration"``: forward sensitivities
        integrated with the state (from ``y0``, whatever ``method``) until state and
        sensitivities pass the residual test, for steady states whose Jacobian is singular
        on the conservation laws found. ``"none"``: the state only.
    relative_tolerance, absolute_tolerance
        The residual test: ``sqrt(mean((f_i / (atol_i + rtol |y_i|))^2)) < 1`` (Stan's
        ``bdf`` defaults, 1e-10 and 1e-10; ``absolute_tolerance`` may be one per state).
        The integration uses the same tolerances.
    max_newton_iterations : int
        Jacobians per Newton run (default 40).
    max_num_steps : int
        Integration steps over all horizons (default 10000).
    max_time : float
        Longest integrated time (default 1e12).
    nonnegative : bool
        Reject Newton iterates with a state below ``-absolute_tolerance`` (damping instead),
        so that Newton cannot converge to a root with negative concentrations.

    Returns
    -------
    SteadyStateResult
        ``.y``, ``.S`` (N, P), ``.S_y0`` (N, N), ``.route``, ``.residual_norm``, ``.t``,
        ``.stats``; ``.vjp(w)`` gives ``dL/dp`` and ``dL/dy0`` by one transposed solve.

    Raises
    ------
    SteadyStateNotReachedError
        No steady state within the bounds (with the residual norm and time reached).
    SteadyStateSingularError
        With ``sensitivity="implicit"``, when the Jacobian at ``y*`` is singular on the
        conservation laws.
    ValueError, TypeError
        Bad arguments (named).
    """
    check_steady_state_system(system)
    if sensitivity not in STEADY_STATE_SENSITIVITIES:
        raise ValueError(
            f"sensitivity must be one of {', '.join(map(repr, STEADY_STATE_SENSITIVITIES))}; "
            f"got {sensitivity!r}"
        )
    n, n_p = system.n_states, system.n_params
    controls = resolve_steady_state_controls(
        n, method, relative_tolerance, absolute_tolerance, max_newton_iterations,
        max_num_steps, max_time, nonnegative,
    )  # fmt: skip
    if sensitivity == "integration" and method == "newton":
        raise ValueError("sensitivity='integration' integrates: use method 'auto' or 'integration'")
    params = validate_vector("params", params, n_p, "one value per parameter")
    try:
        t0 = float(t0)
    except (TypeError, ValueError):
        raise TypeError(f"t0 must be a float, got {t0!r}") from None
    if not np.isfinite(t0):
        raise ValueError(f"t0 must be finite, got {t0!r}")
    kernels = compile_kernels(system)
    p_kernel = params if n_p else np.zeros(1)
    initial_jac = None
    if y0 is None:
        if kernels.initial_state is None:
            raise ValueError("y0 is required: the system declares no initial_state y0(p)")
        y0 = kernels.evaluate("initial_state", t0, np.zeros(n), params)
        initial_jac = kernels.evaluate("initial_state_jac", t0, np.zeros(n), params)
    y0 = validate_vector("y0", y0, n, "one value per state")
    laws = system.conservation_laws
    from pymc_odesens.sensitivity.steady_state_core import find_steady_state

    if sensitivity == "integration":
        blocks = n_p + n
        rhs = compile_sensitivity_kernel(system, "both")
        s0 = np.zeros((blocks, n))
        if initial_jac is not None:
            s0[:n_p] = initial_jac
        s0[n_p:] = np.eye(n)
        z = np.concatenate((y0, s0.ravel()))
        mode = ss.INTEGRATION
    else:
        blocks = 0
        rhs = kernels.rhs
        z = y0.copy()
        mode = controls.mode
    n_z = z.size
    lu = np.zeros((n, n))
    pivots = np.zeros(n, dtype=np.int64)
    scales = np.zeros(2 * n + 1)
    stats_arr = np.zeros(len(ss.STAT_NAMES), dtype=np.int64)
    info = np.zeros(ss.INFO_SIZE)
    status = compiled_entry(find_steady_state)(
        mode,
        rhs,
        kernels.jac_y,
        t0,
        z,
        p_kernel,
        np.ascontiguousarray(laws.matrix),
        laws.dependent,
        np.full(n_z, controls.relative_tolerance),
        np.tile(controls.absolute_tolerance, 1 + blocks),
        n,
        controls.max_newton_iterations,
        controls.max_num_steps,
        controls.max_time,
        int(controls.nonnegative),
        lu,
        pivots,
        scales,
        stats_arr,
        info,
    )
    stats = {name: int(v) for name, v in zip(ss.STAT_NAMES, stats_arr)}
    raise_for_steady_state(status, info, stats, system, controls)
    y_star = z[:n].copy()
    t_star = float(info[ss.INFO_TIME])
    rcond = float(info[ss.INFO_RCOND])
    s_params = s_y0 = None
    if sensitivity == "integration":
        sens = z[n:].reshape(blocks, n)
        s_params = np.ascontiguousarray(sens[:n_p].T)
        s_y0 = np.ascontiguousarray(sens[n_p:].T)
    elif sensitivity == "implicit":
        if not rcond >= MIN_RECIPROCAL_CONDITION:
            raise SteadyStateSingularError(
                _singular_message(system, t_star, rcond),
                residual_norm=float(info[ss.INFO_RESIDUAL]),
                t=t_star,
                stats=stats,
            )
        from pymc_odesens.sensitivity.steady_state_implicit import implicit_sensitivities

        rows_p = np.zeros((n_p, n))
        rows_y0 = np.zeros((n, n))
        implicit_sensitivities(
            kernels.jac_p, t_star, y_star, p_kernel, np.ascontiguousarray(laws.matrix),
            laws.dependent, lu, pivots, scales, rows_p, rows_y0,
        )  # fmt: skip
        s_params = np.ascontiguousarray(rows_p.T)
        s_y0 = np.ascontiguousarray(rows_y0.T)
        if initial_jac is not None:
            s_params = s_params + s_y0 @ initial_jac.T
    return SteadyStateResult(
        y=y_star,
        S=s_params,
        S_y0=s_y0,
        t=t_star,
        route=ss.ROUTE_NAMES[int(info[ss.INFO_ROUTE])],
        residual_norm=float(info[ss.INFO_RESIDUAL]),
        reciprocal_condition=rcond,
        stats=stats,
        conservation_laws=laws,
        sensitivity=sensitivity,
        controls=controls,
        states=list(system.states),
        params=list(system.params),
        _vjp_data=(
            kernels,
            p_kernel,
            laws,
            (lu, pivots, scales),
            initial_jac,
        )
        if sensitivity == "implicit"
        else None,
    )
