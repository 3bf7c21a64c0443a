"""`solve_sensitivity`: states and their derivatives with respect to parameters and y0."""

from __future__ import annotations

import numpy as np

from pymc_odesens.codegen.sensitivity_source import WRT_CHOICES
from pymc_odesens.model import OdeSystem
from pymc_odesens.sensitivity.forward import forward_sensitivities
from pymc_odesens.sensitivity.pbs_options import PBS_ALGORITHMS, PbsOptions, resolve_pbs_options
from pymc_odesens.sensitivity.result import SensitivityResult
from pymc_odesens.solvers.solve import prepare_problem
from pymc_odesens.solvers.status import stats_dict

__all__ = ["SENSITIVITY_METHODS", "solve_sensitivity"]

SENSITIVITY_METHODS = ("forward", "pbs", "pbsr", "exp")


def solve_sensitivity(
    system: OdeSystem,
    y0,
    times,
    params,
    *,
    t0: float = 0.0,
    method: str = "bdf",
    sensitivity: str = "forward",
    wrt: str = "params",
    relative_tolerance: float | None = None,
    absolute_tolerance=None,
    max_num_steps: int | None = None,
    sensitivity_error_control: bool = True,
    pbs_options: PbsOptions | dict | None = None,
    linear_solver: str = "auto",
) -> SensitivityResult:
    """Solve the system and its sensitivities ``dy(t)/dp`` and/or ``dy(t)/dy0``.

    Parameters
    ----------
    system : OdeSystem
    y0 : array_like, shape (N,), or None
        Initial state; None takes the system's ``y0(p)``, and then
        ``S(t0) = dy0/dp`` (otherwise ``S(t0) = 0``).
    times : array_like, shape (T,)
        Output times, non-decreasing and >= ``t0``.
    params : array_like, shape (P,)
    t0 : float
    method : {"bdf", "adams", "rk45", "ckrk"}
    sensitivity : {"forward", "pbs", "pbsr", "exp"}
        ``"forward"``: the variational equations ``S' = J_y S + J_p``
        integrated with the state by the chosen solver, with exact compiled
        Jacobians. For ``bdf``/``adams`` one LU of ``I - c J_y`` serves the
        state and every sensitivity column.
        ``"pbs"``, ``"pbsr"``, ``"exp"``: the Peano–Baker-series methods of
        Eriksson et al. (arXiv:2109.00067; Algorithms 1, 2 and 3): the chosen
        solver integrates the state alone, and ``S`` is carried over its
        accepted steps with ``J_y``, ``J_p`` evaluated on the recorded
        trajectory (see ``docs/pbs.md``). ``.pbs_steps`` reports the branch
        each solver step took. Approximations whose error is set by the
        solver's steps, not by the tolerances directly.
    wrt : {"params", "y0", "both"}
        Sensitivities with respect to the parameters (``.S`` of shape
        (T, N, P)), the initial state (``.S`` is the state-transition matrix
        of shape (T, N, N)), or both (``.S`` and ``.S_y0``).
    relative_tolerance, absolute_tolerance, max_num_steps
        Stan's controls and defaults (see :func:`pymc_odesens.solve`); the
        sensitivities use the same tolerances as the states (as Stan does).
    sensitivity_error_control : bool
        Include the sensitivities in the local error test (default, as in
        Stan, which sets CVODES' ``errconS``). With False only the state
        controls the step size; the Newton iteration still converges on every
        component. numpy booleans are accepted. Not used by the PBS methods
        (only the state is integrated).
    pbs_options : PbsOptions or dict, optional
        Controls of ``"pbs"``, ``"pbsr"`` and ``"exp"`` (refinement factor
        ``c``, switch tolerance ``eps``, ``n_max``, ``norm``, ``interpolation``,
        ...; see :class:`~pymc_odesens.sensitivity.PbsOptions`); None takes its
        defaults (the paper's, except that PBSR's Exp steps take the mean of
        the Jacobians at both ends). Only valid with these methods.
    linear_solver : {"auto", "dense", "sparse"}
        Factorisation of the Newton matrices of ``bdf`` and ``adams`` (see
        :func:`pymc_odesens.solve`); the sensitivity columns share the state's. With
        ``"pbs"``, ``"pbsr"`` and ``"exp"`` it applies to the state's solve only: their
        march works with dense ``N x N`` Jacobians and matrix exponentials whatever it
        says (docs/solvers.md, "Linear solver").

    Returns
    -------
    SensitivityResult
        ``.t``, ``.y`` (T, N), ``.S``, ``.S_y0``, ``.stats`` (and
        ``.pbs_steps`` for the PBS methods). A system without states (an SBML model
        made of rules only) has empty arrays of these shapes on every route, as in
        :func:`pymc_odesens.solve`.
    """
    if sensitivity not in SENSITIVITY_METHODS:
        raise ValueError(f"sensitivity must be one of {SENSITIVITY_METHODS}, got {sensitivity!r}")
    if sensitivity in PBS_ALGORITHMS:
        options = resolve_pbs_options(pbs_options)
    elif pbs_options is not None:
        raise ValueError(
            f"pbs_options applies to sensitivity='pbs', 'pbsr' or 'exp', not {sensitivity!r}"
        )
    if wrt not in WRT_CHOICES:
        raise ValueError(f"wrt must be one of {WRT_CHOICES}, got {wrt!r}")
    if isinstance(sensitivity_error_control, np.bool_):
        sensitivity_error_control = bool(sensitivity_error_control)
    if not isinstance(sensitivity_error_control, bool):
        raise TypeError(
            f"sensitivity_error_control must be True or False, got {sensitivity_error_control!r}"
        )
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
    if sensitivity in PBS_ALGORITHMS and system.n_states:
        # imported here: the march compiles (or loads) only when a PBS method is used
        from pymc_odesens.sensitivity.pbs import pbs_sensitivities

        y, s_params, s_y0, pbs_stats, report = pbs_sensitivities(problem, wrt, sensitivity, options)
        return SensitivityResult(
            t=problem.times,
            y=y,
            S=s_y0 if wrt == "y0" else s_params,
            S_y0=s_y0 if wrt == "both" else None,
            stats=pbs_stats,
            controls=problem.controls,
            method=method,
            sensitivity=sensitivity,
            wrt=wrt,
            states=list(system.states),
            params=list(system.params),
            pbs_steps=report,
        )
    # (a system without states, an SBML model of rules only, has empty arrays on every route)
    y, s_params, s_y0, stats, events, dtau = forward_sensitivities(
        problem, wrt, sensitivity_error_control
    )
    main = s_y0 if wrt == "y0" else s_params
    n_p = system.n_params if wrt != "y0" else 0
    return SensitivityResult(
        t=problem.times,
        y=y,
        S=main,
        S_y0=s_y0 if wrt == "both" else None,
        stats=stats_dict(stats),
        controls=problem.controls,
        method=method,
        sensitivity=sensitivity,
        wrt=wrt,
        states=list(system.states),
        params=list(system.params),
        events=events,
        event_time_sensitivity=None
        if events is None
        else (dtau[:, n_p:] if wrt == "y0" else dtau[:, :n_p]),
        event_time_sensitivity_y0=None if events is None or wrt != "both" else dtau[:, n_p:],
    )
