"""The measurement table as index arrays: which experiment, output time and values each uses.

Each experiment is simulated at the sorted distinct times of its measurements (``inf``:
the steady state, last); rows are padded to a common length by repeating the last finite
time, so that all experiments share one (E, T) time array. The measurements of each
observable become one :class:`MeasurementGroup`: the experiment and time index of every
measurement, and the indices in ``z`` (:class:`~pymc_odesens.petab.parameters.ParameterValues`)
of its observable and noise parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import petab.v1 as petab
from petab.v1 import C

from pymc_odesens.petab.errors import PetabError, table_location
from pymc_odesens.petab.experiments import Experiment
from pymc_odesens.petab.observables import ObservableModel
from pymc_odesens.petab.parameters import ParameterValues

__all__ = ["MeasurementGroup", "experiment_times", "group_measurements", "measurement_conditions"]


@dataclass(frozen=True, eq=False)
class MeasurementGroup:
    """The measurements of one observable.

    Attributes
    ----------
    observable : ObservableModel
    rows : numpy.ndarray of int, (M,)
        Their positions in the measurement table.
    experiment : numpy.ndarray of int, (M,)
    time_index : numpy.ndarray of int, (M,)
        Index into the experiment's row of the (E, T) output times.
    time : numpy.ndarray, (M,)
    data : numpy.ndarray, (M,)
    observable_parameters, noise_parameters : numpy.ndarray of int, (M, K)
        Indices in ``z`` of the placeholders' values.
    """

    observable: ObservableModel
    rows: np.ndarray
    experiment: np.ndarray
    time_index: np.ndarray
    time: np.ndarray
    data: np.ndarray
    observable_parameters: np.ndarray
    noise_parameters: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)


def measurement_conditions(measurement_df: pd.DataFrame) -> list[tuple[str, str | None]]:
    """Each measurement row's condition pair: (``simulationConditionId``,
    ``preequilibrationConditionId``, None where the column is absent or the cell empty)."""
    simulations = measurement_df[C.SIMULATION_CONDITION_ID].tolist()
    column = measurement_df.get(C.PREEQUILIBRATION_CONDITION_ID)
    pres = [None] * len(simulations) if column is None else column.tolist()
    return [
        (sim, pre if isinstance(pre, str) and pre else None) for sim, pre in zip(simulations, pres)
    ]


def _experiment_index(experiments: list[Experiment]) -> dict[tuple, int]:
    """Each (simulation, pre-equilibration) condition pair's experiment."""
    return {pair: k for k, e in enumerate(experiments) for pair in e.conditions}


def measurement_times(measurement_df: pd.DataFrame) -> list[float]:
    """Each row's ``time`` as a float (``inf``: the steady state).

    Raises
    ------
    PetabError
        A time that is not a number (petab's linter does not check them), naming the row.
    """
    times = []
    observables = measurement_df[C.OBSERVABLE_ID].tolist()
    for r, t in enumerate(measurement_df[C.TIME].tolist()):
        try:
            value = float(t)
        except (TypeError, ValueError):
            value = math.nan
        if math.isnan(value):
            where = table_location("measurement", r, observables[r], C.TIME)
            raise PetabError(f"{where} = {t!r}: expected a number (or inf: the steady state)")
        times.append(value)
    return times


def experiment_times(measurement_df: pd.DataFrame, experiments: list[Experiment]) -> np.ndarray:
    """The output times (E, T): each experiment's distinct measurement times, padded."""
    index = _experiment_index(experiments)
    distinct: list[set] = [set() for _ in experiments]
    for pair, t in zip(measurement_conditions(measurement_df), measurement_times(measurement_df)):
        distinct[index[pair]].add(t)
    own = []
    for k, ts in enumerate(distinct):
        values = np.array(sorted(ts), dtype=float)
        if np.any(values < 0):
            raise PetabError(
                f"measurement table: negative time in condition {experiments[k].label} "
                "(simulations start at t = 0)"
            )
        own.append(values)
    width = max(len(ts) for ts in own)
    padded = np.empty((len(experiments), width))
    for k, ts in enumerate(own):
        finite = ts[np.isfinite(ts)]
        n_inf = len(ts) - len(finite)
        fill = finite[-1] if len(finite) else 0.0
        padded[k] = np.concatenate([finite, np.full(width - len(ts), fill), np.full(n_inf, np.inf)])
    return padded


def _overrides(cell, placeholders: tuple, values: ParameterValues, where: str) -> list[int]:
    entries = petab.split_parameter_replacement_list(cell)
    if len(entries) != len(placeholders):
        names = ", ".join(s.name for s in placeholders) or "none"
        raise PetabError(
            f"{where}: {len(entries)} value(s) given for {len(placeholders)} placeholder(s) "
            f"({names})"
        )
    return [values.index(v, where) for v in entries]


def group_measurements(
    measurement_df: pd.DataFrame,
    experiments: list[Experiment],
    times: np.ndarray,
    observables: dict[str, ObservableModel],
    values: ParameterValues,
) -> list[MeasurementGroup]:
    """One :class:`MeasurementGroup` per observable that has measurements, in table order."""
    index = _experiment_index(experiments)
    pairs = measurement_conditions(measurement_df)
    columns = {
        c: measurement_df[c].tolist() if c in measurement_df else None
        for c in (
            C.OBSERVABLE_ID,
            C.TIME,
            C.MEASUREMENT,
            C.OBSERVABLE_PARAMETERS,
            C.NOISE_PARAMETERS,
        )
    }
    columns[C.TIME] = measurement_times(measurement_df)
    n_rows = len(measurement_df)
    per_observable: dict[str, list[int]] = {}
    for r in range(n_rows):
        oid = columns[C.OBSERVABLE_ID][r]
        if oid not in observables:
            raise PetabError(f"measurement table, row {r}: unknown observable {oid!r}")
        per_observable.setdefault(oid, []).append(r)

    def cell(column, r):
        values_ = columns[column]
        return None if values_ is None else values_[r]

    groups = []
    for oid, rows in per_observable.items():
        observable = observables[oid]
        experiment, time_index, time, data, obs_idx, noise_idx = [], [], [], [], [], []
        for r in rows:
            where = f"measurement table, row {r} ({oid})"
            k = index[pairs[r]]
            t = float(cell(C.TIME, r))
            value = float(cell(C.MEASUREMENT, r))
            if not math.isfinite(value):
                raise PetabError(f"{where}: the measurement is {value}")
            row_times = times[k]
            j = len(row_times) - 1 if math.isinf(t) else int(np.searchsorted(row_times, t))
            experiment.append(k)
            time_index.append(j)
            time.append(t)
            data.append(value)
            obs_idx.append(
                _overrides(
                    cell(C.OBSERVABLE_PARAMETERS, r),
                    observable.observable_placeholders,
                    values,
                    f"{where}, observableParameters",
                )
            )
            noise_idx.append(
                _overrides(
                    cell(C.NOISE_PARAMETERS, r),
                    observable.noise_placeholders,
                    values,
                    f"{where}, noiseParameters",
                )
            )
        m = len(rows)
        groups.append(
            MeasurementGroup(
                observable=observable,
                rows=np.array(rows, dtype=np.int64),
                experiment=np.array(experiment, dtype=np.int64),
                time_index=np.array(time_index, dtype=np.int64),
                time=np.array(time, dtype=float),
                data=np.array(data, dtype=float),
                observable_parameters=np.array(obs_idx, dtype=np.int64).reshape(
                    m, len(observable.observable_placeholders)
                ),
                noise_parameters=np.array(noise_idx, dtype=np.int64).reshape(
                    m, len(observable.noise_placeholders)
                ),
            )
        )
    return groups
