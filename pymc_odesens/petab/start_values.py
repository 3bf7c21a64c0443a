"""Random starting values for the chains near the nominal parameter values (``initvals``).

PEtab's nominal values are usually the published estimate: a good place to start a
sampler, but not exactly there. Started exactly at the nominal values, nutpie's chains on
Bachmann_MSB2011 ran with a step size below 0.005 and 1023 gradient evaluations per draw
through their first draws: nutpie's first mass matrix is estimated from the gradient at the
start, which vanishes at a mode (measured on Boehm_JProteomeRes2014: docs/pymc.md, "Modes
first"; :meth:`pymc_odesens.inference.ModeSearchResult.laplace` gives starts that avoid
it). PyMC's own jitter, uniform(-1, 1) on each variable's transformed scale, is the other
extreme on wide bounds: up to 3.7 decades on log10 [-8, 8] (docs/petab.md#sampling).

:func:`start_values` gives each chain its own start, uniform within ``spread`` of the
nominal value on the parameter's scale and inside its bounds, as PyTensor expressions that
PyMC's initial-point function draws once per chain (its seed) for ``pm.sample`` and for
nutpie (through :func:`pymc_odesens.sample`).
"""

from __future__ import annotations

import math

import numpy as np
import pytensor.tensor as pt

from pymc_odesens.petab.parameters import EstimatedParameters
from pymc_odesens.petab.priors import bounds_on_scale, inside_bounds

__all__ = ["start_intervals", "start_values"]


def start_intervals(parameters: EstimatedParameters, spread: float):
    """Each parameter's start interval: within ``spread`` of its nominal value, inside its bounds.

    Parameters
    ----------
    parameters : EstimatedParameters
    spread : float
        Half-width on the parameter's scale, finite and >= 0.

    Returns
    -------
    (low, high) : tuple of numpy.ndarray
        Equal (the nominal value, moved inside the bounds) where the interval is empty or
        ``spread`` is 0.
    """
    if not (isinstance(spread, int | float) and math.isfinite(spread) and spread >= 0.0):
        raise ValueError(f"spread must be a finite number >= 0; got {spread!r}")
    low, high = [], []
    nominal_values = parameters.check(None)  # a named error where the table gives none
    for scale, nominal, lower, upper in zip(
        parameters.scales, nominal_values, parameters.lower, parameters.upper
    ):
        inside = inside_bounds(*bounds_on_scale(lower, upper, scale))
        a, b = max(float(nominal) - spread, inside[0]), min(float(nominal) + spread, inside[1])
        if not a < b:
            a = b = float(np.clip(nominal, *inside))
        low.append(a)
        high.append(b)
    return np.array(low), np.array(high)


def start_values(parameters: EstimatedParameters, spread: float) -> dict:
    """Per-chain random starts near the nominal values, as ``initvals`` for ``pm.sample``.

    Parameters
    ----------
    parameters : EstimatedParameters
        The estimated parameters (ids, scales, bounds, nominal values).
    spread : float
        Half-width of the uniform start around each nominal value, on the parameter's
        scale (0.1 on log10: within about 26 % of the nominal value). 0 starts every chain
        exactly at the nominal values.

    Returns
    -------
    dict
        Parameter id -> float (``spread == 0``) or a PyTensor expression with a uniform
        random draw that PyMC evaluates once per chain.
    """
    low, high = start_intervals(parameters, spread)
    values: dict = {}
    for pid, a, b in zip(parameters.ids, low, high):
        values[pid] = float(a) if a == b else pt.random.uniform(a, b)
    return values
