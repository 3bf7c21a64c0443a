"""Steady states of a batch of experiments and their vector-Jacobian products (numpy in and out).

The numerics of :class:`~pymc_odesens.ops.steady_state_ops.SteadyStateOp` and its
gradient, outside the Ops, as :mod:`pymc_odesens.ops.experiments` does for the
trajectories: a leading experiment axis E, experiments solved in parallel threads, failures
raised or recorded (finite placeholders: the initial state, zero gradients).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pymc_odesens.model import OdeSystem
from pymc_odesens.ops.experiments import _map
from pymc_odesens.ops.failures import record_failure
from pymc_odesens.sensitivity.steady_state_controls import SteadyStateControls
from pymc_odesens.sensitivity.steady_state_errors import (
    SteadyStateError,
    SteadyStateSingularError,
)
from pymc_odesens.sensitivity.steady_state_problem import SteadyStateProblem, steady_state_error
from pymc_odesens.solvers.compiled_entry import compiled_entry

__all__ = ["SteadyStateSpec", "solve_steady_states", "steady_state_vjps", "integrated_vjp"]

INTEGRATED_PHASE = "integrated steady-state sensitivities"
"""The phase a failure of :func:`integrated_vjp` is counted under."""


@dataclass(frozen=True, eq=False)
class SteadyStateSpec:
    """Everything about a batch of steady states that is fixed when the graph is built.

    Attributes
    ----------
    system : OdeSystem
    t0 : float
    controls : SteadyStateControls
    n_experiments : int
    y0_from_system : bool
        The starting state is the system's ``y0(p)`` (no ``y0`` input).
    on_failure : {"reject", "raise"}
    """

    system: OdeSystem
    t0: float
    controls: SteadyStateControls
    n_experiments: int
    y0_from_system: bool
    on_failure: str

    @cached_property
    def problem(self) -> SteadyStateProblem:
        """Kernels, conservation laws and tolerance arrays (prepared once)."""
        return SteadyStateProblem(self.system, self.controls)

    @cached_property
    def sensitivity_problem(self) -> SteadyStateProblem:
        """The state with its forward sensitivities (parameters, and the initial state when
        it is an input), integrated together: the gradient where the Jacobian at the steady
        state is singular (prepared on first use)."""
        return SteadyStateProblem(
            self.system,
            self.controls,
            integrated_sensitivities=True,
            wrt="params" if self.y0_from_system else "both",
        )

    def __getstate__(self) -> dict:
        """Pickle without the prepared problems (their compiled kernels reload from the
        cache)."""
        state = dict(self.__dict__)
        state.pop("problem", None)
        state.pop("sensitivity_problem", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def label(self, experiment: int) -> str:
        who = f"experiment {experiment} of " if self.n_experiments > 1 else ""
        return f"steady state of {who}system {self.system.name!r}"


def _start(spec: SteadyStateSpec, y0, p_kernel: np.ndarray, experiment: int) -> np.ndarray:
    if spec.y0_from_system:
        kernels = spec.problem.kernels
        return kernels.evaluate("initial_state", spec.t0, np.zeros(spec.system.n_states), p_kernel)
    return np.ascontiguousarray(y0[experiment], dtype=np.float64)


def _p_kernel(params, experiment: int) -> np.ndarray:
    row = np.ascontiguousarray(params[experiment], dtype=np.float64)
    return row if row.size else np.zeros(1)


def solve_steady_states(spec: SteadyStateSpec, y0, params):
    """``y*`` (E, N), the time each was reached (E,) and ``failed`` (E,) int8."""
    n_e, n = spec.n_experiments, spec.system.n_states
    problem = spec.problem
    y = np.empty((n_e, n))
    t = np.full(n_e, spec.t0)
    failed = np.zeros(n_e, dtype=np.int8)

    def run(e):
        p_kernel = _p_kernel(params, e)
        start = _start(spec, y0, p_kernel, e)
        result = problem.find(start, p_kernel, spec.t0)
        if spec.controls.sensitivity == "implicit":
            # AMICI's newtonOnly: a steady state without implicit-function sensitivities
            # is refused at once (else the value needs no inverse of the Jacobian, and the
            # gradient integrates the sensitivities where it is singular)
            problem.check_regular(result)
        error = steady_state_error(
            result.status, result.info, result.stats_dict(), spec.system, spec.controls
        )
        if error is None:
            y[e] = result.z
            t[e] = result.t
            return
        if spec.on_failure == "raise":
            raise error
        record_failure(error, spec.label(e))
        y[e] = np.where(np.isfinite(start), start, 0.0)
        failed[e] = 1

    _map(run, n_e)
    return y, t, failed


def steady_state_vjps(spec: SteadyStateSpec, y0, params, y, t, failed, cotangent):
    """``(dL/dy0 (E, N), dL/dp (E, P))`` for ``cotangent = dL/dy*`` (E, N), zero for failed
    experiments.

    By the implicit function theorem (one transposed solve per experiment) where the
    bordered Jacobian at the steady state is regular; where it is singular (or with the
    control ``sensitivity="integration"``) from the forward sensitivities integrated with the
    state (:func:`integrated_vjp`). With ``sensitivity="implicit"`` a singular Jacobian
    raises :class:`~pymc_odesens.SteadyStateSingularError`.
    """
    from pymc_odesens.sensitivity.steady_state_implicit import steady_state_vjp

    n_e, n, n_p = spec.n_experiments, spec.system.n_states, spec.system.n_params
    problem = spec.problem
    kernels = problem.kernels
    mode = spec.controls.sensitivity
    grad_y0 = np.zeros((n_e, n))
    grad_p = np.zeros((n_e, n_p))
    entry = compiled_entry(steady_state_vjp)
    for e in range(n_e):
        if failed[e]:
            continue
        p_kernel = _p_kernel(params, e)
        w = np.ascontiguousarray(cotangent[e], dtype=np.float64)
        regular = mode != "integration" and entry(
            kernels.jac_y_values,
            kernels.vjp_p,
            float(t[e]),
            np.ascontiguousarray(y[e], dtype=np.float64),
            p_kernel,
            problem.cons,
            problem.dependent,
            problem.structure,
            problem.source,
            problem.n_jac,
            w,
            grad_p[e],
            grad_y0[e],
        )
        if not regular:
            if mode == "implicit":
                raise SteadyStateSingularError(
                    f"{spec.label(e)}: the bordered Jacobian at the steady state is singular, "
                    "so the implicit function theorem gives no gradient; the steady-state "
                    "control sensitivity='auto' or 'integration' integrates the "
                    "sensitivities instead",
                    t=float(t[e]),
                )
            try:
                start = _start(spec, y0, p_kernel, e)
                integrated_vjp(spec, start, p_kernel, e, w, grad_p[e], grad_y0[e])
            except SteadyStateError as error:
                if spec.on_failure == "raise":
                    raise
                # as a failed adjoint backward pass: counted, and a zero gradient
                record_failure(error, spec.label(e), INTEGRATED_PHASE)
                grad_p[e] = 0.0
                grad_y0[e] = 0.0
                continue
        if spec.y0_from_system and n_p:
            jac0 = kernels.evaluate("initial_state_jac", spec.t0, np.zeros(n), p_kernel)
            grad_p[e] += jac0 @ grad_y0[e]
    return grad_y0, grad_p


def integrated_vjp(
    spec: SteadyStateSpec,
    start: np.ndarray,
    p_kernel: np.ndarray,
    experiment: int,
    cotangent: np.ndarray,
    grad_p: np.ndarray,
    grad_y0: np.ndarray,
) -> None:
    """``grad_p = S_p^T w`` and ``grad_y0 = S_y0^T w`` from the forward sensitivities
    integrated with the state from the experiment's start until both have settled (AMICI's
    ``integrateIfNewtonFails``); ``start`` is the state the steady state was reached from.
    With the system's ``y0(p)`` as start, ``S_p`` includes its path (seeded with
    ``dy0/dp``) and ``grad_y0`` is zero; else ``S_p`` is at fixed ``y0``.

    Raises the :class:`~pymc_odesens.SteadyStateError` when they do not settle (the
    gradient does not exist or is not reached within the controls' bounds); in a model
    (``on_failure="reject"``) :func:`steady_state_vjps` counts it and gives that
    experiment a zero gradient, as a failed adjoint backward pass does.
    """
    problem = spec.sensitivity_problem
    initial_jac = None
    if spec.y0_from_system and spec.system.n_params:
        initial_jac = problem.kernels.evaluate(
            "initial_state_jac", spec.t0, np.zeros(spec.system.n_states), p_kernel
        )
    run, rows_p, rows_y0 = problem.find_with_sensitivities(start, p_kernel, spec.t0, initial_jac)
    error = steady_state_error(run.status, run.info, run.stats_dict(), spec.system, spec.controls)
    if error is not None:
        raise type(error)(
            f"{spec.label(experiment)}: the sensitivities integrated for the gradient (the "
            f"Jacobian at the steady state is singular): {error}",
            residual_norm=error.residual_norm,
            t=error.t,
            stats=error.stats,
        ) from error
    grad_p[:] = rows_p @ cotangent
    grad_y0[:] = rows_y0 @ cotangent if rows_y0.shape[0] else 0.0
