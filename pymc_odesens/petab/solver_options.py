"""How a PEtab problem is simulated: method, gradient route, tolerances."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from pymc_odesens.sensitivity.steady_state_controls import STEADY_STATE_CONTROL_NAMES
from pymc_odesens.solvers.controls import METHODS

__all__ = ["SolverOptions", "FrozenControls", "FORWARD_PARAMETER_LIMIT", "SENSITIVITIES"]

SENSITIVITIES = ("auto", "forward", "adjoint", "discrete_adjoint")

FORWARD_PARAMETER_LIMIT = 6
"""The rule by columns (:meth:`SolverOptions.route`): forward sensitivities while the
simulated system has at most this many sensitivity columns (its parameters, plus its states
when experiments are pre-equilibrated: their initial state then depends on the parameters),
else the discrete adjoint of the ``bdf`` steps. Measured on eight problems of the benchmark
collection at AMICI's tolerances (docs/petab.md): the discrete adjoint was 1.6 to 45 times
as fast as forward sensitivities from 7 columns on; at 6 columns (Boehm) the two were equal.
``sensitivity="auto"`` measures this route first and the others after it
(:mod:`pymc_odesens.petab.route_choice`)."""


def _canonical(value):
    """A hashable form of a control's value: arrays and sequences as tuples of their
    entries, numpy scalars as Python numbers."""
    if isinstance(value, np.ndarray):
        return _canonical(value.tolist())
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


class FrozenControls(Mapping):
    """A read-only mapping of controls that can be hashed (options are cache keys).

    Equal contents give equal keys whatever their types: an array of tolerances and the
    list of the same numbers hash alike. The values are kept as given.
    """

    __slots__ = ("_items", "_key")

    def __init__(self, controls: Mapping) -> None:
        items = dict(controls)
        for name in items:
            if not isinstance(name, str):
                raise TypeError(f"control names must be strings, got {name!r}")
        self._items = items
        self._key = tuple(sorted((name, _canonical(v)) for name, v in items.items()))
        hash(self._key)  # a value that cannot be hashed even so is named now

    def __getitem__(self, name: str):
        return self._items[name]

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other) -> bool:
        if isinstance(other, FrozenControls):
            return self._key == other._key
        if isinstance(other, Mapping):
            return self == FrozenControls(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenControls({self._items!r})"


@dataclass(frozen=True)
class SolverOptions:
    """Method, gradient route and tolerances of every simulation of a problem.

    Parameters
    ----------
    method : {"bdf", "adams", "rk45", "ckrk"}
        The integrator (``bdf`` for these stiff pathway models).
    sensitivity : {"auto", "forward", "adjoint", "discrete_adjoint"}
        The gradient route: forward sensitivities, the continuous adjoint, the discrete
        adjoint of the ``bdf`` steps, or ``"auto"``: the fastest of them on the problem
        at hand, measured at the nominal parameters on first use
        (:attr:`PetabProblem.gradient_route`, :mod:`pymc_odesens.petab.route_choice`).
    relative_tolerance, absolute_tolerance : float
        Of the integration (all phases). The defaults are AMICI's (1e-8, 1e-16), so that
        the log-likelihoods agree with the benchmark collection's reference values.
    max_num_steps : int
        Between output times.
    steady_state_controls : dict, optional
        Controls of pre-equilibration and steady-state measurements
        (:func:`pymc_odesens.steady_state_solution`'s names and defaults: ``method``,
        ``relative_tolerance``, ``absolute_tolerance``, ``max_newton_iterations``,
        ``max_num_steps``, ``max_time``, ``nonnegative``, ``linear_solver``,
        ``sensitivity``), kept as a :class:`FrozenControls` (hashable).
    gradient_check : bool
        On the first gradient, compute the gradient at the nominal parameters again with
        tolerances 10 times tighter, and tighten the tolerances of gradients (and of the PyMC
        model) until two successive ones agree within 1 %
        (:mod:`pymc_odesens.petab.tolerance_choice`; ``PetabProblem.tolerance_choice``
        reports). ``False``: the given tolerances, unchecked.
    """

    method: str = "bdf"
    sensitivity: str = "auto"
    relative_tolerance: float = 1e-8
    absolute_tolerance: float = 1e-16
    max_num_steps: int = 100_000
    steady_state_controls: Mapping | None = None
    gradient_check: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.gradient_check, (bool, np.bool_)):
            raise TypeError(f"gradient_check must be True or False; got {self.gradient_check!r}")
        controls = self.steady_state_controls
        if controls is not None:
            if not isinstance(controls, Mapping):
                raise TypeError(
                    "steady_state_controls must be a dict of steady-state controls, got "
                    f"{type(controls).__name__}"
                )
            unknown = sorted(set(controls) - set(STEADY_STATE_CONTROL_NAMES))
            if unknown:
                raise TypeError(
                    f"unknown steady-state control(s) {unknown} in steady_state_controls; "
                    f"accepted: {', '.join(STEADY_STATE_CONTROL_NAMES)}"
                )
            if not isinstance(controls, FrozenControls):
                object.__setattr__(self, "steady_state_controls", FrozenControls(controls))
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
        """The gradient route for a system with this many sensitivity columns by the rule
        by columns (:data:`FORWARD_PARAMETER_LIMIT`): what ``"auto"`` measures first."""
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
