"""Tight tolerances for closed-form checks: of the solve, and of every adjoint phase."""

TIGHT = dict(relative_tolerance=1e-10, absolute_tolerance=1e-12)
"""``relative_tolerance`` and ``absolute_tolerance`` of a solve."""

TIGHT_ADJOINT_PHASES = {
    f"{tol}_tolerance_{phase}": TIGHT[f"{tol}_tolerance"]
    for tol in ("relative", "absolute")
    for phase in ("forward", "backward", "quadrature")
}
"""The same tolerances for the forward, backward and quadrature phases of an adjoint."""
