"""SMMALA: simplified manifold MALA, a Riemannian Metropolis-adjusted Langevin sampler for PyMC.

Girolami & Calderhead (2011), "Riemann manifold Langevin and Hamiltonian Monte
Carlo methods", J. R. Statist. Soc. B 73(2), Section 5 (the simplified mMALA).
At the current point ``x`` (PyMC's unconstrained space) with metric ``G(x)``:

    x' = x + (eps^2 / 2) G(x)^{-1} grad log p(x) + eps G(x)^{-1/2} z,   z ~ N(0, I),

accepted with probability ``min(1, p(x') q(x | x') / (p(x) q(x' | x)))``, where
``q(. | x) = N(x + (eps^2/2) G(x)^{-1} grad log p(x), eps^2 G(x)^{-1})``. The
reverse density uses the metric at the proposal, so the chain is exact for any
metric that is a deterministic function of the point, including one built from
approximate sensitivities.

The metric (:mod:`pymc_odesens.inference.smmala_metric`) is the expected Fisher
information of the model's Normal / LogNormal likelihoods plus the negative
Hessian of the log-prior, made positive definite by SoftAbs (Betancourt 2013,
"A general metric for Riemannian manifold Hamiltonian Monte Carlo"):
eigenvalues ``lambda -> lambda coth(alpha lambda)``, which is ``|lambda|`` for
``|lambda| >> 1/alpha`` and ``1/alpha`` at 0, smooth in between.

One evaluation per proposal computes the log-density, its gradient and the
metric with one ODE solve with sensitivities (``sensitivity`` chooses the
route: exact forward sensitivities or a Peano-Baker approximation, from which
both the gradient and the Fisher information are then taken).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pymc as pm
from pymc.blocking import RaveledVars, StatsType
from pymc.exceptions import SamplingError
from pymc.pytensorf import compile as compile_pytensor
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.step_methods.step_sizes import DualAverageAdaptation, StepSizeState
from pymc.util import get_value_vars_from_user_vars
from pymc.vartypes import continuous_types
from rich.progress import TextColumn
from rich.table import Column

from pymc_odesens.inference.smmala_metric import smmala_graph
from pymc_odesens.inference.smmala_sensitivities import ODE_OPS
from pymc_odesens.sensitivity.pbs_options import PBS_ALGORITHMS, resolve_pbs_options

__all__ = ["SMMALA", "LocalGeometry", "softabs"]


def softabs(eigenvalues: np.ndarray, alpha: float) -> np.ndarray:
    """``lambda coth(alpha lambda)`` (``1/alpha`` at 0): positive, ``~|lambda|`` away from 0."""
    eigenvalues = np.asarray(eigenvalues, dtype=float)
    a = alpha * eigenvalues
    small = np.abs(a) < 1e-8
    safe = np.where(small, 1.0, a)
    out = eigenvalues / np.tanh(np.where(small, 1.0, safe))
    return np.where(small, 1.0 / alpha, np.where(np.abs(a) > 40.0, np.abs(eigenvalues), out))


@dataclass
class LocalGeometry:
    """Log-density, gradient and regularised metric at one point.

    Attributes
    ----------
    x : numpy.ndarray (D,)
    logp : float
    grad : numpy.ndarray (D,)
    eigenvalues, eigenvectors : numpy.ndarray
        ``G = Q diag(lambda) Q^T`` after SoftAbs.
    raw_min_eigenvalue : float
        Smallest eigenvalue before regularisation.
    """

    x: np.ndarray
    logp: float
    grad: np.ndarray
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    raw_min_eigenvalue: float

    @property
    def natural_gradient(self) -> np.ndarray:
        """``G^{-1} grad log p``."""
        q = self.eigenvectors
        return q @ ((q.T @ self.grad) / self.eigenvalues)

    def mean(self, step_size: float) -> np.ndarray:
        """Mean of the proposal from this point."""
        return self.x + 0.5 * step_size**2 * self.natural_gradient

    def propose(self, step_size: float, z: np.ndarray) -> np.ndarray:
        """``mean + eps G^{-1/2} z`` (with ``G^{-1/2} = Q diag(lambda^{-1/2})``)."""
        return self.mean(step_size) + step_size * (
            self.eigenvectors @ (z / np.sqrt(self.eigenvalues))
        )

    def log_proposal_density(self, target: np.ndarray, step_size: float) -> float:
        """``log q(target | x)`` up to the constant ``-(D/2) log(2 pi)``."""
        r = self.eigenvectors.T @ (target - self.mean(step_size))
        with np.errstate(over="ignore", invalid="ignore"):  # a wild proposal: -inf, rejected
            quad = float(np.sum(self.eigenvalues * r * r)) / step_size**2
        d = self.x.size
        return 0.5 * float(np.sum(np.log(self.eigenvalues))) - d * np.log(step_size) - 0.5 * quad


@dataclass_state
class SMMALAState(StepMethodState):
    step_size: float
    step_adapt: StepSizeState
    target_accept: float
    adapt_step_size: bool
    tune: bool
    iter_count: int
    n_metric_failures: int
    n_solver_failures: int


class SMMALA(ArrayStepShared):
    """Simplified manifold MALA with the expected Fisher information as metric.

    Attributes
    ----------
    likelihoods : list of (str, str)
        The observed variables and their distributions, as found in the model.
    n_ode_solutions : int
        ODE solves per evaluation (one per ``ode_solution`` call of the model).
    dimension : int
        Number of sampled (unconstrained) coordinates D.

    Use it as ``pm.sample(step=SMMALA(...))`` inside a model context. The model's
    observed variables must be Normal or LogNormal (their location typically
    an ODE solution from :func:`pymc_odesens.ode_solution`); priors and
    potentials contribute their negative Hessian.

    Parameters
    ----------
    vars : list of variables, optional
        Continuous free variables to sample (default: all continuous value
        variables of the model).
    sensitivity : str
        Route of the ODE sensitivities used for the gradient and the metric:
        ``"forward"`` (exact) or a Peano-Baker approximation of
        :func:`pymc_odesens.solve_sensitivity` (``"pbsr"``, ``"exp"``, where
        available). Every ODE solution in the model is solved once per proposal
        by this route, whatever ``sensitivity`` it was built with.
    pbs_options : PbsOptions or dict, optional
        Options of the Peano-Baker routes (see
        :class:`pymc_odesens.sensitivity.PbsOptions`; None: the paper's defaults).
    step_size : float, optional
        Initial step size ``eps`` (default ``D**(-1/6)`` for D dimensions).
    target_accept : float
        Acceptance rate the step size is tuned to during tuning (dual averaging
        as in PyMC's HMC); 0.574 is optimal for MALA in high dimensions.
    adapt_step_size : bool
        Tune the step size during the tuning phase (then keep it fixed).
    gamma, k, t0 : float
        Dual-averaging parameters (PyMC's HMC defaults).
    softabs_alpha : float
        Sharpness of the SoftAbs regularisation: eigenvalues of the metric
        below about ``1/alpha`` in magnitude are lifted to ``1/alpha``.
    model : pymc.Model, optional
    rng : RandomGenerator, optional
    initial_point : dict, optional
    compile_kwargs : dict, optional
        Passed to the compilation of the evaluation function (e.g. ``mode``).
    blocked : bool
        Must be True (the metric couples all variables).

    Notes
    -----
    Sample stats: ``accept`` (acceptance probability of the proposal),
    ``accepted``, ``step_size``, ``step_size_bar`` (the tuned value),
    ``tune``, ``metric_failure`` (the metric or gradient at the proposal was
    not finite or not decomposable: rejected), ``solver_failure`` (an ODE
    solve failed at the proposal: rejected), ``failures`` (both kinds, counted
    over the chain so far), ``metric_min_eigenvalue`` (the
    smallest eigenvalue of the metric before SoftAbs at the chain's point;
    negative where the log-prior is not concave), ``model_logp`` and
    ``perf_counter_diff`` (wall time of the step, s).

    When other step methods update some of the model's variables (a compound
    step), the point's values are re-evaluated at every step (two ODE solves
    per proposal instead of one).
    """

    name = "smmala"
    default_blocked = True
    stats_dtypes_shapes = {
        "accept": (np.float64, []),
        "accepted": (bool, []),
        "step_size": (np.float64, []),
        "step_size_bar": (np.float64, []),
        "tune": (bool, []),
        "metric_failure": (bool, []),
        "solver_failure": (bool, []),
        "failures": (np.int64, []),
        "metric_min_eigenvalue": (np.float64, []),
        "model_logp": (np.float64, []),
        "perf_counter_diff": (np.float64, []),
    }
    _state_class = SMMALAState

    def __init__(
        self,
        vars=None,  # noqa: A002  (PyMC's name: BlockedStep.__new__ reads it)
        *,
        sensitivity: str = "forward",
        pbs_options=None,
        step_size: float | None = None,
        target_accept: float = 0.574,
        adapt_step_size: bool = True,
        gamma: float = 0.05,
        k: float = 0.75,
        t0: float = 10,
        softabs_alpha: float = 1e6,
        model=None,
        rng=None,
        initial_point=None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
    ) -> None:
        """Create the sampler for the model in context (or ``model``).

        The parameters are described in the class docstring (``help(SMMALA)``):
        ``vars``, ``sensitivity``, ``pbs_options``, ``step_size``, ``target_accept``,
        ``adapt_step_size``, ``gamma``, ``k``, ``t0``, ``softabs_alpha``, ``model``,
        ``rng``, ``initial_point``, ``compile_kwargs`` and ``blocked``.
        """
        from pymc_odesens.sensitivity import SENSITIVITY_METHODS

        model = pm.modelcontext(model)
        if sensitivity not in SENSITIVITY_METHODS:
            raise ValueError(
                f"sensitivity must be one of {SENSITIVITY_METHODS}, got {sensitivity!r}"
            )
        if sensitivity in PBS_ALGORITHMS:
            pbs_options = resolve_pbs_options(pbs_options)
        elif pbs_options is not None:
            raise ValueError(
                f"pbs_options applies to sensitivity='pbs', 'pbsr' or 'exp', not {sensitivity!r}"
            )
        if not 0.0 < float(target_accept) < 1.0:
            raise ValueError(f"target_accept must be in (0, 1), got {target_accept!r}")
        if not float(softabs_alpha) > 0.0 or not np.isfinite(softabs_alpha):
            raise ValueError(f"softabs_alpha must be finite and > 0, got {softabs_alpha!r}")
        if step_size is not None and not (np.isfinite(step_size) and step_size > 0):
            raise ValueError(f"step_size must be finite and > 0, got {step_size!r}")
        if not blocked:
            raise ValueError(
                "SMMALA must be blocked (blocked=True): its metric couples all variables"
            )
        if initial_point is None:
            initial_point = model.initial_point()
        if vars is None:
            value_vars = model.continuous_value_vars
        else:
            value_vars = get_value_vars_from_user_vars(vars, model)
        discrete = [v.name for v in value_vars if v.dtype not in continuous_types]
        if discrete:
            raise ValueError(f"SMMALA samples continuous variables only; got discrete {discrete}")
        shared = pm.make_shared_replacements(initial_point, value_vars, model)
        graph = smmala_graph(model, value_vars, initial_point, shared, sensitivity, pbs_options)
        self._function = compile_pytensor(
            [graph.x],
            [graph.logp, graph.dlogp, graph.metric, graph.failed],
            **(compile_kwargs or {}),
        )
        self._function.trust_input = True
        self.sensitivity = sensitivity
        self.likelihoods = [(t.name, t.distribution) for t in graph.terms]
        self.n_ode_solutions = sum(
            isinstance(node.op, ODE_OPS) for node in self._function.maker.fgraph.apply_nodes
        )
        self.dimension = int(sum(np.size(initial_point[v.name]) for v in value_vars))
        self.softabs_alpha = float(softabs_alpha)
        if step_size is None:
            step_size = self.dimension ** (-1.0 / 6.0)
        self.step_size = float(step_size)
        self.target_accept = float(target_accept)
        self.adapt_step_size = bool(adapt_step_size)
        self.step_adapt = DualAverageAdaptation(self.step_size, self.target_accept, gamma, k, t0)
        self.tune = True
        self.iter_count = 0
        self.n_metric_failures = 0
        self.n_solver_failures = 0
        self._current: LocalGeometry | None = None
        super().__init__(value_vars, shared, blocked=True, rng=rng)

    # evaluation ------------------------------------------------------------------
    def evaluate(self, x: np.ndarray):
        """``(logp, dlogp, metric before regularisation, failed)`` at the raveled point ``x``."""
        logp, dlogp, metric, failed = self._function(np.asarray(x, dtype=self._dtype))
        return float(logp), np.asarray(dlogp), np.asarray(metric), bool(failed)

    @property
    def _dtype(self):
        return self._function.maker.fgraph.inputs[0].type.dtype

    def metric(self, x: np.ndarray, regularised: bool = True) -> np.ndarray:
        """The metric ``G`` at the raveled point ``x`` (SoftAbs unless ``regularised=False``)."""
        _, _, raw, _ = self.evaluate(x)
        if not regularised:
            return raw
        values, vectors = np.linalg.eigh(raw)
        return (vectors * softabs(values, self.softabs_alpha)) @ vectors.T

    def _geometry(self, x: np.ndarray) -> tuple[LocalGeometry | None, str | None]:
        """The local geometry at ``x``, or None with the reason (``"solver"``,
        ``"logp"`` or ``"metric"``)."""
        logp, grad, raw, failed = self.evaluate(x)
        if failed:
            return None, "solver"
        if not np.isfinite(logp):
            return None, "logp"
        if not (np.all(np.isfinite(grad)) and np.all(np.isfinite(raw))):
            return None, "metric"
        try:
            values, vectors = np.linalg.eigh(raw)
        except np.linalg.LinAlgError:
            return None, "metric"
        lifted = softabs(values, self.softabs_alpha)
        if not (np.all(np.isfinite(lifted)) and np.all(lifted > 0)):
            return None, "metric"
        return LocalGeometry(x.copy(), logp, grad, lifted, vectors, float(values[0])), None

    def _current_geometry(self, x: np.ndarray) -> LocalGeometry:
        cached = self._current
        if cached is not None and not self.shared and np.array_equal(cached.x, x):
            return cached
        geometry, reason = self._geometry(x)
        if geometry is None:
            what = {
                "solver": "an ODE solve failed",
                "logp": "the log-density is not finite",
                "metric": "the gradient or the metric is not finite",
            }[reason]
            raise SamplingError(
                f"SMMALA: {what} at the chain's current point {x}; start from another point "
                "(initvals) or check the model with model.debug()"
            )
        self._current = geometry
        return geometry

    # step --------------------------------------------------------------------------
    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, StatsType]:
        start = time.perf_counter()
        x0 = np.asarray(q0.data)
        current = self._current_geometry(x0)
        adapt = self.tune and self.adapt_step_size
        eps = float(self.step_adapt.current(adapt))
        z = self.rng.standard_normal(x0.size)
        x1 = current.propose(eps, z)
        proposal, reason = self._geometry(x1)
        metric_failure = reason == "metric"
        solver_failure = reason == "solver"
        self.n_metric_failures += int(metric_failure)
        self.n_solver_failures += int(solver_failure)
        accept_stat, accepted = 0.0, False
        if proposal is not None:
            log_forward = current.log_proposal_density(x1, eps)
            log_backward = proposal.log_proposal_density(x0, eps)
            log_ratio = proposal.logp - current.logp + log_backward - log_forward
            if np.isfinite(log_ratio):
                accept_stat = float(min(1.0, np.exp(min(log_ratio, 0.0))))
                accepted = bool(np.log(self.rng.uniform()) < log_ratio)
        self.step_adapt.update(accept_stat, adapt)
        if accepted:
            self._current = proposal
        new = proposal if accepted else current
        self.step_size = eps
        self.iter_count += 1
        adapt_stats = self.step_adapt.stats()
        stats = {
            "accept": accept_stat,
            "accepted": accepted,
            "step_size": eps,
            "step_size_bar": float(adapt_stats["step_size_bar"]),
            "tune": bool(self.tune),
            "metric_failure": metric_failure,
            "solver_failure": solver_failure,
            "failures": self.n_metric_failures + self.n_solver_failures,
            "metric_min_eigenvalue": new.raw_min_eigenvalue,
            "model_logp": new.logp,
            "perf_counter_diff": time.perf_counter() - start,
        }
        return RaveledVars(new.x.copy(), q0.point_map_info), [stats]

    def reset_tuning(self, start=None) -> None:
        """Restart the step-size adaptation (PyMC calls this before every chain)."""
        self.step_adapt.reset()
        self.iter_count = 0
        self.n_metric_failures = 0
        self.n_solver_failures = 0
        self._current = None

    @staticmethod
    def competence(var, has_grad):
        """Compatible with continuous variables whose log-density has a gradient."""
        if var.dtype in continuous_types and has_grad:
            return Competence.COMPATIBLE
        return Competence.INCOMPATIBLE

    @staticmethod
    def _progressbar_config(n_chains=1):
        columns = [
            TextColumn("{task.fields[step_size]:0.3f}", table_column=Column("Step size", ratio=1)),
            TextColumn("{task.fields[accept]:0.2f}", table_column=Column("Accept", ratio=1)),
            TextColumn("{task.fields[failures]}", table_column=Column("Failures", ratio=1)),
        ]
        stats = {
            "step_size": [0.0] * n_chains,
            "accept": [0.0] * n_chains,
            "failures": [0] * n_chains,
        }
        return columns, stats

    @staticmethod
    def _make_progressbar_update_functions():
        def update_stats(step_stats):
            return {
                "step_size": step_stats["step_size"],
                "accept": step_stats["accept"],
                "failures": step_stats["failures"],
                "failing": step_stats["failures"] > 0,
            }

        return (update_stats,)
