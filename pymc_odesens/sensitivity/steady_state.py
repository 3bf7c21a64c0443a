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

from pymc_odesens.model import OdeSystem
from pymc_odesens.model.conservation import ConservationLaws
from pymc_odesens.sensitivity import steady_state_status as ss
from pymc_odesens.sensitivity.steady_state_controls import (
    STEADY_STATE_SENSITIVITIES,
    SteadyStateControls,
    check_steady_state_system,
    resolve_steady_state_controls,
)
from pymc_odesens.sensitivity.steady_state_linear import MIN_RECIPROCAL_CONDITION
from pymc_odesens.sensitivity.steady_state_problem import SteadyStateProblem, steady_state_error
from pymc_odesens.solvers.solve import validate_vector

__all__ = ["steady_state", "SteadyStateResult", "SteadyStateGradient"]


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
        How ``S`` was computed (``"auto"`` asked for resolves to one of the first two).
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

        problem, p_kernel, factors, initial_jac = self._vjp_data
        grad_p = np.zeros(len(self.params))
        grad_y0 = np.zeros(n)
        implicit_vjp(
            problem.kernels.vjp_p,
            self.t,
            self.y,
            p_kernel,
            problem.cons,
            problem.dependent,
            problem.structure,
            *factors,
            w,
            grad_p,
            grad_y0,
        )
        if initial_jac is not None:
            grad_p += initial_jac @ grad_y0
        return SteadyStateGradient(params=grad_p, y0=grad_y0)


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
    linear_solver: str = "auto",
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
    sensitivity : {"implicit", "integration", "auto", "none"}
        ``"implicit"``: the implicit function theorem at ``y*`` (one factorisation, P + N
        solves; exact for the computed ``y*``). ``"integration"``: forward sensitivities
        integrated with the state (from ``y0``, whatever ``method``) until state and
        sensitivities pass the residual test and have settled, for steady states whose
        Jacobian is singular on the conservation laws found. ``"auto"``: ``"implicit"``,
        or ``"integration"`` where the Jacobian is singular (AMICI's
        ``integrateIfNewtonFails``; ``.sensitivity`` of the result says which was used).
        ``"none"``: the state only.
    relative_tolerance, absolute_tolerance
        The residual test: ``sqrt(mean((f_i / (atol_i + rtol |y_i|))^2)) < 1`` (Stan's
        ``bdf`` defaults, 1e-10 and 1e-10; ``absolute_tolerance`` may be one per state).
        The integration uses the same tolerances.
    max_newton_iterations : int
        Newton steps per Newton run (default 40).
    max_num_steps : int
        Integration steps over all horizons (default 10000).
    max_time : float
        Longest integrated time (default 1e12).
    nonnegative : bool
        Reject Newton iterates with a state below ``-absolute_tolerance`` (damping instead),
        so that Newton cannot converge to a root with negative concentrations.
    linear_solver : {"auto", "dense", "sparse"}
        How the bordered Jacobian (Newton, the sensitivities and their adjoint) and the
        integration's Newton matrices are factorised: dense LU, or sparse LU on the
        pattern analysed once per system (no ``N x N`` array); ``"auto"`` chooses by
        size, density and fill as the integrators do (docs/solvers.md).

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
        conservation laws (``"auto"`` integrates the sensitivities instead).
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
        n,
        method,
        relative_tolerance,
        absolute_tolerance,
        max_newton_iterations,
        max_num_steps,
        max_time,
        nonnegative,
        linear_solver,
        "auto" if sensitivity == "none" else sensitivity,
    )
    if sensitivity == "integration" and method == "newton":
        raise ValueError("sensitivity='integration' integrates: use method 'auto' or 'integration'")
    params = validate_vector("params", params, n_p, "one value per parameter")
    try:
        t0 = float(t0)
    except (TypeError, ValueError):
        raise TypeError(f"t0 must be a float, got {t0!r}") from None
    if not np.isfinite(t0):
        raise ValueError(f"t0 must be finite, got {t0!r}")
    integrated = sensitivity == "integration"
    problem = SteadyStateProblem(system, controls, integrated)
    kernels = problem.kernels
    p_kernel = params if n_p else np.zeros(1)
    initial_jac = None
    if y0 is None:
        if kernels.initial_state is None:
            raise ValueError("y0 is required: the system declares no initial_state y0(p)")
        y0 = kernels.evaluate("initial_state", t0, np.zeros(n), params)
        initial_jac = kernels.evaluate("initial_state_jac", t0, np.zeros(n), params)
    y0 = validate_vector("y0", y0, n, "one value per state")
    s_params = s_y0 = factors = None
    if integrated:
        run, rows_p, rows_y0 = problem.find_with_sensitivities(y0, p_kernel, t0, initial_jac)
    else:
        run = problem.find(y0, p_kernel, t0)
        if sensitivity == "implicit":
            problem.check_regular(run)
    stats = run.stats_dict()
    error = steady_state_error(run.status, run.info, stats, system, controls)
    if error is not None:
        raise error
    if sensitivity == "auto":
        # AMICI's integrateIfNewtonFails: the implicit function theorem where the Jacobian
        # is regular, else the sensitivities integrated with the state from y0
        if run.reciprocal_condition >= MIN_RECIPROCAL_CONDITION:
            sensitivity = "implicit"
        else:
            sensitivity = "integration"
            integration = SteadyStateProblem(system, controls, True)
            run, rows_p, rows_y0 = integration.find_with_sensitivities(
                y0, p_kernel, t0, initial_jac
            )
            stats = {k: v + stats[k] for k, v in run.stats_dict().items()}
            error = steady_state_error(run.status, run.info, stats, system, controls)
            if error is not None:
                raise error
    y_star = run.z[:n].copy()
    if sensitivity == "integration":
        s_params = np.ascontiguousarray(rows_p.T)
        s_y0 = np.ascontiguousarray(rows_y0.T)
    elif sensitivity == "implicit":
        from pymc_odesens.sensitivity.steady_state_implicit import implicit_sensitivities

        rows_p = np.zeros((n_p, n))
        rows_y0 = np.zeros((n, n))
        factors = problem.factor(run.t, y_star, p_kernel)
        implicit_sensitivities(
            kernels.jac_p,
            run.t,
            y_star,
            p_kernel,
            problem.cons,
            problem.dependent,
            problem.structure,
            *factors,
            rows_p,
            rows_y0,
        )
        s_params = np.ascontiguousarray(rows_p.T)
        s_y0 = np.ascontiguousarray(rows_y0.T)
        if initial_jac is not None:
            s_params = s_params + s_y0 @ initial_jac.T
    return SteadyStateResult(
        y=y_star,
        S=s_params,
        S_y0=s_y0,
        t=run.t,
        route=ss.ROUTE_NAMES[int(run.info[ss.INFO_ROUTE])],
        residual_norm=float(run.info[ss.INFO_RESIDUAL]),
        reciprocal_condition=run.reciprocal_condition,
        stats=stats,
        conservation_laws=problem.laws,
        sensitivity=sensitivity,
        controls=controls,
        states=list(system.states),
        params=list(system.params),
        _vjp_data=(problem, p_kernel, factors, initial_jac) if sensitivity == "implicit" else None,
    )
