"""Sparse LU factorisation on a static pattern, as KLU does it (numba).

The Newton matrices ``I - c J_y`` of one model all share one sparsity pattern, known when
its kernels are generated. So, as in KLU (Davis and Palamadai Natarajan 2010):

1. **Symbolic analysis, once per model** (:func:`analyse_pattern`, Python): the pattern of
   the matrix, a fill-reducing ordering (minimum degree on the pattern of ``A + A^T``,
   applied to rows and columns alike), the matrix in compressed columns in that order and
   where each entry of ``J_y`` goes in it. It is stored with the model's kernels.
2. **Factorisation with partial pivoting** (:func:`sparse_lu_factor`): left-looking
   Gilbert-Peierls LU (each column a sparse triangular solve whose non-zeros are found by
   a depth-first search in the graph of ``L``), the pivot of each column chosen among the
   rows not yet pivotal by threshold partial pivoting: the diagonal when it is at least
   :data:`PIVOT_TOLERANCE` times the largest candidate, else the largest. The patterns of
   ``L`` and ``U`` are found as it goes; structurally or numerically awkward matrices
   (zero or tiny diagonals) are handled by the row exchanges.
3. **Refactorisation** (:func:`sparse_lu_refactor`): the next matrix with the same pattern
   is factorised with the pivot sequence and the ``L`` and ``U`` patterns of the last
   factorisation, without any search: its cost is the factorisation's floating-point
   work. If a pivot is no longer acceptable (below the same threshold against its column),
   the caller factorises again with pivoting.

Solves with ``A`` and with ``A^T`` (the adjoints), for one vector or for a block of vectors
(the forward sensitivities' columns), cost ``nnz(L) + nnz(U)`` each. No array of size
``N x N`` exists anywhere.
"""

from __future__ import annotations

import heapq

import numpy as np
from numba import njit

__all__ = [
    "FACTOR_OK",
    "FACTOR_OUT_OF_SPACE",
    "FACTOR_SINGULAR",
    "PIVOT_TOLERANCE",
    "SparseLuPattern",
    "analyse_pattern",
    "grown_sparse_factor",
    "matrix_values",
    "minimum_degree_ordering",
    "new_sparse_factor",
    "sparse_factor_pivots",
    "sparse_factor_sizes",
    "sparse_factor_valid",
    "sparse_lu_factor",
    "sparse_lu_refactor",
    "sparse_lu_solve",
    "sparse_lu_solve_blocks",
    "sparse_lu_solve_transpose",
]

FACTOR_OK = 0
FACTOR_SINGULAR = 1
"""No acceptable pivot: the matrix is singular (or, for a refactorisation, the old pivot
sequence is unstable for it)."""
FACTOR_OUT_OF_SPACE = 2
"""The ``L`` or ``U`` storage is too small: enlarge it and factorise again."""

PIVOT_TOLERANCE = 0.1
"""Threshold partial pivoting: the diagonal is kept as pivot while it is at least this
fraction of the largest candidate of its column (UMFPACK's default for symmetric patterns;
KLU uses 0.001). A refactorisation accepts the old pivot on the same condition."""


# ----------------------------------------------------------------------------- analysis


def minimum_degree_ordering(n: int, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, int]:
    """A fill-reducing ordering of the graph of ``A + A^T`` by minimum degree.

    Eliminates, one at a time, a node of smallest current degree (ties: the smallest
    index) and joins its neighbours into a clique, as symmetric elimination does.

    Returns
    -------
    order : numpy.ndarray of int64, shape (n,)
        ``order[k]`` is the index eliminated k-th.
    fill : int
        ``nnz(L) + nnz(U)`` of symmetric elimination in this order (diagonal included).
    """
    neighbours = [set() for _ in range(n)]
    for r, c in zip(rows.tolist(), cols.tolist()):
        if r != c:
            neighbours[r].add(c)
            neighbours[c].add(r)
    heap = [(len(neighbours[i]), i) for i in range(n)]
    heapq.heapify(heap)
    eliminated = [False] * n
    order = []
    off_diagonal = 0
    while heap:
        degree, i = heapq.heappop(heap)
        if eliminated[i] or degree != len(neighbours[i]):
            continue  # a stale entry: the node's degree has changed since
        eliminated[i] = True
        order.append(i)
        clique = neighbours[i]
        off_diagonal += len(clique)
        for j in clique:
            adjacent = neighbours[j]
            adjacent.discard(i)
            adjacent |= clique
            adjacent.discard(j)
            heapq.heappush(heap, (len(adjacent), j))
        neighbours[i] = set()
    return np.array(order, dtype=np.int64), 2 * off_diagonal + n


class SparseLuPattern:
    """The symbolic analysis of a square pattern (see the module docstring).

    Parameters
    ----------
    n : int
    rows, cols : array_like of int
        The structurally non-zero entries ``(rows[e], cols[e])`` (no duplicates); the
        numerical values come in this order.
    diagonal : bool
        Add the diagonal to the pattern (the identity of ``I - c J``).

    Attributes
    ----------
    n : int
    order : numpy.ndarray of int64
        The fill-reducing ordering ``q``: row and column ``k`` of the factorised matrix
        are row and column ``q[k]`` of the matrix.
    a_ptr, a_idx : numpy.ndarray of int64
        The reordered pattern in compressed columns (``a_idx`` in reordered rows).
    entry_position : numpy.ndarray of int64
        Position in the reordered values of each entry ``e``.
    diagonal_position : numpy.ndarray of int64
        Position of the diagonal entry of each reordered column (-1 if absent).
    fill_estimate : int
        ``nnz(L) + nnz(U)`` of symmetric elimination in this order (the storage first
        allocated for the factors).
    """

    def __init__(self, n: int, rows, cols, *, diagonal: bool = True) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        if rows.shape != cols.shape or rows.ndim != 1:
            raise ValueError("rows and cols must be 1-d arrays of the same length")
        if rows.size and (rows.min() < 0 or cols.min() < 0 or max(rows.max(), cols.max()) >= n):
            raise ValueError(f"pattern entries must lie in [0, {n})")
        keys = rows * n + cols
        if np.unique(keys).size != keys.size:
            raise ValueError("the pattern has duplicate entries")
        self.n = int(n)
        all_rows, all_cols = rows, cols
        if diagonal:
            missing = np.setdiff1d(np.arange(n, dtype=np.int64), rows[rows == cols])
            all_rows = np.concatenate((rows, missing))
            all_cols = np.concatenate((cols, missing))
        self.order, self.fill_estimate = minimum_degree_ordering(n, all_rows, all_cols)
        inverse = np.empty(n, dtype=np.int64)
        inverse[self.order] = np.arange(n, dtype=np.int64)
        self.inverse_order = inverse
        new_rows, new_cols = inverse[all_rows], inverse[all_cols]
        by_column = np.lexsort((new_rows, new_cols))
        position = np.empty(by_column.size, dtype=np.int64)
        position[by_column] = np.arange(by_column.size, dtype=np.int64)
        self.a_idx = new_rows[by_column]
        self.a_ptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(self.a_ptr, new_cols + 1, 1)
        self.a_ptr = np.cumsum(self.a_ptr)
        self.entry_position = position[: rows.size].copy()
        self.diagonal_position = np.full(n, -1, dtype=np.int64)
        on_diagonal = new_rows == new_cols
        self.diagonal_position[new_cols[on_diagonal]] = position[on_diagonal]

    @property
    def nnz(self) -> int:
        """Entries of the (reordered) pattern, the diagonal included if added."""
        return int(self.a_idx.size)


def analyse_pattern(n: int, rows, cols, *, diagonal: bool = True) -> SparseLuPattern:
    """The symbolic analysis of the pattern ``(rows, cols)`` (see :class:`SparseLuPattern`)."""
    return SparseLuPattern(n, rows, cols, diagonal=diagonal)


# ----------------------------------------------------------------------------- numeric
#
# The factors live in two flat arrays, ``ints`` (int64) and ``floats`` (float64), so that
# compiled callers pass two arrays instead of a dozen (each array passed costs atomic
# reference counting in numba: with a tuple of 17 arrays that counting took 40 % of a small
# stiff solve). ``ints`` starts with a header of section offsets:

_N, _CAPACITY, _VALID = 0, 1, 2  # size, room for L and U, factors usable by refactorisation
_L_PTR, _L_IDX, _U_PTR, _U_IDX = 3, 4, 5, 6  # in ints: L and U in compressed columns
_PINV, _ROW_MAP, _ORDER, _INVERSE = 7, 8, 9, 10  # pivots; row -> pivot position; q; q^-1
_XI, _NODES, _POSITIONS, _MARK = 11, 12, 13, 14  # depth-first search work space
_L_VAL, _U_VAL, _X, _A_VAL = 15, 16, 17, 18  # in floats: L, U, work vector x, the matrix
_HEADER = 19


@njit(cache=True)
def new_sparse_factor(n, capacity, order, inverse_order, matrix_size):
    """Storage ``(ints, floats)`` for the factors of an ``n x n`` matrix factorised in the
    ``order`` of the analysis (``inverse_order`` its inverse), with room for ``capacity``
    entries in each of ``L`` and ``U`` and for the ``matrix_size`` values of the matrix
    itself (:func:`matrix_values`)."""
    capacity = max(capacity, 1)
    sizes = (n + 1, capacity, n + 1, capacity, n, n, n, n, n, n, n, n)
    ints = np.zeros(_HEADER + sum(sizes), dtype=np.int64)
    offset = _HEADER
    for k in range(len(sizes)):
        ints[_L_PTR + k] = offset
        offset += sizes[k]
    ints[_N] = n
    ints[_CAPACITY] = capacity
    for k in range(n):
        ints[ints[_ORDER] + k] = order[k]
        ints[ints[_INVERSE] + k] = inverse_order[k]
    floats = np.zeros(2 * capacity + n + matrix_size)
    ints[_L_VAL] = 0
    ints[_U_VAL] = capacity
    ints[_X] = 2 * capacity
    ints[_A_VAL] = 2 * capacity + n
    return ints, floats


@njit(cache=True)
def matrix_values(ints, floats):
    """The room in ``floats`` for the values of the matrix to factorise (a view)."""
    start = ints[_A_VAL]
    return floats[start : floats.size]


@njit(cache=True)
def grown_sparse_factor(ints, floats):
    """The storage with twice the room for ``L`` and ``U`` (the ordering and the matrix's
    values kept)."""
    n = ints[_N]
    order = ints[ints[_ORDER] : ints[_ORDER] + n]
    inverse = ints[ints[_INVERSE] : ints[_INVERSE] + n]
    values = matrix_values(ints, floats)
    new_ints, new_floats = new_sparse_factor(n, 2 * ints[_CAPACITY], order, inverse, values.size)
    matrix_values(new_ints, new_floats)[:] = values
    return new_ints, new_floats


@njit(cache=True)
def sparse_factor_valid(ints):
    """True when the storage holds factors a refactorisation may reuse."""
    return ints[_VALID] == 1


@njit(cache=True)
def _depth_first(j, ints, top, stamp):
    """Depth-first search from row ``j`` in the graph of ``L``; finished nodes are pushed
    onto the output stack ``xi`` from ``top`` down, which leaves them in topological order."""
    l_ptr, l_idx, pinv = ints[_L_PTR], ints[_L_IDX], ints[_PINV]
    xi, nodes, positions, mark = ints[_XI], ints[_NODES], ints[_POSITIONS], ints[_MARK]
    head = 0
    ints[nodes] = j
    while head >= 0:
        j = ints[nodes + head]
        column = ints[pinv + j]
        if ints[mark + j] != stamp:
            ints[mark + j] = stamp
            ints[positions + head] = 0 if column < 0 else ints[l_ptr + column]
        done = True
        end = 0 if column < 0 else ints[l_ptr + column + 1]
        for p in range(ints[positions + head], end):
            i = ints[l_idx + p]
            if ints[mark + i] == stamp:
                continue
            ints[positions + head] = p
            head += 1
            ints[nodes + head] = i
            done = False
            break
        if done:
            head -= 1
            top -= 1
            ints[xi + top] = j
    return top


@njit(cache=True)
def sparse_lu_factor(a_ptr, a_idx, a_val, tolerance, ints, floats):
    """Factorise ``P A = L U`` with threshold partial pivoting (left-looking).

    ``A`` (the reordered matrix of the analysis) in compressed columns (``a_ptr``,
    ``a_idx``, ``a_val``). On success ``L`` (unit diagonal stored first in each column) and
    ``U`` (diagonal stored last) are in compressed columns with row indices in pivot
    positions, each ``U`` column in topological order (the order
    :func:`sparse_lu_refactor` needs), and the row map of the solves is set.

    Returns FACTOR_OK, FACTOR_SINGULAR or FACTOR_OUT_OF_SPACE.
    """
    n = ints[_N]
    l_ptr, l_idx, u_ptr, u_idx = ints[_L_PTR], ints[_L_IDX], ints[_U_PTR], ints[_U_IDX]
    pinv, xi, mark = ints[_PINV], ints[_XI], ints[_MARK]
    l_val, u_val, x = ints[_L_VAL], ints[_U_VAL], ints[_X]
    capacity = ints[_CAPACITY]
    ints[_VALID] = 0
    lnz = 0
    unz = 0
    for i in range(n):
        ints[pinv + i] = -1
        ints[mark + i] = -1
    for k in range(n):
        ints[l_ptr + k] = lnz
        ints[u_ptr + k] = unz
        if lnz + n - k > capacity or unz + n - k > capacity:
            for i in range(n):
                floats[x + i] = 0.0
            return FACTOR_OUT_OF_SPACE
        top = n
        for p in range(a_ptr[k], a_ptr[k + 1]):
            j = a_idx[p]
            if ints[mark + j] != k:
                top = _depth_first(j, ints, top, k)
        for p in range(a_ptr[k], a_ptr[k + 1]):
            floats[x + a_idx[p]] = a_val[p]
        for px in range(top, n):
            j = ints[xi + px]
            column = ints[pinv + j]
            if column < 0:
                continue
            xj = floats[x + j]
            for p in range(ints[l_ptr + column] + 1, ints[l_ptr + column + 1]):
                floats[x + ints[l_idx + p]] -= floats[l_val + p] * xj
        pivot_row = -1
        largest = -1.0
        for p in range(top, n):
            i = ints[xi + p]
            if ints[pinv + i] < 0:
                size = abs(floats[x + i])
                if size > largest:
                    largest = size
                    pivot_row = i
            else:
                ints[u_idx + unz] = ints[pinv + i]
                floats[u_val + unz] = floats[x + i]
                unz += 1
        if pivot_row < 0 or not (largest > 0.0) or not np.isfinite(largest):
            for p in range(top, n):
                floats[x + ints[xi + p]] = 0.0
            return FACTOR_SINGULAR
        if ints[pinv + k] < 0 and abs(floats[x + k]) >= tolerance * largest:
            pivot_row = k
        pivot = floats[x + pivot_row]
        ints[u_idx + unz] = k
        floats[u_val + unz] = pivot
        unz += 1
        ints[pinv + pivot_row] = k
        ints[l_idx + lnz] = pivot_row
        floats[l_val + lnz] = 1.0
        lnz += 1
        for p in range(top, n):
            i = ints[xi + p]
            if ints[pinv + i] < 0:
                ints[l_idx + lnz] = i
                floats[l_val + lnz] = floats[x + i] / pivot
                lnz += 1
            floats[x + i] = 0.0
    ints[l_ptr + n] = lnz
    ints[u_ptr + n] = unz
    for p in range(lnz):
        ints[l_idx + p] = ints[pinv + ints[l_idx + p]]
    row_map, inverse = ints[_ROW_MAP], ints[_INVERSE]
    for i in range(n):
        ints[row_map + i] = ints[pinv + ints[inverse + i]]
    ints[_VALID] = 1
    return FACTOR_OK


@njit(cache=True)
def sparse_lu_refactor(a_ptr, a_idx, a_val, tolerance, ints, floats):
    """Factorise a matrix of the same pattern with the pivots and patterns of the last
    :func:`sparse_lu_factor`; FACTOR_SINGULAR when a pivot falls below ``tolerance`` times
    the largest entry of its ``L`` column (then factorise again with pivoting)."""
    n = ints[_N]
    l_ptr, l_idx, u_ptr, u_idx = ints[_L_PTR], ints[_L_IDX], ints[_U_PTR], ints[_U_IDX]
    pinv = ints[_PINV]
    l_val, u_val, x = ints[_L_VAL], ints[_U_VAL], ints[_X]
    for k in range(n):
        for p in range(a_ptr[k], a_ptr[k + 1]):
            floats[x + ints[pinv + a_idx[p]]] = a_val[p]
        last = ints[u_ptr + k + 1] - 1
        for p in range(ints[u_ptr + k], last):
            j = ints[u_idx + p]
            xj = floats[x + j]
            floats[u_val + p] = xj
            floats[x + j] = 0.0
            for q in range(ints[l_ptr + j] + 1, ints[l_ptr + j + 1]):
                floats[x + ints[l_idx + q]] -= floats[l_val + q] * xj
        pivot = floats[x + k]
        floats[x + k] = 0.0
        floats[u_val + last] = pivot
        largest = 0.0
        for q in range(ints[l_ptr + k] + 1, ints[l_ptr + k + 1]):
            largest = max(largest, abs(floats[x + ints[l_idx + q]]))
        if not (abs(pivot) > 0.0 and abs(pivot) >= tolerance * largest) or not np.isfinite(
            pivot + largest
        ):
            for i in range(n):
                floats[x + i] = 0.0
            ints[_VALID] = 0
            return FACTOR_SINGULAR
        for q in range(ints[l_ptr + k] + 1, ints[l_ptr + k + 1]):
            i = ints[l_idx + q]
            floats[l_val + q] = floats[x + i] / pivot
            floats[x + i] = 0.0
    return FACTOR_OK


@njit(cache=True, inline="always")
def sparse_lu_solve(ints, floats, b, offset, work):
    """Solve ``A x = b[offset:offset+n]`` in place for the matrix ``A`` of the analysis (in
    its own numbering: the ordering and the pivots are applied here); ``work`` (n)."""
    n = ints[_N]
    l_ptr, l_idx, u_ptr, u_idx = ints[_L_PTR], ints[_L_IDX], ints[_U_PTR], ints[_U_IDX]
    row_map, order = ints[_ROW_MAP], ints[_ORDER]
    l_val, u_val = ints[_L_VAL], ints[_U_VAL]
    for i in range(n):
        work[ints[row_map + i]] = b[offset + i]
    for k in range(n):
        wk = work[k]
        if wk != 0.0:
            for p in range(ints[l_ptr + k] + 1, ints[l_ptr + k + 1]):
                work[ints[l_idx + p]] -= floats[l_val + p] * wk
    for k in range(n - 1, -1, -1):
        last = ints[u_ptr + k + 1] - 1
        wk = work[k] / floats[u_val + last]
        work[k] = wk
        if wk != 0.0:
            for p in range(ints[u_ptr + k], last):
                work[ints[u_idx + p]] -= floats[u_val + p] * wk
    for k in range(n):
        b[offset + ints[order + k]] = work[k]


@njit(cache=True)
def sparse_lu_solve_transpose(ints, floats, b, work):
    """Solve ``A^T x = b`` in place (``A^T = Q U^T L^T P Q^T`` in the factorisation's terms)."""
    n = ints[_N]
    l_ptr, l_idx, u_ptr, u_idx = ints[_L_PTR], ints[_L_IDX], ints[_U_PTR], ints[_U_IDX]
    row_map, order = ints[_ROW_MAP], ints[_ORDER]
    l_val, u_val = ints[_L_VAL], ints[_U_VAL]
    for k in range(n):
        last = ints[u_ptr + k + 1] - 1
        s = b[ints[order + k]]
        for p in range(ints[u_ptr + k], last):
            s -= floats[u_val + p] * work[ints[u_idx + p]]
        work[k] = s / floats[u_val + last]
    for k in range(n - 1, -1, -1):
        s = work[k]
        for p in range(ints[l_ptr + k] + 1, ints[l_ptr + k + 1]):
            s -= floats[l_val + p] * work[ints[l_idx + p]]
        work[k] = s
    for i in range(n):
        b[i] = work[ints[row_map + i]]


@njit(cache=True, inline="always")
def sparse_lu_solve_blocks(ints, floats, b, blocks, work):
    """Solve ``A x_c = b_c`` in place for the ``blocks`` consecutive blocks of ``b``.

    The blocks are gathered into the columns of ``work`` (at least ``(n, blocks)``) so
    that the innermost loops run over the blocks with unit stride.
    """
    n = ints[_N]
    l_ptr, l_idx, u_ptr, u_idx = ints[_L_PTR], ints[_L_IDX], ints[_U_PTR], ints[_U_IDX]
    row_map, order = ints[_ROW_MAP], ints[_ORDER]
    l_val, u_val = ints[_L_VAL], ints[_U_VAL]
    for c in range(blocks):
        base = c * n
        for i in range(n):
            work[ints[row_map + i], c] = b[base + i]
    for k in range(n):
        for p in range(ints[l_ptr + k] + 1, ints[l_ptr + k + 1]):
            m = floats[l_val + p]
            row = ints[l_idx + p]
            for c in range(blocks):
                work[row, c] -= m * work[k, c]
    for k in range(n - 1, -1, -1):
        last = ints[u_ptr + k + 1] - 1
        inverse = 1.0 / floats[u_val + last]
        for c in range(blocks):
            work[k, c] *= inverse
        for p in range(ints[u_ptr + k], last):
            m = floats[u_val + p]
            row = ints[u_idx + p]
            for c in range(blocks):
                work[row, c] -= m * work[k, c]
    for c in range(blocks):
        base = c * n
        for k in range(n):
            b[base + ints[order + k]] = work[k, c]


@njit(cache=True)
def sparse_factor_sizes(ints):
    """``(nnz(L), nnz(U), capacity)`` of factorised storage (for reports and tests)."""
    n = ints[_N]
    return ints[ints[_L_PTR] + n], ints[ints[_U_PTR] + n], ints[_CAPACITY]


@njit(cache=True)
def sparse_factor_pivots(ints):
    """The pivot position of each row of the reordered matrix (a copy)."""
    n = ints[_N]
    return ints[ints[_PINV] : ints[_PINV] + n].copy()
