"""The parameter table: estimated parameters on their scales, fixed values, references.

PEtab estimates the parameters of the parameter table with ``estimate = 1`` on their
``parameterScale`` (``lin``, ``log``, ``log10``); every other id of the table is fixed at
its ``nominalValue`` (always on the linear scale). Wherever a table refers to a value (a
condition sets a model parameter, a measurement overrides an observable or noise
parameter), the value is an estimated parameter or a number; :class:`ParameterValues`
turns each into an index into one vector

    z = [unscale(x_0), ..., unscale(x_{K-1}), c_0, c_1, ...]

of the K estimated parameters on the linear scale followed by the constants, so that a
whole table of references becomes one integer array and one gather from ``z``.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import petab.v1 as petab
import pytensor.tensor as pt
from petab.v1 import C

from pymc_odesens.petab.errors import PetabError, PetabUnsupportedError, table_location

__all__ = ["EstimatedParameters", "ParameterValues", "unscale_tensor"]

_SCALES = (C.LIN, C.LOG, C.LOG10)


def unscale_tensor(x, scales) -> pt.TensorVariable:
    """``x`` (K,) on the parameter scales ``scales`` as a tensor on the linear scale.

    Each scale's entries are transformed on their own (no ``where`` over both branches,
    whose unused ``exp`` could overflow and turn the gradient into NaN).
    """
    x = pt.as_tensor_variable(x)
    scales = np.asarray(scales, dtype=object)
    result = x
    for scale, function in ((C.LOG, pt.exp), (C.LOG10, lambda v: pt.exp(v * math.log(10.0)))):
        where = np.flatnonzero(scales == scale)
        if where.size:
            result = pt.set_subtensor(result[where], function(x[where]))
    return result


@dataclass(frozen=True)
class EstimatedParameters:
    """The estimated parameters of a PEtab problem, in parameter-table order.

    Attributes
    ----------
    ids : tuple of str
    scales : tuple of str
        Each one's ``parameterScale``.
    lower, upper : numpy.ndarray
        Bounds on the linear scale.
    nominal : numpy.ndarray
        ``nominalValue`` on the parameter scale (what ``x=None`` means; NaN where the
        table gives none).
    table : pandas.DataFrame
        Their rows of the parameter table (priors are read from it).
    positions : tuple of int
        Their rows' positions in the parameter table (for messages).
    """

    ids: tuple
    scales: tuple
    lower: np.ndarray
    upper: np.ndarray
    nominal: np.ndarray
    table: pd.DataFrame
    positions: tuple = ()

    @classmethod
    def from_table(cls, parameter_df: pd.DataFrame) -> EstimatedParameters:
        """Read the rows with ``estimate = 1`` of a PEtab parameter table.

        Raises
        ------
        PetabError
            An ``estimate`` that is not 0 or 1 (the entry named).
        PetabUnsupportedError
            A ``parameterScale`` other than ``lin``, ``log``, ``log10``.

        Warns
        -----
        UserWarning
            An estimated parameter's ``nominalValue`` lies outside its bounds (each entry
            named).
        """
        estimate = pd.to_numeric(parameter_df[C.ESTIMATE], errors="coerce")
        for position, (pid, value) in enumerate(zip(parameter_df.index, estimate)):
            if value not in (0, 1):  # NaN and 0.5 too (petab's check reads int(0.5) as 0)
                raw = parameter_df[C.ESTIMATE].iloc[position]
                raw = raw.item() if isinstance(raw, np.generic) else raw
                where = table_location("parameter", position, pid, C.ESTIMATE)
                raise PetabError(f"{where} = {raw!r}: expected 0 or 1")
        chosen = (estimate == 1).to_numpy()
        rows = parameter_df.loc[chosen]
        positions = tuple(int(k) for k in np.flatnonzero(chosen))
        scales = tuple(
            str(s) if isinstance(s, str) and s else C.LIN
            for s in rows.get(C.PARAMETER_SCALE, pd.Series(C.LIN, index=rows.index))
        )
        for pid, s in zip(rows.index, scales):
            if s not in _SCALES:
                raise PetabUnsupportedError(
                    f"parameter table: parameterScale {s!r} of {pid!r} is not one of {_SCALES}"
                )
        lower = rows[C.LOWER_BOUND].to_numpy(dtype=float)
        upper = rows[C.UPPER_BOUND].to_numpy(dtype=float)
        linear = pd.to_numeric(
            rows.get(C.NOMINAL_VALUE, pd.Series(np.nan, index=rows.index)), errors="coerce"
        ).to_numpy(dtype=float)
        outside = [
            f"{table_location('parameter', position, pid, C.NOMINAL_VALUE)} = {value!r} "
            f"outside [{a!r}, {b!r}]"
            for pid, position, value, a, b in zip(
                rows.index, positions, linear.tolist(), lower.tolist(), upper.tolist()
            )
            if not math.isnan(value) and not a <= value <= b
        ]
        if outside:
            # PEtab allows it (the benchmark collection's Lang_PLOSComputBiol2024 has a
            # nominal value 0 below a bound 1e-24): x=None evaluates there, the chains'
            # starts (start_values) and initial values are moved inside the bounds
            warnings.warn(
                "nominalValue outside the bounds (lowerBound, upperBound) of an estimated "
                "parameter: " + "; ".join(outside),
                UserWarning,
                stacklevel=2,
            )
        nominal = np.array([petab.scale(v, s) for v, s in zip(linear, scales)], dtype=float)
        return cls(
            ids=tuple(rows.index),
            scales=scales,
            lower=lower,
            upper=upper,
            nominal=nominal,
            table=rows,
            positions=positions,
        )

    def __len__(self) -> int:
        return len(self.ids)

    def check(self, x) -> np.ndarray:
        """``x`` (or the nominal values for None) as a float vector of the right length.

        Raises
        ------
        PetabError
            ``x`` is None and the parameter table gives no ``nominalValue`` for some
            estimated parameter (PEtab leaves it optional for them).
        """
        if x is None:
            missing = np.flatnonzero(np.isnan(self.nominal))
            if missing.size:
                rows = ", ".join(
                    f"row {self.positions[k]} ({self.ids[k]})" if self.positions else self.ids[k]
                    for k in missing
                )
                raise PetabError(
                    f"x=None means the nominal values, and the parameter table gives no "
                    f"nominalValue for {rows}: pass x"
                )
            return self.nominal.copy()
        x = np.asarray(x, dtype=float)
        if x.shape != (len(self.ids),):
            raise ValueError(
                f"x must have shape ({len(self.ids)},): one value per estimated parameter "
                f"({', '.join(self.ids[:6])}{', ...' if len(self.ids) > 6 else ''}) on its "
                f"parameterScale; got shape {x.shape}"
            )
        return x

    def unscale(self, x) -> np.ndarray:
        """``x`` on the linear scale."""
        return np.array([petab.unscale(v, s) for v, s in zip(self.check(x), self.scales)])


class ParameterValues:
    """Indices into ``z = [unscale(x), constants]`` for the values tables refer to.

    Parameters
    ----------
    parameter_df : pandas.DataFrame
        The PEtab parameter table.
    estimated : EstimatedParameters
    """

    def __init__(self, parameter_df: pd.DataFrame, estimated: EstimatedParameters) -> None:
        self.estimated = estimated
        self._estimated_index = {pid: k for k, pid in enumerate(estimated.ids)}
        self._fixed = {
            pid: float(row[C.NOMINAL_VALUE])
            for pid, row in parameter_df.iterrows()
            if pid not in self._estimated_index
        }
        self._constants: list[float] = []
        self._constant_index: dict[float, int] = {}

    @property
    def n_estimated(self) -> int:
        return len(self._estimated_index)

    @property
    def constants(self) -> np.ndarray:
        return np.array(self._constants, dtype=float)

    def constant(self, value: float, where: str = "value") -> int:
        """The index of the number ``value`` (finite) in ``z``."""
        value = float(value)
        if not math.isfinite(value):
            raise PetabError(f"{where}: expected a finite number, got {value}")
        index = self._constant_index.get(value)
        if index is None:
            index = self.n_estimated + len(self._constants)
            self._constants.append(value)
            self._constant_index[value] = index
        return index

    def is_table_parameter(self, pid: str) -> bool:
        return pid in self._estimated_index or pid in self._fixed

    def index(self, value, where: str) -> int:
        """The index in ``z`` of a table entry: a number or a parameter-table id."""
        if not isinstance(value, numbers.Number):
            value = petab.core.to_float_if_float(value)
        if isinstance(value, numbers.Number):
            return self.constant(float(value), where)
        if value in self._estimated_index:
            return self._estimated_index[value]
        if value in self._fixed:
            return self.constant(self._fixed[value], f"{where} ({value!r})")
        raise PetabError(f"{where}: {value!r} is neither a number nor an id of the parameter table")

    def values(self, x_linear: np.ndarray) -> np.ndarray:
        """``z`` for the estimated parameters ``x_linear`` (on the linear scale)."""
        return np.concatenate([np.asarray(x_linear, dtype=float), self.constants])

    def tensor(self, x_linear) -> pt.TensorVariable:
        """``z`` as a tensor, for a tensor ``x_linear`` of the estimated parameters."""
        return pt.concatenate([pt.as_tensor_variable(x_linear), pt.constant(self.constants)])
