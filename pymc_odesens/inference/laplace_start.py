"""From a mode to a sampler that does not stall: the Laplace approximation in the sampler's
coordinates, its draws as chain starts, its covariance as the mass matrix.

Why chains started *exactly* at a mode stall (measured on Boehm_JProteomeRes2014, 4
chains; docs/inference.md): nutpie's first mass matrix is its gradient-based estimate at
the start, an inverse variance of ``|gradient|`` per coordinate (nuts-rs'
``update_diag_grad``, clamped to [1e-20, 1e20]). At a mode the gradient is 0 up to the
optimiser's tolerance, so the first variances are of order 1e4 to 1e20 instead of the
posterior's, and the step size adaptation has to shrink the step by as many orders of
magnitude before a trajectory is accepted: tree depth 10 (1023 gradients) per draw. A
parameter whose mode lies on its bound adds to it: the sampler's interval transform puts
it at minus or plus infinity, and the start moved just inside the bound sits where the
log-density is flat in that coordinate.

:func:`laplace_approximation` starts from a mode of the log-posterior (for example the best
of :func:`~pymc_odesens.inference.find_modes`, moved inside its bounds), climbs to the
mode of the *sampler's* density (the log-posterior with the transforms' log-Jacobians,
which is finite for a parameter whose MAP lies on a bound), and takes the negative Hessian
there: the Fisher information in the sampler's coordinates (forward sensitivities, plus the
priors' and transforms' exact Hessian) or central differences of the exact gradient. Its
inverse is the Laplace covariance. :meth:`LaplaceApproximation.start_values` draws each
chain's start from that normal distribution, so that every chain starts in the bulk of the
posterior, where the gradient has the size of the posterior's scales (nutpie's first
metric is then within a small factor of the right one) and the chains start apart (R-hat
compares chains that started dispersed); :meth:`LaplaceApproximation.potential` gives
PyMC's NUTS the covariance as its dense mass matrix, adapted during tuning and anchored to
it (:class:`~pymc_odesens.inference.anchored_potential.AnchoredFullAdapt`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.pytensorf import compile as compile_pytensor
from pymc.step_methods.hmc.quadpotential import QuadPotentialFull

from pymc_odesens.inference.anchored_potential import AnchoredFullAdapt
from pymc_odesens.inference.mode_metric import (
    PosteriorMode,
    _log_density_function,
    _maximise,
    _positive_definite_inverse,
    _start_point,
    _value_variables,
    negative_hessian,
)
from pymc_odesens.inference.smmala_metric import smmala_graph

__all__ = ["HESSIANS", "LaplaceApproximation", "LaplaceApproximator", "laplace_approximation"]

HESSIANS = ("fisher", "finite-differences")


@dataclass(frozen=True)
class LaplaceApproximation:
    """A normal approximation of the posterior in the sampler's coordinates.

    Attributes
    ----------
    model : pymc.Model
    mode : PosteriorMode
        The mode of the sampler's log-density (value variables, transformed scale).
    covariance : numpy.ndarray
        The inverse of the negative Hessian there, in the order of ``mode.value_variables``.
    hessian : str
        How the Hessian was computed (``"fisher"`` or ``"finite-differences"``).
    """

    model: pm.Model
    mode: PosteriorMode
    covariance: np.ndarray
    hessian: str

    @cached_property
    def cholesky(self) -> np.ndarray:
        """The covariance's lower Cholesky factor (computed once)."""
        return np.linalg.cholesky(self.covariance)

    @property
    def standard_deviations(self) -> dict[str, np.ndarray]:
        """Each value variable's Laplace standard deviation (transformed scale)."""
        sd = np.sqrt(np.diag(self.covariance))
        out, offset = {}, 0
        for name in self.mode.value_variables:
            shape = np.shape(self.mode.point[name])
            size = int(np.prod(shape, dtype=int))
            out[name] = sd[offset : offset + size].reshape(shape)
            offset += size
        return out

    def start_values(self, spread: float = 1.0) -> dict:
        """Chain starts drawn from the Laplace approximation, as ``initvals``.

        Each chain's start is one draw of ``Normal(mode, spread**2 * covariance)`` in the
        sampler's coordinates, mapped to each variable's own scale, as PyTensor
        expressions that PyMC's initial-point function draws once per chain (from its seed):
        give them to :func:`pymc_odesens.sample` or ``pm.sample`` (with an ``init`` without
        jitter, e.g. ``"adapt_diag"``) and to nutpie through :func:`pymc_odesens.sample`.

        Parameters
        ----------
        spread : float
            Scales the standard deviations (1: the approximation itself; 0: every chain at
            the mode, which stalls nutpie: see the module docstring).
        """
        if not (np.isfinite(spread) and spread >= 0):
            raise ValueError(f"spread: expected a finite number >= 0, got {spread!r}")
        mean = self.mode.vector
        if spread == 0:
            draw = pt.as_tensor_variable(mean)
        else:
            draw = pt.random.multivariate_normal(mean, spread**2 * self.covariance)
        return self.values_of(draw)

    def values_of(self, vector) -> dict:
        """The free variables on their own scale, by name, from ``vector``: the value
        variables in the sampler's coordinates concatenated in the order of
        ``mode.value_variables`` (a PyTensor expression, for example a random draw, as
        ``initvals``)."""
        model = self.model
        draw = pt.as_tensor_variable(vector)
        by_value = {model.rvs_to_values[rv].name: rv for rv in model.free_RVs}
        values, offset = {}, 0
        for name in self.mode.value_variables:
            shape = np.shape(self.mode.point[name])
            size = int(np.prod(shape, dtype=int))
            u = draw[offset : offset + size].reshape(shape)
            offset += size
            rv = by_value[name]
            transform = model.rvs_to_transforms.get(rv)
            values[rv.name] = u if transform is None else transform.backward(u, *rv.owner.inputs)
        return values

    def potential(self, adapt: bool = True, initial_weight: int = 100):
        """The covariance as PyMC's dense mass matrix.

        Parameters
        ----------
        adapt : bool
            True: :class:`~pymc_odesens.inference.anchored_potential.AnchoredFullAdapt`
            (adapted to the draws in each tuning window, anchored to the covariance counted
            as ``initial_weight`` draws); False: ``QuadPotentialFull`` (fixed).
        initial_weight : int
        """
        n = self.mode.vector.size
        if adapt:
            return AnchoredFullAdapt(n, self.mode.vector, self.covariance, initial_weight)
        return QuadPotentialFull(self.covariance)

    def nuts_step(
        self,
        adapt: bool = True,
        initial_weight: int = 100,
        target_accept: float = 0.8,
        compile_kwargs: Mapping | None = None,
        **nuts_kwargs,
    ) -> pm.NUTS:
        """PyMC's NUTS with :meth:`potential` as its mass matrix (``step=`` of
        :func:`pymc_odesens.sample` or ``pm.sample``; log-density compiled in NUMBA mode
        unless ``compile_kwargs`` says otherwise)."""
        variables = _value_variables(self.model, None)
        return pm.NUTS(
            vars=variables,
            model=self.model,
            potential=self.potential(adapt, initial_weight),
            target_accept=target_accept,
            compile_kwargs=dict(compile_kwargs)
            if compile_kwargs is not None
            else {"mode": "NUMBA"},
            **nuts_kwargs,
        )


def _fisher_metric(model, variables, point, vector) -> np.ndarray:
    shared = pm.make_shared_replacements(point, variables, model)
    graph = smmala_graph(model, variables, point, shared, "forward")
    function = compile_pytensor([graph.x], graph.metric)
    return np.array(function(np.asarray(vector, dtype=float)), dtype=float)


class LaplaceApproximator:
    """Laplace approximations of one model at several modes, its log-density compiled once.

    :func:`laplace_approximation` for one start; this for many (the modes of a multistart,
    :func:`~pymc_odesens.inference.laplace_mixture.laplace_mixture`): the climb to each
    sampler's mode and the Hessian there reuse one compiled log-density and gradient.
    Not safe to call from several threads at once (the compiled function keeps the point
    it was last given); one per thread.

    Parameters
    ----------
    model : pymc.Model
    """

    def __init__(self, model: pm.Model):
        self.model = model
        self._variables = _value_variables(model, None)
        self._function, _, self._point = _log_density_function(model, self._variables, None, {})

    def climb(self, start: Mapping[str, np.ndarray]) -> PosteriorMode:
        """The sampler's mode (value variables, transformed scale) that L-BFGS-B reaches
        from ``start`` (value variables by name; the model's initial point for the others).

        Raises
        ------
        ValueError
            ``start`` names a variable that is not a value variable; the log-density is not
            finite there.
        """
        point, vector = _start_point(self._point, self._variables, start)
        return _maximise(self._function, vector, point, self._variables, max_iterations=20000)

    def at(self, mode: PosteriorMode, hessian: str = "fisher", fd_step: float = 1e-3):
        """The Laplace approximation at ``mode`` (from :meth:`climb`).

        Raises
        ------
        ValueError
            ``hessian`` unknown; the negative Hessian is not finite or not positive definite
            (the count of eigenvalues that are not positive is given).
        """
        if hessian not in HESSIANS:
            raise ValueError(f"hessian: expected one of {HESSIANS}, got {hessian!r}")
        if hessian == "fisher":
            matrix = _fisher_metric(self.model, self._variables, self._point, mode.vector)
        else:
            function = self._function
            matrix = negative_hessian(lambda v: function(v)[1], mode.vector, fd_step)
        if not np.all(np.isfinite(matrix)):
            raise ValueError(f"the {hessian} Hessian at the sampler's mode is not finite")
        values, covariance = _positive_definite_inverse(matrix)
        if covariance is None:
            raise ValueError(
                f"the negative Hessian ({hessian}) at the sampler's mode ({mode.message}; "
                f"gradient norm {mode.gradient_norm:.3g}) has {int(np.sum(values <= 0))} "
                f"eigenvalues that are not positive (smallest {values[0]:.3g}): not a strict "
                "local maximum"
            )
        return LaplaceApproximation(self.model, mode, 0.5 * (covariance + covariance.T), hessian)


def laplace_approximation(
    model: pm.Model,
    start: Mapping[str, np.ndarray],
    hessian: str = "fisher",
    fd_step: float = 1e-3,
) -> LaplaceApproximation:
    """The Laplace approximation at the sampler's mode found from ``start``.

    Parameters
    ----------
    model : pymc.Model
    start : dict
        Value variables (transformed scale) by name: where the climb to the sampler's mode
        starts (:meth:`ModeObjective.sampler_point` of a mode of the log-posterior).
    hessian : {"fisher", "finite-differences"}
        ``"fisher"``: the expected Fisher information of the observed Normal and LogNormal
        variables plus the exact Hessian of the priors and transforms (positive
        semi-definite where the priors are log-concave); ``"finite-differences"``: central
        differences of the exact gradient with step ``fd_step``.
    fd_step : float

    Raises
    ------
    ValueError
        ``hessian`` unknown; the negative Hessian at the mode is not positive definite (the
        count of eigenvalues that are not positive is given).
    """
    if hessian not in HESSIANS:
        raise ValueError(f"hessian: expected one of {HESSIANS}, got {hessian!r}")
    approximator = LaplaceApproximator(model)
    return approximator.at(approximator.climb(start), hessian, fd_step)
