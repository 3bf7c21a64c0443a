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

:func:`check_prior` refuses, when a problem is read, the priors that petab's linter lets
through and that would give a log-density of NaN or -inf everywhere: a standard deviation
or scale that is not positive, a uniform prior whose interval is empty or misses the
bounds, parameters that are not finite numbers, and bounds that are infinite on the
parameter scale (a log-scaled lower bound of 0) under the default uniform prior.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
from petab.v1 import C
from pymc.distributions.transforms import Interval

from pymc_odesens.petab.errors import PetabError, PetabUnsupportedError, table_location

__all__ = [
    "PRIOR_TYPES",
    "bounds_on_scale",
    "check_prior",
    "inside_bounds",
    "prior_variable",
    "prior_of",
]

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


def _location(pid: str, position: int | None, column: str | None = None) -> str:
    """Where a parameter-table entry is: its row when known, else the parameter's id."""
    if position is None:
        where = f"parameter table, parameter {pid!r}"
        return where + (f", column {column}" if column else "")
    return table_location("parameter", position, pid, column)


def prior_of(row: pd.Series, pid: str, position: int | None = None) -> tuple[str, tuple]:
    """``(type, parameters)`` of a parameter-table row (default: uniform on the bounds).

    ``position``: the row's position in the table, for messages.
    """
    kind = row.get(C.OBJECTIVE_PRIOR_TYPE, None)
    kind = kind.strip() if isinstance(kind, str) and kind.strip() else None
    text = row.get(C.OBJECTIVE_PRIOR_PARAMETERS, None)
    text = str(text).strip() if isinstance(text, (str, float, int)) and not pd.isna(text) else ""
    scale = row.get(C.PARAMETER_SCALE, C.LIN) or C.LIN
    if kind is None:
        if text:
            raise PetabError(
                f"{_location(pid, position, C.OBJECTIVE_PRIOR_PARAMETERS)}: {pid!r} has "
                "objectivePriorParameters but no objectivePriorType"
            )
        kind = C.PARAMETER_SCALE_UNIFORM
        text = ""
    if kind not in PRIOR_TYPES:
        raise PetabUnsupportedError(
            f"{_location(pid, position, C.OBJECTIVE_PRIOR_TYPE)}: objectivePriorType "
            f"{kind!r} of {pid!r} is not one of {PRIOR_TYPES}"
        )
    if not text:
        if kind != C.PARAMETER_SCALE_UNIFORM:
            raise PetabError(
                f"{_location(pid, position, C.OBJECTIVE_PRIOR_PARAMETERS)}: {pid!r} needs "
                f"objectivePriorParameters for {kind}"
            )
        parameters = (
            _scaled(float(row[C.LOWER_BOUND]), scale),
            _scaled(float(row[C.UPPER_BOUND]), scale),
        )
    else:
        where = f"{_location(pid, position, C.OBJECTIVE_PRIOR_PARAMETERS)} = {text!r}"
        try:
            parameters = tuple(float(v) for v in text.split(C.PARAMETER_SEPARATOR))
        except ValueError:
            raise PetabError(
                f"{where}: objectivePriorParameters of {pid!r} must be two numbers separated by ';'"
            ) from None
        if len(parameters) != 2:
            raise PetabError(f"{where}: objectivePriorParameters of {pid!r} must be two numbers")
    return kind, parameters


def _support(kind: str, lower: float, upper: float, scale: str) -> tuple[float, float]:
    """The bounds on the prior's own variable: ``x``, ``theta`` or ``log(theta)``."""
    if kind in (C.PARAMETER_SCALE_UNIFORM, C.PARAMETER_SCALE_NORMAL, C.PARAMETER_SCALE_LAPLACE):
        return bounds_on_scale(lower, upper, scale)
    if kind in (C.LOG_NORMAL, C.LOG_LAPLACE):
        return _scaled(lower, C.LOG), _scaled(upper, C.LOG)
    return lower, upper


def check_prior(row: pd.Series, pid: str, position: int | None = None) -> None:
    """Refuse a prior whose log-density would be NaN, or -inf at every value.

    Parameters
    ----------
    row : pandas.Series
        The parameter's row of the parameter table (after petab's own checks: numeric
        bounds, ``lowerBound <= upperBound``, log-scaled bounds not negative).
    pid : str
    position : int, optional
        The row's position in the table, for messages.

    Raises
    ------
    PetabError
        Prior parameters that are not finite, a normal or laplace standard deviation or
        scale that is not > 0, a uniform prior with an empty interval or one that misses
        the bounds, or no prior (uniform on the bounds on the parameter scale) with a bound
        that is infinite on that scale. The message names the row and column.
    PetabUnsupportedError
        An ``objectivePriorType`` that PEtab v1 does not define.
    """
    kind, parameters = prior_of(row, pid, position)
    scale = row.get(C.PARAMETER_SCALE, C.LIN) or C.LIN
    lower, upper = float(row[C.LOWER_BOUND]), float(row[C.UPPER_BOUND])
    text = row.get(C.OBJECTIVE_PRIOR_PARAMETERS, None)
    given = isinstance(text, str) and text.strip()
    if not given:
        x_lower, x_upper = bounds_on_scale(lower, upper, scale)
        for column, bound, on_scale in (
            (C.LOWER_BOUND, lower, x_lower),
            (C.UPPER_BOUND, upper, x_upper),
        ):
            if not math.isfinite(on_scale):
                raise PetabError(
                    f"{_location(pid, position, column)} = {bound!r}: expected a bound that "
                    f"is finite on the parameterScale {scale} ({on_scale} there): without "
                    "objectivePriorType the prior is uniform on the bounds on that scale"
                )
        return
    where = f"{_location(pid, position, C.OBJECTIVE_PRIOR_PARAMETERS)} = {text.strip()!r}"
    if not all(math.isfinite(v) for v in parameters):
        raise PetabError(f"{where}: expected two finite numbers for the {kind} prior")
    a, b = parameters
    base = _BASE_KIND[kind]
    if base in (C.NORMAL, C.LAPLACE) and not b > 0:
        spread = "standard deviation" if base == C.NORMAL else "scale"
        raise PetabError(f"{where}: expected a {spread} > 0 for the {kind} prior, got {b!r}")
    if base == C.UNIFORM:
        if not a < b:
            raise PetabError(
                f"{where}: expected a lower end < the upper end for the {kind} prior, got "
                f"{a!r} and {b!r}"
            )
        low, high = _support(kind, lower, upper, scale)
        if not max(a, low) < min(b, high):
            raise PetabError(
                f"{where}: expected an interval that overlaps the bounds [{low!r}, {high!r}] "
                f"(lowerBound, upperBound on the {kind} prior's scale), got [{a!r}, {b!r}]"
            )


def _base(kind: str, parameters: tuple, lower: float, upper: float, size=None):
    """The prior's own variable (truncated to [lower, upper]) as an unnamed distribution.

    Every number is a numpy float64: PyTensor makes a Python float that float32 holds
    exactly (10.0, 0.5) a float32 constant, and the log-density's terms of constants alone
    (a uniform's ``-log(b - a)``, a truncated normal's normaliser) were then computed in
    float32 (``-log(10)`` 3.2e-8 off).
    """
    a, b = (np.float64(v) for v in parameters)
    lower, upper = np.float64(lower), np.float64(upper)
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
    check_prior(row, pid)
    kind, parameters = prior_of(row, pid)
    lower, upper = float(row[C.LOWER_BOUND]), float(row[C.UPPER_BOUND])
    x_lower, x_upper = bounds_on_scale(lower, upper, scale)
    if not x_lower < x_upper:
        raise PetabError(
            f"{_location(pid, None, C.LOWER_BOUND)}: {pid!r} has lowerBound >= upperBound; an "
            "estimated parameter needs an interval"
        )
    if initval is not None:
        initval = float(np.clip(initval, *inside_bounds(x_lower, x_upper)))
    on = _support(kind, lower, upper, scale)
    if kind in (C.PARAMETER_SCALE_UNIFORM, C.PARAMETER_SCALE_NORMAL, C.PARAMETER_SCALE_LAPLACE):
        to_x = None  # the prior is that of x
    elif kind in (C.LOG_NORMAL, C.LOG_LAPLACE):
        to_x = {C.LIN: pt.exp, C.LOG: None, C.LOG10: lambda u: u / _LN10}[scale]  # u = log(theta)
    else:
        to_x = {C.LIN: None, C.LOG: pt.log, C.LOG10: pt.log10}[scale]  # that of theta
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
