"""Which measurements share which marginalised parameters: the blocks of a marginal likelihood.

Measurements ``i`` (on the transformed scale of their observable: the value, its ``log`` or
``log10``) follow

    z_i = c_i + sum_j A_ij theta_j + eps_i,    eps_i ~ Normal(0, sigma_i^2),

where the *columns* ``theta_j`` (scalings and offsets that enter linearly) and the noise
variances ``sigma^2`` of some measurements are integrated out under conjugate priors:
``theta_j ~ Normal(mean_j, sd_j^2)`` independently, ``sigma^2 ~ InverseGamma(alpha, beta)``.
Measurements and marginalised parameters that are linked (a measurement uses a column or a
marginalised noise variance) form a *block*; blocks are independent, and each has one of
three closed forms (:mod:`pymc_odesens.ops.marginal_numerics`):

- ``KNOWN_NOISE``: columns only; each measurement's ``sigma_i`` is given (an input);
- ``MARGINAL_NOISE``: one noise variance shared by the block's measurements, no columns;
- ``NORMAL_INVERSE_GAMMA``: columns and one noise variance shared by every measurement of
  the block; then the columns' prior is conditional on it,
  ``theta_j | sigma^2 ~ Normal(mean_j, sd_j^2 sigma^2 / sigma_ref^2)`` with
  ``sigma_ref^2 = beta exp(-digamma(alpha))`` (the prior's geometric mean of ``sigma^2``):
  at a noise variance typical of its prior, ``theta_j`` has the standard deviation given.

A block whose columns link measurements of several noise variances, or marginalised and
given ones, has no closed form: :meth:`MarginalNormalStructure.build` refuses it, naming
them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import digamma

__all__ = [
    "KNOWN_NOISE",
    "MARGINAL_NOISE",
    "NORMAL_INVERSE_GAMMA",
    "MarginalColumn",
    "MarginalNoise",
    "MarginalNormalStructure",
    "REPORT_SCALES",
]

KNOWN_NOISE = 0
MARGINAL_NOISE = 1
NORMAL_INVERSE_GAMMA = 2
BLOCK_KIND_NAMES = {
    KNOWN_NOISE: "known noise",
    MARGINAL_NOISE: "marginal noise variance",
    NORMAL_INVERSE_GAMMA: "normal-inverse-gamma",
}
REPORT_SCALES = ("lin", "log", "log10")


def _positive(value: float, what: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} must be a positive finite number, got {value}")
    return value


@dataclass(frozen=True)
class MarginalColumn:
    """One marginalised linear parameter ``theta`` (a column of ``A``) and its prior.

    Attributes
    ----------
    name : str
        The variable its recovered draws are stored under.
    mean, sd : float
        Its prior ``Normal(mean, sd^2)`` (in a normal-inverse-gamma block: at the noise
        variance ``sigma_ref^2``, see the module docstring).
    position : int
        Its index within the variable ``name`` (-1: ``name`` is a scalar).
    variable : {"lin", "log", "log10"}
        ``theta`` is the parameter's linear value ``s``, ``ln s`` or ``log10 s``.
    report : {"lin", "log", "log10"}
        Recovered draws are reported as ``s``, ``ln s`` or ``log10 s``.
    """

    name: str
    mean: float
    sd: float
    position: int = -1
    variable: str = "lin"
    report: str = "lin"

    def __post_init__(self) -> None:
        if not math.isfinite(float(self.mean)):
            raise ValueError(f"the prior mean of {self.name!r} must be finite, got {self.mean}")
        _positive(self.sd, f"the prior standard deviation of {self.name!r}")
        for attribute in ("variable", "report"):
            if getattr(self, attribute) not in REPORT_SCALES:
                raise ValueError(
                    f"{attribute} of {self.name!r} must be one of {REPORT_SCALES}, got "
                    f"{getattr(self, attribute)!r}"
                )


@dataclass(frozen=True)
class MarginalNoise:
    """One marginalised noise variance ``sigma^2 ~ InverseGamma(alpha, beta)``.

    Attributes
    ----------
    name : str
        The variable its recovered draws (of ``sigma``) are stored under.
    alpha, beta : float
        Shape and scale of the inverse-gamma prior of ``sigma^2``.
    position : int
        Its index within the variable ``name`` (-1: a scalar).
    report : {"lin", "log", "log10"}
        Recovered draws are reported as ``sigma``, ``ln sigma`` or ``log10 sigma``.
    """

    name: str
    alpha: float
    beta: float
    position: int = -1
    report: str = "lin"

    def __post_init__(self) -> None:
        _positive(self.alpha, f"alpha of {self.name!r}")
        _positive(self.beta, f"beta of {self.name!r}")
        if self.report not in REPORT_SCALES:
            raise ValueError(
                f"report of {self.name!r} must be one of {REPORT_SCALES}, got {self.report!r}"
            )

    @property
    def reference_variance(self) -> float:
        """``beta exp(-digamma(alpha))``: the geometric mean of ``sigma^2`` under the prior."""
        return float(self.beta * np.exp(-digamma(self.alpha)))


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def _index_array(values, what: str, size: int | None = None) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise ValueError(f"{what} must be a 1-d integer array, got {array.dtype} {array.shape}")
    array = array.astype(np.int64)
    if size is not None and array.size != size:
        raise ValueError(f"{what} must have {size} entries, got {array.size}")
    return array


@dataclass(frozen=True, eq=False)
class MarginalNormalStructure:
    """The block structure of a marginal likelihood (build it with :meth:`build`).

    Attributes
    ----------
    n_rows : int
        Measurements (rows of ``A``).
    entry_row, entry_column : numpy.ndarray of int, (nnz,)
        The non-zero entries of ``A`` (their values are an input of the Op, in this
        order; repeated (row, column) pairs add up).
    columns : tuple of MarginalColumn
    noises : tuple of MarginalNoise
    row_noise : numpy.ndarray of int, (n_rows,)
        Each row's marginalised noise variance (index into ``noises``), -1 where the
        row's ``sigma`` is given.
    block_kind : numpy.ndarray of int, (B,)
    block_noise : numpy.ndarray of int, (B,)
        The noise variance of each block (-1 for ``KNOWN_NOISE`` blocks).
    prior_mean, prior_precision : numpy.ndarray, (K,)
        ``mean_j`` and the diagonal of ``Lambda_0`` (``1 / sd_j^2``; in a
        normal-inverse-gamma block ``sigma_ref^2 / sd_j^2``, relative to ``sigma^2``).
    alpha, beta : numpy.ndarray, (B,)
        The inverse-gamma prior of each block's noise variance (NaN for known noise).
    block_rows_start, block_rows, block_columns_start, block_columns : numpy.ndarray of int
        Rows and columns of each block (CSR: block ``b`` has
        ``block_rows[block_rows_start[b]:block_rows_start[b + 1]]``).
    column_local : numpy.ndarray of int, (K,)
        Each column's position within its block.
    row_entries_start, row_entries : numpy.ndarray of int
        The entries of each row (CSR).
    max_columns : int
        The largest number of columns of a block.
    """

    n_rows: int
    entry_row: np.ndarray
    entry_column: np.ndarray
    columns: tuple
    noises: tuple
    row_noise: np.ndarray
    block_kind: np.ndarray = field(repr=False)
    block_noise: np.ndarray = field(repr=False)
    prior_mean: np.ndarray = field(repr=False)
    prior_precision: np.ndarray = field(repr=False)
    alpha: np.ndarray = field(repr=False)
    beta: np.ndarray = field(repr=False)
    block_rows_start: np.ndarray = field(repr=False)
    block_rows: np.ndarray = field(repr=False)
    block_columns_start: np.ndarray = field(repr=False)
    block_columns: np.ndarray = field(repr=False)
    column_local: np.ndarray = field(repr=False)
    row_entries_start: np.ndarray = field(repr=False)
    row_entries: np.ndarray = field(repr=False)
    max_columns: int = 0

    @property
    def n_entries(self) -> int:
        return int(self.entry_row.size)

    @property
    def n_blocks(self) -> int:
        return int(self.block_kind.size)

    def numeric_arrays(self) -> tuple:
        """The arrays the numba functions take, in their order
        (:func:`pymc_odesens.ops.marginal_numerics.marginal_log_density`)."""
        return (
            self.block_kind,
            self.block_rows_start,
            self.block_rows,
            self.block_columns_start,
            self.block_columns,
            self.column_local,
            self.row_entries_start,
            self.row_entries,
            self.entry_column,
            self.prior_mean,
            self.prior_precision,
            self.alpha,
            self.beta,
            self.max_columns,
        )

    def block_description(self, b: int) -> str:
        """Block ``b`` in words (its kind, columns and noise variance), for messages."""
        start, end = self.block_columns_start[b], self.block_columns_start[b + 1]
        names = [_label(self.columns[j]) for j in self.block_columns[start:end]]
        noise = self.block_noise[b]
        parts = [f"block {b} ({BLOCK_KIND_NAMES[int(self.block_kind[b])]}"]
        if names:
            parts.append(f"; columns {', '.join(names)}")
        if noise >= 0:
            parts.append(f"; noise {_label(self.noises[noise])}")
        return "".join(parts) + ")"

    @classmethod
    def build(
        cls,
        n_rows: int,
        entry_row,
        entry_column,
        columns,
        row_noise,
        noises=(),
    ) -> MarginalNormalStructure:
        """The blocks of measurements linked by marginalised columns and noise variances.

        Parameters
        ----------
        n_rows : int
            The number of measurements.
        entry_row, entry_column : array_like of int, (nnz,)
            Where ``A`` has entries (``A``'s values are given when the likelihood is
            evaluated).
        columns : sequence of MarginalColumn
            The marginalised linear parameters, ``entry_column``'s indices.
        row_noise : array_like of int, (n_rows,)
            Each row's marginalised noise variance (index into ``noises``) or -1 (its
            ``sigma`` is given).
        noises : sequence of MarginalNoise

        Raises
        ------
        ValueError
            Indices out of range; a row with nothing marginalised; a column or noise
            variance no row uses; columns that link rows of different noise variances, or
            of a marginalised and a given one (no closed form: the parameters are named).
        """
        columns, noises = tuple(columns), tuple(noises)
        n_rows = int(n_rows)
        entry_row = _index_array(entry_row, "entry_row")
        entry_column = _index_array(entry_column, "entry_column", entry_row.size)
        row_noise = _index_array(row_noise, "row_noise", n_rows)
        k, m = len(columns), len(noises)
        for what, array, size in (
            ("entry_row", entry_row, n_rows),
            ("entry_column", entry_column, k),
        ):
            if array.size and (array.min() < 0 or array.max() >= size):
                raise ValueError(
                    f"{what} must lie in [0, {size}), got {array.min()}..{array.max()}"
                )
        if row_noise.size and (row_noise.min() < -1 or row_noise.max() >= m):
            raise ValueError(
                f"row_noise must lie in [-1, {m}), got {row_noise.min()}..{row_noise.max()}"
            )
        has_entry = np.zeros(n_rows, dtype=bool)
        has_entry[entry_row] = True
        empty = np.flatnonzero(~has_entry & (row_noise < 0))
        if empty.size:
            raise ValueError(
                f"row {int(empty[0])} has no marginalised column and a given noise: nothing of "
                "it is marginalised (leave it out of the structure)"
            )
        for what, used, items in (
            ("column", np.unique(entry_column), columns),
            ("noise variance", np.unique(row_noise[row_noise >= 0]), noises),
        ):
            unused = sorted(set(range(len(items))) - set(used.tolist()))
            if unused:
                raise ValueError(f"the {what} {_label(items[unused[0]])} is used by no row")

        # union-find over rows; columns and noise variances link the rows that use them
        links = _UnionFind(n_rows)
        first_of_column = np.full(k, -1, dtype=np.int64)
        for r, j in zip(entry_row, entry_column):
            if first_of_column[j] < 0:
                first_of_column[j] = r
            links.union(int(r), int(first_of_column[j]))
        first_of_noise = np.full(m, -1, dtype=np.int64)
        for r in np.flatnonzero(row_noise >= 0):
            q = row_noise[r]
            if first_of_noise[q] < 0:
                first_of_noise[q] = r
            links.union(int(r), int(first_of_noise[q]))
        roots = np.array([links.find(r) for r in range(n_rows)], dtype=np.int64)
        _, first, row_block = np.unique(roots, return_index=True, return_inverse=True)
        order = np.argsort(np.argsort(first))  # blocks numbered by their first row
        row_block = order[row_block].astype(np.int64)
        n_blocks = int(first.size)
        column_block = row_block[first_of_column] if k else np.zeros(0, dtype=np.int64)

        block_kind = np.empty(n_blocks, dtype=np.int64)
        block_noise = np.full(n_blocks, -1, dtype=np.int64)
        for b in range(n_blocks):
            rows = np.flatnonzero(row_block == b)
            noise = set(row_noise[rows].tolist())
            has_columns = bool(np.any(column_block == b))
            if noise == {-1}:
                block_kind[b] = KNOWN_NOISE
                continue
            if len(noise) > 1:
                names = [_label(columns[j]) for j in np.flatnonzero(column_block == b)]
                given = "given noise and " if -1 in noise else ""
                marginal = [_label(noises[q]) for q in sorted(noise - {-1})]
                raise ValueError(
                    f"the columns {', '.join(names)} link measurements of {given}the noise "
                    f"variance(s) {', '.join(marginal)}: a closed form exists only when all "
                    "measurements of such a block share one marginalised noise variance. "
                    "Marginalise the columns alone (sample the noise), or the noise alone"
                )
            block_noise[b] = noise.pop()
            block_kind[b] = NORMAL_INVERSE_GAMMA if has_columns else MARGINAL_NOISE

        alpha = np.full(n_blocks, np.nan)
        beta = np.full(n_blocks, np.nan)
        for b in np.flatnonzero(block_noise >= 0):
            alpha[b] = noises[block_noise[b]].alpha
            beta[b] = noises[block_noise[b]].beta
        prior_mean = np.array([float(c.mean) for c in columns], dtype=float)
        prior_precision = np.empty(k)
        for j, column in enumerate(columns):
            precision = 1.0 / float(column.sd) ** 2
            b = column_block[j]
            if block_kind[b] == NORMAL_INVERSE_GAMMA:
                precision *= noises[block_noise[b]].reference_variance
            prior_precision[j] = precision

        block_rows = np.argsort(row_block, kind="stable").astype(np.int64)
        block_rows_start = np.searchsorted(row_block[block_rows], np.arange(n_blocks + 1))
        block_columns = np.argsort(column_block, kind="stable").astype(np.int64)
        block_columns_start = np.searchsorted(column_block[block_columns], np.arange(n_blocks + 1))
        column_local = np.empty(k, dtype=np.int64)
        for b in range(n_blocks):
            members = block_columns[block_columns_start[b] : block_columns_start[b + 1]]
            column_local[members] = np.arange(members.size)
        row_entries = np.argsort(entry_row, kind="stable").astype(np.int64)
        row_entries_start = np.searchsorted(entry_row[row_entries], np.arange(n_rows + 1))
        counts = np.diff(block_columns_start)
        return cls(
            n_rows=n_rows,
            entry_row=entry_row,
            entry_column=entry_column,
            columns=columns,
            noises=noises,
            row_noise=row_noise,
            block_kind=block_kind,
            block_noise=block_noise,
            prior_mean=prior_mean,
            prior_precision=prior_precision,
            alpha=alpha,
            beta=beta,
            block_rows_start=block_rows_start.astype(np.int64),
            block_rows=block_rows,
            block_columns_start=block_columns_start.astype(np.int64),
            block_columns=block_columns,
            column_local=column_local,
            row_entries_start=row_entries_start.astype(np.int64),
            row_entries=row_entries,
            max_columns=int(counts.max()) if counts.size else 0,
        )


def _label(item) -> str:
    return item.name if item.position < 0 else f"{item.name}[{item.position}]"
