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
from pymc_odesens.sensitivity.steady_state_problem import SteadyStateProblem, steady_state_error
from pymc_odesens.solvers.compiled_entry import compiled_entry

__all__ = ["SteadyStateSpec", "solve_steady_states", "steady_state_vjps"]


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

    def __getstate__(self) -> dict:
        """Pickle without the prepared problem (its compiled kernels reload from the cache)."""
        state = dict(self.__dict__)
        state.pop("problem", None)
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
    """``(dL/dy0 (E, N), dL/dp (E, P))`` for ``cotangent = dL/dy*`` (E, N): one transposed
    solve per experiment (zero for failed ones)."""
    from pymc_odesens.sensitivity.steady_state_implicit import steady_state_vjp

    n_e, n, n_p = spec.n_experiments, spec.system.n_states, spec.system.n_params
    problem = spec.problem
    kernels = problem.kernels
    grad_y0 = np.zeros((n_e, n))
    grad_p = np.zeros((n_e, n_p))
    entry = compiled_entry(steady_state_vjp)
    for e in range(n_e):
        if failed[e]:
            continue
        p_kernel = _p_kernel(params, e)
        entry(
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
            np.ascontiguousarray(cotangent[e], dtype=np.float64),
            grad_p[e],
            grad_y0[e],
        )
        if spec.y0_from_system and n_p:
            jac0 = kernels.evaluate("initial_state_jac", spec.t0, np.zeros(n), p_kernel)
            grad_p[e] += jac0 @ grad_y0[e]
    return grad_y0, grad_p
