"""A model in whitened coordinates: the sampler sees the Laplace approximation as N(0, I).

nutpie adapts a *diagonal* mass matrix, from its gradient-based first guess, and takes no
mass matrix from outside. On a posterior with strong correlations between parameters (the
PEtab problems' rate constants and their scalings) that is the slow part of a run: on
Bachmann_MSB2011 (95 sampled coordinates) 4 chains had not finished nutpie's 500 tuning
steps after 11 minutes (benchmarks/README.md). PyMC's NUTS takes the Laplace covariance as
its dense mass matrix (:meth:`~pymc_odesens.inference.laplace_start.LaplaceApproximation.
potential`); for nutpie the same information goes into the coordinates instead.

:func:`whitened_model` writes a PyMC model with one free variable ``z`` (``n`` values, flat
prior) and the original model's log-density (priors, likelihood, potentials and the
transforms' log-Jacobians) at ``x = m + L z``, where ``m`` is the Laplace mode and
``L L^T`` its covariance (Cholesky factor), plus ``log |det L|``: its density is exactly the
original posterior's in ``z``. A posterior that is close to its Laplace approximation is
then close to a standard normal, whose diagonal mass matrix is the identity: nutpie's
adaptation starts near its answer, and the correlations that a diagonal metric cannot
express are gone. Every free variable and deterministic of the original model is a
deterministic of the whitened one, by its own name, dims and coordinates, so the trace
holds the original variables.

The map is linear, so it changes no probability: draws of ``x`` have the original
posterior whether or not the approximation is good; only the sampler's efficiency depends
on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace

from pymc_odesens.inference.laplace_start import LaplaceApproximation

__all__ = ["WHITENED_NAME", "WhitenedModel", "whitened_model"]

WHITENED_NAME = "pymc_odesens_whitened"
"""The whitened model's free variable (a name no PEtab or PyMC variable takes)."""


@dataclass(frozen=True)
class WhitenedModel:
    """The whitened model and the map back to the original one.

    Attributes
    ----------
    model : pymc.Model
        One free variable, :data:`WHITENED_NAME` (flat, shape ``(n,)``); a potential with
        the original log-density; the original free variables and deterministics as
        deterministics.
    original : pymc.Model
    mean : numpy.ndarray
        ``m``, the original value variables at the Laplace mode, concatenated in the order
        of ``value_variables``.
    cholesky : numpy.ndarray
        ``L``, lower triangular, ``L @ L.T`` the Laplace covariance.
    value_variables : tuple of str
    recorded : tuple of str
        The original free variables and deterministics, by name (what a trace keeps).
    """

    model: pm.Model
    original: pm.Model
    mean: np.ndarray
    cholesky: np.ndarray
    value_variables: tuple[str, ...]
    recorded: tuple[str, ...]

    def to_whitened(self, vector: np.ndarray) -> np.ndarray:
        """``z = L^{-1} (x - m)`` for a concatenated value vector ``x``."""
        from scipy.linalg import solve_triangular

        x = np.asarray(vector, dtype=float)
        if x.shape != self.mean.shape:
            raise ValueError(
                f"vector: expected shape {self.mean.shape} (the value variables "
                f"{list(self.value_variables)} concatenated), got {x.shape}"
            )
        return solve_triangular(self.cholesky, x - self.mean, lower=True)

    def from_whitened(self, z: np.ndarray) -> np.ndarray:
        """``x = m + L z``."""
        z = np.asarray(z, dtype=float)
        if z.shape != self.mean.shape:
            raise ValueError(f"z: expected shape {self.mean.shape}, got {z.shape}")
        return self.mean + self.cholesky @ z


def _cholesky(covariance: np.ndarray) -> np.ndarray:
    covariance = np.asarray(covariance, dtype=float)
    try:
        return np.linalg.cholesky(0.5 * (covariance + covariance.T))
    except np.linalg.LinAlgError as error:
        raise ValueError(
            "laplace: its covariance is not positive definite, so it cannot whiten the "
            f"coordinates ({error})"
        ) from None


def whitened_model(laplace: LaplaceApproximation) -> WhitenedModel:
    """The model of ``laplace`` in coordinates whitened by its Laplace approximation.

    Parameters
    ----------
    laplace : LaplaceApproximation
        From :func:`~pymc_odesens.inference.laplace_start.laplace_approximation`; its
        covariance must be positive definite.

    Returns
    -------
    WhitenedModel

    Raises
    ------
    TypeError
        ``laplace`` is not a ``LaplaceApproximation``.
    ValueError
        The covariance's shape does not match the mode, or it is not positive definite;
        the original model has a variable named :data:`WHITENED_NAME`.
    """
    if not isinstance(laplace, LaplaceApproximation):
        raise TypeError(
            f"laplace: expected a LaplaceApproximation (laplace_approximation), got "
            f"{type(laplace).__name__}"
        )
    original = laplace.model
    mean = np.asarray(laplace.mode.vector, dtype=float)
    n = mean.size
    if np.shape(laplace.covariance) != (n, n):
        raise ValueError(
            f"laplace: covariance of shape {np.shape(laplace.covariance)} for a mode of {n} values"
        )
    if WHITENED_NAME in original.named_vars:
        raise ValueError(f"the model already has a variable named {WHITENED_NAME!r}")
    cholesky = _cholesky(laplace.covariance)
    by_name = {v.name: v for v in original.value_vars}
    names = tuple(laplace.mode.value_variables)
    missing = [name for name in names if name not in by_name]
    if missing:
        raise ValueError(f"laplace: value variables {missing} are not the model's")
    kept = list(original.free_RVs) + list(original.deterministics)
    log_density = original.logp(jacobian=True)
    outputs = original.replace_rvs_by_values(kept)
    with pm.Model(coords=dict(original.coords)) as model:
        z = pm.Flat(WHITENED_NAME, shape=(n,))
        # shared, not constants: the compiled log-density (nutpie's, cached across
        # processes by its graph) is then the same for every approximation of this model
        shift = pytensor.shared(mean, name=WHITENED_NAME + "_mean")
        factor = pytensor.shared(cholesky, name=WHITENED_NAME + "_cholesky")
        x = shift + pt.dot(factor, z)
        replacements, offset = {}, 0
        for name in names:
            shape = np.shape(laplace.mode.point[name])
            size = int(np.prod(shape, dtype=int))
            value = by_name[name]
            piece = x[offset : offset + size].reshape(shape).astype(value.dtype)
            replacements[value] = pt.specify_shape(piece, shape)
            offset += size
        replaced = graph_replace([log_density, *outputs], replacements, strict=False)
        log_det = pt.sum(pt.log(pt.diagonal(factor)))
        pm.Potential(WHITENED_NAME + "_log_density", replaced[0] + log_det)
        dims = original.named_vars_to_dims
        for variable, graph in zip(kept, replaced[1:], strict=True):
            pm.Deterministic(variable.name, graph, dims=dims.get(variable.name))
    return WhitenedModel(
        model=model,
        original=original,
        mean=mean,
        cholesky=cholesky,
        value_variables=names,
        recorded=tuple(variable.name for variable in kept),
    )
