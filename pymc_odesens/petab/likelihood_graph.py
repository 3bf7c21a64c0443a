"""The PyTensor graph from the estimated parameters to every measurement's distribution.

``x`` (estimated parameters on their scales) -> ``z = [unscale(x), constants]`` -> each
experiment's parameters (one gather) -> the batched ODE solution ``y`` (E, T, N): one
:func:`~pymc_odesens.ode_solution` for the experiments without pre-equilibration, one for the
others, which starts from the steady state of their pre-equilibration conditions
(:func:`~pymc_odesens.steady_state_solution`; with model events, from the state the events
leave once they can no longer fire, :mod:`pymc_odesens.petab.model_events`) -> per
observable, the states,
parameters and placeholder values of each measurement (gathers) -> the observable formula
``h`` and the noise formula ``sigma`` evaluated elementwise -> the measurements'
distributions (:mod:`pymc_odesens.petab.noise`). The same graph serves
:meth:`PetabProblem.log_likelihood` (compiled on its own) and the PyMC model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytensor.tensor as pt

from pymc_odesens.ops import ode_solution, steady_state_solution
from pymc_odesens.petab.measurements import MeasurementGroup
from pymc_odesens.petab.parameters import ParameterValues, unscale_tensor
from pymc_odesens.petab.simulation_system import SimulationSystem
from pymc_odesens.petab.solver_options import SolverOptions
from pymc_odesens.petab.tensor_expressions import expression_tensor

__all__ = ["ObservableTensors", "PetabGraph"]


@dataclass(frozen=True, eq=False)
class ObservableTensors:
    """One observable's simulated values ``h`` and noise parameters ``sigma`` (M,), of the
    measurements ``rows`` of its group (None: all of them)."""

    group: MeasurementGroup
    h: pt.TensorVariable
    sigma: pt.TensorVariable
    rows: np.ndarray | None = None

    @property
    def data(self) -> np.ndarray:
        """The measurements of :attr:`rows`."""
        return self.group.data if self.rows is None else self.group.data[self.rows]


@dataclass(frozen=True, eq=False)
class PetabGraph:
    """Everything the graph needs, as index arrays (built once per problem).

    Attributes
    ----------
    simulation : SimulationSystem
    values : ParameterValues
    scales : tuple of str
        ``parameterScale`` of each estimated parameter.
    times : numpy.ndarray, (E, T)
    parameters : numpy.ndarray of int, (E, P)
        Index in ``z`` of each simulated-system parameter in each experiment's simulation
        condition.
    preequilibration_parameters : numpy.ndarray of int, (E_pre, P)
        The same in the pre-equilibration conditions of the last E_pre experiments.
    reinitialize, reinitial_values : numpy.ndarray, (E_pre, N)
        States the simulation conditions re-initialise after pre-equilibration, and the
        indices in ``z`` of their values.
    groups : list of MeasurementGroup
    table_parameters : dict of str to dict
        Per observable id, the index in ``z`` of each parameter-table symbol it uses.
    settling : numpy.ndarray, (E,), optional
        With model events: the simulation condition's settling time of each experiment
        measured at ``inf`` (0 elsewhere): its steady state is reached from the state then.
    preequilibration_settling : numpy.ndarray, (E_pre,), optional
        With model events: the settling time of each pre-equilibration condition.
    """

    simulation: SimulationSystem
    values: ParameterValues
    scales: tuple
    times: np.ndarray
    parameters: np.ndarray
    preequilibration_parameters: np.ndarray
    reinitialize: np.ndarray
    reinitial_values: np.ndarray
    groups: list
    table_parameters: dict
    settling: np.ndarray | None = None
    preequilibration_settling: np.ndarray | None = None

    @property
    def n_plain(self) -> int:
        """The number of experiments without pre-equilibration (they come first)."""
        return self.parameters.shape[0] - self.preequilibration_parameters.shape[0]

    def restricted(self, experiments) -> PetabGraph:
        """The graph of some experiments alone: their rows of the index arrays and the
        measurements made in them (experiment indices renumbered), the same simulated
        system, output times (padding included) and parameter values, so that each
        experiment is simulated exactly as in the whole graph.

        Parameters
        ----------
        experiments : sequence of int
            Indices of experiments, increasing, without repeats.

        Raises
        ------
        ValueError
            ``experiments`` is empty, not increasing or out of range.
        """
        index = np.asarray(experiments, dtype=np.int64).reshape(-1)
        n_e = self.parameters.shape[0]
        if index.size == 0 or np.any(np.diff(index) <= 0) or index[0] < 0 or index[-1] >= n_e:
            raise ValueError(
                f"experiments: expected increasing indices in 0 .. {n_e - 1} without repeats, "
                f"got {index.tolist()}"
            )
        renumbered = np.full(n_e, -1, dtype=np.int64)
        renumbered[index] = np.arange(index.size)
        pre = index[index >= self.n_plain] - self.n_plain
        groups = []
        for group in self.groups:
            keep = renumbered[group.experiment] >= 0
            if keep.any():
                groups.append(
                    MeasurementGroup(
                        observable=group.observable,
                        rows=group.rows[keep],
                        experiment=renumbered[group.experiment[keep]],
                        time_index=group.time_index[keep],
                        time=group.time[keep],
                        data=group.data[keep],
                        observable_parameters=group.observable_parameters[keep],
                        noise_parameters=group.noise_parameters[keep],
                    )
                )
        return replace(
            self,
            times=self.times[index],
            parameters=self.parameters[index],
            preequilibration_parameters=self.preequilibration_parameters[pre],
            reinitialize=self.reinitialize[pre],
            reinitial_values=self.reinitial_values[pre],
            groups=groups,
        )

    def z(self, x) -> pt.TensorVariable:
        """``z = [unscale(x), constants]`` for a tensor ``x`` on the parameter scales."""
        return self.values.tensor(unscale_tensor(x, self.scales))

    def states(self, z, options: SolverOptions, route: str) -> pt.TensorVariable:
        """The solution at the output times, (E, T, N), for the values ``z``."""
        controls = options.ode_controls(route)
        n_plain, n_e = self.n_plain, self.parameters.shape[0]
        blocks = []
        if n_plain:
            blocks.append(self._block(z, slice(0, n_plain), None, options, controls))
        if n_plain < n_e:
            y0 = self._preequilibrated_start(z, options, controls)
            system = self.simulation.preequilibrated_system
            blocks.append(self._block(z, slice(n_plain, n_e), y0, options, controls, system))
        return blocks[0] if len(blocks) == 1 else pt.concatenate(blocks, axis=0)

    def _settled(self, system, y0, settling: np.ndarray, params, controls: dict):
        """The states (E', N) at the settling times (E',), integrated with the model's
        events from ``y0`` (None: ``y0(p)``): no event fires after them."""
        times = np.asarray(settling, dtype=float).reshape(-1, 1)
        return ode_solution(system, y0, times, params, **controls)[:, 0, :]

    def _steady_state(self, z, y0, params, options: SolverOptions, what: str):
        """Steady states (E', N) of the event-free system (switches at their values after
        every switching time) from ``y0`` (None: ``y0(p)``) with ``params``."""
        sim = self.simulation
        if y0 is not None and sim.switches:
            after = np.array([1.0 if w.after else 0.0 for w in sim.switches])
            y0 = pt.concatenate(
                [y0[:, : sim.n_model_states], pt.broadcast_to(after, (y0.shape[0], len(after)))],
                axis=1,
            )
        return steady_state_solution(
            sim.steady_state_system,
            y0,
            params,
            name=f"{sim.system.name}_{what}_failed",
            **(options.steady_state_controls or {}),
        )

    def _block(self, z, rows: slice, y0, options: SolverOptions, controls: dict, system=None):
        """One group of experiments: the ODE solution at the finite output times, and at
        ``inf`` the steady state reached from the same start with the same parameters
        (after the model's events, from the state at the settling time)."""
        system = system or self.simulation.system
        times = self.times[rows]
        infinite = np.isinf(times)
        finite = times.copy()
        for e in range(finite.shape[0]):  # inf (at the end of a row): its last finite time
            last = finite[e][~infinite[e]]
            finite[e][infinite[e]] = last[-1] if last.size else 0.0
        params = z[self.parameters[rows]]
        y = ode_solution(system, y0, finite, params, **controls)
        if infinite.any():
            start = y0
            if self.simulation.event_timings:
                start = self._settled(system, y0, self.settling[rows], params, controls)
            y_steady = self._steady_state(z, start, params, options, "steady_state")
            y = pt.where(infinite[:, :, None], y_steady[:, None, :], y)
        return y

    def _preequilibrated_start(self, z, options: SolverOptions, controls: dict):
        """The initial states of the experiments with pre-equilibration: the steady state
        under the pre-equilibration condition (from its ``y0(p)``; with model events, from
        the state they leave at its settling time), with the states the simulation condition
        sets re-initialised and the switch states set for its ``t = 0``."""
        sim = self.simulation
        system = sim.system
        n_pre = self.preequilibration_parameters.shape[0]
        params = z[self.parameters[self.n_plain :]]
        pre_params = z[self.preequilibration_parameters]
        start = None
        if sim.event_timings:
            start = self._settled(
                system, None, self.preequilibration_settling, pre_params, controls
            )
        y_star = self._steady_state(z, start, pre_params, options, "preequilibration")
        mask = self.reinitialize.copy()
        mask[:, sim.n_model_states :] = True  # the switch states, set for t = 0
        if not mask.any():
            return y_star
        # one gather for every state (a few nodes in the graph and its gradient, not N)
        initial = z[self.reinitial_values]
        if sim.switches:
            values = {s: params[:, j] for j, s in enumerate(system.param_symbols)}
            switches = [
                pt.broadcast_to(
                    expression_tensor(switch.initial, values, f"time switch {switch.condition}"),
                    (n_pre,),
                )
                for switch in sim.switches
            ]
            initial = pt.concatenate(
                [initial[:, : sim.n_model_states], pt.stack(switches, axis=1)], axis=1
            )
        return pt.where(mask, initial, y_star)

    def symbol_values(self, group: MeasurementGroup, z, y, rows=None) -> dict:
        """The value of every symbol of ``group``'s observable and noise formulas, per
        measurement (of the measurements ``rows`` of the group; default: all): states,
        system parameters, time, placeholders and parameter-table symbols."""
        system = self.simulation.system
        observable = group.observable
        select = slice(None) if rows is None else np.asarray(rows, dtype=np.int64)
        experiment = group.experiment[select]
        used = observable.formula.free_symbols | observable.noise_formula.free_symbols
        values = {}
        if any(s in used for s in system.state_symbols):
            y_m = y[experiment, group.time_index[select]]
            for i, s in enumerate(system.state_symbols):
                if s in used:
                    values[s] = y_m[:, i]
        for k, s in enumerate(system.param_symbols):
            if s in used:
                values[s] = z[self.parameters[experiment, k]]
        if system.t in used:
            values[system.t] = pt.constant(group.time[select])
        for j, s in enumerate(observable.observable_placeholders):
            values[s] = z[group.observable_parameters[select, j]]
        for j, s in enumerate(observable.noise_placeholders):
            values[s] = z[group.noise_parameters[select, j]]
        for s, index in self.table_parameters[observable.id].items():
            values[s] = z[index]
        return values

    def observables(self, z, y, rows: dict | None = None) -> list[ObservableTensors]:
        """``h`` and ``sigma`` of every measurement, per observable.

        ``rows`` (optional) maps a group's index in :attr:`groups` to the measurements of
        it to include (the others are not computed); groups it does not name are whole,
        and a group with no measurement selected is left out.
        """
        result = []
        for k, group in enumerate(self.groups):
            selected = None if rows is None else rows.get(k)
            if selected is not None and len(selected) == 0:
                continue
            observable = group.observable
            values = self.symbol_values(group, z, y, selected)
            label = f"observable {observable.id!r}"
            h = expression_tensor(observable.formula, values, f"{label}: observableFormula")
            sigma = expression_tensor(observable.noise_formula, values, f"{label}: noiseFormula")
            m = len(group) if selected is None else len(selected)
            result.append(
                ObservableTensors(
                    group=group,
                    h=pt.broadcast_to(h, (m,)),
                    sigma=pt.broadcast_to(sigma, (m,)),
                    rows=None if selected is None else np.asarray(selected, dtype=np.int64),
                )
            )
        return result
