"""The tolerances of a problem's gradients, checked by tightening them (``gradient_check``).

A gradient computed at the problem's tolerances can be far from the exact one even though
the log-likelihood is right to many digits: on Crauste_CellSystems2017 (docs/petab.md,
"Ill-conditioned gradients") the nominal parameters lie 3.5e-7 (log10 units) from values
at which the pathogen's quadratic growth wins and the solution blows up in finite time; the
sensitivities reach 1e9, they all point along one direction, and the gradient is what is left
of measurement terms that cancel 17 000-fold. At AMICI's default tolerances the gradient's
relative error was 17 (forward sensitivities) and 378 (adjoints), along that direction;
AMICI's (45 and 403) and scipy's integrators (BDF 62, LSODA 1.8, DOP853 0.09) were off too.

So on the first gradient the gradient at the nominal parameters is computed again with both
tolerances :data:`TIGHTENING_FACTOR` times tighter. Where the two agree within
:data:`AGREEMENT` (relative, Euclidean norm), the problem's tolerances are kept; otherwise
they are tightened by that factor and compared again, down to a relative tolerance of
:data:`SMALLEST_RELATIVE_TOLERANCE`, and the loosest tolerances whose gradient agrees with
the next tighter one are used for every later gradient (and the PyMC model). No agreement
down there raises :class:`GradientConvergenceError`. A failure of a tighter solve (a
step-size underflow, the step budget) ends the check: the tolerances reached are kept, and
the failure is reported (:attr:`ToleranceChoice.failures`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pymc_odesens.petab.errors import PetabError
from pymc_odesens.solvers.errors import OdeSolverError

__all__ = [
    "AGREEMENT",
    "GradientConvergenceError",
    "SMALLEST_RELATIVE_TOLERANCE",
    "TIGHTENING_FACTOR",
    "ToleranceChoice",
    "choose_tolerances",
    "gradient_difference",
]

TIGHTENING_FACTOR = 10.0
"""Both tolerances are divided by this at each step of the check."""

AGREEMENT = 0.01
"""Two gradients agree when the norm of their difference is at most this fraction of the
norm of the tighter one."""

SMALLEST_RELATIVE_TOLERANCE = 1e-15
"""The tightest relative tolerance the check computes a gradient with (4.5 ulp of 1)."""


class GradientConvergenceError(PetabError):
    """A problem's gradient does not settle as the tolerances are tightened: the gradients
    at successive tolerances (each :data:`TIGHTENING_FACTOR` times tighter) disagree by more
    than :data:`AGREEMENT` down to :data:`SMALLEST_RELATIVE_TOLERANCE`. The message names
    the problem, the tolerances and the differences."""


@dataclass(frozen=True)
class ToleranceChoice:
    """The tolerances gradients are computed with, and what the check measured.

    Attributes
    ----------
    relative_tolerance, absolute_tolerance : float
        The tolerances used for gradients (the problem's own unless the check tightened
        them).
    differences : dict of float to float
        Per relative tolerance checked: the norm of the difference between its gradient and
        the gradient at tolerances :data:`TIGHTENING_FACTOR` times tighter, relative to the
        norm of the latter.
    failures : dict of float to str
        The error of a tighter solve that failed, by its relative tolerance.
    checked : bool
        False when nothing was compared (no nominal values, a gradient that is zero, not
        finite or fails at them, or ``gradient_check=False``).
    """

    relative_tolerance: float
    absolute_tolerance: float
    differences: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)
    checked: bool = True

    @property
    def tightened(self) -> bool:
        """Whether the tolerances are tighter than the problem's."""
        return bool(self.differences) and _tolerance(self.relative_tolerance) < next(
            iter(self.differences)
        )


def gradient_difference(gradient: np.ndarray, tighter: np.ndarray) -> float:
    """``|gradient - tighter| / |tighter|`` (Euclidean norms); 0 when both are zero and
    ``inf`` when only ``tighter`` is."""
    scale = float(np.linalg.norm(tighter))
    difference = float(np.linalg.norm(np.asarray(gradient) - np.asarray(tighter)))
    if scale == 0.0:
        return 0.0 if difference == 0.0 else math.inf
    return difference / scale


def _tolerance(value) -> float:
    """A scalar tolerance (the largest entry of per-state tolerances)."""
    return float(np.max(np.asarray(value, dtype=float)))


def choose_tolerances(
    name: str,
    relative_tolerance,
    absolute_tolerance,
    gradient: Callable[[float, float], np.ndarray],
) -> ToleranceChoice:
    """Tighten the tolerances until the gradient settles.

    Parameters
    ----------
    name : str
        The problem's name (for the error message).
    relative_tolerance, absolute_tolerance : float or array_like
        The problem's tolerances (the first gradient's). Arrays are divided entry by entry.
    gradient : callable
        ``gradient(relative_tolerance, absolute_tolerance)``: the gradient at the nominal
        parameters computed with those tolerances; raises the solver's error when it fails.

    Returns
    -------
    ToleranceChoice

    Raises
    ------
    GradientConvergenceError
        No two successive gradients agree down to :data:`SMALLEST_RELATIVE_TOLERANCE`.

    A gradient at the problem's own tolerances that fails (a solver error) leaves them
    unchecked (``checked=False``, the error in ``failures``): the user's own call meets it.
    """
    given_rtol = np.asarray(relative_tolerance, dtype=float)
    given_atol = np.asarray(absolute_tolerance, dtype=float)
    rtol, atol = relative_tolerance, absolute_tolerance
    try:
        current = np.asarray(gradient(rtol, atol), dtype=float)
    except (OdeSolverError, FloatingPointError, ArithmeticError) as error:
        # nothing to check at: the user's own gradient call raises this error itself
        failure = f"{type(error).__name__}: {error}".split("\n")[0]
        return ToleranceChoice(rtol, atol, failures={_tolerance(rtol): failure}, checked=False)
    if not np.all(np.isfinite(current)) or not np.any(current):
        return ToleranceChoice(rtol, atol, checked=False)
    differences: dict[float, float] = {}
    for steps in itertools.count(1):
        # from the given tolerances, so that no rounding accumulates
        factor = TIGHTENING_FACTOR**steps
        tighter_rtol = _as_given(given_rtol / factor, relative_tolerance)
        tighter_atol = _as_given(given_atol / factor, absolute_tolerance)
        if _tolerance(tighter_rtol) < SMALLEST_RELATIVE_TOLERANCE * (1 - 1e-9):
            raise GradientConvergenceError(
                f"{name}: the gradient does not settle as the tolerances are tightened (at "
                f"the nominal parameters, the relative difference of the gradient at each "
                f"relative_tolerance to the one {TIGHTENING_FACTOR:g} times tighter: "
                f"{_listed(differences)}; at most {AGREEMENT:g} is needed, down to "
                f"relative_tolerance {SMALLEST_RELATIVE_TOLERANCE:g}). {_ADVICE}"
            )
        try:
            tighter = np.asarray(gradient(tighter_rtol, tighter_atol), dtype=float)
        except (OdeSolverError, FloatingPointError, ArithmeticError) as error:
            failure = f"{type(error).__name__}: {error}".split("\n")[0]
            if differences:
                # the gradient at the problem's tolerances is known to be off
                raise GradientConvergenceError(
                    f"{name}: the gradient does not settle as the tolerances are tightened "
                    f"(relative differences {_listed(differences)}; at most {AGREEMENT:g} "
                    f"is needed), and the solve at relative_tolerance "
                    f"{_tolerance(tighter_rtol):g} failed ({failure}). {_ADVICE}"
                ) from error
            return ToleranceChoice(rtol, atol, differences, {_tolerance(tighter_rtol): failure})
        difference = gradient_difference(current, tighter)
        differences[_tolerance(rtol)] = difference
        if difference <= AGREEMENT:
            return ToleranceChoice(rtol, atol, differences)
        rtol, atol, current = tighter_rtol, tighter_atol, tighter
    raise AssertionError("unreachable")  # pragma: no cover


_ADVICE = (
    "The gradient is ill-conditioned with respect to the integration error: the "
    "measurements' terms cancel, or the solution depends on the parameters through a "
    "near-singularity (a finite-time blow-up nearby, say); see docs/petab.md, "
    "'Ill-conditioned gradients'. gradient_check=False uses the given tolerances anyway."
)


def _listed(differences: dict) -> str:
    return ", ".join(f"{r:g}: {d:.3g}" for r, d in differences.items())


def _as_given(value: np.ndarray, like):
    """``value`` as a float where the option was a scalar, else as a tuple (hashable)."""
    if np.ndim(like) == 0:
        return float(value)
    return tuple(float(v) for v in np.ravel(value))
