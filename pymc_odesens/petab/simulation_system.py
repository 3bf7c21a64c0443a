"""The system that is simulated: the SBML model with what PEtab fixes folded in.

The SBML model's parameters fall in two groups. Those that PEtab estimates, or sets to
different values in different conditions, stay parameters; every other one takes the same
value in every condition and is substituted as a number, so that sensitivities (and
kernels) cover only what varies. A species whose initial value a condition sets gets a
parameter of its own, ``<species>_initial_value``, which becomes its initial state
``y0(p)``. Inputs switched at given times become switch states with explicit events
(:mod:`pymc_odesens.petab.time_switches`). The model's own events are carried over
(:mod:`pymc_odesens.petab.model_events`), with the fixed values substituted. The model's
conservation laws (from its stoichiometry) are kept.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import sympy as sp

from pymc_odesens.model import ExplicitEvent, OdeSystem
from pymc_odesens.model.symbol_vector import make_symbols
from pymc_odesens.petab.errors import PetabError, PetabUnsupportedError
from pymc_odesens.petab.experiments import Experiment
from pymc_odesens.petab.model_events import carried_events, event_timings, settling_time
from pymc_odesens.petab.parameters import ParameterValues
from pymc_odesens.petab.time_switches import TimeSwitch, find_time_switches

__all__ = ["SimulationSystem"]


def _switch_events(
    switches: list[TimeSwitch], n_model: int, condition_times: list, taken: set
) -> list[ExplicitEvent]:
    """One explicit event per switch: at ``tau(p)`` its state takes the value after it.

    A switch whose time every condition gives as a number (``condition_times[k]``: the
    distinct positive values) fires instead at each of those numbers, constant times, and
    takes its value after the switch where ``tau(p)`` is at or before that time: two such
    switches that coincide in one condition then share a time that does not move with the
    parameters, and the sensitivity across them is defined (with a parameter-driven event
    time each, the engine refuses it as one-sided). The parameters that set these times
    are never estimated (PEtab fixes them per condition); the simulated system's derivative
    with respect to them leaves out the time's dependence.
    """
    events = []
    for k, (switch, times) in enumerate(zip(switches, condition_times)):
        index = n_model + k
        value = sp.S.One if switch.after else sp.S.Zero
        if times is None:
            event_times = lambda p, tau=switch.event_time: [tau]  # noqa: E731
            switched = None  # the state takes ``value``
        else:
            # tau(p) is one of the times up to the rounding of its expression: a tolerance
            # far below the smallest gap between them
            gaps = np.diff(times)
            tolerance = 0.5 * float(gaps.min()) if gaps.size else 0.5 * times[0]
            tolerance = min(tolerance, 1e-9 * max(1.0, float(times[-1])))
            event_times = [sp.Float(v) for v in times]
            switched = (switch.time, tolerance)

        def affect(t, y, p, index=index, value=value, switched=switched):
            new = value
            if switched is not None:
                tau, tol = switched
                new = sp.Piecewise((value, tau - t <= tol), (y[index], True))
            return [new if j == index else y[j] for j in range(len(y))]

        event_name = f"switch_{k}"
        while event_name in taken:  # the model's events keep their names
            event_name = f"_{event_name}"
        events.append(ExplicitEvent(event_times, affect=affect, name=event_name))
    return events


def _trigger_switches(
    model_system: OdeSystem, substitution: dict, switches: list, params: list
) -> list[TimeSwitch]:
    """The comparisons of ``t`` with an expression of the parameters in the model's event
    triggers (``time >= t_dose``) that are not already switches of the right-hand side.

    They become switch states too, so that a trigger reads ``s > 1/2`` and fires in a
    cascade after the switch's event: at the numbers the conditions give as constant times
    (times that coincide in one condition, with each other or with an event of the model,
    then share an instant whose time does not move), and a switching time at or before
    ``t = 0`` (a dose "at 0") sets the switch's initial value instead of firing an event at
    the start, whose derivative with respect to that time would be one-sided (the
    derivative given is the one from below, zero, as for the switches of the right-hand
    side). A comparison with a number stays as it is (its time is a constant).
    """
    triggers = [
        sp.sympify(e.trigger).xreplace(substitution)
        for e in model_system.events
        if e.kind == "trigger"
    ]
    known = {w.condition for w in switches}
    found = find_time_switches(triggers, model_system.t, model_system.state_symbols, params)
    return [w for w in found if w.condition not in known and w.time.free_symbols]


def _condition_times(
    switch: TimeSwitch,
    experiments: list[Experiment],
    system: OdeSystem,
    end: float,
    preequilibration: bool = False,
) -> np.ndarray | None:
    """The distinct positive switching times of ``switch`` (before ``end``) over the
    simulation conditions (and the pre-equilibration conditions if ``preequilibration``:
    the model's events are integrated there), if every condition gives its time as a
    number; else None."""
    nominal = dict(zip(system.params, system.p_nominal))
    ids = dict(zip(system.param_symbols, system.params))
    symbols = sorted(switch.time.free_symbols, key=str)
    if not symbols or any(symbol not in ids for symbol in symbols):
        return None
    mappings = [e.parameters for e in experiments]
    if preequilibration:
        mappings += [e.preequilibration_parameters for e in experiments if e.preequilibration]
    times = set()
    for mapping in mappings:
        values = {}
        for symbol in symbols:
            value = mapping.get(ids[symbol], nominal[ids[symbol]])
            if not _is_number(value) or math.isnan(value):
                return None
            values[symbol] = sp.Float(float(value))
        tau = float(switch.time.xreplace(values))
        if tau > 0 and tau <= end:
            times.add(tau)
    return np.array(sorted(times)) if times else None


def _is_number(value) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _model_values(system: OdeSystem, experiments: list[Experiment]) -> dict[str, list]:
    """Every value each model parameter takes, over all conditions."""
    nominal = dict(zip(system.params, system.p_nominal))
    # a parameter that an event or a rate rule changes is a state: petab's mapping lists it
    # with the file's value, which is its initial value here
    file_values = dict(zip(system.states, system.x0)) if system.x0 is not None else {}
    seen: dict[str, list] = {pid: [] for pid in system.params}
    for experiment in experiments:
        maps = [experiment.parameters]
        if experiment.preequilibration:
            maps.append(experiment.preequilibration_parameters)
        for mapping in maps:
            for pid, value in mapping.items():
                if pid not in seen:
                    default = nominal.get(pid, file_values.get(pid))
                    if isinstance(value, str) or (
                        _is_number(value) and not math.isnan(value) and value != default
                    ):
                        held = (
                            "holds as a state (an event or a rate rule changes it)"
                            if pid in file_values
                            else "does not hold as a parameter (it is assigned by an initial "
                            "assignment or a rule, or is not a model id)"
                        )
                        raise PetabUnsupportedError(
                            f"the PEtab problem sets or estimates {pid!r}, which the imported "
                            f"SBML model {held}"
                        )
                    continue
                if _is_number(value) and math.isnan(value):
                    raise PetabError(
                        f"condition {experiment.label}: model parameter {pid!r} has no value "
                        "(an observable or noise placeholder in the model without an override?)"
                    )
                seen[pid].append(value)
    for pid in system.params:
        if not seen[pid]:
            seen[pid].append(float(nominal[pid]))
    return seen


@dataclass(frozen=True, eq=False)
class SimulationSystem:
    """The simulated OdeSystem and how each experiment sets its parameters.

    Attributes
    ----------
    system : OdeSystem
        Parameters: the varying model parameters, then one ``<species>_initial_value``
        per species a condition sets; ``outputs`` and ``y0(p)`` with the fixed values
        substituted; the SBML model's stoichiometry.
    model_system : OdeSystem
        The SBML model as imported.
    fixed : dict of str to float
        The model parameters substituted as numbers.
    initial_value_parameters : dict of str to str
        Species id to the name of its initial-value parameter.
    switches : tuple of TimeSwitch
        The time switches; their states follow the model's in :attr:`system`.
    steady_state_system : OdeSystem
        :attr:`system` without the switches' events, whose ``y0(p)`` sets every switch
        state to its value after the switching time: steady states (pre-equilibration,
        measurements at ``inf``) are those reached as ``t -> inf``, where the switch states
        are constants of the right-hand side.
    event_timings : tuple of EventTiming
        When each of the model's events can happen (they come first in
        :attr:`system`'s events, the switches' after them).
    preequilibrated_system : OdeSystem
        :attr:`system` for the simulations that start from a pre-equilibration: each
        trigger's value before ``t = 0`` is its value at the end of pre-equilibration
        (:mod:`pymc_odesens.petab.model_events`); :attr:`system` itself where no event's
        ``initialValue`` differs from that value.
    """

    system: OdeSystem
    model_system: OdeSystem
    fixed: dict
    initial_value_parameters: dict
    switches: tuple
    steady_state_system: OdeSystem
    event_timings: tuple = ()
    preequilibrated_system: OdeSystem | None = None

    @property
    def n_model_states(self) -> int:
        """The states of the SBML model (the switch states follow them)."""
        return self.model_system.n_states

    @classmethod
    def build(
        cls,
        model_system: OdeSystem,
        experiments: list[Experiment],
        name: str,
        end: float = math.inf,
    ) -> SimulationSystem:
        """Fold the values PEtab fixes into ``model_system``.

        ``end``: the last time any experiment is simulated to (``inf`` with steady states):
        conditions of time that switch only after it keep their value before the switch.
        """
        values = _model_values(model_system, experiments)
        fixed = {}
        for pid, seen in values.items():
            if all(_is_number(v) for v in seen) and len({float(v) for v in seen}) == 1:
                fixed[pid] = float(seen[0])
        species = sorted(
            {s for e in experiments for s in (*e.species, *e.preequilibration_species)},
            key=model_system.states.index,
        )
        taken = set(model_system.params) | set(model_system.states)
        initial_names = {}
        for s in species:
            candidate = f"{s}_initial_value"
            while candidate in taken:
                candidate = f"_{candidate}"
            taken.add(candidate)
            initial_names[s] = candidate
            state = model_system.state_symbols[model_system.states.index(s)]
            if sp.sympify(model_system.outputs.get(s, state)) != state:
                raise PetabUnsupportedError(
                    f"condition table: species {s!r} is held as an amount in a compartment "
                    "whose size varies; setting its initial value from the condition table "
                    "is not supported"
                )
        substitution = {
            sym: sp.Float(fixed[pid])
            for pid, sym in zip(model_system.params, model_system.param_symbols)
            if pid in fixed
        }
        kept = [
            sym
            for pid, sym in zip(model_system.params, model_system.param_symbols)
            if pid not in fixed
        ]
        initial_symbols = dict(zip(species, make_symbols([initial_names[s] for s in species])))
        params = [*kept, *initial_symbols.values()]
        rhs = [e.xreplace(substitution) for e in model_system.rhs_expressions]
        y0 = [
            initial_symbols[s] if s in initial_symbols else sp.sympify(e).xreplace(substitution)
            for s, e in zip(model_system.states, model_system.initial_state_expressions)
        ]
        switches = find_time_switches(rhs, model_system.t, model_system.state_symbols, params)
        t = model_system.t
        settled = {w.condition: sp.true if w.after else sp.false for w in switches if w.settled}
        settled.update(
            {
                w.condition: sp.false if w.after else sp.true
                for w in switches
                if w.unchanged_through(t, end)
            }
        )
        if settled:
            rhs = [e.xreplace(settled) for e in rhs]
            switches = [w for w in switches if w.condition not in settled]
        switches += _trigger_switches(model_system, substitution, switches, params)
        switch_names = []
        for k in range(len(switches)):
            candidate = f"time_switch_{k}"
            while candidate in taken:
                candidate = f"_{candidate}"
            taken.add(candidate)
            switch_names.append(candidate)
        switch_symbols = make_symbols(switch_names)
        replacement = {
            w.condition: sp.StrictGreaterThan(s, sp.S.Half)
            for w, s in zip(switches, switch_symbols)
        }
        rhs = [e.xreplace(replacement) for e in rhs] + [sp.S.Zero] * len(switches)
        y0 = y0 + [w.initial for w in switches]
        states = [*model_system.state_symbols, *switch_symbols]
        stoichiometry = None
        if model_system.stoichiometry is not None:
            rows = np.array(model_system.stoichiometry.tolist(), dtype=object)
            zeros = np.zeros((len(switches), rows.shape[1]), dtype=object)
            stoichiometry = np.concatenate([rows, zeros]) if len(switches) else rows
        outputs = {k: sp.sympify(v).xreplace(substitution) for k, v in model_system.outputs.items()}

        model_events = bool(model_system.events)
        condition_times = [
            _condition_times(w, experiments, model_system, end, preequilibration=model_events)
            for w in switches
        ]
        event_names = {e.name for e in model_system.events}

        def make(events: bool, initial_values: dict | None = None) -> OdeSystem:
            system = OdeSystem.from_expressions(rhs, model_system.t, states, params, name=name)
            if events:
                system.set_initial_state(y0)
            else:  # steady states: the switches as they are after every switching time
                after = [sp.S.One if w.after else sp.S.Zero for w in switches]
                system.set_initial_state(y0[: len(model_system.states)] + after)
            system.outputs = outputs
            if stoichiometry is not None:
                system.stoichiometry = stoichiometry
            system.t0 = 0.0
            system.source = model_system.source
            if events and (switches or model_events):
                system.set_events(
                    carried_events(model_system, substitution, replacement, initial_values)
                    + _switch_events(
                        switches, len(model_system.states), condition_times, event_names
                    )
                )
            return system

        system = make(True)
        timings = event_timings(model_system) if model_events else ()
        preequilibrated = system
        if any(e.preequilibration for e in experiments):
            # a trigger's value before t = 0 is its value at the end of pre-equilibration
            at_end = {
                timing.name: timing.value_at_end
                for timing, event in zip(timings, model_system.events)
                if timing.value_at_end is not None and timing.value_at_end != event.initial_value
            }
            if at_end:
                preequilibrated = make(True, at_end)
        return cls(
            system=system,
            model_system=model_system,
            fixed=fixed,
            initial_value_parameters=initial_names,
            switches=tuple(switches),
            steady_state_system=make(False) if switches or model_events else system,
            event_timings=timings,
            preequilibrated_system=preequilibrated,
        )

    def settling_time(self, experiment: Experiment, preequilibration: bool) -> float:
        """The last time at which a model event can happen in one condition of
        ``experiment`` (0 if none after ``t = 0``): steady states are computed from the
        state reached then (:mod:`pymc_odesens.petab.model_events`).

        Raises
        ------
        PetabUnsupportedError
            An event is located by root finding, or its time depends on an estimated
            parameter.
        """
        if not self.event_timings:
            return 0.0
        mapping = (
            experiment.preequilibration_parameters if preequilibration else experiment.parameters
        )
        condition = experiment.preequilibration if preequilibration else experiment.simulation
        nominal = dict(zip(self.model_system.params, self.model_system.p_nominal))
        values = {
            symbol: self.fixed.get(pid, mapping.get(pid, nominal[pid]))
            for pid, symbol in zip(self.model_system.params, self.model_system.param_symbols)
        }
        role = "pre-equilibration" if preequilibration else "simulation"
        return settling_time(self.event_timings, values, f"{role} condition {condition!r}")

    # references into z ------------------------------------------------------------------
    def _default_initial_value(self, species: str, where: str) -> float:
        """The model's initial value of ``species`` (a number once the fixed values are in)."""
        model = self.model_system
        index = model.states.index(species)
        fixed = {
            sym: sp.Float(self.fixed[pid])
            for pid, sym in zip(model.params, model.param_symbols)
            if pid in self.fixed
        }
        expr = sp.sympify(model.initial_state_expressions[index]).xreplace(fixed)
        if expr.free_symbols:
            raise PetabUnsupportedError(
                f"{where}: species {species!r} keeps the model's initial value, which depends "
                f"on parameters that vary ({', '.join(sorted(map(str, expr.free_symbols)))}), "
                "while another condition sets it; give its value in every condition"
            )
        return float(expr)

    def parameter_indices(
        self, experiment: Experiment, values: ParameterValues, preequilibration: bool
    ) -> list[int]:
        """The index in ``z`` of each parameter of :attr:`system` in one condition."""
        mapping = (
            experiment.preequilibration_parameters if preequilibration else experiment.parameters
        )
        condition = experiment.preequilibration if preequilibration else experiment.simulation
        where = f"condition {condition!r}"
        nominal = dict(zip(self.model_system.params, self.model_system.p_nominal))
        indices = []
        n_model = self.system.n_params - len(self.initial_value_parameters)
        for pid in self.system.params[:n_model]:
            value = mapping.get(pid, nominal[pid])
            indices.append(values.index(value, f"{where}, model parameter {pid!r}"))
        species_values = (
            experiment.preequilibration_species if preequilibration else experiment.species
        )
        for species in self.initial_value_parameters:
            value = species_values.get(species, math.nan)
            if _is_number(value) and math.isnan(value):
                if not preequilibration and experiment.preequilibration:
                    value = experiment.preequilibration_species.get(species, math.nan)
                if _is_number(value) and math.isnan(value):
                    value = self._default_initial_value(species, where)
            indices.append(values.index(value, f"{where}, initial value of {species!r}"))
        return indices

    def reinitialized(self, experiment: Experiment, values: ParameterValues):
        """``(mask (N,), indices (N,))``: the states the simulation condition re-initialises
        after pre-equilibration, and the index in ``z`` of each one's value (0 elsewhere)."""
        n = self.system.n_states
        mask = np.zeros(n, dtype=bool)
        indices = np.full(n, values.constant(0.0), dtype=np.int64)
        for species, value in experiment.species.items():
            if _is_number(value) and math.isnan(value):
                continue
            i = self.system.states.index(species)
            mask[i] = True
            indices[i] = values.index(
                value, f"condition {experiment.simulation!r}, initial value of {species!r}"
            )
        return mask, indices
