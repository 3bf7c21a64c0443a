"""Generated kernels of a system's events: conditions, times, state jumps and their adjoints.

At an event at time ``tau`` the state jumps from ``xi = y(tau-)`` to
``y(tau) = a(tau, xi, p)``. A sensitivity column ``S = dy/dalpha`` (a parameter or an
initial state) jumps as

    S(tau)    = a_y (S(tau-) + f_minus dtau) + a_p + a_t dtau - f_plus dtau
              = a_y S(tau-) + a_p + w dtau,       w = a_y f_minus + a_t - f_plus

with ``f_minus = f(tau, xi, p)``, ``f_plus = f(tau, a, p)`` (zero after a terminal
event) and the event time's own sensitivity ``dtau``: for an implicit event
``g(tau, y(tau-), p) = 0`` the implicit function theorem gives
``dtau = -(g_y S(tau-) + g_p) / (g_t + g_y f_minus)``; for an explicit event at
``tau(p)`` it is ``tau_p`` (zero for constant times and for initial-state columns).
The adjoint jump is the transpose of this linear map (the red, blue and green terms
of the hybrid-ODE adjoint): with ``lambda`` after the event,

    lambda(tau-) = a_y^T lambda + (w . lambda) dtau/dxi
    dL/dp       += a_p lambda + (w . lambda) dtau/dp.

Kernels (the common C signature ``(t, y, p, v, out)``; ``v[0]`` the event's index
among all events, ``v[1]`` the time's index within an explicit event):

- ``event_conditions``: ``out[j] = g_j(t, y, p)`` for the implicit events, in order
  (reads only the first N components of ``y``);
- ``event_times``: ``out[s]`` the explicit events' times, event after event;
- ``event_jump`` (one module per sensitivity layout): ``out`` = the vector after the
  event, for ``y`` = ``[xi, S_0, S_1, ...]`` (no columns: the plain state);
- ``event_time_sensitivity``: ``out[b] = dtau`` for each column ``b`` of ``y``;
- ``event_adjoint_jump``: ``y = xi``, ``v[2:2+N]`` = ``lambda`` after the event;
  ``out = [lambda(tau-) (N), the event's term of dL/dp (P)]``.
"""

from __future__ import annotations

import sympy as sp

from pymc_odesens.codegen.kernel_source import header
from pymc_odesens.codegen.printer import KernelPrinter
from pymc_odesens.model import OdeSystem
from pymc_odesens.model.internal_symbols import InternalSymbol, internal_symbols

__all__ = ["event_module_source", "event_sensitivity_module_source", "explicit_time_count"]


def _is_zero(expr) -> bool:
    return expr.is_Number and expr == 0


def explicit_time_count(system: OdeSystem) -> int:
    """Number of explicit event times (slots of ``event_times``)."""
    return sum(len(e.times) for e in system.explicit_events)


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
            [sp.sympify(e) for e in expressions], symbols=internal_symbols(prefix)
        )
        pad = "    " * indent
        self.lines += [f"{pad}{symbol} = {self.printer.doprint(v)}" for symbol, v in replacements]
        self.lines += [
            f"{pad}{name} = {self.printer.doprint(v)}" for name, v in zip(names, reduced)
        ]


def _function_header(name: str) -> list[str]:
    return ["", "", f"def {name}(t, y, p, v, out):"]


def _event_pieces(system: OdeSystem, event, with_params: bool):
    """Canonical expressions of one event: affect, its derivatives, f_minus, condition gradient."""
    n, p = system.n_states, system.n_params
    canon = system.to_canonical
    a_y = event.affect_jacobian_y
    pieces = {
        "a": [canon(e) for e in event.affect],
        "ay": {(i, j): canon(a_y[i, j]) for i in range(n) for j in range(n)},
        "at": [canon(e) for e in event.affect_derivative_t],
        "fm": [canon(e) for e in system.rhs_expressions],
    }
    pieces["ay"] = {k: v for k, v in pieces["ay"].items() if not _is_zero(v)}
    if with_params:
        a_p = event.affect_jacobian_p
        pieces["ap"] = {
            (k, i): canon(a_p[k, i]) for k in range(p) for i in range(n) if not _is_zero(a_p[k, i])
        }
    else:
        pieces["ap"] = {}
    if event.kind == "implicit":
        g_t, g_y, g_p = event.condition_gradient
        pieces["gt"] = canon(g_t)
        pieces["gy"] = [canon(e) for e in g_y]
        pieces["gp"] = [canon(e) for e in g_p] if with_params else []
    return pieces


def _write_common(w: _Writer, system: OdeSystem, event, pieces, indent: int) -> None:
    """Locals ``yp_i`` (the state after the event), ``w_i`` and, implicit, ``gy_j``, ``den``."""
    n = system.n_states
    names, exprs = [], []
    names += [f"yp{i}" for i in range(n)]
    exprs += pieces["a"]
    names += [f"ay_{i}_{j}" for (i, j) in pieces["ay"]]
    exprs += list(pieces["ay"].values())
    names += [f"at{i}" for i in range(n)]
    exprs += pieces["at"]
    names += [f"fm{i}" for i in range(n)]
    exprs += pieces["fm"]
    names += [f"ap_{k}_{i}" for (k, i) in pieces["ap"]]
    exprs += list(pieces["ap"].values())
    if event.kind == "implicit":
        names += (
            ["gt"] + [f"gy{j}" for j in range(n)] + [f"gp{k}" for k in range(len(pieces["gp"]))]
        )
        exprs += [pieces["gt"], *pieces["gy"], *pieces["gp"]]
    w.assign(names, exprs, indent)
    # f after the event: the right-hand side at the new state (zero once terminal)
    if event.terminal:
        for i in range(n):
            w.line(f"fp{i} = 0.0", indent)
    else:
        _, y_syms, _ = system.canonical_symbols
        at_new = {y_syms[i]: InternalSymbol(f"yp{i}", real=True) for i in range(n)}
        w.assign(
            [f"fp{i}" for i in range(n)],
            [system.to_canonical(e).xreplace(at_new) for e in system.rhs_expressions],
            indent,
        )
    for i in range(n):
        products = " + ".join(f"ay_{i}_{j} * fm{j}" for (ii, j) in pieces["ay"] if ii == i)
        w.line(f"w{i} = ({products or '0.0'}) + at{i} - fp{i}", indent)
    if event.kind == "implicit":
        rate = " + ".join(f"gy{j} * fm{j}" for j in range(n))
        w.line(f"den = gt + {rate}", indent)


def _explicit_time_gradient(w: _Writer, system: OdeSystem, event, k: int, indent: int) -> bool:
    """``dtk = d tau_slot / d p_k`` for an explicit event; False when it is zero for every slot."""
    canon = system.to_canonical
    grads = [(s, canon(g[k])) for s, g in enumerate(event.time_gradients) if not _is_zero(g[k])]
    if not grads:
        return False
    w.line("dtk = 0.0", indent)
    for s, g in grads:
        w.line(f"if slot == {s}:", indent)
        w.assign(["dtk"], [g], indent + 1)
    return True


def _jump_function(system: OdeSystem, n_p: int, n_y0: int) -> list[str]:
    n = system.n_states
    blocks = n_p + n_y0
    w = _Writer(KernelPrinter())
    w.lines += _function_header("event_jump")
    w.line("e = int(v[0])", 1)
    w.line("slot = int(v[1])", 1)
    for event in system.events:
        w.line(f"if e == {event.index}:", 1)
        pieces = _event_pieces(system, event, with_params=n_p > 0)
        _write_common(w, system, event, pieces, 2)
        for i in range(n):
            w.line(f"out[{i}] = yp{i}", 2)
        if blocks:
            w.line(f"for b in range({n}, {n * (1 + blocks)}, {n}):", 2)
            for j in range(n):
                w.line(f"s{j} = y[b + {j}]", 3)
            if event.kind == "implicit":
                dot = " + ".join(f"gy{j} * s{j}" for j in range(n))
                w.line(f"dtau = -({dot}) / den", 3)
            else:
                w.line("dtau = 0.0", 3)
            for i in range(n):
                products = " + ".join(f"ay_{i}_{j} * s{j}" for (ii, j) in pieces["ay"] if ii == i)
                w.line(f"out[b + {i}] = ({products or '0.0'}) + w{i} * dtau", 3)
            for k in range(n_p):
                has_ap = any(kk == k for (kk, _) in pieces["ap"])
                if event.kind == "implicit":
                    if _is_zero(pieces["gp"][k]) and not has_ap:
                        continue
                    w.line(f"dtk = -gp{k} / den", 2)
                    has_dt = not _is_zero(pieces["gp"][k])
                else:
                    has_dt = _explicit_time_gradient(w, system, event, k, 2)
                    if not has_dt and not has_ap:
                        continue
                base = n * (1 + k)
                for i in range(n):
                    terms = []
                    if (k, i) in pieces["ap"]:
                        terms.append(f"ap_{k}_{i}")
                    if has_dt:
                        terms.append(f"w{i} * dtk")
                    if terms:
                        w.line(f"out[{base + i}] += {' + '.join(terms)}", 2)
        w.line("return", 2)
    if not system.events:
        w.line("return", 1)
    return w.lines


def _time_sensitivity_function(system: OdeSystem, n_p: int, n_y0: int) -> list[str]:
    n = system.n_states
    blocks = n_p + n_y0
    w = _Writer(KernelPrinter())
    w.lines += _function_header("event_time_sensitivity")
    w.line("e = int(v[0])", 1)
    w.line("slot = int(v[1])", 1)
    w.line(f"for b in range({max(blocks, 1)}):", 1)
    w.line("out[b] = 0.0", 2)
    for event in system.events:
        w.line(f"if e == {event.index}:", 1)
        if event.kind == "implicit":
            canon = system.to_canonical
            g_t, g_y, g_p = event.condition_gradient
            names = ["gt"] + [f"gy{j}" for j in range(n)] + [f"fm{j}" for j in range(n)]
            exprs = [canon(g_t), *(canon(e) for e in g_y)]
            exprs += [canon(e) for e in system.rhs_expressions]
            names += [f"gp{k}" for k in range(n_p)]
            exprs += [canon(e) for e in g_p[:n_p]]
            w.assign(names, exprs, 2)
            w.line("den = gt + " + " + ".join(f"gy{j} * fm{j}" for j in range(n)), 2)
            for b in range(blocks):
                base = n * (1 + b)
                dot = " + ".join(f"gy{j} * y[{base + j}]" for j in range(n))
                extra = f" + gp{b}" if b < n_p else ""
                w.line(f"out[{b}] = -({dot}{extra}) / den", 2)
        else:
            for k in range(n_p):
                if _explicit_time_gradient(w, system, event, k, 2):
                    w.line(f"out[{k}] = dtk", 2)
        w.line("return", 2)
    return w.lines


def _adjoint_jump_function(system: OdeSystem) -> list[str]:
    n, p = system.n_states, system.n_params
    w = _Writer(KernelPrinter())
    w.lines += _function_header("event_adjoint_jump")
    w.line("e = int(v[0])", 1)
    w.line("slot = int(v[1])", 1)
    for i in range(n):
        w.line(f"lam{i} = v[{2 + i}]", 1)
    for event in system.events:
        w.line(f"if e == {event.index}:", 1)
        pieces = _event_pieces(system, event, with_params=p > 0)
        _write_common(w, system, event, pieces, 2)
        w.line("wl = " + " + ".join(f"w{i} * lam{i}" for i in range(n)), 2)
        if event.kind == "implicit":
            w.line("c = -wl / den", 2)
        for j in range(n):
            terms = [f"ay_{i}_{jj} * lam{i}" for (i, jj) in pieces["ay"] if jj == j]
            if event.kind == "implicit":
                terms.append(f"c * gy{j}")
            w.line(f"out[{j}] = {' + '.join(terms) or '0.0'}", 2)
        for k in range(p):
            terms = [f"ap_{kk}_{i} * lam{i}" for (kk, i) in pieces["ap"] if kk == k]
            if event.kind == "implicit":
                if not _is_zero(pieces["gp"][k]):
                    terms.append(f"c * gp{k}")
                w.line(f"out[{n + k}] = {' + '.join(terms) or '0.0'}", 2)
            else:
                if _explicit_time_gradient(w, system, event, k, 2):
                    terms.append("wl * dtk")
                w.line(f"out[{n + k}] = {' + '.join(terms) or '0.0'}", 2)
        w.line("return", 2)
    if not system.events:
        w.line("return", 1)
    return w.lines


def _conditions_function(system: OdeSystem) -> list[str]:
    canon = system.to_canonical
    w = _Writer(KernelPrinter())
    w.lines += _function_header("event_conditions")
    implicit = system.implicit_events
    w.assign([f"out[{j}]" for j in range(len(implicit))], [canon(e.condition) for e in implicit], 1)
    if not implicit:
        w.line("return", 1)
    return w.lines


def _times_function(system: OdeSystem) -> list[str]:
    canon = system.to_canonical
    w = _Writer(KernelPrinter())
    w.lines += _function_header("event_times")
    times = [canon(tau) for e in system.explicit_events for tau in e.times]
    w.assign([f"out[{s}]" for s in range(len(times))], times, 1)
    if not times:
        w.line("return", 1)
    return w.lines


def _header(system: OdeSystem, what: str) -> list[str]:
    return [header(system), f"# events: {what}"]


def event_module_source(system: OdeSystem) -> str:
    """Source of the module with ``event_conditions``, ``event_times``, ``event_jump`` (plain
    state) and ``event_adjoint_jump``."""
    lines = _header(system, "conditions, times, state jump, adjoint jump")
    lines += _conditions_function(system)
    lines += _times_function(system)
    lines += _jump_function(system, 0, 0)
    lines += _adjoint_jump_function(system)
    return "\n".join(lines) + "\n"


def event_sensitivity_module_source(system: OdeSystem, n_p: int, n_y0: int) -> str:
    """Source of the module with ``event_jump`` and ``event_time_sensitivity`` for vectors
    ``[y, S_0, ...]`` with ``n_p`` parameter columns then ``n_y0`` initial-state columns."""
    lines = _header(system, f"jump of {n_p} parameter and {n_y0} initial-state columns")
    lines += _jump_function(system, n_p, n_y0)
    lines += _time_sensitivity_function(system, n_p, n_y0)
    return "\n".join(lines) + "\n"
