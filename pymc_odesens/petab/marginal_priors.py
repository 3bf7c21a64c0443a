"""Conjugate priors of marginalised observation parameters, derived from their PEtab priors.

A marginalised scaling or offset ``theta`` gets a normal prior, a marginalised noise
standard deviation ``sigma`` an inverse-gamma prior on ``sigma^2``. ``theta`` is the
parameter's linear value ``s`` where the observable is on the ``lin`` scale, and ``ln s`` or
``log10 s`` where it is on the ``log`` or ``log10`` scale (there a scaling is an offset
of the transformed value).

Defaults (:func:`column_prior`, :func:`noise_prior`):

- when the PEtab prior is a normal distribution of ``theta`` itself or of an affine
  function of it (``normal`` of ``s`` for ``theta = s``, ``logNormal`` of ``ln s`` or
  ``parameterScaleNormal`` on a ``log`` / ``log10`` parameter scale for ``theta = ln s`` or
  ``log10 s``, ``parameterScaleNormal`` on the ``lin`` scale for ``theta = s``), that
  normal, exactly (its truncation to the bounds dropped);
- otherwise the normal with the mean and variance of ``theta`` under the PEtab prior
  (truncated to the bounds, as PEtab defines it; where ``theta`` is a logarithm, over
  the positive part), by quadrature: a ``uniform`` / ``parameterScaleUniform`` prior on
  ``[a, b]`` of ``theta``'s own scale becomes ``Normal((a + b) / 2, (b - a)^2 / 12)``;
- for ``sigma^2 ~ InverseGamma(alpha, beta)``: the ``alpha``, ``beta`` whose ``ln
  sigma^2`` has the mean and variance of ``ln sigma^2`` under the PEtab prior
  (``trigamma(alpha) = Var``, ``ln beta = E + digamma(alpha)``): on a wide
  ``log10``-uniform prior of ``sigma`` a small ``alpha``, close to the scale-invariant
  ``1 / sigma^2``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from petab.v1 import C
from petab.v1.priors import Prior
from scipy import integrate
from scipy.optimize import brentq
from scipy.special import digamma, polygamma

from pymc_odesens.petab.errors import PetabError
from pymc_odesens.petab.priors import bounds_on_scale, prior_of

__all__ = ["column_prior", "noise_prior", "inverse_gamma_matching"]

_LN10 = math.log(10.0)


def _linear(x: np.ndarray | float, scale: str):
    if scale == C.LIN:
        return x
    return np.exp(x) if scale == C.LOG else np.power(10.0, x)


def _moments(row: pd.Series, pid: str, scale: str, function) -> tuple[float, float]:
    """Mean and variance of ``function(x)`` (``x`` on the parameter scale; NaN where it is
    not defined, which excludes that part) under the PEtab prior of the row, truncated
    to its bounds."""
    values = {
        k: v
        for k, v in row.to_dict().items()
        if not (isinstance(v, float) and np.isnan(v)) and not (isinstance(v, str) and not v.strip())
    }
    values.setdefault(C.PARAMETER_SCALE, scale)
    prior = Prior.from_par_dict(values, type_="objective")
    lower, upper = bounds_on_scale(row[C.LOWER_BOUND], row[C.UPPER_BOUND], scale)

    def density(x):
        return float(prior.pdf(x, x_scaled=True, rescale=True))

    def value(x):
        with np.errstate(all="ignore"):
            v = function(x)
        return float(v) if np.isfinite(v) else math.nan

    if not math.isfinite(value(lower)) and math.isfinite(lower):
        lower = max(lower, 0.0)  # a logarithm of a linear value: its positive part
    with warnings.catch_warnings():
        warnings.simplefilter("error", integrate.IntegrationWarning)
        try:
            mass = integrate.quad(density, lower, upper, limit=200)[0]
            mean = integrate.quad(lambda x: value(x) * density(x), lower, upper, limit=200)[0]
            mean /= mass
            variance = integrate.quad(
                lambda x: (value(x) - mean) ** 2 * density(x), lower, upper, limit=200
            )[0]
            variance /= mass
        except (integrate.IntegrationWarning, ValueError, ZeroDivisionError, OverflowError):
            mean = variance = math.nan
    if not (math.isfinite(mean) and math.isfinite(variance) and variance > 0):
        raise PetabError(
            f"marginalisation of {pid!r}: its PEtab prior gives the marginalised variable no "
            "finite mean and variance, so no default conjugate prior can be derived from it; "
            f"give one: marginal_priors={{{pid!r}: {{...}}}}"
        )
    return mean, variance


def _natural_log(x: float, scale: str) -> float:
    """``ln s`` of ``x`` on ``scale`` (NaN for ``s <= 0``)."""
    if scale == C.LOG:
        return x
    if scale == C.LOG10:
        return x * _LN10
    return math.log(x) if x > 0 else math.nan


def _on_variable(scale: str, variable: str):
    """``theta`` (``s``, ``ln s`` or ``log10 s``) as a function of ``x`` on ``scale``."""
    if variable == C.LIN:
        return lambda x: _linear(x, scale)
    if variable == C.LOG:
        return lambda x: _natural_log(x, scale)
    return lambda x: _natural_log(x, scale) / _LN10


def _exact_normal(kind: str, parameters: tuple, scale: str, variable: str):
    """The normal prior of ``theta`` (on ``variable``) a PEtab normal prior is, or None."""
    mu, sd = parameters
    factor = {C.LIN: None, C.LOG: 1.0, C.LOG10: 1.0 / _LN10}  # theta per unit of ln s
    if kind == C.NORMAL and variable == C.LIN:
        return mu, sd
    if kind == C.PARAMETER_SCALE_NORMAL:
        if scale == variable:
            return mu, sd
        if scale != C.LIN and variable != C.LIN:  # ln s and log10 s are proportional
            ratio = factor[variable] / factor[scale]
            return mu * ratio, sd * ratio
        return None
    if kind == C.LOG_NORMAL and variable != C.LIN:
        ratio = factor[variable]
        return mu * ratio, sd * ratio
    return None


def column_prior(row: pd.Series, pid: str, scale: str, variable: str) -> tuple[float, float, str]:
    """The default normal prior of a marginalised scaling or offset.

    Parameters
    ----------
    row : pandas.Series
        Its row of the parameter table.
    pid : str
    scale : {"lin", "log", "log10"}
        Its ``parameterScale``.
    variable : {"lin", "log", "log10"}
        ``theta`` is ``s``, ``ln s`` or ``log10 s``.

    Returns
    -------
    (mean, sd, how)
        ``how`` says where it came from (``"the PEtab prior"`` or ``"moments of the PEtab
        prior"``).
    """
    kind, parameters = prior_of(row, pid)
    exact = _exact_normal(kind, parameters, scale, variable)
    if exact is not None:
        return float(exact[0]), float(exact[1]), "the PEtab prior"
    mean, variance = _moments(row, pid, scale, _on_variable(scale, variable))
    return mean, math.sqrt(variance), "moments of the PEtab prior"


def inverse_gamma_matching(mean_log: float, variance_log: float) -> tuple[float, float]:
    """``(alpha, beta)`` of the inverse gamma whose ``ln v`` has mean ``mean_log`` and
    variance ``variance_log`` (``trigamma(alpha) = variance_log``,
    ``ln beta = mean_log + digamma(alpha)``)."""
    if not (math.isfinite(variance_log) and variance_log > 0 and math.isfinite(mean_log)):
        raise ValueError(
            f"need a finite mean and a positive variance of ln v, got {mean_log}, {variance_log}"
        )
    target = math.log(variance_log)
    t = brentq(lambda u: math.log(float(polygamma(1, math.exp(u)))) - target, -60.0, 60.0)
    alpha = math.exp(t)
    return alpha, math.exp(mean_log + float(digamma(alpha)))


def noise_prior(row: pd.Series, pid: str, scale: str) -> tuple[float, float, str]:
    """The default inverse-gamma prior of a marginalised noise variance ``sigma^2``.

    Returns
    -------
    (alpha, beta, how)
    """
    mean, variance = _moments(row, pid, scale, _on_variable(scale, C.LOG))  # of ln sigma
    alpha, beta = inverse_gamma_matching(2.0 * mean, 4.0 * variance)
    return alpha, beta, "moments of ln sigma^2 under the PEtab prior"
