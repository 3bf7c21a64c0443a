"""`solve_sensitivity`: states and their derivatives with respect to parameters and y0."""

from __future__ import annotations

from pymc_odesens.codegen.sensitivity_source import WRT_CHOICES
from pymc_odesens.model import OdeSystem
from pymc_odesens.sensitivity.forward import forward_sensitivities
from pymc_odesens.sensitivity.result import SensitivityResult
from pymc_odesens.solvers.solve import prepare_problem
from pymc_odesens.solvers.status import stats_dict

__all__ = ["SENSITIVITY_METHODS", "solve_sensitivity"]

SENSITIVITY_METHODS = ("forward",)


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
    sensitivity : {"forward"}
        Forward sensitivities: the variational equations
        ``S' = J_y S + J_p`` integrated with the state by the chosen solver,
        with exact compiled Jacobians. For ``bdf``/``adams`` one LU of
        ``I - c J_y`` serves the state and every sensitivity column.
    wrt : {"params", "y0", "both"}
        Sensitivities with respect to the parameters (``.S`` of shape
        (T, N, P)), the initial state (``.S`` is the state-transition matrix
        of shape (T, N, N)), or both (``.S`` and ``.S_y0``).
    relative_tolerance, absolute_tolerance, max_num_steps
        Stan's controls and defaults (see :func:`pymc_odesens.solve`); the
        sensitivities use the same tolerances as the states (as Stan does).
    sensitivity_error_control : bool
        Include the sensitivities in the local error test (default, as in
        Stan and CVODES). With False only the state controls the step size;
        the Newton iteration still converges on every component.

    Returns
    -------
    SensitivityResult
        ``.t``, ``.y`` (T, N), ``.S``, ``.S_y0``, ``.stats``.
    """
    if sensitivity not in SENSITIVITY_METHODS:
        raise ValueError(f"sensitivity must be one of {SENSITIVITY_METHODS}, got {sensitivity!r}")
    if wrt not in WRT_CHOICES:
        raise ValueError(f"wrt must be one of {WRT_CHOICES}, got {wrt!r}")
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
    )
    y, s_params, s_y0, stats = forward_sensitivities(problem, wrt, sensitivity_error_control)
    main = s_y0 if wrt == "y0" else s_params
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
    )
