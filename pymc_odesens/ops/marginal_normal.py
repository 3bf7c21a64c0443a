"""A normal likelihood with its scaling, offset and noise integrated out, for any PyMC model.

:func:`marginal_normal` is the general form of what :meth:`PetabProblem.build_model
<pymc_odesens.petab.PetabProblem.build_model>` does with ``marginalize``: measurements
of a model output ``mu`` (an :func:`~pymc_odesens.ode_solution` output, say) whose
scaling ``s``, offset ``o`` and noise ``sigma`` are unknown,

    observed_i ~ Normal(s mu_i + o, sigma^2)              (transformation "lin")
    T(observed_i) ~ Normal(T(s mu_i), sigma^2)            ("log", "log10"; T = ln, log10)

with ``s``, ``o`` and/or ``sigma^2`` integrated out exactly under conjugate priors
(:class:`NormalPrior`, :class:`InverseGammaPrior`): one closed form per block
(:mod:`pymc_odesens.ops.marginal_structure`), added to the model as a potential whose
value is the log-density of the measurements themselves (for ``log`` / ``log10`` with the
Jacobian ``-sum log observed_i`` / ``-sum log(observed_i ln 10)``). After sampling,
:func:`pymc_odesens.inference.recover_marginalized` draws them from their conditional
posterior.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_odesens.ops.marginal_likelihood import marginal_log_likelihood
from pymc_odesens.ops.marginal_structure import (
    MarginalColumn,
    MarginalNoise,
    MarginalNormalStructure,
)

__all__ = ["InverseGammaPrior", "NormalPrior", "marginal_normal"]

_TRANSFORMATIONS = ("lin", "log", "log10")


@dataclass(frozen=True)
class NormalPrior:
    """``Normal(mu, sigma^2)``: the prior of a marginalised scaling or offset.

    For a scaling under the ``log`` / ``log10`` transformation it is the prior of ``ln s`` /
    ``log10 s``. Where the noise variance is marginalised too, the prior is conditional on
    it: ``theta | sigma_noise^2 ~ Normal(mu, sigma^2 sigma_noise^2 / sigma_ref^2)``, with
    ``sigma_ref^2 = beta exp(-digamma(alpha))`` the noise prior's geometric mean of
    ``sigma_noise^2``.
    """

    mu: float = 0.0
    sigma: float = 1.0

    def __post_init__(self) -> None:
        if not math.isfinite(float(self.mu)):
            raise ValueError(f"NormalPrior: mu must be finite, got {self.mu}")
        if not (math.isfinite(float(self.sigma)) and float(self.sigma) > 0):
            raise ValueError(f"NormalPrior: sigma must be positive and finite, got {self.sigma}")


@dataclass(frozen=True)
class InverseGammaPrior:
    """``sigma^2 ~ InverseGamma(alpha, beta)``: the prior of a marginalised noise variance."""

    alpha: float
    beta: float

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            value = float(getattr(self, name))
            if not (math.isfinite(value) and value > 0):
                raise ValueError(
                    f"InverseGammaPrior: {name} must be positive and finite, got {value}"
                )


def _labels(groups, n: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct labels, each row's index among them)``."""
    if groups is None:
        return np.zeros(1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    labels = np.asarray(groups)
    if labels.shape != (n,) or labels.dtype.kind not in "iu":
        raise ValueError(
            f"{what} must be an integer array with one label per measurement ({n}), got "
            f"{labels.dtype} {labels.shape}"
        )
    distinct, inverse = np.unique(labels, return_inverse=True)
    return distinct, inverse.astype(np.int64)


def marginal_normal(
    name: str,
    mu,
    observed,
    *,
    sigma,
    scale: NormalPrior | None = None,
    offset: NormalPrior | None = None,
    transformation: str = "lin",
    scale_groups=None,
    offset_groups=None,
    sigma_groups=None,
):
    """Add measurements with marginalised scaling, offset and/or noise to the current model.

    Parameters
    ----------
    name : str
        The potential's name; recovered draws are named ``<name>_scale``,
        ``<name>_offset`` and ``<name>_sigma``.
    mu : tensor-like, (n,) or scalar
        The model output the measurements observe.
    observed : array_like, (n,)
        The measurements (positive for ``log`` / ``log10``).
    sigma : tensor-like or InverseGammaPrior
        The noise standard deviation on the transformed scale (a tensor or number,
        broadcast to ``(n,)``), or the prior of ``sigma^2`` to marginalise it.
    scale, offset : NormalPrior, optional
        Marginalise a scaling ``s`` (default: ``s = 1``) or an offset ``o`` (default: 0;
        only for ``"lin"``: an offset inside a logarithm has no closed form).
    transformation : {"lin", "log", "log10"}
        The scale on which the noise is normal (PEtab's ``observableTransformation``).
    scale_groups, offset_groups, sigma_groups : array_like of int, (n,), optional
        A label per measurement: one scaling (offset, noise variance) per distinct label,
        in sorted order; default one for all. Measurements linked by a marginalised
        scaling or offset must share one marginalised noise variance (or have given
        noise).

    Returns
    -------
    TensorVariable
        The potential: the marginal log-density of ``observed``.

    Raises
    ------
    ValueError
        Nothing marginalised, an offset under a log transformation, non-positive
        measurements under a log transformation, shapes that do not match, or groups
        with no closed form (named).
    """
    if transformation not in _TRANSFORMATIONS:
        raise ValueError(
            f"transformation must be one of {_TRANSFORMATIONS}, got {transformation!r}"
        )
    marginal_sigma = isinstance(sigma, InverseGammaPrior)
    if scale is None and offset is None and not marginal_sigma:
        raise ValueError(
            "marginal_normal: nothing to marginalise (give scale, offset or an "
            "InverseGammaPrior as sigma); without them use pm.Normal"
        )
    for what, prior in (("scale", scale), ("offset", offset)):
        if prior is not None and not isinstance(prior, NormalPrior):
            raise TypeError(f"{what} must be a NormalPrior or None, got {type(prior).__name__}")
    if offset is not None and transformation != "lin":
        raise ValueError(
            f"marginal_normal: an offset under the {transformation!r} transformation enters "
            "inside the logarithm, which has no closed form; only 'lin' takes an offset"
        )
    data = np.asarray(observed, dtype=float)
    if data.ndim != 1 or data.size == 0:
        raise ValueError(f"observed must be a non-empty vector, got shape {data.shape}")
    if not np.all(np.isfinite(data)):
        raise ValueError("observed holds values that are not finite")
    n = data.size
    if transformation != "lin" and np.any(data <= 0):
        bad = int(np.flatnonzero(data <= 0)[0])
        raise ValueError(
            f"observed[{bad}] = {data[bad]} is not positive, but the transformation is "
            f"{transformation!r}"
        )
    mu = pt.as_tensor_variable(mu)
    if mu.ndim > 1 or (mu.ndim == 1 and mu.type.shape[0] not in (None, n)):
        raise ValueError(f"mu must be a scalar or a vector of {n} values, got {mu.type}")
    mu = pt.cast(pt.broadcast_to(mu, (n,)), "float64")

    columns, entry_row, entry_column, values = [], [], [], []
    for what, prior, groups in (("scale", scale, scale_groups), ("offset", offset, offset_groups)):
        if prior is None:
            if groups is not None:
                raise ValueError(f"{what}_groups given, but {what} is not marginalised")
            continue
        distinct, index = _labels(groups, n, f"{what}_groups")
        first = len(columns)
        for position in range(distinct.size):
            columns.append(
                MarginalColumn(
                    f"{name}_{what}",
                    prior.mu,
                    prior.sigma,
                    position=position if groups is not None else -1,
                    variable=transformation if what == "scale" else "lin",
                    report="lin",
                )
            )
        entry_row.append(np.arange(n))
        entry_column.append(first + index)
        if what == "scale" and transformation == "lin":
            values.append(mu)
        else:
            values.append(pt.ones((n,), dtype="float64"))
    noises, row_noise = [], np.full(n, -1, dtype=np.int64)
    if marginal_sigma:
        distinct, index = _labels(sigma_groups, n, "sigma_groups")
        for position in range(distinct.size):
            noises.append(
                MarginalNoise(
                    f"{name}_sigma",
                    sigma.alpha,
                    sigma.beta,
                    position=position if sigma_groups is not None else -1,
                )
            )
        row_noise = index
        noise = pt.ones((n,), dtype="float64")
    else:
        if sigma_groups is not None:
            raise ValueError("sigma_groups given, but sigma is not marginalised")
        noise = pt.cast(pt.broadcast_to(pt.as_tensor_variable(sigma), (n,)), "float64")
    structure = MarginalNormalStructure.build(
        n,
        np.concatenate(entry_row) if entry_row else np.zeros(0, dtype=np.int64),
        np.concatenate(entry_column) if entry_column else np.zeros(0, dtype=np.int64),
        columns,
        row_noise,
        noises,
    )
    if transformation == "lin":
        z = data
        fixed = pt.zeros((n,), dtype="float64") if scale is not None else mu
        jacobian = 0.0
    elif transformation == "log":
        z = np.log(data)
        fixed = pt.log(mu)
        jacobian = -float(np.sum(np.log(data)))
    else:
        z = np.log10(data)
        fixed = pt.log10(mu)
        jacobian = -float(np.sum(np.log(data * math.log(10.0))))
    a = pt.concatenate(values) if values else pt.zeros((0,), dtype="float64")
    logp = marginal_log_likelihood(structure, z, fixed, a, noise) + jacobian
    return pm.Potential(name, logp)
