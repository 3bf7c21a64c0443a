"""The Newton matrix ``I - c J`` of the implicit methods: dense or sparse, one interface.

Every implicit integration (``bdf`` and ``adams``, the forward sensitivities' shared
corrector, both adjoints) factorises ``I - c J`` for the Jacobian ``J`` of its first
block and solves with the factors. The Jacobian comes from a kernel that writes its
structurally non-zero entries in the order of the model's sparsity pattern
(``jac_y_values``); a *structure* array says what to do with them:

- dense: scatter them into an ``N x N`` matrix and factorise it with partial pivoting
  (:mod:`pymc_odesens.solvers.dense_lu`);
- sparse: scatter them into the compressed columns of the reordered pattern and
  factorise with :mod:`pymc_odesens.solvers.sparse_lu` (refactorisation with the previous
  pivots while they stay acceptable); no ``N x N`` array exists.

:func:`newton_structure` builds the structure once per model (the sparse analysis is
stored with the model's kernels); :data:`LINEAR_SOLVERS` are the values of the solver
control ``linear_solver``, where ``"auto"`` takes the sparse path for systems of at least
:data:`SPARSE_MIN_STATES` states whose Newton matrix has at most
:data:`SPARSE_MAX_DENSITY` of its entries non-zero and whose factors (by the analysis'
estimate) fill at most :data:`SPARSE_MAX_FILL` of ``N x N`` (measured by
``benchmarks/bench_linear_solver.py``: see docs/solvers.md).

Inside compiled code the factors live in two flat arrays (:func:`new_newton_factor`):
compiled code passes them instead of a dozen arrays, whose reference counting numba would
otherwise pay at every call (atomic operations: with a tuple of 17 arrays they took 40 %
of a small stiff solve), and the solves are inlined into the Newton iteration for the
same reason. :func:`factor_newton_matrix` returns them again because the
sparse factors may need more room (rarely: then they are larger arrays).
"""

from __future__ import annotations

import io

import numpy as np
from numba import njit

from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.controls import LINEAR_SOLVERS, check_linear_solver
from pymc_odesens.solvers.dense_lu import (
    flat_lu_factor,
    flat_lu_solve,
    flat_lu_solve_blocks,
    flat_lu_solve_transpose,
)
from pymc_odesens.solvers.sparse_lu import (
    FACTOR_OK,
    FACTOR_OUT_OF_SPACE,
    PIVOT_TOLERANCE,
    SparseLuPattern,
    grown_sparse_factor,
    matrix_values,
    new_sparse_factor,
    sparse_factor_valid,
    sparse_lu_factor,
    sparse_lu_refactor,
    sparse_lu_solve,
    sparse_lu_solve_blocks,
    sparse_lu_solve_transpose,
)

__all__ = [
    "DENSE",
    "LINEAR_SOLVERS",
    "SPARSE",
    "SPARSE_MAX_DENSITY",
    "SPARSE_MAX_FILL",
    "SPARSE_MIN_STATES",
    "choose_linear_solver",
    "dense_structure",
    "factor_matrix",
    "factor_newton_matrix",
    "full_dense_structure",
    "new_newton_factor",
    "newton_structure",
    "pattern_structure",
    "solve_newton",
    "solve_newton_blocks",
    "solve_newton_transpose",
    "structure_kind",
    "structure_pattern",
    "structure_size",
    "structure_states",
]

DENSE = 0
SPARSE = 1
SPARSE_MIN_STATES = 20
"""``linear_solver="auto"`` stays dense below this many states (measured: the two paths
cost the same at N = 16, the sparse one 1.2x less at N = 24 on the mass-action networks)."""
SPARSE_MAX_DENSITY = 0.3
"""``linear_solver="auto"`` stays dense, without analysing the pattern, when more than this
fraction of ``I - c J`` is structurally non-zero."""
SPARSE_MAX_FILL = 0.4
"""``linear_solver="auto"`` stays dense when the factors would fill more than this fraction
of ``N x N`` (measured: the sparse path wins up to a fill of about 0.5, loses from 0.6)."""

# the structure: a header, then sections (offsets in the header)
STRUCTURE_VERSION = 2
"""Layout of the structure array; stored structures of another layout are not read."""
_KIND, _N, _NNZ, _CAPACITY, _FILL = range(5)
_OFFSETS = 5
_ROWS, _COLS, _A_PTR, _A_IDX, _ENTRY, _DIAGONAL, _ORDER, _INVERSE = range(8)
_SECTIONS = 8
_HEADER = _OFFSETS + _SECTIONS + 1


def _pack(kind: int, n: int, rows, cols, sections: list, fill: int) -> np.ndarray:
    parts = [np.asarray(rows, np.int64), np.asarray(cols, np.int64), *sections]
    parts += [np.zeros(0, np.int64)] * (_SECTIONS - len(parts))
    header = np.zeros(_HEADER, dtype=np.int64)
    header[_KIND], header[_N], header[_NNZ] = kind, n, len(rows)
    header[_FILL] = fill  # estimated nnz(L) + nnz(U); twice that is the first room for them
    header[_CAPACITY] = 2 * fill + n
    offset = _HEADER
    for k, part in enumerate(parts):
        header[_OFFSETS + k] = offset
        offset += part.size
    header[_OFFSETS + _SECTIONS] = offset
    return np.concatenate([header, *[np.asarray(p, np.int64) for p in parts]])


def dense_structure(n: int, rows, cols) -> np.ndarray:
    """The structure of a dense Newton matrix for Jacobian entries at ``(rows, cols)``."""
    return _pack(DENSE, n, rows, cols, [], n * n)


@njit(cache=True)
def full_dense_structure(n):
    """The dense structure for a Jacobian written whole, row by row (the ``jac_y`` kernel's
    ``N x N`` output), built in compiled code; the layout of :func:`dense_structure`."""
    nnz = n * n
    structure = np.zeros(_HEADER + 2 * nnz, dtype=np.int64)
    structure[_KIND], structure[_N], structure[_NNZ] = DENSE, n, nnz
    structure[_FILL], structure[_CAPACITY] = nnz, 2 * nnz + n
    structure[_OFFSETS + _ROWS] = _HEADER
    for k in range(_COLS, _SECTIONS + 1):
        structure[_OFFSETS + k] = _HEADER + nnz
    for k in range(_A_PTR, _SECTIONS + 1):
        structure[_OFFSETS + k] = _HEADER + 2 * nnz
    for e in range(nnz):
        structure[_HEADER + e] = e // n
        structure[_HEADER + nnz + e] = e % n
    return structure


def _sparse_structure(n: int, rows, cols, pattern: SparseLuPattern) -> np.ndarray:
    sections = [
        pattern.a_ptr,
        pattern.a_idx,
        pattern.entry_position,
        pattern.diagonal_position,
        pattern.order,
        pattern.inverse_order,
    ]
    return _pack(SPARSE, n, rows, cols, sections, pattern.fill_estimate)


def structure_kind(structure: np.ndarray) -> str:
    """``"dense"`` or ``"sparse"``."""
    return "sparse" if structure[_KIND] == SPARSE else "dense"


@njit(cache=True)
def structure_size(structure):
    """The number of Jacobian entries (values) a structure expects."""
    return structure[_NNZ]


def choose_linear_solver(choice: str, n: int, nnz: int, fill: int | None = None) -> str:
    """``"dense"`` or ``"sparse"`` for the control ``choice``.

    Parameters
    ----------
    choice : {"auto", "dense", "sparse"}
    n : int
        Size of the Newton matrix.
    nnz : int
        Structural non-zeros of the Jacobian.
    fill : int, optional
        ``nnz(L) + nnz(U)`` estimated by the sparse analysis; without it ``"auto"`` judges
        by size and density alone.
    """
    choice = check_linear_solver(choice)
    if choice != "auto":
        return choice
    if n < SPARSE_MIN_STATES or nnz + n > SPARSE_MAX_DENSITY * n * n:
        return "dense"
    if fill is not None and fill > SPARSE_MAX_FILL * n * n:
        return "dense"
    return "sparse"


def newton_structure(kernels, linear_solver: str, *, transposed: bool = False) -> np.ndarray:
    """The structure for the Newton matrices of a system with compiled ``kernels``.

    Parameters
    ----------
    kernels : pymc_odesens.codegen.CompiledKernels
        Its ``jacobian_pattern`` orders the values of ``jac_y_values`` (and of the
        adjoint's ``adjoint_jac``).
    linear_solver : {"auto", "dense", "sparse"}
    transposed : bool
        For ``I - c J^T`` (the continuous adjoint's backward Newton matrices), with the
        values still in the order of ``J``'s pattern.

    The sparse analysis is computed once per system and stored with its kernels.
    """
    rows, cols = kernels.jacobian_pattern
    if transposed:
        rows, cols = cols, rows
    suffix = f"newton{'_T' if transposed else ''}"
    return pattern_structure(kernels, suffix, rows, cols, linear_solver)


def pattern_structure(kernels, name: str, rows, cols, linear_solver: str) -> np.ndarray:
    """The structure of ``N x N`` matrices with the structural non-zeros ``(rows, cols)``
    (values in that order), chosen by ``linear_solver`` with the rule of
    :func:`choose_linear_solver`.

    The sparse analysis is computed once and stored with the system's ``kernels`` under
    ``name`` (which must identify the pattern among the system's patterns); the structure
    is also kept in memory with the kernels.
    """
    from pymc_odesens.codegen.cache import (
        GENERATION_LOCK,
        artefact_path,
        load_artefact,
        store_artefact,
    )

    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    n = kernels.n_states
    memo = kernels.__dict__.setdefault("_newton_structures", {})
    key = (name, linear_solver)
    structure = memo.get(key)
    if structure is not None:
        return structure
    kind = choose_linear_solver(linear_solver, n, rows.size)
    if kind == "sparse":
        path = artefact_path(kernels.key, f".{name}.v{STRUCTURE_VERSION}.npy")
        with GENERATION_LOCK:
            structure = load_artefact(path, lambda data: _decode_structure(data, n, rows, cols))
            if structure is None:
                structure = _sparse_structure(n, rows, cols, SparseLuPattern(n, rows, cols))
                buffer = io.BytesIO()
                np.save(buffer, structure)
                store_artefact(path, buffer.getvalue())
        kind = choose_linear_solver(linear_solver, n, rows.size, int(structure[_FILL]))
    if kind == "dense":
        structure = dense_structure(n, rows, cols)
    memo[key] = structure
    return structure


def _decode_structure(data: bytes, n: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The stored sparse structure in ``data``, checked to be one for ``(n, rows, cols)``."""
    structure = np.load(io.BytesIO(data), allow_pickle=False)
    if structure.dtype != np.int64 or structure.ndim != 1 or structure.size < _HEADER:
        raise ValueError("not a structure array")
    offsets = structure[_OFFSETS : _OFFSETS + _SECTIONS + 1]
    if (
        structure[_KIND] != SPARSE
        or structure[_N] != n
        or structure[_NNZ] != rows.size
        or offsets[0] != _HEADER
        or np.any(np.diff(offsets) < 0)
        or offsets[-1] != structure.size
        or not np.array_equal(_section_of(structure, _ROWS), rows)
        or not np.array_equal(_section_of(structure, _COLS), cols)
    ):
        raise ValueError(f"not the sparse structure of this {n} x {n} pattern")
    return structure


def _section_of(structure: np.ndarray, k: int) -> np.ndarray:
    return structure[structure[_OFFSETS + k] : structure[_OFFSETS + k + 1]]


# ----------------------------------------------------------------------------- numeric


@njit(cache=True)
def _section(structure, k):
    return structure[structure[_OFFSETS + k] : structure[_OFFSETS + k + 1]]


@njit(cache=True)
def structure_states(structure):
    """The size ``N`` of the matrices of a structure."""
    return structure[_N]


@njit(cache=True)
def structure_pattern(structure):
    """``(rows, cols)`` of the entries a structure expects, in the order of their values
    (views)."""
    return _section(structure, _ROWS), _section(structure, _COLS)


@njit(cache=True)
def new_newton_factor(structure):
    """Storage ``(ints, floats)`` for the factors of the Newton matrices of ``structure``:
    dense, the pivots and the ``N x N`` LU; sparse, see :mod:`~pymc_odesens.solvers.sparse_lu`."""
    n = structure[_N]
    if structure[_KIND] == DENSE:
        return np.zeros(max(n, 1), dtype=np.int64), np.zeros(max(n * n, 1))  # pivots, LU
    return new_sparse_factor(
        n,
        structure[_CAPACITY],
        _section(structure, _ORDER),
        _section(structure, _INVERSE),
        _section(structure, _A_IDX).size,
    )


@njit(cache=True)
def factor_newton_matrix(structure, ints, floats, jac_values, c, stats):
    """Factorise ``I - c J`` (``J``'s entries ``jac_values`` in the structure's order).

    Returns ``(ok, ints, floats)``: ``ok`` is False for a singular matrix; ``ints`` and
    ``floats`` are the storage to use from now on (the same arrays, or larger ones when the
    sparse factors needed more room).
    """
    stats[st.N_LU] += 1
    return _factor(structure, ints, floats, jac_values, -c, 1.0)


@njit(cache=True)
def factor_matrix(structure, ints, floats, values):
    """Factorise the matrix ``A`` whose structural non-zeros are ``values`` (in the
    structure's order; no identity added). Returns ``(ok, ints, floats)`` as
    :func:`factor_newton_matrix`; the solves then solve with ``A``."""
    return _factor(structure, ints, floats, values, 1.0, 0.0)


@njit(cache=True)
def _factor(structure, ints, floats, values, scale, shift):
    """Factorise ``shift I + scale M`` (``M``'s entries ``values``)."""
    n = structure[_N]
    rows = _section(structure, _ROWS)
    cols = _section(structure, _COLS)
    if structure[_KIND] == DENSE:
        for e in range(n * n):
            floats[e] = 0.0
        for e in range(rows.size):
            floats[rows[e] * n + cols[e]] = scale * values[e]
        for i in range(n):
            floats[i * n + i] += shift
        return flat_lu_factor(floats, n, ints), ints, floats
    entry = _section(structure, _ENTRY)
    diagonal = _section(structure, _DIAGONAL)
    a_ptr = _section(structure, _A_PTR)
    a_idx = _section(structure, _A_IDX)
    a_val = matrix_values(ints, floats)
    for e in range(a_val.size):
        a_val[e] = 0.0
    for e in range(entry.size):
        a_val[entry[e]] = scale * values[e]
    for k in range(n):
        a_val[diagonal[k]] += shift
    if sparse_factor_valid(ints):
        code = sparse_lu_refactor(a_ptr, a_idx, a_val, PIVOT_TOLERANCE, ints, floats)
        if code == FACTOR_OK:
            return True, ints, floats
    while True:
        code = sparse_lu_factor(a_ptr, a_idx, a_val, PIVOT_TOLERANCE, ints, floats)
        if code != FACTOR_OUT_OF_SPACE:
            break
        ints, floats = grown_sparse_factor(ints, floats)
        a_val = matrix_values(ints, floats)
    return code == FACTOR_OK, ints, floats


@njit(cache=True, inline="always")
def solve_newton_blocks(structure, ints, floats, b, blocks, work):
    """Solve ``(I - c J) x_k = b_k`` in place for ``blocks`` consecutive blocks of ``b``
    (``work``: at least ``(N, blocks)``)."""
    if structure[_KIND] == DENSE:
        flat_lu_solve_blocks(floats, structure[_N], ints, b, blocks, work)
    else:
        sparse_lu_solve_blocks(ints, floats, b, blocks, work)


@njit(cache=True, inline="always")
def solve_newton(structure, ints, floats, b, work):
    """Solve ``(I - c J) x = b`` in place (``work``: N)."""
    if structure[_KIND] == DENSE:
        flat_lu_solve(floats, structure[_N], ints, b, 0)
    else:
        sparse_lu_solve(ints, floats, b, 0, work)


@njit(cache=True, inline="always")
def solve_newton_transpose(structure, ints, floats, b, work):
    """Solve ``(I - c J)^T x = b`` in place (``work``: N)."""
    if structure[_KIND] == DENSE:
        flat_lu_solve_transpose(floats, structure[_N], ints, b)
    else:
        sparse_lu_solve_transpose(ints, floats, b, work)
