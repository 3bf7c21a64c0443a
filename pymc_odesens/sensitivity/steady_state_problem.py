"""A steady-state problem prepared once (kernels, laws, controls) and solved many times.

:func:`pymc_odesens.steady_state` solves one; the PyMC Ops solve one per experiment and
log-density evaluation, without validating again what the graph fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_odesens.codegen import compile_kernels, compile_sensitivity_kernel
from pymc_odesens.model import OdeSystem
from pymc_odesens.sensitivity import steady_state_status as ss
from pymc_odesens.sensitivity.steady_state_controls import SteadyStateControls
from pymc_odesens.sensitivity.steady_state_errors import (
    SteadyStateError,
    SteadyStateNotReachedError,
    SteadyStateSingularError,
)
from pymc_odesens.sensitivity.steady_state_linear import (
    MIN_RECIPROCAL_CONDITION,
    bordered_structure,
    factor_steady_state_jacobian,
)
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.compiled_entry import compiled_entry
from pymc_odesens.solvers.errors import OdeSolverError
from pymc_odesens.solvers.newton_matrix import newton_structure

__all__ = ["SteadyStateProblem", "SteadyStateRun", "steady_state_error"]


@dataclass
class SteadyStateRun:
    """Outcome of one :meth:`SteadyStateProblem.find`.

    Attributes
    ----------
    status : int
        ``CONVERGED``, ``NOT_REACHED`` or ``INTEGRATION_FAILED``, or ``SINGULAR`` when the
        implicit-function sensitivities were asked for and the Jacobian is singular.
    z : numpy.ndarray
        The steady state (with the integrated sensitivities after it, if asked for).
    info : numpy.ndarray
        :mod:`~pymc_odesens.sensitivity.steady_state_status` information slots.
    stats : numpy.ndarray of int64
    """

    status: int
    z: np.ndarray
    info: np.ndarray
    stats: np.ndarray

    @property
    def t(self) -> float:
        return float(self.info[ss.INFO_TIME])

    @property
    def reciprocal_condition(self) -> float:
        return float(self.info[ss.INFO_RCOND])

    def stats_dict(self) -> dict[str, int]:
        return {name: int(v) for name, v in zip(ss.STAT_NAMES, self.stats)}


class SteadyStateProblem:
    """The kernels, conservation laws and tolerance arrays of a system's steady states.

    Parameters
    ----------
    system : OdeSystem
    controls : SteadyStateControls
    integrated_sensitivities : bool
        Integrate the forward sensitivities (parameters and initial state) with the state
        instead of computing them at the steady state.
    wrt : {"both", "params"}
        The integrated sensitivities' columns: parameters and initial state, or the
        parameters only (for a start ``y0(p)``, whose path is seeded into them).
    """

    def __init__(
        self,
        system: OdeSystem,
        controls: SteadyStateControls,
        integrated_sensitivities: bool = False,
        wrt: str = "both",
    ) -> None:
        from pymc_odesens.sensitivity.steady_state_core import find_steady_state

        n, n_p = system.n_states, system.n_params
        self.system = system
        self.controls = controls
        self.kernels = compile_kernels(system)
        laws = system.conservation_laws
        self.laws = laws
        self.cons = np.ascontiguousarray(laws.matrix, dtype=np.float64)
        self.dependent = np.ascontiguousarray(laws.dependent, dtype=np.int64)
        if wrt not in ("both", "params"):
            raise ValueError(f"wrt must be 'both' or 'params', got {wrt!r}")
        self.wrt = wrt
        self.blocks = (n_p + (n if wrt == "both" else 0)) if integrated_sensitivities else 0
        if integrated_sensitivities:
            self.rhs = compile_sensitivity_kernel(system, wrt)
            self.mode = ss.INTEGRATION
        else:
            self.rhs = self.kernels.rhs
            self.mode = controls.mode
        self.rtol = np.full(n * (1 + self.blocks), controls.relative_tolerance)
        self.atol = np.tile(controls.absolute_tolerance, 1 + self.blocks)
        self.structure, self.source = bordered_structure(
            self.kernels, self.cons, self.dependent, controls.linear_solver
        )
        self.newton = newton_structure(self.kernels, controls.linear_solver)
        self.n_jac = int(self.kernels.jacobian_pattern[0].size)
        self._entry = compiled_entry(find_steady_state)

    def find(self, z0: np.ndarray, p_kernel: np.ndarray, t0: float) -> SteadyStateRun:
        """Run the compiled routine from ``z0`` (the state, then sensitivity blocks if
        integrated); ``p_kernel`` holds at least one entry."""
        n = self.system.n_states
        z = np.array(z0, dtype=np.float64)
        stats = np.zeros(len(ss.STAT_NAMES), dtype=np.int64)
        info = np.zeros(ss.INFO_SIZE)
        c = self.controls
        status = self._entry(
            self.mode,
            self.rhs,
            self.kernels.jac_y_values,
            float(t0),
            z,
            p_kernel,
            self.cons,
            self.dependent,
            self.rtol,
            self.atol,
            n,
            c.max_newton_iterations,
            c.max_num_steps,
            c.max_time,
            int(c.nonnegative),
            self.structure,
            self.source,
            self.newton,
            stats,
            info,
        )
        return SteadyStateRun(int(status), z, info, stats)

    def find_with_sensitivities(
        self, y0: np.ndarray, p_kernel: np.ndarray, t0: float, initial_jac=None
    ) -> tuple[SteadyStateRun, np.ndarray, np.ndarray]:
        """Integrate the state from ``y0`` with its forward sensitivities until both have
        settled (a problem built with ``integrated_sensitivities=True``).

        Returns ``(run, rows_p, rows_y0)``: ``rows_p[k] = dy*/dp_k`` (P, N) and
        ``rows_y0[j] = dy*/dy0_j`` (N, N; (0, N) for ``wrt="params"``) at the state
        reached. ``initial_jac`` (P, N), when given, seeds ``rows_p`` with ``dy0/dp``
        (the path through the system's ``y0(p)``); without it ``rows_p`` holds the
        derivatives at fixed ``y0``.
        """
        if not self.blocks:
            raise ValueError("this steady-state problem integrates no sensitivities")
        n, n_p = self.system.n_states, self.system.n_params
        s0 = np.zeros((self.blocks, n))
        if initial_jac is not None:
            s0[:n_p] = initial_jac
        if self.wrt == "both":
            s0[n_p:] = np.eye(n)
        run = self.find(
            np.concatenate((np.asarray(y0, dtype=np.float64), s0.ravel())), p_kernel, t0
        )
        sens = run.z[n:].reshape(self.blocks, n)
        return run, np.ascontiguousarray(sens[:n_p]), np.ascontiguousarray(sens[n_p:])

    def factor(self, t: float, y: np.ndarray, p_kernel: np.ndarray) -> tuple:
        """``(ints, floats, scales)``: the factors of the bordered Jacobian at ``(t, y)``
        (for :mod:`~pymc_odesens.sensitivity.steady_state_implicit`, with
        ``self.structure``)."""
        ok, ints, floats, scales = factor_steady_state_jacobian(
            self.kernels.jac_y_values,
            float(t),
            np.ascontiguousarray(y, dtype=np.float64),
            p_kernel,
            self.cons,
            self.structure,
            self.source,
            self.n_jac,
        )
        if not ok:
            raise SteadyStateSingularError(
                f"the bordered Jacobian of {self.system.name!r} at its steady state is singular",
                residual_norm=0.0,
                t=float(t),
                stats={},
            )
        return ints, floats, scales

    def check_regular(self, run: SteadyStateRun) -> None:
        """Mark ``run`` SINGULAR when its bordered Jacobian is (numerically) singular."""
        if run.status == ss.CONVERGED and not run.reciprocal_condition >= MIN_RECIPROCAL_CONDITION:
            run.status = ss.SINGULAR


def steady_state_error(
    status: int,
    info: np.ndarray,
    stats: dict,
    system: OdeSystem,
    controls: SteadyStateControls,
) -> SteadyStateError | None:
    """The exception that a status of the compiled routine stands for (None on success)."""
    if status == ss.CONVERGED:
        return None
    residual = float(info[ss.INFO_RESIDUAL])
    t = float(info[ss.INFO_TIME])
    if status == ss.SINGULAR:
        return SteadyStateSingularError(
            _singular_message(system, t, float(info[ss.INFO_RCOND])),
            residual_norm=residual,
            t=t,
            stats=stats,
        )
    newton = ss.NEWTON_OUTCOMES.get(int(info[ss.INFO_NEWTON]), "unknown")
    verdict = "passes the test < 1" if residual < 1.0 else "needs < 1"
    message = (
        f"no steady state of {system.name!r} reached (method {controls.method!r}): residual "
        f"norm {residual:.3g} ({verdict}) at time {t:.6g} after "
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
        change = float(info[ss.INFO_CHANGE])
        if not change < 1.0:
            message += (
                f"; the state had not settled: {_changed_component(system, info)} changed "
                f"from {info[ss.INFO_CHANGE_FROM]:.6g} to {info[ss.INFO_CHANGE_TO]:.6g} "
                f"between t = {info[ss.INFO_HALF_TIME]:.6g} and t = {t:.6g} (weighted change "
                f"{change:.3g}, needs < 1)"
            )
            if residual < 1.0:
                message += (
                    ": it passes the residual test only because rtol |y| grew with it, so "
                    "it drifts or grows without bound (no steady state)"
                )
    error = SteadyStateNotReachedError(message, residual_norm=residual, t=t, stats=stats)
    error.__cause__ = cause
    return error


def _changed_component(system: OdeSystem, info: np.ndarray) -> str:
    """Name of the component of the integrated vector that changed most (a state, or a
    sensitivity ``d state / d parameter`` or ``d state / d state(t0)``)."""
    k = int(info[ss.INFO_CHANGE_COMPONENT])
    n = system.n_states
    if not 0 <= k:
        return "no component"
    block, i = divmod(k, n)
    state = system.states[i]
    if block == 0:
        return f"state {state!r}"
    block -= 1
    if block < system.n_params:
        return f"the sensitivity d{state}/d{system.params[block]}"
    return f"the sensitivity d{state}/d{system.states[block - system.n_params]}(t0)"


def _singular_message(system: OdeSystem, t: float, rcond: float) -> str:
    laws = system.conservation_laws
    hint = (
        f" J_y has {laws.unresolved} left null vector(s) at random points that are not "
        "provable conservation laws (coefficients that depend on parameters, such as "
        "compartment volumes?)"
        if laws.unresolved
        else " The steady state is not isolated, or a conservation law was not found"
    )
    return (
        f"the steady state of {system.name!r} (reached at t = {t:.6g}) has a singular "
        f"Jacobian on its {laws.n_laws} conservation law(s) (reciprocal condition "
        f"{rcond:.2g} < {MIN_RECIPROCAL_CONDITION:g}), so the implicit function theorem "
        f"gives no sensitivities.{hint}; sensitivity='integration' integrates them instead."
    )
