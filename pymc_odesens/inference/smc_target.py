"""The tempered targets of sequential Monte Carlo: a PyMC model's prior and likelihood apart.

Tempered SMC moves particles through the densities ``log prior + beta * log likelihood``
for ``beta`` from 0 to 1 (:func:`pymc_odesens.inference.sample_smc`). :class:`TemperedTarget`
compiles, for one model, a function of the raveled value variables (the sampler's
unconstrained coordinates) that returns both terms and their exact gradients at once:

- **prior**: ``model.varlogp``, the free random variables' log-densities with the
  transforms' log-Jacobians (the density of the unconstrained coordinates);
- **likelihood**: ``model.observedlogp + model.potentiallogp``, the observed variables and
  *every* potential. Potentials belong to the likelihood because the population starts as
  draws from the free variables' priors, which know nothing of potentials; a potential
  tempered in with the likelihood is weighted in exactly. The solver-failure potential of
  :func:`pymc_odesens.ode_solution` is one of them: a failed solve makes the log-likelihood
  ``-inf`` (and its gradient 0), so the particle gets weight 0 at any ``beta > 0`` and a
  move that reaches it is rejected. A user's potential that encodes prior knowledge is
  tempered too, and the evidence is that of the model with the potential
  (``∫ prior · exp(potentials) · likelihood``), as for PyMC's ``pm.sample_smc``.

The function is compiled with ``compile_kwargs`` (PyTensor's ``NUMBA`` mode by default: the
ODE solves and their sensitivities run as one compiled function) and called through a copy
per thread (:class:`~pymc_odesens.ops.per_thread_function.PerThreadFunction`).

**A trajectory model.** HMC's leapfrog steps may follow the gradient of another density
without changing what the moves sample, as long as the end point is accepted with the
model's own density: each leapfrog update moves the momentum by a function of the position
alone, or the position by a function of the momentum alone, so the trajectory is
reversible and preserves volume whatever that function is (Neal 2011, section 5.5.1;
"surrogate" HMC, Rasmussen 2003, Zhang et al. 2017). With ``trajectory_model`` (for an ODE
model: the same model solved at looser tolerances, whose gradient costs less),
:meth:`TemperedTarget.trajectory` gives the trajectory model's terms and gradients, and
:meth:`TemperedTarget.evaluate` the model's own log-prior and log-likelihood (a solve
without sensitivities) with the trajectory model's gradients: the weights, the acceptance
tests and the evidence are the model's, exactly; only the paths of the moves differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.initial_point import make_initial_point_expression
from pymc.pytensorf import compile as compile_pytensor
from pymc.pytensorf import find_rng_nodes, join_nonshared_inputs, reseed_rngs
from pymc.vartypes import continuous_types

from pymc_odesens.ops.per_thread_function import PerThreadFunction

__all__ = ["Evaluation", "ParticleLayout", "PriorDraws", "TemperedTarget"]


@dataclass(frozen=True, eq=False)
class Evaluation:
    """The prior and likelihood terms at one point, with their gradients.

    Attributes
    ----------
    log_prior, log_likelihood : float
    grad_log_prior, grad_log_likelihood : numpy.ndarray
        Gradients in the raveled unconstrained coordinates.
    """

    log_prior: float
    log_likelihood: float
    grad_log_prior: np.ndarray
    grad_log_likelihood: np.ndarray

    @property
    def finite(self) -> bool:
        """Whether both terms and both gradients are finite (a failed solve is not)."""
        return bool(
            np.isfinite(self.log_prior)
            and np.isfinite(self.log_likelihood)
            and np.all(np.isfinite(self.grad_log_prior))
            and np.all(np.isfinite(self.grad_log_likelihood))
        )

    def tempered(self, beta: float) -> tuple[float, np.ndarray]:
        """``(log prior + beta log likelihood, its gradient)``."""
        return (
            self.log_prior + beta * self.log_likelihood,
            self.grad_log_prior + beta * self.grad_log_likelihood,
        )


@dataclass(frozen=True)
class ParticleLayout:
    """Where each value variable lives in a particle's raveled vector.

    Attributes
    ----------
    names : tuple of str
        The value variables (``k_log__``), in the vector's order.
    shapes : tuple of tuple of int
    size : int
        The vector's length.
    """

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    size: int

    @classmethod
    def of(cls, model: pm.Model) -> ParticleLayout:
        """The layout of ``model``'s value variables (all of them must be continuous).

        Raises
        ------
        ValueError
            The model has discrete free variables (named): HMC moves need gradients.
        """
        discrete = [v.name for v in model.value_vars if v.dtype not in continuous_types]
        if discrete:
            raise ValueError(
                f"sample_smc: the model's free variables {discrete} are discrete; the "
                "gradient-based moves of sample_smc need continuous variables only"
            )
        point = model.initial_point()
        shapes = tuple(tuple(np.shape(point[v.name])) for v in model.value_vars)
        size = int(sum(int(np.prod(s)) for s in shapes))
        return cls(tuple(v.name for v in model.value_vars), shapes, size)

    def require_same(self, model: pm.Model, name: str) -> None:
        """Raise a ValueError (``name`` first) unless ``model``'s value variables are these,
        with these shapes."""
        other = ParticleLayout.of(model)
        if other != self:
            raise ValueError(
                f"{name} must have the model's value variables with their shapes, "
                f"{list(zip(self.names, self.shapes))}; it has "
                f"{list(zip(other.names, other.shapes))}"
            )

    def split(self, vector: np.ndarray) -> dict[str, np.ndarray]:
        """The value variables of one raveled vector, by name."""
        out, offset = {}, 0
        for name, shape in zip(self.names, self.shapes):
            n = int(np.prod(shape))
            out[name] = np.asarray(vector[offset : offset + n]).reshape(shape)
            offset += n
        return out

    def join(self, point: Mapping[str, np.ndarray]) -> np.ndarray:
        """The raveled vector of a point given by value variable names."""
        if self.size == 0:
            return np.zeros(0)
        return np.concatenate([np.ravel(point[name]) for name in self.names]).astype(float)


def _flat_gradient(term, value_vars) -> pt.TensorVariable:
    if not value_vars:
        return pt.zeros((0,))
    grads = pt.grad(term, value_vars, disconnected_inputs="ignore")
    return pt.concatenate([pt.flatten(g) for g in grads])


class TemperedTarget:
    """A model's log-prior and log-likelihood, with exact gradients, in one compiled function
    (with a trajectory model: the model's terms, and the trajectory model's terms and
    gradients, in two).

    Parameters
    ----------
    model : pymc.Model
    compile_kwargs : dict, optional
        For PyTensor's compile (default ``{"mode": "NUMBA"}``).
    trajectory_model : pymc.Model, optional
        A model with the same value variables whose gradients the leapfrog steps follow
        (module docstring); default: ``model``'s own.

    Raises
    ------
    ValueError
        The model has discrete free variables, or no free variables at all, or
        ``trajectory_model``'s value variables are not ``model``'s (named).
    """

    def __init__(
        self,
        model: pm.Model,
        compile_kwargs: Mapping | None = None,
        trajectory_model: pm.Model | None = None,
    ) -> None:
        self.layout = ParticleLayout.of(model)
        if self.layout.size == 0:
            raise ValueError("sample_smc: the model has no free variables to sample")
        kwargs = {"mode": "NUMBA"} if compile_kwargs is None else dict(compile_kwargs)
        kwargs.setdefault("on_unused_input", "ignore")
        self.has_trajectory_model = trajectory_model is not None
        if trajectory_model is None:
            self._function = _compile_terms(model, kwargs, gradients=True)
            self._values = None
            return
        self.layout.require_same(trajectory_model, "trajectory_model")
        self._function = _compile_terms(trajectory_model, kwargs, gradients=True)
        self._values = _compile_terms(model, kwargs, gradients=False)

    def evaluate(self, x: np.ndarray) -> Evaluation:
        """The model's prior and likelihood terms at the raveled point ``x``, with the
        gradients that the moves follow (the model's own, or the trajectory model's).

        A failed ODE solve gives ``log_likelihood = -inf`` and a zero gradient (the model's
        failure potential); nothing is raised.
        """
        x = _own_copy(x)
        if self._values is None:
            return _evaluation(self._function(x))
        prior, likelihood = self._values(x)
        _, _, grad_prior, grad_likelihood = self._function(x)
        return Evaluation(
            float(prior),
            float(likelihood),
            np.array(grad_prior, dtype=float),
            np.array(grad_likelihood, dtype=float),
        )

    def trajectory(self, x: np.ndarray) -> Evaluation:
        """The terms and gradients that a leapfrog step inside a trajectory uses: the
        trajectory model's, or :meth:`evaluate`'s when there is none."""
        return _evaluation(self._function(_own_copy(x)))


def _own_copy(x) -> np.ndarray:
    # a copy of our own: a batch received from the network (Dask) may hold unaligned or
    # read-only rows, which a PyTensor function refuses ("not aligned")
    return np.array(x, dtype=np.float64, copy=True)


def _evaluation(outputs) -> Evaluation:
    prior, likelihood, grad_prior, grad_likelihood = outputs
    return Evaluation(
        float(prior),
        float(likelihood),
        np.array(grad_prior, dtype=float),
        np.array(grad_likelihood, dtype=float),
    )


def _compile_terms(model: pm.Model, kwargs: dict, gradients: bool) -> PerThreadFunction:
    """``x -> (log prior, log likelihood[, their gradients])`` of ``model``."""
    value_vars = list(model.value_vars)
    prior = model.varlogp
    likelihood = model.observedlogp + model.potentiallogp
    outputs = [prior, likelihood]
    if gradients:
        outputs += [_flat_gradient(prior, value_vars), _flat_gradient(likelihood, value_vars)]
    joined_outputs, x = join_nonshared_inputs(model.initial_point(), outputs, value_vars)
    return PerThreadFunction(compile_pytensor([x], joined_outputs, **kwargs))


class PriorDraws:
    """Draws from the free variables' priors on the unconstrained scale, as raveled vectors.

    The models' initial values are ignored (a PEtab model starts at the nominal values: its
    particles must still start from the prior).
    """

    def __init__(self, model: pm.Model) -> None:
        self.layout = ParticleLayout.of(model)
        expressions = make_initial_point_expression(
            free_rvs=model.free_RVs,
            rvs_to_transforms=model.rvs_to_transforms,
            initval_strategies={},
            default_strategy="prior",
            return_transformed=True,
        )
        self._names = [model.rvs_to_values[rv].name for rv in model.free_RVs]
        self._function = compile_pytensor([], expressions)
        self._rngs = find_rng_nodes(expressions)

    def draw(self, n: int, seed: np.random.SeedSequence) -> np.ndarray:
        """``n`` draws (rows), reproducible from ``seed``."""
        reseed_rngs(self._rngs, [int(v) for v in seed.generate_state(4)])
        rows = []
        for _ in range(n):
            values = self._function()
            rows.append(self.layout.join(dict(zip(self._names, values))))
        return np.array(rows, dtype=float).reshape(n, self.layout.size)
