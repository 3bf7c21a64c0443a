"""Numerical integration of a joint log-density over marginalised parameters (tests).

``log_integral(log_joint, boxes)`` integrates ``exp(log_joint)`` over 1, 2 or 3 variables
with scipy's adaptive quadrature (``quad``) over the last variable of a Gauss-Legendre rule
(a tensor grid) over the others, evaluated on arrays; the inner boxes may depend on the
last variable; after subtracting a reference value so
that nothing underflows. The boxes must hold the mass: callers derive them from the data (least
squares), not from the code under test.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate
from scipy.special import digamma

__all__ = ["log_integral", "reference_variance", "inverse_gamma_logpdf", "normal_logpdf"]


def normal_logpdf(x, mean, sd):
    x = np.asarray(x, dtype=float)
    return -0.5 * ((x - mean) / sd) ** 2 - np.log(sd) - 0.5 * math.log(2 * math.pi)


def inverse_gamma_logpdf(v, alpha: float, beta: float):
    v = np.asarray(v, dtype=float)
    return alpha * math.log(beta) - math.lgamma(alpha) - (alpha + 1) * np.log(v) - beta / v


def reference_variance(alpha: float, beta: float) -> float:
    """``sigma_ref^2 = beta exp(-digamma(alpha))``: a normal-inverse-gamma block's column
    priors are ``Normal(mu, sd^2 v / sigma_ref^2)`` given the noise variance ``v``."""
    return beta * math.exp(-digamma(alpha))


def _box(box, t):
    return box(t) if callable(box) else box


def log_integral(log_joint, boxes, reference: float, nodes: int = 60) -> float:
    """``log`` of the integral of ``exp(log_joint(*t))`` over ``boxes``: one ``(a, b)`` per
    variable, the last fixed, the others fixed or functions of the last; ``log_joint``
    takes arrays for all variables but the last (shape (nodes, 1) for one, (nodes, nodes)
    for two)."""
    tolerance = dict(epsabs=0.0, epsrel=1e-11, limit=200)
    *inner, (a, b) = boxes
    if not inner:
        value = integrate.quad(lambda t: math.exp(log_joint(t) - reference), a, b, **tolerance)[0]
        return reference + math.log(value)
    x, w = np.polynomial.legendre.leggauss(nodes)
    if len(inner) == 1:

        def section(t1):
            a0, b0 = _box(inner[0], t1)
            t0 = 0.5 * (b0 - a0) * x + 0.5 * (b0 + a0)
            values = np.exp(log_joint(t0[:, None], t1)[:, 0] - reference)
            return float(0.5 * (b0 - a0) * np.sum(w * values))

        value = integrate.quad(section, a, b, **tolerance)[0]
    else:

        def section(t2):
            (a0, b0), (a1, b1) = _box(inner[0], t2), _box(inner[1], t2)
            t0 = 0.5 * (b0 - a0) * x + 0.5 * (b0 + a0)
            t1 = 0.5 * (b1 - a1) * x + 0.5 * (b1 + a1)
            weights = np.outer(w, w) * 0.25 * (b0 - a0) * (b1 - a1)
            grid0, grid1 = np.meshgrid(t0, t1, indexing="ij")
            return float(np.sum(weights * np.exp(log_joint(grid0, grid1, t2) - reference)))

        value = integrate.quad(section, a, b, **tolerance)[0]
    return reference + math.log(value)


def log_integral_around_mode(log_joint, start, nodes: int = 64, half_width: float = 12.0):
    """:func:`log_integral` over a box of ``half_width`` in coordinates whitened at the mode
    of ``log_joint`` (found numerically from ``start``, its curvature by central
    differences): for posteriors whose location and shape the test does not know."""
    from scipy.optimize import minimize

    start = np.atleast_1d(np.asarray(start, dtype=float))
    d = start.size

    def negative(t):
        return -float(log_joint(*t))

    mode = minimize(
        negative, start, method="Nelder-Mead", options=dict(xatol=1e-7, fatol=1e-10, maxiter=20000)
    ).x
    step = 1e-4 * np.maximum(1.0, np.abs(mode))
    hessian = np.empty((d, d))
    for i in range(d):
        for j in range(d):
            e_i, e_j = np.eye(d)[i] * step[i], np.eye(d)[j] * step[j]
            hessian[i, j] = (
                negative(mode + e_i + e_j)
                - negative(mode + e_i - e_j)
                - negative(mode - e_i + e_j)
                + negative(mode - e_i - e_j)
            ) / (4 * step[i] * step[j])
    root = np.linalg.cholesky(np.linalg.inv(0.5 * (hessian + hessian.T)))
    log_det = float(np.sum(np.log(np.diag(root))))

    def whitened(*w):
        t = [mode[i] + sum(root[i, j] * w[j] for j in range(i + 1)) for i in range(d)]
        return log_joint(*t) + log_det

    reference = float(log_joint(*mode)) + log_det
    boxes = [(-half_width, half_width)] * d
    return log_integral(whitened, boxes, reference=reference, nodes=nodes)
