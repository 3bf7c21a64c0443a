"""`OdeSystem`: an ODE right-hand side defined once, with exact derivatives."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from functools import cached_property
from os import PathLike

import numpy as np
import sympy as sp

from pymc_odesens.model.conservation import (
    ConservationLaws,
    find_conservation_laws,
    validate_stoichiometry,
)
from pymc_odesens.model.conservation_cache import cached_conservation_laws
from pymc_odesens.model.derivatives import (
    jacobian_vector_product,
    jacobian_wrt_params,
    jacobian_wrt_states,
    vector_jacobian_product,
)
from pymc_odesens.model.event_atoms import event_atoms
from pymc_odesens.model.events import resolve_events
from pymc_odesens.model.expression_checks import checked_expression
from pymc_odesens.model.internal_symbols import InternalSymbol, time_symbol
from pymc_odesens.model.symbol_vector import SymbolVector, make_symbols
from pymc_odesens.model.tracing import traced

__all__ = ["OdeSystem", "require_states"]


def require_states(system: OdeSystem, caller: str, consequence: str) -> None:
    """Raise ``ValueError`` when ``system`` has no states.

    A model importer may build a system without states (an SBML model made of rules only,
    ``OdeSystem.from_expressions(..., allow_no_states=True)``): :func:`pymc_odesens.solve`
    and :func:`pymc_odesens.solve_sensitivity` return its empty solution. Routines that
    have nothing to do for it call this with their name and what would have come out.
    """
    if system.n_states == 0:
        raise ValueError(
            f"{caller}: system {system.name!r} has no states (a model made of rules only: its "
            f"outputs, system.outputs, are functions of time and the parameters), so "
            f"{consequence}"
        )


def _check_names(argument: str, names: Sequence[str]) -> list[str]:
    if isinstance(names, str):
        raise TypeError(f"{argument} must be a sequence of names, got the string {names!r}")
    names = [str(n) for n in names]
    for n in names:
        if not n.isidentifier():
            raise ValueError(f"{argument}: {n!r} is not a valid identifier")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{argument}: duplicate names {duplicates}")
    return names


def _resolve_size(argument: str, count: int | None, names: Sequence[str] | None) -> int | None:
    if count is not None:
        if not isinstance(count, (int, np.integer)) or isinstance(count, bool) or count < 0:
            raise ValueError(f"{argument} must be a non-negative int, got {count!r}")
        if names is not None and len(names) != count:
            raise ValueError(
                f"{argument}={count} disagrees with the {len(names)} names given "
                f"({', '.join(names)})"
            )
        return int(count)
    return None if names is None else len(names)


def _check_symbols(t, states: Sequence[sp.Symbol], params: Sequence[sp.Symbol]) -> None:
    """States, parameters and time must be distinct symbols, and none an internal one."""
    for role, symbols in (("states", states), ("params", params)):
        for s in symbols:
            if not isinstance(s, sp.Symbol):
                raise TypeError(f"{role} must be sympy Symbols, got {s!r} ({type(s).__name__})")
            if isinstance(s, InternalSymbol):
                raise ValueError(
                    f"{role}: {s} is one of the library's internal symbols; use sympy.Symbol"
                )
    everything = [t, *states, *params]
    if len(set(everything)) != len(everything):
        raise ValueError("time, the states and the parameters must be distinct symbols")


class OdeSystem:
    """An ODE system ``dy/dt = f(t, y, p)`` with exact, compiled derivatives.

    Parameters
    ----------
    rhs : callable
        ``rhs(t, y, p)`` returning a sequence of N expressions. It is called
        once with symbolic ``t``, ``y`` and ``p``; ``y`` and ``p`` are indexable
        by position (``y[0]``) and, where names are given, by name
        (``p["k1"]`` or ``p.k1``). Use ordinary arithmetic and the functions in
        :mod:`pymc_odesens.math` (exp, log, sqrt, tanh, minimum, where, ...).
    n_states : int, optional
        Number of states N. Inferred from ``states`` or from the length of
        the returned sequence.
    n_params : int, optional
        Number of parameters P. Inferred from ``params`` or from the largest
        index used in ``rhs`` (pass it when trailing parameters are unused).
    states, params : sequence of str, optional
        Names, in index order.
    name : str, optional
        Name used in messages and generated code.
    initial_state : callable, optional
        ``initial_state(p)`` returning N expressions in the parameters: the
        initial state ``y0(p)``. Solves then need no ``y0`` and forward
        sensitivities start from ``S(t0) = dy0/dp``.
    events : sequence of ImplicitEvent, ExplicitEvent or TriggerEvent, optional
        Discontinuities of the trajectory: explicit events at given times,
        implicit events where a condition crosses zero and trigger events where a
        boolean trigger becomes true, each mapping the state before it to the
        state after it (see :mod:`pymc_odesens.model.events`).
        Solvers locate them, and sensitivities and adjoint gradients include
        how the event times move with the parameters.

    Attributes
    ----------
    states, params : list of str
    n_states, n_params : int
    rhs_expressions : tuple of sympy.Expr
        The N right-hand-side expressions in the symbols ``t``,
        ``state_symbols`` and ``param_symbols``.
    x0, p_nominal : numpy.ndarray or None
        Initial state and nominal parameters when the source provides them
        (``from_json``).
    t0, t_end : float or None
        Time span when the source provides it.

    Examples
    --------
    >>> from pymc_odesens import OdeSystem
    >>> def lotka_volterra(t, y, p):
    ...     prey, predator = y
    ...     return [p.alpha * prey - p.beta * prey * predator,
    ...             p.delta * prey * predator - p.gamma * predator]
    >>> system = OdeSystem(lotka_volterra, states=["prey", "predator"],
    ...                    params=["alpha", "beta", "delta", "gamma"])
    >>> system.n_states, system.n_params
    (2, 4)
    """

    def __init__(
        self,
        rhs: Callable,
        n_states: int | None = None,
        n_params: int | None = None,
        *,
        states: Sequence[str] | None = None,
        params: Sequence[str] | None = None,
        name: str | None = None,
        initial_state: Callable | None = None,
        events: Sequence | None = None,
    ) -> None:
        if not callable(rhs):
            raise TypeError(f"rhs must be a callable rhs(t, y, p), got {type(rhs).__name__}")
        states = None if states is None else _check_names("states", states)
        params = None if params is None else _check_names("params", params)
        n = _resolve_size("n_states", n_states, states)
        p = _resolve_size("n_params", n_params, params)
        state_names = states if states is not None else [f"y{i}" for i in range(n or 0)]
        param_names = params if params is not None else [f"p{k}" for k in range(p or 0)]
        t = time_symbol()
        y_vec = SymbolVector("y", state_names, make_symbols(state_names), growable=n is None)
        p_vec = SymbolVector("p", param_names, make_symbols(param_names), growable=p is None)
        out = traced(rhs, (t, y_vec, p_vec), "rhs")
        if isinstance(out, (sp.MatrixBase, np.ndarray)):
            out = list(out)
        if not isinstance(out, Sequence) or isinstance(out, str):
            raise TypeError(
                f"rhs must return a sequence of expressions (list, tuple), got {type(out).__name__}"
            )
        if n is None:
            n = len(out)
            if len(y_vec) > n:
                raise IndexError(
                    f"rhs reads y[{len(y_vec) - 1}] but returns only {n} derivatives; "
                    "pass n_states or states to fix the number of states"
                )
            y_vec[n - 1] if n else None  # extend the growable vector to N symbols
        self._init_from_expressions(
            name=name or getattr(rhs, "__name__", "ode"),
            t=t,
            state_names=y_vec.names[:n],
            state_symbols=y_vec.symbols[:n],
            param_names=p_vec.names,
            param_symbols=p_vec.symbols,
            expressions=out,
        )
        if initial_state is not None:
            self.set_initial_state(initial_state)
        if events is not None:
            self.set_events(events)

    # construction ------------------------------------------------------------
    @classmethod
    def from_expressions(
        cls,
        expressions: Sequence,
        t: sp.Symbol,
        states: Sequence[sp.Symbol],
        params: Sequence[sp.Symbol],
        *,
        name: str = "ode",
        allow_no_states: bool = False,
    ) -> OdeSystem:
        """Build a system from sympy expressions in given symbols.

        Parameters
        ----------
        expressions : sequence of sympy expressions
            ``d states[i] / dt``.
        t : sympy.Symbol
            Time symbol used in the expressions.
        states, params : sequence of sympy.Symbol
            State and parameter symbols, in index order.
        name : str
            Name of the system.
        allow_no_states : bool
            Accept a system without states (a model importer's model made of
            explicit functions of time and parameters only, such as an SBML model
            of assignment rules: ``solve`` then evaluates its outputs). False: such
            a system is refused as a mistake.
        """
        self = cls.__new__(cls)
        self._init_from_expressions(
            name=name,
            t=t,
            state_names=_check_names("states", [str(s) for s in states]),
            state_symbols=tuple(states),
            param_names=_check_names("params", [str(s) for s in params]),
            param_symbols=tuple(params),
            expressions=expressions,
            allow_no_states=allow_no_states,
        )
        return self

    @classmethod
    def from_json(cls, path: str | PathLike) -> OdeSystem:
        """Read a model in the neutral JSON format of ``shared/models``.

        Parameters
        ----------
        path : str or path-like
            The ``<name>.json`` file.

        Returns
        -------
        OdeSystem
            With ``x0``, ``p_nominal``, ``t0``, ``t_end`` and, where present,
            ``outputs``, ``experiments``, ``events_spec`` and ``source`` set.
        """
        from pymc_odesens.model.json_model import load_json_model

        return load_json_model(cls, path)

    @classmethod
    def from_sbml(cls, source: str | PathLike, *, name: str | None = None) -> OdeSystem:
        """Read an SBML model (any level and version libsbml reads; ``comp`` flattened).

        Parameters
        ----------
        source : str or path-like
            A path to an SBML file, or the SBML document itself as a string.
        name : str, optional
            Name of the system (default: the model's id).

        Returns
        -------
        OdeSystem
            States, parameters and outputs keep SBML's ids. ``states``: the species that
            are not constant (in amounts where their compartment's size varies or their
            symbol denotes an amount, else in concentrations) and every compartment,
            parameter or species reference a rate rule or an event changes; ``params``:
            the global parameters no rule, initial assignment or event sets; ``x0`` and
            ``p_nominal``: the file's values (``x0 = y0(p_nominal)``); the initial state
            ``y0(p)`` with the initial assignments (a solve's ``y0=None`` uses it);
            ``t0 = 0``; ``outputs``: every id as what its symbol denotes (a species'
            concentration unless it has only substance units, a compartment's size, a
            reaction's rate); ``stoichiometry`` (N x R, ``f = stoichiometry @ rates``, or
            None) and ``reaction_ids``; ``sbml``
            (:class:`~pymc_odesens.model.sbml.SbmlVariables`): each id's kind and role,
            each species' amount and concentration. Events become
            :class:`~pymc_odesens.model.events.ImplicitEvent` /
            :class:`~pymc_odesens.model.events.ExplicitEvent`.

        Raises
        ------
        FileNotFoundError
            ``source`` names no file.
        pymc_odesens.model.sbml.SbmlError
            libsbml reports errors in the document, or the model is incomplete.
        pymc_odesens.model.sbml.SbmlUnsupportedError
            The model uses a feature that is not supported (algebraic rules, fast
            reactions, ``delay()``, events with delays, ...), named with the element.
        """
        from pymc_odesens.model.sbml import load_sbml_model

        return load_sbml_model(cls, source, name=name)

    def _init_from_expressions(
        self,
        *,
        name,
        t,
        state_names,
        state_symbols,
        param_names,
        param_symbols,
        expressions,
        allow_no_states=False,
    ) -> None:
        self.name = str(name)
        self.t = t
        self.states = list(state_names)
        self.params = list(param_names)
        self.state_symbols = tuple(state_symbols)
        self.param_symbols = tuple(param_symbols)
        clash = set(self.states) & set(self.params)
        if clash:
            raise ValueError(f"names used for both a state and a parameter: {sorted(clash)}")
        _check_symbols(t, self.state_symbols, self.param_symbols)
        n = len(self.states)
        if len(expressions) != n:
            raise ValueError(
                f"rhs returned {len(expressions)} expressions but the system has {n} states "
                f"({', '.join(self.states)})"
            )
        if n == 0 and not allow_no_states:
            raise ValueError(
                f"system {self.name!r} has no states (rhs returned no expressions): an ODE "
                "system needs at least one state"
            )
        allowed = {t, *self.state_symbols, *self.param_symbols}
        cleaned = []
        for i, raw in enumerate(expressions):
            label = f"rhs[{i}] (d{self.states[i]}/dt)"
            expr = checked_expression(raw, label)
            if expr.has(sp.I):
                raise ValueError(f"{label} is complex: {expr}")
            unknown = expr.free_symbols - allowed
            if unknown:
                names = ", ".join(sorted(str(s) for s in unknown))
                raise ValueError(
                    f"{label} uses undeclared symbol(s) {names}; declare them as parameters "
                    "or replace them by numbers"
                )
            cleaned.append(expr)
        self.rhs_expressions = tuple(cleaned)
        self.n_states = n
        self.n_params = len(self.params)
        self.x0 = None
        self.p_nominal = None
        self.t0 = None
        self.t_end = None
        self.outputs = {}
        self.experiments = []
        self.events_spec = []
        self.events = ()
        self.source = None
        self.initial_state_expressions = None
        self._stoichiometry = None

    def set_events(self, events: Sequence) -> None:
        """Declare the system's events (replacing any declared before).

        Parameters
        ----------
        events : sequence of ImplicitEvent, ExplicitEvent or TriggerEvent
            See :mod:`pymc_odesens.model.events`.
        """
        self.events = resolve_events(self, events)
        self.__dict__.pop("fingerprint", None)
        self.__dict__.pop("_compiled_kernels", None)
        self.__dict__.pop("event_atoms", None)

    @cached_property
    def event_atoms(self):
        """The relational atoms of the events' conditions and triggers, their schedule and
        cause classes (:class:`~pymc_odesens.model.event_atoms.EventAtoms`)."""
        return event_atoms(self)

    @property
    def stoichiometry(self) -> sp.Matrix | None:
        """The stoichiometric matrix (N states x R reactions), or None.

        When set, the right-hand side is ``f = stoichiometry @ v(t, y, p)`` for some
        reaction rates ``v`` (a model importer that knows the reactions sets it), and
        :attr:`conservation_laws` are read from it. Entries must be numbers (int, float or
        rational; floats are taken at their exact binary value); fold symbolic factors such
        as compartment volumes into the rates. Stored as an exact sympy matrix.
        """
        return self.__dict__.get("_stoichiometry")

    @stoichiometry.setter
    def stoichiometry(self, value) -> None:
        self._stoichiometry = validate_stoichiometry(value, self.n_states)
        self.__dict__.pop("conservation_laws", None)

    @cached_property
    def conservation_laws(self) -> ConservationLaws:
        """The linear conservation laws ``C y = const`` (:mod:`pymc_odesens.model.conservation`).

        Found exactly from :attr:`stoichiometry` when set, else from the structure of the
        right-hand side; computed once per system and kept in the cache directory, so that
        later processes read them (:mod:`pymc_odesens.model.conservation_cache`).
        """
        return cached_conservation_laws(
            self,
            lambda: find_conservation_laws(
                self.rhs_expressions,
                self.t,
                self.state_symbols,
                self.param_symbols,
                self.states,
                self.J_y,
                self.stoichiometry,
            ),
        )

    @property
    def implicit_events(self) -> tuple:
        """The implicit events, in declaration order."""
        return tuple(e for e in self.events if e.kind == "implicit")

    @property
    def explicit_events(self) -> tuple:
        """The explicit events, in declaration order."""
        return tuple(e for e in self.events if e.kind == "explicit")

    @property
    def trigger_events(self) -> tuple:
        """The trigger events, in declaration order."""
        return tuple(e for e in self.events if e.kind == "trigger")

    def set_initial_state(self, initial_state) -> None:
        """Declare the initial state as expressions of the parameters, ``y0(p)``.

        Parameters
        ----------
        initial_state : callable or sequence
            ``initial_state(p)`` returning N expressions (``p`` indexable by
            position and name, as in ``rhs``), or the N expressions themselves
            in :attr:`param_symbols`.
        """
        if callable(initial_state):
            p_vec = SymbolVector("p", self.params, self.param_symbols)
            values = traced(initial_state, (p_vec,), "initial_state")
        else:
            values = initial_state
        if isinstance(values, (sp.MatrixBase, np.ndarray)):
            values = list(values)
        if not isinstance(values, Sequence) or isinstance(values, str):
            raise TypeError(
                "initial_state must return a sequence of N expressions, "
                f"got {type(values).__name__}"
            )
        if len(values) != self.n_states:
            raise ValueError(
                f"initial_state returned {len(values)} values but the system has "
                f"{self.n_states} states ({', '.join(self.states)})"
            )
        allowed = set(self.param_symbols)
        cleaned = []
        for i, raw in enumerate(values):
            label = f"initial_state[{i}] ({self.states[i]})"
            expr = checked_expression(raw, label, scalar=False)
            unknown = expr.free_symbols - allowed
            if unknown:
                names = ", ".join(sorted(str(s) for s in unknown))
                raise ValueError(f"{label} may depend on the parameters only; it uses {names}")
            cleaned.append(expr)
        self.initial_state_expressions = tuple(cleaned)
        self.__dict__.pop("fingerprint", None)
        self.__dict__.pop("initial_state_jacobian", None)

    @cached_property
    def initial_state_jacobian(self) -> sp.Matrix | None:
        """``dy0/dp`` as a P x N matrix (``[k, i] = dy0_i/dp_k``), or None."""
        if self.initial_state_expressions is None:
            return None
        return jacobian_wrt_params(self.initial_state_expressions, self.param_symbols)

    # exact derivatives (sympy) -----------------------------------------------
    @cached_property
    def J_y(self) -> sp.SparseMatrix:
        """State Jacobian, ``J_y[i, j] = df_i/dy_j`` (N x N, a sparse sympy matrix: only the
        entries whose expression contains ``y_j`` are differentiated)."""
        return jacobian_wrt_states(self.rhs_expressions, self.state_symbols)

    @cached_property
    def J_p(self) -> sp.SparseMatrix:
        """Parameter Jacobian, ``J_p[k, i] = df_i/dp_k`` (P x N, a sparse sympy matrix)."""
        return jacobian_wrt_params(self.rhs_expressions, self.param_symbols)

    @cached_property
    def J_y_nonzeros(self) -> dict[tuple[int, int], sp.Expr]:
        """The structurally non-zero entries ``(i, j) -> df_i/dy_j`` of ``J_y``, row by row
        (row-major order: the order of the sparsity pattern of generated code)."""
        return dict(sorted(self.J_y.todok().items()))

    @cached_property
    def J_p_nonzeros(self) -> dict[tuple[int, int], sp.Expr]:
        """The non-zero entries ``(k, i) -> df_i/dp_k`` of ``J_p``, parameter by parameter."""
        return dict(sorted(self.J_p.todok().items()))

    @cached_property
    def cotangent_symbols(self) -> tuple[sp.Symbol, ...]:
        """Internal symbols ``lambda_i`` used by the vector-Jacobian products (never equal
        to a user's symbol of the same name, see :mod:`pymc_odesens.model.internal_symbols`)."""
        return tuple(InternalSymbol(f"lambda_{i}", real=True) for i in range(self.n_states))

    @cached_property
    def direction_symbols(self) -> tuple[sp.Symbol, ...]:
        """Internal symbols ``v_j`` used by the Jacobian-vector product."""
        return tuple(InternalSymbol(f"v_{j}", real=True) for j in range(self.n_states))

    @cached_property
    def vjp_y(self) -> list[sp.Expr]:
        """``(lambda^T J_y)_j`` in the symbols :attr:`cotangent_symbols` (N)."""
        return vector_jacobian_product(self.J_y, self.cotangent_symbols, rows_are_outputs=True)

    @cached_property
    def vjp_p(self) -> list[sp.Expr]:
        """``(lambda^T J_p^T)_k = sum_i lambda_i df_i/dp_k`` (P)."""
        return vector_jacobian_product(self.J_p, self.cotangent_symbols, rows_are_outputs=False)

    @cached_property
    def jvp_y(self) -> list[sp.Expr]:
        """``(J_y v)_i`` in the symbols :attr:`direction_symbols` (N)."""
        return jacobian_vector_product(self.J_y, self.direction_symbols)

    # identity ------------------------------------------------------------------
    @cached_property
    def canonical_symbols(self) -> tuple[sp.Symbol, tuple[sp.Symbol, ...], tuple[sp.Symbol, ...]]:
        """Position-named internal symbols ``(t, y, p)`` used by code generation."""
        t = InternalSymbol("_t", real=True)
        y = tuple(InternalSymbol(f"_y{i}", real=True) for i in range(self.n_states))
        p = tuple(InternalSymbol(f"_p{k}", real=True) for k in range(self.n_params))
        return t, y, p

    @cached_property
    def _canonical_mapping(self) -> dict[sp.Symbol, sp.Symbol]:
        t, y, p = self.canonical_symbols
        v = tuple(InternalSymbol(f"_v{i}", real=True) for i in range(self.n_states))
        return {
            self.t: t,
            **dict(zip(self.state_symbols, y)),
            **dict(zip(self.param_symbols, p)),
            **dict(zip(self.cotangent_symbols, v)),
            **dict(zip(self.direction_symbols, v)),
        }

    def to_canonical(self, expr: sp.Expr) -> sp.Expr:
        """Rewrite ``expr`` in the position-named symbols of :attr:`canonical_symbols`
        (the cotangent and direction symbols both become ``_v<i>``)."""
        return sp.sympify(expr).xreplace(self._canonical_mapping)

    @cached_property
    def fingerprint(self) -> str:
        """Hash of the canonical right-hand side: equal for mathematically identical systems
        written with different names, different whenever an expression differs."""
        text = "|".join(sp.srepr(self.to_canonical(e)) for e in self.rhs_expressions)
        text = f"N={self.n_states};P={self.n_params};{text}"
        if self.initial_state_expressions is not None:
            y0_text = "|".join(
                sp.srepr(self.to_canonical(e)) for e in self.initial_state_expressions
            )
            text += f";y0={y0_text}"
        if self.events:
            events_text = "|".join(e.canonical_text(self.to_canonical) for e in self.events)
            text += f";events={events_text}"
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def __getstate__(self) -> dict:
        """Pickle the symbolic system only; compiled kernels are reloaded from the disk cache."""
        state = dict(self.__dict__)
        state.pop("_compiled_kernels", None)
        return state

    def __repr__(self) -> str:
        return (
            f"OdeSystem({self.name!r}, n_states={self.n_states}, n_params={self.n_params}, "
            f"states={self.states}, params={self.params})"
        )
