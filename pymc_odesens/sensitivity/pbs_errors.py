"""The failure of a Peano-Baker march: a non-finite ``S``."""

from __future__ import annotations

from pymc_odesens.solvers.errors import OdeSolverError

__all__ = ["NonFiniteSensitivityError", "non_finite_sensitivity_error"]


class NonFiniteSensitivityError(OdeSolverError):
    """``S`` from a PBS / PBSR / Exp march is not finite (NaN or infinity).

    Raised where a sampler needs ``S`` (``ode_solution(..., sensitivity="pbs" | "pbsr" |
    "exp")``), so that the proposal is rejected and counted like a solver failure;
    :func:`~pymc_odesens.solve_sensitivity` warns instead and returns the NaN.
    ``t`` is the first output time where ``S`` is not finite.
    """


def non_finite_sensitivity_error(
    algorithm: str, t: float, jacobian_not_finite: bool
) -> NonFiniteSensitivityError:
    """The :class:`NonFiniteSensitivityError` of a march of ``algorithm`` that failed at ``t``.

    ``jacobian_not_finite``: the march stopped at a non-finite Jacobian (else ``S`` itself
    overflowed).
    """
    if jacobian_not_finite:
        why = "a Jacobian is not finite on the recorded trajectory"
    elif algorithm == "pbs":
        why = (
            "the PBS step is explicit: on a stiff problem use sensitivity='pbsr' or a "
            "smaller PbsOptions.max_step"
        )
    else:
        why = "the march overflowed"
    return NonFiniteSensitivityError(
        f"sensitivity={algorithm!r}: S is not finite from t = {t:.10g} on ({why})",
        t=float(t),
        method=algorithm,
    )
