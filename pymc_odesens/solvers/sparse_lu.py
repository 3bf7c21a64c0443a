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
    "minimum_degree_ordering",
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


@njit(cache=True)
def _depth_first(j, l_ptr, l_idx, top, xi, nodes, positions, pinv, mark, stamp):
    """Depth-first search from row ``j`` in the graph of ``L``; finished nodes are pushed
    onto ``xi[:top]`` from the end, which leaves them in topological order."""
    head = 0
    nodes[0] = j
    while head >= 0:
        j = nodes[head]
        column = pinv[j]
        if mark[j] != stamp:
            mark[j] = stamp
            positions[head] = 0 if column < 0 else l_ptr[column]
        done = True
        end = 0 if column < 0 else l_ptr[column + 1]
        for p in range(positions[head], end):
            i = l_idx[p]
            if mark[i] == stamp:
                continue
            positions[head] = p
            head += 1
            nodes[head] = i
            done = False
            break
        if done:
            head -= 1
            top -= 1
            xi[top] = j
    return top


@njit(cache=True)
def sparse_lu_factor(
    n,
    a_ptr,
    a_idx,
    a_val,
    tolerance,
    l_ptr,
    l_idx,
    l_val,
    u_ptr,
    u_idx,
    u_val,
    pinv,
    x,
    xi,
    nodes,
    positions,
    mark,
):
    """Factorise ``P A = L U`` with threshold partial pivoting (left-looking).

    ``A`` in compressed columns (``a_ptr``, ``a_idx``, ``a_val``). On success ``L`` (unit
    diagonal stored first in each column) and ``U`` (diagonal stored last) are in
    compressed columns with row indices in pivot positions, each ``U`` column in
    topological order (the order :func:`sparse_lu_refactor` needs), and ``pinv[i]`` is the
    pivot position of row ``i``. ``x`` (n, zero on entry and exit), ``xi``, ``nodes``,
    ``positions`` and ``mark`` (n each) are work space.

    Returns FACTOR_OK, FACTOR_SINGULAR or FACTOR_OUT_OF_SPACE.
    """
    lnz = 0
    unz = 0
    for i in range(n):
        pinv[i] = -1
        mark[i] = -1
    for k in range(n):
        l_ptr[k] = lnz
        u_ptr[k] = unz
        if lnz + n - k > l_idx.size or unz + n - k > u_idx.size:
            for i in range(n):
                x[i] = 0.0
            return FACTOR_OUT_OF_SPACE
        top = n
        for p in range(a_ptr[k], a_ptr[k + 1]):
            j = a_idx[p]
            if mark[j] != k:
                top = _depth_first(j, l_ptr, l_idx, top, xi, nodes, positions, pinv, mark, k)
        for p in range(a_ptr[k], a_ptr[k + 1]):
            x[a_idx[p]] = a_val[p]
        for px in range(top, n):
            j = xi[px]
            column = pinv[j]
            if column < 0:
                continue
            xj = x[j]
            for p in range(l_ptr[column] + 1, l_ptr[column + 1]):
                x[l_idx[p]] -= l_val[p] * xj
        pivot_row = -1
        largest = -1.0
        for p in range(top, n):
            i = xi[p]
            if pinv[i] < 0:
                size = abs(x[i])
                if size > largest:
                    largest = size
                    pivot_row = i
            else:
                u_idx[unz] = pinv[i]
                u_val[unz] = x[i]
                unz += 1
        if pivot_row < 0 or not (largest > 0.0) or not np.isfinite(largest):
            for p in range(top, n):
                x[xi[p]] = 0.0
            return FACTOR_SINGULAR
        if pinv[k] < 0 and mark[k] == k and abs(x[k]) >= tolerance * largest:
            pivot_row = k
        pivot = x[pivot_row]
        u_idx[unz] = k
        u_val[unz] = pivot
        unz += 1
        pinv[pivot_row] = k
        l_idx[lnz] = pivot_row
        l_val[lnz] = 1.0
        lnz += 1
        for p in range(top, n):
            i = xi[p]
            if pinv[i] < 0:
                l_idx[lnz] = i
                l_val[lnz] = x[i] / pivot
                lnz += 1
            x[i] = 0.0
    l_ptr[n] = lnz
    u_ptr[n] = unz
    for p in range(lnz):
        l_idx[p] = pinv[l_idx[p]]
    return FACTOR_OK


@njit(cache=True)
def sparse_lu_refactor(
    n, a_ptr, a_idx, a_val, tolerance, l_ptr, l_idx, l_val, u_ptr, u_idx, u_val, pinv, x
):
    """Factorise a matrix of the same pattern with the pivots and patterns of the last
    :func:`sparse_lu_factor`; FACTOR_SINGULAR when a pivot falls below ``tolerance`` times
    the largest entry of its ``L`` column (then factorise again with pivoting)."""
    for k in range(n):
        for p in range(a_ptr[k], a_ptr[k + 1]):
            x[pinv[a_idx[p]]] = a_val[p]
        last = u_ptr[k + 1] - 1
        for p in range(u_ptr[k], last):
            j = u_idx[p]
            xj = x[j]
            u_val[p] = xj
            x[j] = 0.0
            for q in range(l_ptr[j] + 1, l_ptr[j + 1]):
                x[l_idx[q]] -= l_val[q] * xj
        pivot = x[k]
        x[k] = 0.0
        u_val[last] = pivot
        largest = 0.0
        for q in range(l_ptr[k] + 1, l_ptr[k + 1]):
            largest = max(largest, abs(x[l_idx[q]]))
        if not (abs(pivot) > 0.0 and abs(pivot) >= tolerance * largest) or not np.isfinite(
            pivot + largest
        ):
            for i in range(n):
                x[i] = 0.0
            return FACTOR_SINGULAR
        for q in range(l_ptr[k] + 1, l_ptr[k + 1]):
            i = l_idx[q]
            l_val[q] = x[i] / pivot
            x[i] = 0.0
    return FACTOR_OK


@njit(cache=True)
def sparse_lu_solve(l_ptr, l_idx, l_val, u_ptr, u_idx, u_val, row_map, order, b, offset, work):
    """Solve ``A x = b[offset:offset+n]`` in place.

    ``row_map[i]`` is the pivot position of row ``i`` of ``A`` and ``order[k]`` the
    column of ``A`` factorised k-th (:func:`row_positions` and the analysis' ordering);
    ``work`` (n) is work space.
    """
    n = order.size
    for i in range(n):
        work[row_map[i]] = b[offset + i]
    for k in range(n):
        wk = work[k]
        if wk != 0.0:
            for p in range(l_ptr[k] + 1, l_ptr[k + 1]):
                work[l_idx[p]] -= l_val[p] * wk
    for k in range(n - 1, -1, -1):
        last = u_ptr[k + 1] - 1
        wk = work[k] / u_val[last]
        work[k] = wk
        if wk != 0.0:
            for p in range(u_ptr[k], last):
                work[u_idx[p]] -= u_val[p] * wk
    for k in range(n):
        b[offset + order[k]] = work[k]


@njit(cache=True)
def sparse_lu_solve_transpose(l_ptr, l_idx, l_val, u_ptr, u_idx, u_val, row_map, order, b, work):
    """Solve ``A^T x = b`` in place (``A^T = Q U^T L^T P Q^T`` in the factorisation's terms)."""
    n = order.size
    for k in range(n):
        last = u_ptr[k + 1] - 1
        s = b[order[k]]
        for p in range(u_ptr[k], last):
            s -= u_val[p] * work[u_idx[p]]
        work[k] = s / u_val[last]
    for k in range(n - 1, -1, -1):
        s = work[k]
        for p in range(l_ptr[k] + 1, l_ptr[k + 1]):
            s -= l_val[p] * work[l_idx[p]]
        work[k] = s
    for i in range(n):
        b[i] = work[row_map[i]]


@njit(cache=True)
def sparse_lu_solve_blocks(
    l_ptr, l_idx, l_val, u_ptr, u_idx, u_val, row_map, order, b, blocks, work
):
    """Solve ``A x_c = b_c`` in place for the ``blocks`` consecutive blocks of ``b``.

    The blocks are gathered into the columns of ``work`` (at least ``(n, blocks)``) so
    that the innermost loops run over the blocks with unit stride.
    """
    n = order.size
    if blocks == 1:
        sparse_lu_solve(l_ptr, l_idx, l_val, u_ptr, u_idx, u_val, row_map, order, b, 0, work[:, 0])
        return
    for c in range(blocks):
        base = c * n
        for i in range(n):
            work[row_map[i], c] = b[base + i]
    for k in range(n):
        for p in range(l_ptr[k] + 1, l_ptr[k + 1]):
            m = l_val[p]
            row = l_idx[p]
            for c in range(blocks):
                work[row, c] -= m * work[k, c]
    for k in range(n - 1, -1, -1):
        last = u_ptr[k + 1] - 1
        inverse = 1.0 / u_val[last]
        for c in range(blocks):
            work[k, c] *= inverse
        for p in range(u_ptr[k], last):
            m = u_val[p]
            row = u_idx[p]
            for c in range(blocks):
                work[row, c] -= m * work[k, c]
    for c in range(blocks):
        base = c * n
        for k in range(n):
            b[base + order[k]] = work[k, c]
