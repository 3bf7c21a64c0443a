"""PEtab priors as PyMC random variables on the parameter scale.

Each estimated parameter is one random variable ``x`` on its ``parameterScale``. Its
``objectivePriorType`` says on which scale the prior's density is given:

- ``parameterScaleUniform``, ``parameterScaleNormal``, ``parameterScaleLaplace``: on the
  parameter scale, for ``x`` itself;
- ``uniform``, ``normal``, ``laplace``: for the linear value ``theta = unscale(x)``;
- ``logNormal``, ``logLaplace``: for ``log(theta)`` (natural log; PEtab's parameters are
  the location and scale of that normal or Laplace distribution).

The distribution is truncated to the parameter's bounds (and renormalised, as in
``petab.v1.priors.Prior``); a parameter without prior is ``parameterScaleUniform`` on its
bounds. When the prior's variable is not ``x``, ``x`` is built from it (``log``,
``log10``, ``exp``), and PyMC derives its density with the change-of-variables factor, so
that ``theta`` has exactly the stated prior. All have an interval transform on the bounds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
from petab.v1 import C
from pymc.distributions.transforms import Interval

from pymc_odesens.petab.errors import PetabError, PetabUnsupportedError

__all__ = ["PRIOR_TYPES", "bounds_on_scale", "inside_bounds", "prior_variable", "prior_of"]

PRIOR_TYPES = (
    C.PARAMETER_SCALE_UNIFORM,
    C.PARAMETER_SCALE_NORMAL,
    C.PARAMETER_SCALE_LAPLACE,
    C.UNIFORM,
    C.NORMAL,
    C.LAPLACE,
    C.LOG_NORMAL,
    C.LOG_LAPLACE,
)
_LN10 = math.log(10.0)
_BASE_KIND = {
    C.PARAMETER_SCALE_UNIFORM: C.UNIFORM,
    C.UNIFORM: C.UNIFORM,
    C.PARAMETER_SCALE_NORMAL: C.NORMAL,
    C.NORMAL: C.NORMAL,
    C.LOG_NORMAL: C.NORMAL,
    C.PARAMETER_SCALE_LAPLACE: C.LAPLACE,
    C.LAPLACE: C.LAPLACE,
    C.LOG_LAPLACE: C.LAPLACE,
}


def _scaled(value: float, scale: str) -> float:
    if scale == C.LIN:
        return value
    if value <= 0:
        return -math.inf
    return math.log(value) if scale == C.LOG else math.log10(value)


def bounds_on_scale(lower: float, upper: float, scale: str) -> tuple[float, float]:
    """A parameter's (linear) bounds on its ``parameterScale`` (-inf for log of 0)."""
    return _scaled(float(lower), scale), _scaled(float(upper), scale)


def inside_bounds(x_lower: float, x_upper: float) -> tuple[float, float]:
    """The interval a starting value must lie in: 1e-6 of the bounds' width inside them.

    The interval transform is infinite at a bound, so an initial value there is refused.
    """
    width = x_upper - x_lower
    margin = 1e-6 * width if math.isfinite(width) else 0.0
    return x_lower + margin, x_upper - margin


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def prior_of(row: pd.Series, pid: str) -> tuple[str, tuple]:
    """``(type, parameters)`` of a parameter-table row (default: uniform on the bounds)."""
    kind = row.get(C.OBJECTIVE_PRIOR_TYPE, None)
    kind = kind.strip() if isinstance(kind, str) and kind.strip() else None
    text = row.get(C.OBJECTIVE_PRIOR_PARAMETERS, None)
    text = str(text).strip() if isinstance(text, (str, float, int)) and not pd.isna(text) else ""
    scale = row.get(C.PARAMETER_SCALE, C.LIN) or C.LIN
    if kind is None:
        if text:
            raise PetabError(
                f"parameter table: {pid!r} has objectivePriorParameters but no objectivePriorType"
            )
        kind = C.PARAMETER_SCALE_UNIFORM
        text = ""
    if kind not in PRIOR_TYPES:
        raise PetabUnsupportedError(
            f"parameter table: objectivePriorType {kind!r} of {pid!r} is not one of {PRIOR_TYPES}"
        )
    if not text:
        if kind != C.PARAMETER_SCALE_UNIFORM:
            raise PetabError(f"parameter table: {pid!r} needs objectivePriorParameters for {kind}")
        parameters = (
            _scaled(float(row[C.LOWER_BOUND]), scale),
            _scaled(float(row[C.UPPER_BOUND]), scale),
        )
    else:
        try:
            parameters = tuple(float(v) for v in text.split(C.PARAMETER_SEPARATOR))
        except ValueError:
            raise PetabError(
                f"parameter table: objectivePriorParameters of {pid!r} must be two numbers "
                f"separated by ';', got {text!r}"
            ) from None
        if len(parameters) != 2:
            raise PetabError(
                f"parameter table: objectivePriorParameters of {pid!r} must be two numbers, "
                f"got {text!r}"
            )
    return kind, parameters


def _base(kind: str, parameters: tuple, lower: float, upper: float, size=None):
    """The prior's own variable (truncated to [lower, upper]) as an unnamed distribution."""
    a, b = parameters
    lo, hi = _finite(lower), _finite(upper)
    if kind in (C.UNIFORM, C.PARAMETER_SCALE_UNIFORM):
        return pm.Uniform.dist(max(a, lower), min(b, upper), size=size)
    if kind in (C.NORMAL, C.PARAMETER_SCALE_NORMAL, C.LOG_NORMAL):
        if lo is None and hi is None:
            return pm.Normal.dist(a, b, size=size)
        return pm.TruncatedNormal.dist(a, b, lower=lo, upper=hi, size=size)
    if lo is None and hi is None:
        return pm.Laplace.dist(a, b, size=size)
    return pm.Truncated.dist(pm.Laplace.dist(a, b), lower=lo, upper=hi, size=size)


def prior_variable(pid: str, row: pd.Series, scale: str, initval: float | None = None):
    """The random variable of one estimated parameter, on its scale, in the current model.

    Parameters
    ----------
    pid : str
        Its id (the variable's name).
    row : pandas.Series
        Its row of the parameter table.
    scale : {"lin", "log", "log10"}
    initval : float, optional
        The initial value on the scale (moved inside the bounds).
    """
    kind, parameters = prior_of(row, pid)
    lower, upper = float(row[C.LOWER_BOUND]), float(row[C.UPPER_BOUND])
    x_lower, x_upper = bounds_on_scale(lower, upper, scale)
    if not x_lower < x_upper:
        raise PetabError(f"parameter table: {pid!r} has lowerBound >= upperBound")
    if initval is not None:
        initval = float(np.clip(initval, *inside_bounds(x_lower, x_upper)))
    if kind in (C.PARAMETER_SCALE_UNIFORM, C.PARAMETER_SCALE_NORMAL, C.PARAMETER_SCALE_LAPLACE):
        on, to_x = (x_lower, x_upper), None  # the prior is that of x
    elif kind in (C.LOG_NORMAL, C.LOG_LAPLACE):
        on = (_scaled(lower, C.LOG), _scaled(upper, C.LOG))  # that of u = log(theta)
        to_x = {C.LIN: pt.exp, C.LOG: None, C.LOG10: lambda u: u / _LN10}[scale]
    else:
        on = (lower, upper)  # that of theta
        to_x = {C.LIN: None, C.LOG: pt.log, C.LOG10: pt.log10}[scale]
    base_kind = _BASE_KIND[kind]
    bounded = math.isfinite(x_lower) or math.isfinite(x_upper)
    transform = Interval(_finite(x_lower), _finite(x_upper)) if bounded else None
    if to_x is None:
        return pm.CustomDist(
            pid,
            dist=lambda size: _base(base_kind, parameters, on[0], on[1], size),
            transform=transform,
            initval=initval,
        )
    return pm.CustomDist(
        pid,
        dist=lambda size: to_x(_base(base_kind, parameters, on[0], on[1], size)),
        transform=transform,
        initval=initval,
    )
