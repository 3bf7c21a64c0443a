"""Sensitivities by the Peano–Baker series: PBS, PBSR and Exp (Eriksson et al. 2021).

The full sensitivity matrix from ONE N-dimensional state solve: any of the
four solvers integrates the state alone and records every accepted step
(time, state, slope; for ``rk45`` its continuous extension too); the compiled
march (:mod:`pymc_odesens.sensitivity.pbs_march`) then carries ``S`` over those
steps with small dense algebra on ``J_y`` and ``J_p``. No N(1+P) system is
integrated. See ``docs/pbs.md`` for the algorithms, options, accuracy and cost.
"""

from __future__ import annotations

import warnings

import numpy as np

from pymc_odesens.codegen import compile_event_kernels
from pymc_odesens.codegen.sensitivity_source import sensitivity_blocks
from pymc_odesens.sensitivity.forward import initial_sensitivities
from pymc_odesens.sensitivity.pbs_errors import non_finite_sensitivity_error
from pymc_odesens.sensitivity.pbs_march import (
    COUNTER_NAMES,
    MARCH_SIGNATURE,
    march_sensitivities,
)
from pymc_odesens.sensitivity.pbs_options import (
    DORMAND_PRINCE_DENSE,
    PBS_ALGORITHMS,
    PbsOptions,
)
from pymc_odesens.sensitivity.pbs_report import PbsStepReport
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.integrate import integrate
from pymc_odesens.solvers.solve import OdeProblem

__all__ = ["RecordedTrajectory", "pbs_sensitivities", "record_trajectory"]

INITIAL_CAPACITY = 512
_CAPACITY_HINTS: dict[tuple, int] = {}


def _compiled_march():
    """The march's compiled entry point (its signature is fixed): calling it directly skips
    the dispatcher's typing of the three kernel arguments, ~35 us a call (measured on pka)."""
    overload = march_sensitivities.overloads.get(MARCH_SIGNATURE.args)
    return march_sensitivities if overload is None else overload.entry_point


class RecordedTrajectory:
    """Every accepted step of one state solve: ``t`` (K+1,), ``y`` and ``f`` (K+1, N).

    ``dense`` (K+1, N) holds ``rk45``'s continuous-extension coefficients
    (0 rows for the other solvers); ``y_out`` the states at the output times
    and ``stats`` the solver statistics.
    """

    __slots__ = ("t", "y", "f", "dense", "count", "y_out", "stats")

    def __init__(self, t, y, f, dense, count, y_out, stats):
        self.t, self.y, self.f, self.dense = t, y, f, dense
        self.count, self.y_out, self.stats = count, y_out, stats


def record_trajectory(problem: OdeProblem, with_dense: bool) -> RecordedTrajectory:
    """Solve the state of ``problem`` once, recording every accepted step.

    The recording arrays start at a capacity remembered from earlier solves of
    the same system and method and grow fourfold (with a new solve) when full.
    """
    system = problem.system
    n = system.n_states
    method = problem.controls.method
    key = (str(problem.kernels.path), method)
    capacity = max(INITIAL_CAPACITY, int(1.25 * _CAPACITY_HINTS.get(key, 0)) + 16)
    while True:
        rec_t = np.empty(capacity)
        rec_y = np.empty((capacity, n))
        rec_f = np.empty((capacity, n))
        rec_dense = np.empty((capacity if with_dense else 0, n))
        rec_count = np.zeros(1, dtype=np.int64)
        jac, newton = problem.newton_jacobian()
        y_out, stats = integrate(
            method,
            problem.kernels.rhs,
            jac,
            problem.t0,
            problem.y0,
            problem.params,
            problem.times,
            problem.controls,
            n_state=n,
            n_err=n,
            atol=problem.controls.absolute_tolerance,
            newton=newton,
            state_names=system.states,
            recording=(1, rec_t, rec_y, rec_f, rec_count, rec_dense),
        )
        if y_out is not None:
            break
        capacity *= 4
    count = int(rec_count[0])
    _CAPACITY_HINTS[key] = max(count, _CAPACITY_HINTS.get(key, 0))
    return RecordedTrajectory(rec_t, rec_y, rec_f, rec_dense, count, y_out, stats)


def _first_non_finite_jacobian(problem: OdeProblem, trajectory: RecordedTrajectory, n_p: int):
    """Time of the first recorded step whose ``J_y`` (or ``J_p``) is not finite."""
    params = problem.params
    for t, y in zip(trajectory.t[: trajectory.count], trajectory.y[: trajectory.count]):
        values = [problem.kernels.evaluate("jac_y", t, y, params)]
        if n_p:
            values.append(problem.kernels.evaluate("jac_p", t, y, params))
        if not all(np.all(np.isfinite(v)) for v in values):
            return float(t)
    return float("nan")


def pbs_sensitivities(
    problem: OdeProblem,
    wrt: str,
    algorithm: str,
    options: PbsOptions,
    *,
    non_finite: str = "warn",
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, dict, PbsStepReport]:
    """States and sensitivities by ``algorithm`` ("pbs", "pbsr" or "exp").

    ``non_finite``: what a non-finite ``S`` does, ``"warn"`` (a RuntimeWarning; ``S``
    keeps the NaN) or ``"raise"`` (:class:`NonFiniteSensitivityError`).

    Returns
    -------
    y : (T, N)
    S_params : (T, N, P) or None
    S_y0 : (T, N, N) or None
    stats : dict
        The state solver's statistics and the march's counters.
    report : PbsStepReport
    """
    system = problem.system
    if compile_event_kernels(system) is not None:
        raise ValueError(
            f"sensitivity={algorithm!r} does not support systems with events "
            f"({len(system.events)} declared); use sensitivity='forward'"
        )
    n = system.n_states
    n_p, n_y0 = sensitivity_blocks(system, wrt)
    n_cols = n_p + n_y0
    method = problem.controls.method
    kind = options.interpolation_code(method)
    trajectory = record_trajectory(problem, with_dense=kind == DORMAND_PRINCE_DENSE)
    s0 = initial_sensitivities(problem, n_p, n_y0).reshape(n_cols, n)
    n_times = problem.times.size
    s_out = np.empty((n_times, n_cols, n))
    n_steps = max(trajectory.count - 1, 0)
    branch = np.zeros(n_steps, dtype=np.int64)
    substeps = np.zeros(n_steps, dtype=np.int64)
    counters = np.zeros(len(COUNTER_NAMES), dtype=np.int64)
    params = problem.params if problem.params.size else np.zeros(1)
    code = _compiled_march()(
        PBS_ALGORITHMS[algorithm],
        problem.kernels.rhs,
        problem.kernels.jac_y,
        problem.kernels.jac_p,
        params,
        n_p,
        trajectory.t,
        trajectory.y,
        trajectory.f,
        trajectory.dense,
        trajectory.count,
        kind,
        problem.times,
        np.ascontiguousarray(s0),
        options.compiled_controls(),
        options.norm_code,
        1 if options.steady_state_test == "jacobians" else 0,
        1 if options.exp_step_for(algorithm) == "trapezoid" else 0,
        s_out,
        branch,
        substeps,
        counters,
    )
    if non_finite == "raise" and (code != 0 or not np.all(np.isfinite(s_out))):
        first_bad = int(np.argmin(np.isfinite(s_out).all(axis=(1, 2))))
        raise non_finite_sensitivity_error(algorithm, problem.times[first_bad], code != 0)
    if code != 0:
        t_bad = _first_non_finite_jacobian(problem, trajectory, n_p)
        st.raise_for_status(
            st.NON_FINITE_DERIVATIVE,
            np.array([t_bad, 0.0, -1.0, 0.0]),
            f"sensitivity={algorithm!r} on the {method} trajectory",
        )
    if not np.all(np.isfinite(s_out)):
        hint = (
            " (the PBS step is explicit: on a stiff problem use sensitivity='pbsr' or a "
            "smaller PbsOptions.max_step)"
            if algorithm == "pbs"
            else ""
        )
        warnings.warn(
            f"sensitivity={algorithm!r}: S is not finite{hint}", RuntimeWarning, stacklevel=3
        )
    sens = s_out.transpose(0, 2, 1)
    s_params = np.ascontiguousarray(sens[:, :, :n_p]) if wrt != "y0" else None
    s_y0 = np.ascontiguousarray(sens[:, :, n_p:]) if wrt != "params" else None
    stats = st.stats_dict(trajectory.stats)
    stats.update({name: int(c) for name, c in zip(COUNTER_NAMES, counters)})
    report = PbsStepReport(
        t=trajectory.t[: trajectory.count].copy(),
        y=trajectory.y[: trajectory.count].copy(),
        branch=branch,
        substeps=substeps,
        algorithm=algorithm,
        interpolation=options.describe_interpolation(method),
    )
    return trajectory.y_out, s_params, s_y0, stats, report
