"""Local maximisation of a log-posterior from one start: L-BFGS-B, or a trust region with
the Fisher information.

Both minimise minus the log-posterior of a :class:`~pymc_odesens.inference.mode_objective.
ModeObjective` with its exact gradient, inside the bounds of its bounded coordinates:

- ``"L-BFGS-B"`` (scipy): a quasi-Newton method that learns the curvature from the
  gradients it has seen. One log-posterior and gradient per iteration (plus line-search
  steps). A line search that meets a point where the log-posterior is not finite (a failed
  ODE solve) ends scipy's run at the last finite point; the search restarts from there
  while the log-posterior still rises and the projected gradient is not small.
- ``"trust-region-fisher"``: a projected Levenberg-Marquardt trust region whose Hessian is
  the expected Fisher information of the likelihood minus the priors' Hessian (the
  Gauss-Newton Hessian of least squares, generalised to noise parameters), from forward
  sensitivities: one solve with sensitivities per iteration gives the value, the gradient
  and the curvature. Needs observed Normal or LogNormal variables (what PEtab's normal
  noise gives). scipy's ``trust-constr`` (interior point, for the bounds) and
  ``trust-exact`` (in logit coordinates of the box) with the same Hessian were tried first
  and ended far from the optimum on Boehm_JProteomeRes2014 (docs/pymc.md).

  The forward sensitivities can fail where the log-posterior and its gradient (by the
  model's own route, an adjoint for instance) do not: on Fujita_SciSignal2010, 8 of 24
  starts at particles of a tempered-SMC population (``bdf`` at ``max_num_steps``), and
  trial steps of others, whose trust regions then shrink to nothing, or stall with tiny
  accepted steps next to the failing points, far from an optimum. So a start where the
  Fisher information fails, and a trust region that shrinks to nothing or stalls after
  failures of the Fisher information while the projected gradient is not small, go on
  with L-BFGS-B from that point, by the model's own route to the gradient (for the
  iterations left; the message says so), instead of failing or stopping there.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial

import numpy as np
from scipy.optimize import Bounds, minimize

from pymc_odesens.ops.failures import failure_total

__all__ = ["LOCAL_METHODS", "LocalRun", "maximise_from"]

LOCAL_METHODS = ("L-BFGS-B", "trust-region-fisher")

_MAX_RESTARTS = 10


@dataclass(frozen=True)
class LocalRun:
    """Where one local maximisation ended.

    Attributes
    ----------
    x : numpy.ndarray
        The optimisation vector at the end.
    converged : bool
        The method's own convergence test passed.
    message : str
        The method's message.
    iterations : int
        0 for a run stopped by its time limit (scipy does not report them then).
    evaluations : int
        Calls of the log-posterior (with its gradient, and for the trust region its
        Fisher information).
    """

    x: np.ndarray
    converged: bool
    message: str
    iterations: int
    evaluations: int


class _OutOfTime(Exception):
    """The start's time limit passed before a new evaluation."""


class _Counted:
    """Minus the log-posterior for scipy, counted, cached at the last point; the best finite
    point so far kept; no new evaluation after ``deadline`` (``time.monotonic()``)."""

    def __init__(self, objective, with_metric: bool, deadline: float | None = None) -> None:
        self.objective = objective
        self.with_metric = with_metric
        self.deadline = deadline
        self.evaluations = 0
        self.metric_failures = 0  # points with a finite log-posterior but no Fisher information
        self.own_route = False  # after the trust region: not through the Fisher function
        self.best_value, self.best_x = -math.inf, None
        self._x = None
        self._result = None

    def _at(self, x):
        if self._x is None or not np.array_equal(x, self._x):
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise _OutOfTime
            self.evaluations += 1
            metric_failed = False
            if self.with_metric:
                solver_failures = failure_total()  # (another thread's failure: one more call)
                value, gradient, metric = self.objective.fisher_information(x)
                if not _finite(value, gradient, metric):
                    if _finite(value, gradient):  # the metric alone failed
                        metric_failed = True
                    elif failure_total() > solver_failures:
                        # an ODE solve with forward sensitivities failed, and with it the
                        # value: the model's own route (an adjoint, say) may not fail
                        self.evaluations += 1
                        value, gradient = self.objective.log_posterior_and_gradient(
                            x, own_route=True
                        )
                        metric_failed = _finite(value, gradient)
                    metric = None
                    self.metric_failures += metric_failed
            else:
                value, gradient = self.objective.log_posterior_and_gradient(
                    x, own_route=self.own_route
                )
                metric = None
            finite = _finite(value, gradient) and not (self.with_metric and metric is None)
            self._x = np.array(x, dtype=float)
            self._result = (value, gradient, metric, finite, metric_failed)
            if finite and value > self.best_value:
                self.best_value, self.best_x = value, self._x
        return self._result

    def metric_failed(self, x) -> bool:
        """The log-posterior and its gradient are finite at ``x``, the Fisher information
        is not."""
        return self._at(x)[4]

    def without_metric(self) -> None:
        """From now on, the log-posterior and its gradient alone (for L-BFGS-B), by the
        model's own route."""
        self.with_metric = False
        self.own_route = True
        self._x = self._result = None

    def value_and_gradient(self, x):
        value, gradient, _, finite, _ = self._at(x)
        if not finite:
            return math.inf, np.zeros_like(x)
        return -value, -gradient

    def value(self, x):
        return self.value_and_gradient(x)[0]

    def gradient(self, x):
        return self.value_and_gradient(x)[1]

    def hessian(self, x):
        _, _, metric, finite, _ = self._at(x)
        if not finite:
            return np.eye(x.size)
        return metric


def _finite(*arrays) -> bool:
    return all(bool(np.all(np.isfinite(a))) for a in arrays)


def _projected_gradient_norm(x, gradient, lower, upper) -> float:
    """Largest component of the log-posterior's gradient that a step inside the box could
    follow (0 for a component pushing against its bound)."""
    g = np.array(gradient, dtype=float)
    g[(x <= lower) & (g < 0)] = 0.0
    g[(x >= upper) & (g > 0)] = 0.0
    return float(np.max(np.abs(g))) if g.size else 0.0


def maximise_from(
    objective,
    x0: np.ndarray,
    method: str = "L-BFGS-B",
    max_iterations: int = 2000,
    gradient_tolerance: float = 1e-6,
    time_limit: float | None = None,
) -> LocalRun:
    """Maximise ``objective``'s log-posterior from ``x0`` with ``method``.

    Parameters
    ----------
    objective : ModeObjective
    x0 : numpy.ndarray
        The start (inside the bounds).
    method : {"L-BFGS-B", "trust-region-fisher"}
    max_iterations : int
        Iterations of the method (over its restarts).
    gradient_tolerance : float
        Converged when the projected gradient's largest component is below this.
    time_limit : float, optional
        Seconds: no new evaluation starts after them; the run then ends, not converged, at
        the best point it evaluated (one evaluation in progress is not interrupted).

    Raises
    ------
    ValueError
        The log-posterior is not finite at ``x0`` (the message says so).
    """
    x0 = np.clip(np.asarray(x0, dtype=float), objective.lower, objective.upper)
    deadline = None if time_limit is None else time.monotonic() + time_limit
    counted = _Counted(objective, with_metric=method == "trust-region-fisher")
    value, gradient = counted.value_and_gradient(x0)
    counted.deadline = deadline  # the start itself is always evaluated
    if method not in LOCAL_METHODS:
        raise ValueError(f"method: expected one of {LOCAL_METHODS}, got {method!r}")
    bounds = Bounds(objective.lower, objective.upper)
    run = _lbfgsb if method == "L-BFGS-B" else _trust_region
    if not math.isfinite(value) and counted.metric_failed(x0):
        run = partial(_lbfgsb_after, reason="the Fisher information failed at the start", done=0)
    elif not math.isfinite(value):
        raise ValueError(
            "the log-posterior is not finite at the start (a failed solve, or a value outside "
            "the support)"
        )
    try:
        return run(counted, x0, bounds, max_iterations, gradient_tolerance)
    except _OutOfTime:
        return LocalRun(
            counted.best_x,
            False,
            f"stopped by the start's time limit ({time_limit:g} s)",
            0,
            counted.evaluations,
        )


def _lbfgsb(counted, x, bounds, max_iterations, gradient_tolerance) -> LocalRun:
    best, iterations = counted.value(x), 0
    for _ in range(_MAX_RESTARTS):
        result = minimize(
            counted.value_and_gradient,
            x,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={
                "maxiter": max_iterations - iterations,
                "ftol": 1e-13,
                "gtol": gradient_tolerance,
                "maxcor": 20,
            },
        )
        iterations += int(result.nit)
        x = np.array(result.x)
        value, gradient = counted.value_and_gradient(x)
        small = _projected_gradient_norm(x, -gradient, bounds.lb, bounds.ub) <= gradient_tolerance
        rose = value < best - 1e-12 * max(1.0, abs(best))
        best = min(best, value)
        if small or not rose or iterations >= max_iterations:
            break
    converged = bool(result.success) and iterations < max_iterations
    return LocalRun(x, converged, str(result.message), iterations, counted.evaluations)


def _trust_region(counted, x, bounds, max_iterations, gradient_tolerance) -> LocalRun:
    """A projected Levenberg-Marquardt trust region on minus the log-posterior.

    Each iteration solves ``(H + lam D) p = -g`` on the free coordinates (those not held
    at a bound by a gradient pushing outwards), with ``H`` the Fisher information (the
    Gauss-Newton Hessian), ``D`` its diagonal (Marquardt's scaling; 1 where it is 0), and
    clips ``x + p`` into the box. ``lam`` is the trust region: a step whose actual decrease
    is less than a quarter of the quadratic model's prediction raises it, a good one lowers
    it; a rejected step raises it fourfold. Converged when the projected gradient's largest
    component is below ``gradient_tolerance`` or the decrease of accepted steps stays below
    1e-12 relative (3 in a row).
    """
    lower, upper = bounds.lb, bounds.ub
    value, gradient = counted.value_and_gradient(x)
    hessian = counted.hessian(x)
    lam, small, iterations, message = 1e-3, 0, 0, "maximum number of iterations reached"
    converged = False
    while iterations < max_iterations:
        iterations += 1
        if _projected_gradient_norm(x, -gradient, lower, upper) <= gradient_tolerance:
            converged, message = True, "projected gradient below gradient_tolerance"
            break
        held = ((x <= lower) & (gradient > 0)) | ((x >= upper) & (gradient < 0))
        free = ~held
        h = hessian[np.ix_(free, free)]
        d = np.diag(h).copy()
        d[~(d > 0)] = 1.0
        try:
            p_free = np.linalg.solve(h + lam * np.diag(d), -gradient[free])
        except np.linalg.LinAlgError:
            lam *= 4.0
            continue
        step = np.zeros_like(x)
        step[free] = p_free
        candidate = np.clip(x + step, lower, upper)
        s = candidate - x
        predicted = -(gradient @ s + 0.5 * s @ hessian @ s)
        new_value, new_gradient = counted.value_and_gradient(candidate)
        actual = value - new_value
        if not (predicted > 0) or not math.isfinite(new_value):
            lam *= 4.0
            if lam > 1e16:
                message = "the trust region shrank to nothing (no step decreases the objective)"
                break
            continue
        ratio = actual / predicted
        if ratio > 1e-4:
            relative = actual / max(1.0, abs(value))
            small = small + 1 if relative < 1e-12 else 0
            x, value, gradient = candidate, new_value, new_gradient
            hessian = counted.hessian(x)
            lam = lam / 3.0 if ratio > 0.75 else (lam * 2.0 if ratio < 0.25 else lam)
            lam = max(lam, 1e-12)
            if small >= 3:
                converged, message = True, "relative decrease below 1e-12 in 3 steps"
                break
        else:
            lam *= 4.0
            if lam > 1e16:
                message = "the trust region shrank to nothing (no step decreases the objective)"
                break
    # Stopped short of a small projected gradient after the Fisher information failed at
    # some points: rejected steps there shrink the region to nothing, or until the accepted
    # ones barely move. (Without such failures a region that shrinks to nothing is at the
    # limit of the solutions' accuracy, or in a region as hard for L-BFGS-B: on Fujita it
    # gained 3.4 log-units there, from -792.6, the best optimum being near 0.)
    shrank = message.startswith("the trust region shrank")
    stalled = converged and counted.metric_failures > 0
    gradient_norm = _projected_gradient_norm(x, -gradient, lower, upper)
    if (
        counted.metric_failures > 0
        and (shrank or stalled)
        and gradient_norm > gradient_tolerance
        and iterations < max_iterations
    ):
        why = "shrank to nothing" if shrank else "stalled (relative decrease below 1e-12)"
        return _lbfgsb_after(
            counted,
            x,
            bounds,
            max_iterations,
            gradient_tolerance,
            reason=(
                f"the trust region {why} after {iterations} iterations, projected gradient "
                f"{gradient_norm:.3g}, the Fisher information failed at "
                f"{counted.metric_failures} points"
            ),
            done=iterations,
        )
    return LocalRun(x, converged, message, iterations, counted.evaluations)


def _lbfgsb_after(
    counted, x, bounds, max_iterations, gradient_tolerance, *, reason: str, done: int
) -> LocalRun:
    """L-BFGS-B from ``x`` for the iterations the trust region left (``done`` of
    ``max_iterations`` spent), without the Fisher information; the message says why."""
    counted.without_metric()
    run = _lbfgsb(counted, x, bounds, max(max_iterations - done, 1), gradient_tolerance)
    return LocalRun(
        run.x,
        run.converged,
        f"{reason}; L-BFGS-B from there: {run.message}",
        done + run.iterations,
        run.evaluations,
    )
