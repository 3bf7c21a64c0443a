"""PEtab's noise models as PyMC distributions of the measurements themselves.

PEtab's log-likelihood of a measurement ``m`` with simulated value ``h`` and noise
parameter ``sigma`` is the density *of m*: for ``observableTransformation = log10`` and
normal noise, ``log10(m) ~ Normal(log10(h), sigma)``, so the density of ``m`` carries the
factor ``1 / (m ln 10)`` (``petab.v1.calculate.calculate_single_llh``; AMICI's reference
values include it). These are therefore distributions of ``m``:

| noise, transformation | distribution of ``m`` |
|---|---|
| normal, lin | ``Normal(h, sigma)`` |
| normal, log | ``LogNormal(log h, sigma)`` |
| normal, log10 | ``LogNormal(log h, sigma ln 10)`` |
| laplace, lin | ``Laplace(h, sigma)`` |
| laplace, log | ``exp(Laplace(log h, sigma))`` |
| laplace, log10 | ``exp(Laplace(log h, sigma ln 10))`` |

so that their log-densities sum to PEtab's log-likelihood, posterior predictive draws are
measurements on the measurement's own scale, and SMMALA's Fisher metric (Normal and
LogNormal) applies.

On a ``log`` / ``log10`` scale a simulated observable ``h <= 0`` gives the (positive)
measurement a density of zero: the model's log-density is ``-inf`` there, a rejected
proposal. :func:`observed_measurements` makes that ``-inf`` a potential (``-inf`` when any
``h`` of the observable is not positive, this package's rejection marker) and gives the
distribution ``max(h, tiny)`` (``tiny`` the smallest normal float) in place of such an
``h``, so that the log-density's gradient stays finite (``log h`` of ``h = 0`` would make
it infinite or NaN, and the ODE Ops refuse a non-finite cotangent); draws there are about
``tiny``, the limit of the measurement as ``h`` goes to zero.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from petab.v1 import C

from pymc_odesens.ops.failure_potential import failure_potential

__all__ = ["measurement_distribution", "observed_measurements"]


def _exp_laplace(mu, b, size):
    return pt.exp(pm.Laplace.dist(mu, b, size=size))


def _parameters(distribution: str, transformation: str, h, sigma) -> tuple:
    # sigma is the noise on the log10 scale: ln m = ln 10 * log10 m has sigma * ln 10
    scale = sigma * math.log(10.0) if transformation == C.LOG10 else sigma
    location = h if transformation == C.LIN else pt.log(h)
    if distribution == C.NORMAL:
        cls = pm.Normal if transformation == C.LIN else pm.LogNormal
        return cls, {"mu": location, "sigma": scale}
    if transformation == C.LIN:
        return pm.Laplace, {"mu": location, "b": scale}
    return None, {"mu": location, "b": scale}


def measurement_distribution(distribution: str, transformation: str, h, sigma):
    """The distribution of the measurements (an unnamed PyMC ``.dist``).

    Parameters
    ----------
    distribution : {"normal", "laplace"}
    transformation : {"lin", "log", "log10"}
    h, sigma : tensor-like
        Simulated observable and noise parameter, one per measurement.
    """
    cls, kwargs = _parameters(distribution, transformation, h, sigma)
    if cls is None:
        return pm.CustomDist.dist(kwargs["mu"], kwargs["b"], dist=_exp_laplace)
    return cls.dist(**kwargs)


_TINY = float(np.finfo(np.float64).tiny)


def observed_measurements(name: str, distribution: str, transformation: str, h, sigma, data):
    """The measurements as an observed random variable of the current PyMC model.

    On a ``log`` or ``log10`` scale, also the potential ``<name>_simulation_not_positive``:
    ``-inf`` when a simulated observable ``h`` is not positive (see the module docstring).
    """
    if transformation != C.LIN:
        h = pt.as_tensor_variable(h)
        positive = pt.gt(h, 0.0)
        not_positive = pt.cast(pt.any(pt.invert(positive)), "int8")
        failure_potential(
            pm.modelcontext(None), f"{name}_simulation_not_positive", [not_positive[None]]
        )
        h = pt.switch(positive, h, _TINY)
    cls, kwargs = _parameters(distribution, transformation, h, sigma)
    if cls is None:
        return pm.CustomDist(name, kwargs["mu"], kwargs["b"], dist=_exp_laplace, observed=data)
    return cls(name, **kwargs, observed=data)
