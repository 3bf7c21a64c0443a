"""Generated kernels of a system's events: atoms, triggers, priorities, assignments, adjoints.

Events happen at *instants*: a root atom's located crossing, a scheduled time (an
explicit event's, or a time atom's) or ``t0``. All events executed at one instant
share its time ``tau`` and its time sensitivity ``dtau`` (from the cause of the
instant: ``-(g_p + g_y S) / (g_t + g_y f)`` for a root atom crossing, ``tau_p`` for a
scheduled time, 0 at ``t0``; see :mod:`pymc_odesens.model.event_atoms`).

Within an instant the sensitivity columns are carried as *total* derivatives of the
state at the moving instant, ``T = S + f dtau``: an event that assigns the components
``A`` from the state ``xi`` (the state at its trigger time, or when it executes) then
maps them by the chain rule alone,

    T'[i] = sum_j a_y[i, j] T_xi[j] + a_p[i] + a_t[i] dtau      (i in A; others unchanged)

and the instant starts with ``T = S + f(xi_0) dtau`` and ends with
``S = T - f(xi_end) dtau`` (``f = 0`` after a terminal event). The driver
(:mod:`pymc_odesens.solvers.hybrid`) does those two conversions; the adjoint passes apply
the transposes (:mod:`pymc_odesens.sensitivity.event_adjoint`).

Kernels (the common C signature ``(t, y, p, v, out)``; R root atoms, M time atoms, S
slots, E events, N states, P parameters, B sensitivity columns):

- ``event_conditions``: ``out[j] = g_j(t, y, p)`` (R; reads the first N of ``y``);
- ``event_condition_rates``: ``out[j] = g_t + g_y f``, the atoms' time derivatives;
- ``event_times``: ``out[s]`` the slots' times (explicit events' times, then the time
  atoms');
- ``event_triggers``: ``v`` the sides (-1, 0, +1) of the R + M atoms; ``out[e] = 1``
  where trigger event ``e``'s trigger holds (0 for the other events);
- ``event_priorities``: ``out[e]`` the priority of event ``e`` (0 without one);
- ``event_jump`` (one module per sensitivity layout): ``v = [e, dtau_0, ...,
  dtau_{B-1}]``, ``y = [xi, T_0, ...]`` the state the assignments are computed from,
  ``out`` holding the current vector: the assigned components of the state and of each
  column are overwritten;
- ``event_time_sensitivity`` (per layout): ``v = [cause]``, ``y = [xi_0, S_0, ...]``:
  ``out[b] = dtau`` for each column ``b`` (parameters first, then initial states);
- ``event_adjoint_jump``: ``v = [e, lambda (N)]``, ``y = xi``: ``out = [lambda on the
  components e leaves alone (N), a_y^T lambda_A (N), a_p^T lambda_A (P),
  a_t . lambda_A]`` with ``lambda_A`` the cotangent of the assigned components;
- ``event_time_gradient``: ``v = [cause]``, ``y = xi_0``: ``out = [dtau/dxi (N),
  dtau/dp (P)]``.
"""

from __future__ import annotations

import sympy as sp

from pymc_odesens.codegen.kernel_source import header
from pymc_odesens.codegen.printer import KernelPrinter
from pymc_odesens.codegen.time_offsets import exact_time_offsets
from pymc_odesens.model import OdeSystem
from pymc_odesens.model.internal_symbols import internal_symbols

__all__ = [
    "EVENT_KERNELS_VERSION",
    "event_module_source",
    "event_sensitivity_module_source",
    "explicit_time_count",
]

EVENT_KERNELS_VERSION = "4"
"""Part of the event modules' cache keys: bump when their generated code changes."""

_RELATION_SOURCE = {">": ">", ">=": ">=", "<": "<", "<=": "<=", "==": "==", "!=": "!="}


def _is_zero(expr) -> bool:
    return expr.is_Number and expr == 0


def explicit_time_count(system: OdeSystem) -> int:
    """Number of scheduled times (slots of ``event_times``)."""
    return len(system.event_atoms.slots)


class _Writer:
    """Lines of one generated function, with CSE blocks and unique local names."""

    def __init__(self, printer: KernelPrinter) -> None:
        self.printer = printer
        self.lines: list[str] = []
        self._blocks = 0

    def line(self, text: str, indent: int) -> None:
        self.lines.append("    " * indent + text)

    def assign(self, names: list[str], expressions: list, indent: int) -> None:
        """``names[i] = expressions[i]`` after common-subexpression elimination."""
        if not names:
            return
        self._blocks += 1
        prefix = f"c{self._blocks}_"
        replacements, reduced = sp.cse(
            exact_time_offsets([sp.sympify(e) for e in expressions]),
            symbols=internal_symbols(prefix),
        )
        pad = "    " * indent
        self.lines += [f"{pad}{symbol} = {self.printer.doprint(v)}" for symbol, v in replacements]
        self.lines += [
            f"{pad}{name} = {self.printer.doprint(v)}" for name, v in zip(names, reduced)
        ]


def _function_header(name: str) -> list[str]:
    return ["", "", f"def {name}(t, y, p, v, out):"]


def _new_function(name: str) -> _Writer:
    w = _Writer(KernelPrinter())
    w.lines += _function_header(name)
    return w


def _assignment_pieces(system: OdeSystem, event, with_params: bool) -> dict:
    """Canonical expressions of one event's assignments and their derivatives (assigned
    rows only)."""
    n, p = system.n_states, system.n_params
    canon = system.to_canonical
    rows = [i for i in range(n) if event.assigned[i]]
    a_y = event.affect_jacobian_y
    pieces = {
        "rows": rows,
        "a": {i: canon(event.affect[i]) for i in rows},
        "ay": {(i, j): canon(a_y[i, j]) for i in rows for j in range(n) if a_y[i, j] != 0},
        "at": {i: canon(event.affect_derivative_t[i]) for i in rows},
        "ap": {},
    }
    pieces["ay"] = {k: v for k, v in pieces["ay"].items() if not _is_zero(v)}
    pieces["at"] = {k: v for k, v in pieces["at"].items() if not _is_zero(v)}
    if with_params:
        a_p = event.affect_jacobian_p
        pieces["ap"] = {
            (k, i): canon(a_p[k, i]) for k in range(p) for i in rows if not _is_zero(a_p[k, i])
        }
    return pieces


def _assign_pieces(w: _Writer, pieces: dict, indent: int, values: bool) -> None:
    """Locals ``a_i`` (values), ``ay_i_j``, ``at_i``, ``ap_k_i``."""
    names, exprs = [], []
    if values:
        names += [f"a_{i}" for i in pieces["a"]]
        exprs += list(pieces["a"].values())
    names += [f"ay_{i}_{j}" for (i, j) in pieces["ay"]]
    exprs += list(pieces["ay"].values())
    names += [f"at_{i}" for i in pieces["at"]]
    exprs += list(pieces["at"].values())
    names += [f"ap_{k}_{i}" for (k, i) in pieces["ap"]]
    exprs += list(pieces["ap"].values())
    w.assign(names, exprs, indent)


def _jump_function(system: OdeSystem, n_p: int, n_y0: int) -> list[str]:
    n = system.n_states
    blocks = n_p + n_y0
    w = _new_function("event_jump")
    w.line("e = int(v[0])", 1)
    for event in system.events:
        pieces = _assignment_pieces(system, event, with_params=n_p > 0)
        if not pieces["rows"]:
            continue
        w.line(f"if e == {event.index}:", 1)
        _assign_pieces(w, pieces, 2, values=True)
        if blocks:
            reads = sorted({j for (_, j) in pieces["ay"]})
            w.line(f"for b in range({blocks}):", 2)
            w.line(f"base = {n} * (1 + b)", 3)
            w.line("dt = v[1 + b]", 3)
            for j in reads:
                w.line(f"s{j} = y[base + {j}]", 3)
            for i in pieces["rows"]:
                terms = [f"ay_{i}_{j} * s{j}" for (ii, j) in pieces["ay"] if ii == i]
                if i in pieces["at"]:
                    terms.append(f"at_{i} * dt")
                w.line(f"out[base + {i}] = {' + '.join(terms) or '0.0'}", 3)
            for k, i in pieces["ap"]:
                w.line(f"out[{n * (1 + k) + i}] += ap_{k}_{i}", 2)
        for i in pieces["rows"]:
            w.line(f"out[{i}] = a_{i}", 2)
        w.line("return", 2)
    w.line("return", 1)
    return w.lines


def _root_gradient_locals(
    w: _Writer, system: OdeSystem, j: int, n_p: int, indent: int
) -> list[int]:
    """Locals ``gt``, ``gy{i}``, ``gp{k}`` and ``den = g_t + g_y f`` of root atom j; returns
    the ``k < n_p`` whose ``gp{k}`` is not zero (the others are not written)."""
    n = system.n_states
    canon = system.to_canonical
    g_t, g_y, g_p = system.event_atoms.root_gradient(
        j, system.t, system.state_symbols, system.param_symbols
    )
    names = ["gt"] + [f"gy{i}" for i in range(n)] + [f"fm{i}" for i in range(n)]
    exprs = [canon(g_t), *(canon(e) for e in g_y), *(canon(e) for e in system.rhs_expressions)]
    nonzero = [k for k in range(n_p) if not _is_zero(g_p[k])]
    names += [f"gp{k}" for k in nonzero]
    exprs += [canon(g_p[k]) for k in nonzero]
    w.assign(names, exprs, indent)
    # den = 0 (a crossing without speed) makes every d tau NaN: the callers refuse it
    w.line("den = gt + " + " + ".join(f"gy{i} * fm{i}" for i in range(n)), indent)
    return nonzero


def _slot_time_branches(w: _Writer, system: OdeSystem, n_p: int, offset: int) -> None:
    """``if c == R + s: out[offset + k] = d tau_s / d p_k`` (nonzero, ``k < n_p``) for each
    slot, then the function's final ``return``."""
    atoms = system.event_atoms
    n_roots = len(atoms.roots)
    canon = system.to_canonical
    for s in range(len(atoms.slots)):
        gradient = atoms.slot_time_gradient(s, system.param_symbols)[:n_p]
        grads = [(k, canon(g)) for k, g in enumerate(gradient) if not _is_zero(g)]
        if not grads:
            continue
        w.line(f"if c == {n_roots + s}:", 1)
        w.assign([f"out[{offset + k}]" for k, _ in grads], [g for _, g in grads], 2)
        w.line("return", 2)
    w.line("return", 1)


def _time_sensitivity_function(system: OdeSystem, n_p: int, n_y0: int) -> list[str]:
    n = system.n_states
    blocks = n_p + n_y0
    atoms = system.event_atoms
    n_roots = len(atoms.roots)
    w = _new_function("event_time_sensitivity")
    w.line("c = int(v[0])", 1)
    w.line(f"for b in range({blocks}):", 1)
    w.line("out[b] = 0.0", 2)
    if not blocks:
        w.line("return", 1)
        return w.lines
    for j in range(n_roots):
        w.line(f"if c == {j}:", 1)
        nonzero = _root_gradient_locals(w, system, j, n_p, 2)
        w.line(f"for b in range({blocks}):", 2)
        w.line(f"base = {n} * (1 + b)", 3)
        dot = " + ".join(f"gy{i} * y[base + {i}]" for i in range(n))
        w.line(f"out[b] = -({dot}) / den", 3)
        for k in nonzero:
            w.line(f"out[{k}] -= gp{k} / den", 2)
        w.line("return", 2)
    _slot_time_branches(w, system, n_p, 0)
    return w.lines


def _time_gradient_function(system: OdeSystem) -> list[str]:
    n, p = system.n_states, system.n_params
    atoms = system.event_atoms
    n_roots = len(atoms.roots)
    w = _new_function("event_time_gradient")
    w.line("c = int(v[0])", 1)
    w.line(f"for i in range({n + p}):", 1)
    w.line("out[i] = 0.0", 2)
    for j in range(n_roots):
        w.line(f"if c == {j}:", 1)
        nonzero = _root_gradient_locals(w, system, j, p, 2)
        for i in range(n):
            w.line(f"out[{i}] = -gy{i} / den", 2)
        for k in nonzero:
            w.line(f"out[{n + k}] = -gp{k} / den", 2)
        w.line("return", 2)
    _slot_time_branches(w, system, p, n)
    return w.lines


def _adjoint_jump_function(system: OdeSystem) -> list[str]:
    n, p = system.n_states, system.n_params
    w = _new_function("event_adjoint_jump")
    w.line("e = int(v[0])", 1)
    for i in range(n):
        w.line(f"lam{i} = v[{1 + i}]", 1)
        w.line(f"out[{i}] = lam{i}", 1)
        w.line(f"out[{n + i}] = 0.0", 1)
    w.line(f"for k in range({2 * n}, {2 * n + p + 1}):", 1)
    w.line("out[k] = 0.0", 2)
    for event in system.events:
        pieces = _assignment_pieces(system, event, with_params=p > 0)
        if not pieces["rows"]:
            continue
        w.line(f"if e == {event.index}:", 1)
        _assign_pieces(w, pieces, 2, values=False)
        for i in pieces["rows"]:
            w.line(f"out[{i}] = 0.0", 2)
        for j in range(n):
            terms = [f"ay_{i}_{jj} * lam{i}" for (i, jj) in pieces["ay"] if jj == j]
            if terms:
                w.line(f"out[{n + j}] = {' + '.join(terms)}", 2)
        for k in range(p):
            terms = [f"ap_{kk}_{i} * lam{i}" for (kk, i) in pieces["ap"] if kk == k]
            if terms:
                w.line(f"out[{2 * n + k}] = {' + '.join(terms)}", 2)
        terms = [f"at_{i} * lam{i}" for i in pieces["at"]]
        if terms:
            w.line(f"out[{2 * n + p}] = {' + '.join(terms)}", 2)
        w.line("return", 2)
    w.line("return", 1)
    return w.lines


def _conditions_function(system: OdeSystem) -> list[str]:
    canon = system.to_canonical
    roots = system.event_atoms.roots
    w = _new_function("event_conditions")
    w.assign([f"out[{j}]" for j in range(len(roots))], [canon(g) for g in roots], 1)
    w.line("return", 1)
    return w.lines


def _rates_function(system: OdeSystem) -> list[str]:
    canon = system.to_canonical
    atoms = system.event_atoms
    f = system.rhs_expressions
    rates = []
    for j in range(len(atoms.roots)):
        g_t, g_y, _ = atoms.root_gradient(j, system.t, system.state_symbols, ())
        rates.append(canon(g_t + sum(gi * fi for gi, fi in zip(g_y, f))))
    w = _new_function("event_condition_rates")
    w.assign([f"out[{j}]" for j in range(len(rates))], rates, 1)
    w.line("return", 1)
    return w.lines


def _times_function(system: OdeSystem) -> list[str]:
    canon = system.to_canonical
    times = [canon(tau) for _, _, tau in system.event_atoms.slots]
    w = _new_function("event_times")
    w.assign([f"out[{s}]" for s in range(len(times))], times, 1)
    w.line("return", 1)
    return w.lines


def _formula_source(node) -> str:
    kind = node[0]
    if kind == "const":
        return "True" if node[1] else "False"
    if kind == "atom":
        return f"(v[{node[2]}] {_RELATION_SOURCE[node[1]]} 0.0)"
    if kind == "not":
        return f"(not {_formula_source(node[1])})"
    parts = [_formula_source(child) for child in node[1]]
    if kind == "xor":
        text = parts[0]
        for part in parts[1:]:
            text = f"({text} != {part})"
        return text
    joiner = " and " if kind == "and" else " or "
    return "(" + joiner.join(parts) + ")"


def _triggers_function(system: OdeSystem) -> list[str]:
    formulas = system.event_atoms.formulas
    w = _new_function("event_triggers")
    for event in system.events:
        if event.index in formulas:
            w.line(
                f"out[{event.index}] = 1.0 if {_formula_source(formulas[event.index])} else 0.0",
                1,
            )
        else:
            w.line(f"out[{event.index}] = 0.0", 1)
    w.line("return", 1)
    return w.lines


def _priorities_function(system: OdeSystem) -> list[str]:
    canon = system.to_canonical
    w = _new_function("event_priorities")
    with_priority = [e for e in system.events if e.priority is not None]
    for event in system.events:
        if event.priority is None:
            w.line(f"out[{event.index}] = 0.0", 1)
    w.assign(
        [f"out[{e.index}]" for e in with_priority], [canon(e.priority) for e in with_priority], 1
    )
    w.line("return", 1)
    return w.lines


def _header(system: OdeSystem, what: str) -> list[str]:
    return [header(system), f"# events ({EVENT_KERNELS_VERSION}): {what}"]


def event_module_source(system: OdeSystem) -> str:
    """Source of the module with the kernels of the plain state (see the module docstring)."""
    lines = _header(system, "atoms, triggers, priorities, state jump, adjoint jump")
    lines += _conditions_function(system)
    lines += _rates_function(system)
    lines += _times_function(system)
    lines += _triggers_function(system)
    lines += _priorities_function(system)
    lines += _jump_function(system, 0, 0)
    lines += _time_sensitivity_function(system, 0, 0)
    lines += _adjoint_jump_function(system)
    lines += _time_gradient_function(system)
    return "\n".join(lines) + "\n"


def event_sensitivity_module_source(system: OdeSystem, n_p: int, n_y0: int) -> str:
    """Source of the module with ``event_jump`` and ``event_time_sensitivity`` for vectors
    ``[y, S_0, ...]`` with ``n_p`` parameter columns then ``n_y0`` initial-state columns."""
    lines = _header(system, f"jump of {n_p} parameter and {n_y0} initial-state columns")
    lines += _jump_function(system, n_p, n_y0)
    lines += _time_sensitivity_function(system, n_p, n_y0)
    return "\n".join(lines) + "\n"
