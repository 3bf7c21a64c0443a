"""Linear conservation laws: constant vectors ``c`` with ``c . f(t, y, p) = 0`` identically.

Along every trajectory ``c . y(t) = c . y0``: mass-action networks conserve the totals of
their enzymes and scaffolds. ``M`` independent laws make ``J_y`` singular (its left null
space contains them), so a steady state is unique only within the set ``C y = T`` of the
initial state's totals ``T = C y0``. Steady-state solvers work on that set
(:mod:`pymc_odesens.sensitivity.steady_state`).

The laws are found exactly, in rational arithmetic:

- from the stoichiometry ``S`` (N x R, ``f = S v(y, p)``) when the system carries one
  (``system.stoichiometry``, set e.g. by a model importer): the left null space of ``S``,
  checked against the right-hand side;
- otherwise from the structure of the right-hand side: each ``f_i`` is split into terms
  ``a_ij g_j(t, y, p)`` with numeric coefficients ``a_ij`` (the reaction rates of a
  mass-action network are such ``g_j``); the left null space of the term matrix ``A`` gives
  combinations in which every term cancels, so ``sum_i c_i f_i`` is identically zero.

Both are then cross-checked numerically: the common left null space of ``J_y`` at random
points. A null vector that the exact laws do not explain is rationalised and accepted only if
sympy proves ``sum_i c_i f_i = 0``; otherwise it is counted in
:attr:`ConservationLaws.unresolved` (laws whose coefficients depend on parameters, such as
compartment volumes, are of that kind), so that a singular steady-state Jacobian can be
explained in an error message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp
from sympy import QQ
from sympy.polys.matrices import DomainMatrix

__all__ = ["ConservationLaws", "find_conservation_laws", "validate_stoichiometry"]

_EXPAND_OPTIONS = dict(
    deep=False, mul=True, multinomial=False, power_exp=False, power_base=False, log=False
)
_NULL_RELATIVE_TOLERANCE = 1e-9  # singular values below this x the largest count as zero
_RATIONAL_TOLERANCE = 1e-8  # entries of numerical null vectors rationalised to this


@dataclass(frozen=True, eq=False)
class ConservationLaws:
    """The linear conservation laws ``C y(t) = C y0`` of a system.

    Attributes
    ----------
    matrix : numpy.ndarray, shape (M, N)
        ``C`` in reduced row echelon form: ``matrix[:, dependent]`` is the identity.
    exact : sympy.Matrix, shape (M, N)
        The same matrix in rational numbers.
    dependent : numpy.ndarray of int64, shape (M,)
        One state per law (the pivot of its row): the state that the law determines from
        the others. Steady-state solvers replace these rows of ``f = 0`` by ``C y = T``.
    source : {"stoichiometry", "structure"}
        Where the laws were found.
    states : tuple of str
        State names (for printing the laws).
    unresolved : int
        Left null vectors of ``J_y`` at random points that the laws do not explain and that
        are not provably conserved (0 in the usual case).
    """

    matrix: np.ndarray
    exact: sp.Matrix
    dependent: np.ndarray
    source: str
    states: tuple
    unresolved: int = 0

    @property
    def n_laws(self) -> int:
        """Number M of independent laws."""
        return int(self.matrix.shape[0])

    def totals(self, y0) -> np.ndarray:
        """The conserved totals ``T = C y0`` (shape (M,))."""
        return self.matrix @ np.asarray(y0, dtype=float)

    def describe(self) -> list[str]:
        """Each law as text, e.g. ``"E + ES = const"``."""
        lines = []
        for r in range(self.n_laws):
            terms = []
            for j, name in enumerate(self.states):
                c = self.exact[r, j]
                if c == 0:
                    continue
                sign = "-" if c < 0 else "+"
                magnitude = "" if abs(c) == 1 else f"{abs(c)}*"
                terms.append(f"{sign} {magnitude}{name}")
            text = " ".join(terms)
            lines.append((text[2:] if text.startswith("+ ") else text) + " = const")
        return lines

    def __repr__(self) -> str:
        laws = "; ".join(self.describe()) or "none"
        return f"ConservationLaws({self.n_laws} from {self.source}: {laws})"


def validate_stoichiometry(value, n_states: int) -> sp.Matrix | None:
    """``value`` as an exact (N, R) sympy matrix of numbers, or None.

    Raises
    ------
    ValueError, TypeError
        Wrong shape, non-finite or symbolic entries (named).
    """
    if value is None:
        return None
    try:
        rows = [list(row) for row in (value.tolist() if hasattr(value, "tolist") else value)]
    except TypeError:
        raise TypeError(
            f"stoichiometry must be a 2-d array of numbers (N={n_states} states x R "
            f"reactions), got {type(value).__name__}"
        ) from None
    if len(rows) != n_states or len({len(r) for r in rows}) > 1:
        shape = (len(rows), *sorted({len(r) for r in rows}))
        raise ValueError(
            f"stoichiometry must have shape ({n_states}, R): one row per state; got {shape}"
        )
    exact = []
    for i, row in enumerate(rows):
        exact_row = []
        for r, entry in enumerate(row):
            number = _exact_number(entry)
            if number is None:
                raise ValueError(
                    f"stoichiometry[{i}, {r}] must be a finite number, got {entry!r} (fold "
                    "symbolic factors such as compartment volumes into the rates)"
                )
            exact_row.append(number)
        exact.append(exact_row)
    return sp.Matrix(exact) if exact and exact[0] else sp.zeros(n_states, 0)


def _exact_number(value) -> sp.Rational | None:
    """``value`` as an exact rational (floats exactly, as their binary value), else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return sp.Integer(int(value))
    if isinstance(value, (float, np.floating)):
        return sp.Rational(float(value)) if np.isfinite(value) else None
    try:
        number = sp.sympify(value)
    except (sp.SympifyError, TypeError):
        return None
    if number.is_Rational:
        return number
    if number.is_Float and number.is_finite:
        return sp.Rational(float(number))
    return None


def _term_matrix(expressions: Sequence[sp.Expr]) -> sp.Matrix:
    """``A`` (N x K): ``f_i = sum_j A[i, j] g_j`` over the distinct terms ``g_j``."""
    columns: dict[sp.Expr, int] = {}
    entries: dict[tuple[int, int], sp.Rational] = {}
    for i, expression in enumerate(expressions):
        for term in sp.Add.make_args(sp.expand(expression, **_EXPAND_OPTIONS)):
            if term == 0:
                continue
            coefficient, rest = term.as_coeff_Mul()
            exact = _exact_number(coefficient)
            if exact is None:  # a non-finite or non-real number: keep it inside the term
                exact, rest = sp.Integer(1), term
            j = columns.setdefault(rest, len(columns))
            entries[(i, j)] = entries.get((i, j), sp.Integer(0)) + exact
    matrix = sp.zeros(len(expressions), len(columns))
    for (i, j), value in entries.items():
        matrix[i, j] = value
    return matrix


def _left_null_space(matrix: sp.Matrix) -> sp.Matrix:
    """Rational basis (rows) of ``{c : c^T matrix = 0}`` in reduced row echelon form."""
    n = matrix.shape[0]
    if matrix.shape[1] == 0:
        return sp.eye(n)
    transposed = DomainMatrix.from_Matrix(matrix.T).convert_to(QQ)
    basis = transposed.nullspace()
    if basis.shape[0] == 0:
        return sp.zeros(0, n)
    reduced, _ = basis.rref()
    return reduced.to_Matrix()


def _rref(rows: sp.Matrix) -> tuple[sp.Matrix, tuple[int, ...]]:
    if rows.shape[0] == 0:
        return rows, ()
    reduced, pivots = DomainMatrix.from_Matrix(rows).convert_to(QQ).rref()
    matrix = reduced.to_Matrix()
    return matrix[: len(pivots), :], tuple(int(p) for p in pivots)


def _provably_zero(combination: sp.Expr) -> bool:
    """True when sympy shows that ``combination`` is identically zero."""
    if sp.expand(combination) == 0:
        return True
    try:
        if sp.expand(combination.rewrite(sp.exp)) == 0:
            return True
        return sp.simplify(combination) == 0
    except (TypeError, ValueError, NotImplementedError):  # pragma: no cover - sympy edge
        return False


def _jacobian_left_null(jacobian: sp.Matrix, t, states, params, seed: int = 0) -> np.ndarray:
    """Orthonormal basis (rows) of the common left null space of ``J_y`` at random points.

    The points share one random parameter vector (so that laws whose coefficients depend on
    the parameters show up); empty (0, N) if ``J_y`` is not finite there.
    """
    n = len(states)
    nonzero = [key for key, value in jacobian.todok().items() if value != 0]
    if not nonzero:
        return np.eye(n)
    # dummified arguments: a state may share its name with time or be a Python keyword
    function = sp.lambdify(
        (t, list(states), list(params)),
        [jacobian[i, j] for i, j in nonzero],
        cse=True,
        dummify=True,
    )
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.5, 2.0, len(params))
    blocks = []
    for _ in range(3):
        y = rng.uniform(0.5, 2.0, n)
        with np.errstate(all="ignore"):
            try:
                values = np.asarray(function(0.5, y, p), dtype=float)
            except (ZeroDivisionError, ValueError, TypeError, OverflowError):
                return np.zeros((0, n))
        if not np.all(np.isfinite(values)):
            return np.zeros((0, n))
        block = np.zeros((n, n))
        for (i, j), v in zip(nonzero, values):
            block[i, j] = v
        blocks.append(block)
    stacked = np.hstack(blocks)
    # U is N x N either way (N <= 3N); the 3N x 3N right factor is not needed
    u, s, _ = np.linalg.svd(stacked, full_matrices=False)
    scale = s[0] if s.size and s[0] > 0 else 1.0
    rank = int(np.sum(s > _NULL_RELATIVE_TOLERANCE * scale))
    return u[:, rank:].T.copy()


def _rationalised_candidates(null_rows: np.ndarray, known: np.ndarray) -> list[sp.Matrix]:
    """Rational row vectors spanning ``null_rows`` beyond the span of ``known`` (best effort)."""
    if null_rows.shape[0] == 0:
        return []
    if known.shape[0]:
        q, _ = np.linalg.qr(known.T)
        null_rows = null_rows - (null_rows @ q) @ q.T
    u, s, vt = np.linalg.svd(null_rows, full_matrices=False)
    extra = vt[s > 1e-6]
    candidates = []
    # reduced row echelon form of the extra directions, entries rationalised
    a = extra.copy()
    row = 0
    for col in range(a.shape[1]):
        if row >= a.shape[0]:
            break
        pivot = row + int(np.argmax(np.abs(a[row:, col])))
        if abs(a[pivot, col]) < 1e-8:
            continue
        a[[row, pivot]] = a[[pivot, row]]
        a[row] /= a[row, col]
        for r in range(a.shape[0]):
            if r != row:
                a[r] -= a[r, col] * a[row]
        row += 1
    for r in range(row):
        entries = [
            sp.nsimplify(float(x), rational=True, tolerance=_RATIONAL_TOLERANCE)
            if abs(x) > _RATIONAL_TOLERANCE
            else sp.Integer(0)
            for x in a[r]
        ]
        candidates.append(sp.Matrix([entries]))
    return candidates


def find_conservation_laws(
    expressions: Sequence[sp.Expr],
    t: sp.Symbol,
    states: Sequence[sp.Symbol],
    params: Sequence[sp.Symbol],
    state_names: Sequence[str],
    jacobian: sp.Matrix,
    stoichiometry: sp.Matrix | None = None,
) -> ConservationLaws:
    """The linear conservation laws of ``dy/dt = expressions`` (see the module docstring).

    Parameters
    ----------
    expressions : sequence of sympy.Expr
        The N right-hand sides.
    t, states, params
        Their symbols.
    state_names : sequence of str
    jacobian : sympy.Matrix
        ``J_y`` (N x N), for the numerical cross-check.
    stoichiometry : sympy.Matrix, optional
        (N, R) exact stoichiometry with ``f = S v``; its laws are checked against the
        right-hand side.

    Raises
    ------
    ValueError
        If a law of the stoichiometry is not conserved by the right-hand side.
    """
    n = len(expressions)
    terms = _term_matrix(expressions)
    if stoichiometry is not None:
        source = "stoichiometry"
        laws = _left_null_space(stoichiometry)
        for r in range(laws.shape[0]):
            row = laws[r, :]
            if any(row * terms) and not _provably_zero(
                sum(row[i] * expressions[i] for i in range(n))
            ):
                law = " + ".join(f"{row[i]}*{state_names[i]}" for i in range(n) if row[i] != 0)
                raise ValueError(
                    f"stoichiometry: the conservation law {law} = const that it implies does "
                    "not hold for the right-hand side (is f = stoichiometry @ rates?)"
                )
    else:
        source = "structure"
        laws = _left_null_space(terms)
    numeric_null = _jacobian_left_null(jacobian, t, states, params)
    unresolved = max(0, numeric_null.shape[0] - laws.shape[0])
    if unresolved:
        known = np.array(laws.tolist(), dtype=float).reshape(laws.shape)
        for candidate in _rationalised_candidates(numeric_null, known):
            combination = sum(candidate[i] * expressions[i] for i in range(n))
            if _provably_zero(combination):
                stacked = laws.col_join(candidate)
                if _rref(stacked)[0].shape[0] > laws.shape[0]:
                    laws = stacked
        laws, _ = _rref(laws)
        unresolved = max(0, numeric_null.shape[0] - laws.shape[0])
    laws, pivots = _rref(laws)
    return ConservationLaws(
        matrix=np.array(laws.tolist(), dtype=float).reshape(laws.shape[0], n),
        exact=laws,
        dependent=np.array(pivots, dtype=np.int64),
        source=source,
        states=tuple(state_names),
        unresolved=unresolved,
    )
