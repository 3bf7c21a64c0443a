"""How a PEtab problem is simulated: method, gradient route, tolerances."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pymc_odesens.solvers.controls import METHODS

__all__ = ["SolverOptions", "FORWARD_PARAMETER_LIMIT", "SENSITIVITIES"]

SENSITIVITIES = ("auto", "forward", "adjoint", "discrete_adjoint")

FORWARD_PARAMETER_LIMIT = 6
"""``sensitivity="auto"`` takes forward sensitivities while the simulated system has at
most this many sensitivity columns (its parameters, plus its states when experiments are
pre-equilibrated: their initial state then depends on the parameters), else the discrete
adjoint of the ``bdf`` steps. Measured on eight problems of the benchmark collection at
AMICI's tolerances (docs/petab.md): the discrete adjoint was 1.6 to 45 times as fast as
forward sensitivities from 7 columns on; at 6 columns (Boehm) the two were equal."""


@dataclass(frozen=True)
class SolverOptions:
    """Method, gradient route and tolerances of every simulation of a problem.

    Parameters
    ----------
    method : {"bdf", "adams", "rk45", "ckrk"}
        The integrator (``bdf`` for these stiff pathway models).
    sensitivity : {"auto", "forward", "adjoint", "discrete_adjoint"}
        The gradient route: forward sensitivities, the continuous adjoint, the discrete
        adjoint of the ``bdf`` steps, or ``"auto"``: forward while the sensitivity columns
        are at most :data:`FORWARD_PARAMETER_LIMIT`, else the discrete adjoint.
    relative_tolerance, absolute_tolerance : float
        Of the integration (all phases). The defaults are AMICI's (1e-8, 1e-16), so that
        the log-likelihoods agree with the benchmark collection's reference values.
    max_num_steps : int
        Between output times.
    steady_state_controls : dict, optional
        Controls of pre-equilibration and steady-state measurements
        (:func:`pymc_odesens.steady_state`'s names and defaults).
    """

    method: str = "bdf"
    sensitivity: str = "auto"
    relative_tolerance: float = 1e-8
    absolute_tolerance: float = 1e-16
    max_num_steps: int = 100_000
    steady_state_controls: dict | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {self.method!r}")
        if self.sensitivity not in SENSITIVITIES:
            raise ValueError(
                f"sensitivity must be one of {SENSITIVITIES}; got {self.sensitivity!r}"
            )
        if self.sensitivity in ("adjoint", "discrete_adjoint") and self.method not in (
            "bdf",
            "adams",
        ):
            raise ValueError(
                f"sensitivity={self.sensitivity!r} needs method 'bdf' (or 'adams' for the "
                f"continuous adjoint); got method={self.method!r}"
            )
        if self.sensitivity == "discrete_adjoint" and self.method != "bdf":
            raise ValueError("sensitivity='discrete_adjoint' needs method='bdf'")

    def updated(self, **changes) -> SolverOptions:
        """A copy with ``changes`` (only the names of this class)."""
        unknown = sorted(set(changes) - set(self.__dataclass_fields__))
        if unknown:
            raise TypeError(
                f"unknown solver option(s) {unknown}; accepted: "
                f"{', '.join(self.__dataclass_fields__)}"
            )
        return replace(self, **changes)

    def route(self, n_sensitivity_columns: int) -> str:
        """The gradient route for a system with this many sensitivity columns."""
        if self.sensitivity != "auto":
            return self.sensitivity
        if n_sensitivity_columns <= FORWARD_PARAMETER_LIMIT or self.method != "bdf":
            return "forward"
        return "discrete_adjoint"

    def ode_controls(self, route: str) -> dict:
        """Keyword arguments of :func:`~pymc_odesens.ode_solution` for ``route``
        (``"none"``: states only)."""
        controls = {
            "method": self.method,
            "relative_tolerance": self.relative_tolerance,
            "absolute_tolerance": self.absolute_tolerance,
            "max_num_steps": self.max_num_steps,
        }
        if route == "discrete_adjoint":
            return {**controls, "sensitivity": "adjoint", "adjoint_method": "discrete"}
        return {**controls, "sensitivity": route}
