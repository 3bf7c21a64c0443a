"""Options of the Peano–Baker-series sensitivity methods (``pbs``, ``pbsr``, ``exp``)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PBS_ALGORITHMS",
    "PbsOptions",
    "INTERPOLATIONS",
    "NORMS",
    "STEADY_STATE_TESTS",
    "EXP_STEPS",
    "resolve_pbs_options",
]

PBS_ALGORITHMS = {"pbs": 0, "pbsr": 1, "exp": 2}
"""Algorithm codes of the compiled march: the paper's Algorithms 1, 2 and 3."""

INTERPOLATIONS = ("dense", "hermite", "linear")
"""Ways to obtain the state between two recorded solver steps (see :class:`PbsOptions`)."""

NORMS = {2: 0, 1: 1, math.inf: 2, "fro": 3}
"""Matrix norms of the PBSR switch (the key is numpy's ``ord``), and their codes."""

STEADY_STATE_TESTS = ("jacobians", "state_jacobian")
"""What must be near constant for PBSR's switch to the Exp step."""

EXP_STEPS = ("start", "trapezoid")
"""Where the Jacobians of an Exp step are taken (see :class:`PbsOptions`)."""

# codes of the compiled interpolation (pbs_interpolation)
LINEAR, HERMITE, DORMAND_PRINCE_DENSE, CASH_KARP_SUBSTEP = 0, 1, 2, 3


@dataclass(frozen=True)
class PbsOptions:
    """Controls of ``solve_sensitivity(..., sensitivity="pbs" | "pbsr" | "exp")``.

    The defaults are those of Eriksson, Kramer, Milinanni and Nyquist,
    "Sensitivity Approximation by the Peano-Baker Series" (arXiv:2109.00067,
    Section 6).

    Attributes
    ----------
    c : float
        Refinement factor of PBSR: a solver step ``[t_k, t_k+1]`` is split into
        ``n_int = ceil(c * dt_k * ||J_y(t_k)||)`` equal sub-steps (default 10).
    eps : float
        PBSR takes the Exp step when the Jacobians are near constant over the
        solver step: ``||J(t_k+1) - J(t_k)|| / ||J(t_k)|| < eps`` (default 1e-4;
        0 disables this switch).
    n_max : int or None
        PBSR also takes the Exp step when ``n_int > n_max`` (default 10; None
        never switches for this reason, however many sub-steps are needed).
    norm : {2, 1, inf, "fro"}
        Matrix norm of ``n_int`` and of the switch (numpy's ``ord``; default 2,
        the spectral norm, estimated by power iteration on ``M^T M`` to a
        relative accuracy of 1e-6).
    steady_state_test : {"jacobians", "state_jacobian"}
        ``"jacobians"`` (default, as the paper's reference code): both ``J_y``
        and ``J_p`` must be near constant; ``"state_jacobian"``: only ``J_y``
        (as the paper's text, eq. 45).
    interpolation : {"dense", "hermite", "linear"}
        The state at sub-step ends inside a solver step (PBSR's refinement,
        output times inside a step). ``"dense"``: the solver's own dense
        output where it can be rebuilt from the recorded steps (``rk45``:
        Dormand–Prince's continuous extension; ``ckrk``: a Cash–Karp sub-step
        from the step's start, 5 right-hand sides) and the cubic Hermite
        interpolant through the recorded states and slopes for ``bdf`` and
        ``adams``; ``"hermite"``: that cubic Hermite interpolant for every
        solver; ``"linear"``: linear interpolation between the two recorded
        states (the paper's text).
    exp_step : {"start", "trapezoid"} or None
        The Jacobians of an Exp step ``S <- e^(dt A) S + dt phi_1(dt A) B``
        (exact when ``A = J_y`` and ``B = J_p`` are constant over the step):
        ``"start"``, ``A = J_y(t_k)``, ``B = J_p(t_k)`` as in the paper (eq. 18,
        first order in the step where the Jacobians vary); ``"trapezoid"``,
        the means of the Jacobians at both ends of the step (second order,
        same cost: both ends are evaluated anyway). None (default):
        ``"start"`` for ``sensitivity="exp"`` (Algorithm 3 as published) and
        ``"trapezoid"`` for the Exp steps PBSR switches to (on pka at rtol
        1e-5 / atol 1e-6 the published ``"start"`` makes PBSR's error that
        of Exp, 5e-2; ``"trapezoid"`` gives 5e-4; see docs/pbs.md).
    max_step : float
        Additionally split every solver step into sub-steps no longer than
        this (default inf: the solver's own steps, as in the paper). Used to
        study the convergence in ``dt_max``; the Jacobians at the sub-steps'
        ends come from the interpolated state.
    """

    c: float = 10.0
    eps: float = 1e-4
    n_max: int | None = 10
    norm: int | float | str = 2
    steady_state_test: str = "jacobians"
    interpolation: str = "dense"
    exp_step: str | None = None
    max_step: float = math.inf

    def __post_init__(self) -> None:
        _check_positive_float("c", self.c, allow_inf=False)
        _check_nonnegative_float("eps", self.eps)
        if self.n_max is not None:
            if isinstance(self.n_max, bool) or not isinstance(self.n_max, numbers.Integral):
                raise TypeError(f"n_max must be a positive integer or None, got {self.n_max!r}")
            if self.n_max < 1:
                raise ValueError(f"n_max must be a positive integer or None, got {self.n_max!r}")
        if _norm_key(self.norm) is None:
            raise ValueError(f"norm must be one of 2, 1, inf or 'fro', got {self.norm!r}")
        if self.steady_state_test not in STEADY_STATE_TESTS:
            raise ValueError(
                f"steady_state_test must be one of {STEADY_STATE_TESTS}, "
                f"got {self.steady_state_test!r}"
            )
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(
                f"interpolation must be one of {INTERPOLATIONS}, got {self.interpolation!r}"
            )
        if self.exp_step is not None and self.exp_step not in EXP_STEPS:
            raise ValueError(f"exp_step must be one of {EXP_STEPS} or None, got {self.exp_step!r}")
        _check_positive_float("max_step", self.max_step, allow_inf=True)

    @property
    def norm_code(self) -> int:
        """Code of :attr:`norm` in the compiled march."""
        return NORMS[_norm_key(self.norm)]

    def interpolation_code(self, method: str) -> int:
        """Code of the compiled interpolation for the state solver ``method``."""
        if self.interpolation == "linear":
            return LINEAR
        if self.interpolation == "hermite":
            return HERMITE
        return {"rk45": DORMAND_PRINCE_DENSE, "ckrk": CASH_KARP_SUBSTEP}.get(method, HERMITE)

    def describe_interpolation(self, method: str) -> str:
        """What :attr:`interpolation` means for the state solver ``method``, in words."""
        return {
            LINEAR: "linear between recorded steps",
            HERMITE: "cubic Hermite through recorded states and slopes",
            DORMAND_PRINCE_DENSE: "Dormand-Prince continuous extension (the solver's)",
            CASH_KARP_SUBSTEP: "Cash-Karp sub-step from the step's start (the solver's)",
        }[self.interpolation_code(method)]

    def exp_step_for(self, algorithm: str) -> str:
        """The Exp step used by ``algorithm`` ("pbs", "pbsr" or "exp")."""
        if self.exp_step is not None:
            return self.exp_step
        return "start" if algorithm == "exp" else "trapezoid"

    def compiled_controls(self) -> np.ndarray:
        """``[c, eps, n_max, max_step]`` for the compiled march (``n_max`` None: inf)."""
        n_max = math.inf if self.n_max is None else float(self.n_max)
        return np.array([float(self.c), float(self.eps), n_max, float(self.max_step)])


def _norm_key(norm):
    if isinstance(norm, str):
        return "fro" if norm == "fro" else None
    if isinstance(norm, bool) or not isinstance(norm, numbers.Real):
        return None
    value = float(norm)
    if value in (1.0, 2.0, math.inf):
        return math.inf if value == math.inf else int(value)
    return None


def _check_positive_float(name: str, value, *, allow_inf: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive number, got {value!r}")
    value = float(value)
    if math.isnan(value) or value <= 0 or (math.isinf(value) and not allow_inf):
        limit = "a positive number (inf allowed)" if allow_inf else "a positive finite number"
        raise ValueError(f"{name} must be {limit}, got {value!r}")


def _check_nonnegative_float(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a non-negative number, got {value!r}")
    value = float(value)
    if math.isnan(value) or value < 0 or math.isinf(value):
        raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")


def resolve_pbs_options(options) -> PbsOptions:
    """``options`` as :class:`PbsOptions` (None: the paper's defaults; a dict: its keywords)."""
    if options is None:
        return PbsOptions()
    if isinstance(options, PbsOptions):
        return options
    if isinstance(options, dict):
        unknown = set(options) - set(PbsOptions.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"pbs_options: unknown option(s) {sorted(unknown)}; "
                f"known are {sorted(PbsOptions.__dataclass_fields__)}"
            )
        return PbsOptions(**options)
    raise TypeError(f"pbs_options must be a PbsOptions, a dict or None, got {options!r}")
