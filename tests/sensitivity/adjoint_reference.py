"""Shared by the adjoint tests: reference gradients of the reference models, controls at
one tolerance and the two error measures (see test_adjoint_accuracy's docstring)."""

from __future__ import annotations

import functools

import numpy as np

from pymc_odesens import OdeSystem, adjoint_gradient, solve_sensitivity
from tests.conftest import load_truth, model_path

MODELS = ("linear2", "lotka_volterra", "pka", "robertson")
INTERPOLATIONS = (1, 2)  # Hermite, polynomial
BACKWARD_SOLVERS = (1, 2)  # adams, bdf
# Forward atol = rtol * factor: pka's and robertson's small states (robertson's y2 ~ 4e-5,
# pka's from 1e-6) need an atol below rtol, as in the forward-sensitivity tests.
FORWARD_ATOL_FACTOR = {"linear2": 1e-2, "lotka_volterra": 1e-2, "pka": 1e-4, "robertson": 1e-4}


def adjoint_controls(name: str, tol: float, **extra) -> dict:
    """Every tolerance at ``tol``, with absolute parts suited to the model's scales.

    The adjoint states start at the cotangent (of order 1), so their atol is ``tol``; the
    quadratures are the gradient components themselves, the smallest of which is
    robertson's dL/dk2 ~ 2e-8, hence ``tol * 1e-6``.
    """
    return dict(
        relative_tolerance_forward=tol,
        absolute_tolerance_forward=tol * FORWARD_ATOL_FACTOR[name],
        relative_tolerance_backward=tol,
        absolute_tolerance_backward=tol,
        relative_tolerance_quadrature=tol,
        absolute_tolerance_quadrature=tol * 1e-6,
        **extra,
    )


def relative_error(g: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(g - ref).max() / np.abs(ref).max())


def component_error(g: np.ndarray, ref: np.ndarray, scale: np.ndarray) -> float:
    # components whose every term is 0 (pka's parameters the states do not depend on)
    # are measured against the largest scale
    floor = 1e-12 * scale.max()
    return float((np.abs(g - ref) / np.maximum(scale, floor)).max())


@functools.cache
def reference_case(name: str) -> dict:
    """Model, truth, a seeded cotangent and the reference gradients (cached)."""
    system = OdeSystem.from_json(model_path(name))
    truth = load_truth(name)
    cot = np.random.default_rng(0).standard_normal(truth["y"].shape)
    forward = solve_sensitivity(
        system,
        truth["y"][0],
        truth["t"],
        system.p_nominal,
        t0=system.t0,
        method="bdf",
        wrt="both",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-10 * FORWARD_ATOL_FACTOR[name],
    )
    return {
        "name": name,
        "system": system,
        "t": truth["t"],
        "y0": truth["y"][0],
        "y": truth["y"],
        "cot": cot,
        "g_truth": np.einsum("ti,tik->k", cot, truth["S"]),
        "scale_truth": np.einsum("ti,tik->k", np.abs(cot), np.abs(truth["S"])),
        "g_forward": np.einsum("ti,tik->k", cot, forward.S),
        "g_y0_forward": np.einsum("ti,tij->j", cot, forward.S_y0),
        "scale_y0": np.einsum("ti,tij->j", np.abs(cot), np.abs(forward.S_y0)),
    }


def adjoint_on_case(ref: dict, tol: float, **extra):
    """``adjoint_gradient`` on a reference case with :func:`adjoint_controls` at ``tol``."""
    system = ref["system"]
    return adjoint_gradient(
        system,
        ref["y0"],
        ref["t"],
        system.p_nominal,
        ref["cot"],
        t0=system.t0,
        **adjoint_controls(ref["name"], tol, **extra),
    )


# At rtol 1e-8 (all four controls): bounds on dL/dp against the forward-sensitivity
# gradient (relative) and against the truth (per component), and on dL/dy0 against the
# state-transition matrix (relative and per component). Measured worst case over the two
# interpolations and backward solvers in brackets.
BOUNDS_1E8 = {
    # name: (dL/dp rel, dL/dp comp, dL/dy0 rel, dL/dy0 comp)
    "linear2": (1e-6, 2e-7, 2e-6, 3e-7),  # (1.4e-7, 2.8e-8, 2.6e-7, 4.1e-8)
    "lotka_volterra": (2e-5, 2e-6, 2e-5, 2e-6),  # (3.7e-6, 3.3e-7, 3.1e-6, 3.0e-7)
    "pka": (3e-8, 3e-8, 5e-9, 5e-9),  # (4.4e-9, 4.6e-9, 7.5e-10, 5.9e-10)
    "robertson": (1.5e-6, 7e-7, 5e-7, 1e-7),  # (2.1e-7, 1.0e-7, 6.9e-8, 1.4e-8)
}
