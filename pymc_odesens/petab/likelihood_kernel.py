"""PEtab's log-likelihood of all measurements, and its gradient, as one generated kernel.

:meth:`PetabProblem.log_likelihood` and its gradient do not build a PyTensor graph per
observable (thousands of nodes for a pathway model, seconds of graph rewriting): the
observable and noise formulas, the noise model's density and its derivatives are written
as one kernel of the shared signature ``kernel(t, y, p, v, out)``
(:mod:`pymc_odesens.codegen.signature`) and compiled with the other generated kernels
(:func:`~pymc_odesens.codegen.kernels.load_generated_module`, disk-cached):

- ``y``: the simulated states at the output times, (E, T, N) flattened;
- ``p``: the parameter values ``z`` (:class:`~pymc_odesens.petab.parameters.ParameterValues`);
- ``v``: the measurements (:meth:`LikelihoodKernel.layout`): ``v[0] = E*T*N``, then per
  observable ``k`` the start and the number of its rows (``v[1 + 2k]``, ``v[2 + 2k]``);
  a row is ``[offset of its state in y, time, measurement, index in z of each symbol]``;
- ``out``: a header of :data:`HEADER_SIZE` entries (``OUT_*``: the log-likelihood of the
  measurements whose density is finite, the number of measurements whose noise parameter is
  not positive, of those whose simulated observable is not positive on a ``log`` or
  ``log10`` scale, of those whose simulated observable is NaN or infinite, and the
  observable index and time of the first of the latter); the gradient kernel adds
  ``d llh / d y`` (E*T*N) and ``d llh / d z`` after it.

A simulated observable that is zero or negative on a ``log`` / ``log10`` scale gives the
measurement a density of zero: the log-likelihood is ``-inf`` there (the limit as the
simulation goes to zero; a negative one is no better) and its gradient does not exist.
Such measurements are counted and left out of the sums (no ``log`` of a non-positive
number, no NaN); :mod:`pymc_odesens.petab.likelihood_op` then returns ``-inf`` and the
gradient of a rejection, zero.

Per observable, the symbols its formulas use (states, system parameters, placeholders,
parameter-table ids, time) become locals of the kernel, read per measurement; sympy
differentiates ``h`` and ``sigma`` with respect to them. The densities are PEtab's
(:mod:`pymc_odesens.petab.noise`: normal or laplace on the ``observableTransformation``
scale, as the density of the measurement, normalising constants included). The module's
source depends only on the formulas, transformations and noise distributions, and its
cache key is a hash of them; the measurements are data (``v``).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import sympy as sp
from petab.v1 import C

from pymc_odesens.codegen.kernel_source import CODEGEN_VERSION
from pymc_odesens.codegen.kernels import load_generated_module
from pymc_odesens.codegen.printer import KernelPrinter
from pymc_odesens.model.internal_symbols import InternalSymbol, internal_symbols
from pymc_odesens.petab.errors import PetabError

__all__ = [
    "LIKELIHOOD_CODEGEN_VERSION",
    "HEADER_SIZE",
    "OUT_LLH",
    "OUT_NON_POSITIVE_NOISE",
    "OUT_NON_POSITIVE_SIMULATION",
    "OUT_NON_FINITE_SIMULATION",
    "OUT_FIRST_NON_FINITE_OBSERVABLE",
    "OUT_FIRST_NON_FINITE_TIME",
    "LikelihoodKernel",
    "ObservableTerm",
]

LIKELIHOOD_CODEGEN_VERSION = "2"
"""Bump when the generated log-likelihood code changes (invalidates cached modules)."""

# the header of the kernels' out
OUT_LLH = 0
OUT_NON_POSITIVE_NOISE = 1
OUT_NON_POSITIVE_SIMULATION = 2  # on a log or log10 scale
OUT_NON_FINITE_SIMULATION = 3
OUT_FIRST_NON_FINITE_OBSERVABLE = 4  # index of the observable (the kernel's k)
OUT_FIRST_NON_FINITE_TIME = 5
HEADER_SIZE = 6

_LOG_2PI_HALF = 0.5 * math.log(2.0 * math.pi)
_LN10 = math.log(10.0)
_TIME = InternalSymbol("obs_time", real=True)


@dataclass(frozen=True, eq=False)
class ObservableTerm:
    """One observable in the kernel's local symbols.

    Attributes
    ----------
    h, sigma : sympy.Expr
        Observable and noise formulas in ``obs_time``, ``obs_y<i>`` (state ``i``) and
        ``obs_q<j>`` (the ``j``-th value read from ``z``).
    states : tuple of int
        The states the formulas use (``obs_y<i>``).
    n_values : int
        The number of ``obs_q<j>``.
    transformation, distribution : str
    """

    h: sp.Expr
    sigma: sp.Expr
    states: tuple
    n_values: int
    transformation: str
    distribution: str

    @property
    def width(self) -> int:
        """Entries of one measurement's row in ``v``."""
        return 3 + self.n_values

    def text(self) -> str:
        return (
            f"{sp.srepr(self.h)}|{sp.srepr(self.sigma)}|{self.states}|{self.n_values}|"
            f"{self.transformation}|{self.distribution}"
        )


def _state_symbol(i: int) -> InternalSymbol:
    return InternalSymbol(f"obs_y{i}", real=True)


def _value_symbol(j: int) -> InternalSymbol:
    return InternalSymbol(f"obs_q{j}", real=True)


def localized(observable, system, table_parameters: dict) -> tuple[ObservableTerm, list]:
    """``observable``'s formulas in local symbols, and what each ``obs_q<j>`` stands for.

    Returns
    -------
    term : ObservableTerm
    sources : list of tuple
        Per ``obs_q<j>``: ``("param", k)`` (the experiment's ``k``-th system parameter),
        ``("observable", j)`` / ``("noise", j)`` (a placeholder) or ``("z", index)``.
    """
    used = observable.formula.free_symbols | observable.noise_formula.free_symbols
    mapping, sources, states = {}, [], []
    for i, s in enumerate(system.state_symbols):
        if s in used:
            mapping[s] = _state_symbol(i)
            states.append(i)
    if system.t in used:
        mapping[system.t] = _TIME

    def value(symbol, source):
        mapping[symbol] = _value_symbol(len(sources))
        sources.append(source)

    for k, s in enumerate(system.param_symbols):
        if s in used:
            value(s, ("param", k))
    for j, s in enumerate(observable.observable_placeholders):
        value(s, ("observable", j))
    for j, s in enumerate(observable.noise_placeholders):
        value(s, ("noise", j))
    for s, index in table_parameters.items():
        value(s, ("z", index))
    term = ObservableTerm(
        h=observable.formula.xreplace(mapping),
        sigma=observable.noise_formula.xreplace(mapping),
        states=tuple(states),
        n_values=len(sources),
        transformation=observable.transformation,
        distribution=observable.distribution,
    )
    return term, sources


def _density_lines(term: ObservableTerm) -> list[str]:
    """``obs_l`` (log-density of ``obs_d``), ``obs_gh = dl/dh``, ``obs_gs = dl/dsigma``."""
    if term.transformation == C.LIN:
        residual = "obs_d - obs_h"
        lines = []
        log_data = ""
        h_factor = "1.0"
    else:
        lines = ["obs_ld = math.log(obs_d)"]
        residual = "obs_ld - math.log(obs_h)"
        log_data = " - obs_ld"
        h_factor = "obs_h"
    scale = "obs_s" if term.transformation != C.LOG10 else f"(obs_s * {_LN10!r})"
    lines += [f"obs_sc = {scale}", f"obs_dev = {residual}"]
    if term.distribution == C.NORMAL:
        lines += [
            "obs_res = obs_dev / obs_sc",
            f"obs_l = -0.5 * obs_res * obs_res - math.log(obs_sc) - {_LOG_2PI_HALF!r}{log_data}",
            f"obs_gh = obs_res / (obs_sc * {h_factor})",
            "obs_gs = (obs_res * obs_res - 1.0) / obs_s",
        ]
    else:
        lines += [
            "obs_abs = abs(obs_dev)",
            f"obs_l = -obs_abs / obs_sc - math.log(2.0 * obs_sc){log_data}",
            "obs_sign = 1.0 if obs_dev > 0.0 else (-1.0 if obs_dev < 0.0 else 0.0)",
            f"obs_gh = obs_sign / (obs_sc * {h_factor})",
            "obs_gs = obs_abs / (obs_sc * obs_s) - 1.0 / obs_s",
        ]
    return lines


def _observable_block(k: int, term: ObservableTerm, gradient: bool, printer) -> list[str]:
    """The loop over the measurements of observable ``k``."""
    pad = " " * 8
    lines = [
        f"    obs_start = int(v[{1 + 2 * k}])",
        f"    obs_count = int(v[{2 + 2 * k}])",
        "    for obs_m in range(0, obs_count):",
        f"{pad}obs_r = obs_start + obs_m * {term.width}",
        f"{pad}obs_yo = int(v[obs_r])",
        f"{pad}{_TIME.name} = v[obs_r + 1]",
        f"{pad}obs_d = v[obs_r + 2]",
    ]
    lines += [f"{pad}{_state_symbol(i).name} = y[obs_yo + {i}]" for i in term.states]
    lines += [
        f"{pad}{_value_symbol(j).name} = p[int(v[obs_r + {3 + j}])]" for j in range(term.n_values)
    ]
    wrt = [_state_symbol(i) for i in term.states] + [_value_symbol(j) for j in range(term.n_values)]
    expressions = [term.h, term.sigma]
    if gradient:
        expressions += [sp.diff(term.h, w) for w in wrt] + [sp.diff(term.sigma, w) for w in wrt]
    replacements, reduced = sp.cse(expressions, symbols=internal_symbols("obs_cse"))
    lines += [f"{pad}{s} = {printer.doprint(e)}" for s, e in replacements]
    lines += [f"{pad}obs_h = {printer.doprint(reduced[0])}"]
    lines += [f"{pad}obs_s = {printer.doprint(reduced[1])}"]
    lines += [
        f"{pad}if not obs_s > 0.0:",
        f"{pad}    out[{OUT_NON_POSITIVE_NOISE}] += 1.0",
        f"{pad}if not abs(obs_h) < math.inf:",
        f"{pad}    if out[{OUT_NON_FINITE_SIMULATION}] == 0.0:",
        f"{pad}        out[{OUT_FIRST_NON_FINITE_OBSERVABLE}] = {float(k)!r}",
        f"{pad}        out[{OUT_FIRST_NON_FINITE_TIME}] = {_TIME.name}",
        f"{pad}    out[{OUT_NON_FINITE_SIMULATION}] += 1.0",
    ]
    if term.transformation != C.LIN:
        # zero likelihood: counted, left out of the sums (no log of a non-positive number)
        lines += [
            f"{pad}elif not obs_h > 0.0:",
            f"{pad}    out[{OUT_NON_POSITIVE_SIMULATION}] += 1.0",
        ]
    lines += [f"{pad}else:"]
    body = [*_density_lines(term), f"out[{OUT_LLH}] += obs_l"]
    if gradient:
        n = len(wrt)
        dh, ds = reduced[2 : 2 + n], reduced[2 + n :]
        for position, (a, b) in enumerate(zip(dh, ds)):
            terms = [
                f"obs_gh * ({printer.doprint(a)})" if a != 0 else "",
                f"obs_gs * ({printer.doprint(b)})" if b != 0 else "",
            ]
            value = " + ".join(t for t in terms if t)
            if not value:
                continue
            if position < len(term.states):
                target = f"out[{HEADER_SIZE} + obs_yo + {term.states[position]}]"
            else:
                j = position - len(term.states)
                target = f"out[{HEADER_SIZE} + obs_ny + int(v[obs_r + {3 + j}])]"
            body.append(f"{target} += {value}")
    lines += [f"{pad}    {line}" for line in body]
    return lines


def likelihood_module_source(terms: list[ObservableTerm]) -> str:
    """Source of the module with the kernels ``llh`` and ``llh_gradient``."""
    printer = KernelPrinter()
    parts = [
        '"""Generated by pymc_odesens.petab.likelihood_kernel: PEtab log-likelihood of '
        f'{len(terms)} observables (codegen {CODEGEN_VERSION}/{LIKELIHOOD_CODEGEN_VERSION})."""',
        "import math",
    ]
    for name, gradient in (("llh", False), ("llh_gradient", True)):
        lines = ["", "", f"def {name}(t, y, p, v, out):"]
        lines += [f"    out[{i}] = 0.0" for i in range(HEADER_SIZE)]
        lines += ["    obs_ny = int(v[0])"]
        for k, term in enumerate(terms):
            lines += _observable_block(k, term, gradient, printer)
        parts.append("\n".join(lines))
    return "\n".join(parts) + "\n"


class LikelihoodKernel:
    """The compiled log-likelihood kernels of one problem's observables, and its ``v``.

    Parameters
    ----------
    graph : PetabGraph
        The problem's measurement groups and index arrays.
    """

    def __init__(self, graph) -> None:
        system = graph.simulation.system
        self.shape = (graph.times.shape[0], graph.times.shape[1], system.n_states)
        terms, blocks = [], []
        self._observable_ids = [group.observable.id for group in graph.groups]
        for group in graph.groups:
            observable = group.observable
            term, sources = localized(observable, system, graph.table_parameters[observable.id])
            terms.append(term)
            blocks.append(self._rows(group, term, sources, graph.parameters))
        self.terms = terms
        text = "||".join(t.text() for t in terms)
        digest = hashlib.sha256(
            f"{CODEGEN_VERSION}:{LIKELIHOOD_CODEGEN_VERSION}:{text}".encode()
        ).hexdigest()[:24]
        self.key = f"petab_llh_{digest}"
        self.layout = self._layout(blocks)
        self._module = load_generated_module(self.key, lambda: likelihood_module_source(terms))

    def _rows(self, group, term: ObservableTerm, sources: list, parameters) -> np.ndarray:
        m = len(group)
        rows = np.empty((m, term.width))
        _, n_t, n = self.shape
        rows[:, 0] = (group.experiment * n_t + group.time_index) * n
        rows[:, 1] = group.time
        rows[:, 2] = group.data
        for j, (kind, index) in enumerate(sources):
            if kind == "param":
                rows[:, 3 + j] = parameters[group.experiment, index]
            elif kind == "observable":
                rows[:, 3 + j] = group.observable_parameters[:, index]
            elif kind == "noise":
                rows[:, 3 + j] = group.noise_parameters[:, index]
            else:
                rows[:, 3 + j] = index
        if term.transformation != C.LIN and np.any(group.data <= 0):
            row = int(group.rows[np.argmax(group.data <= 0)])
            raise PetabError(
                f"measurement table, row {row} ({group.observable.id}): the measurement "
                f"{group.data[np.argmax(group.data <= 0)]} is not positive, but the "
                f"observableTransformation is {term.transformation!r}"
            )
        return rows

    def _layout(self, blocks: list[np.ndarray]) -> np.ndarray:
        header = np.empty(1 + 2 * len(blocks))
        header[0] = float(np.prod(self.shape))
        start = header.size
        for k, block in enumerate(blocks):
            header[1 + 2 * k] = start
            header[2 + 2 * k] = block.shape[0]
            start += block.size
        return np.concatenate([header, *(b.ravel() for b in blocks)])

    @property
    def value_kernel(self):
        """``out[:HEADER_SIZE]``: the log-likelihood and the counts (the ``OUT_*`` slots)."""
        return self._module.llh

    @property
    def gradient_kernel(self):
        """As :attr:`value_kernel`, then ``d llh/d y`` (E*T*N) and ``d llh/d z``."""
        return self._module.llh_gradient

    @property
    def observable_ids(self) -> list[str]:
        """The observables in the kernel's order (``OUT_FIRST_NON_FINITE_OBSERVABLE``)."""
        return list(self._observable_ids)
