"""Which observation parameters of a PEtab problem can be integrated out, and how.

A measurement's observable ``h`` and noise ``sigma`` are formulas of the states and of
values that each measurement reads from ``z`` (placeholders, parameter-table symbols,
system parameters). Per observable, the measurements that read the same entries of ``z``
share a *signature*: their formulas, with the constants put in and each estimated
parameter as a symbol, are then fixed expressions, and every question below is asked of
them (so an id that is a scaling in one observable and used non-linearly in another is
seen as such).

An estimated parameter qualifies (:func:`observation_analysis`) as

- a **scaling or offset** ``theta`` if, in every measurement that reads it, it enters the
  observable formula of a normal-noise observable linearly (``lin`` scale: ``h`` affine in
  it, ``theta`` is its value) or as a constant power of a factor (``log`` / ``log10``
  scale: ``h = s^k f``, so that ``T(h) = k T(s) + T(f)``, ``theta = T(s)``), and nowhere else;
- a **noise standard deviation** if every noise formula that reads it is that parameter
  times a positive constant, under normal noise, and it is read nowhere else;

and it is not a parameter of the simulated system's dynamics. Laplace noise has no
conjugate prior; an offset inside a logarithm, or a parameter that also sets the noise,
enters non-linearly. Several marginalised ``theta`` multiplied together in one formula
are not jointly linear: the first in the parameter table is kept. A scaling or offset
that links measurements of several noise parameters, or of a marginalised and a sampled
one, allows no closed form for those noise parameters: they are sampled (``"auto"``).

:class:`MarginalizationPlan` then builds the PyTensor pieces: the measurements' transformed
values ``z`` (divided by their noise weights), the fixed part ``c`` and the entries of
``A`` of every block, the given ``sigma`` of known-noise blocks, and the structure with the
conjugate priors (:mod:`pymc_odesens.petab.marginal_priors`), for
:func:`pymc_odesens.ops.marginal_likelihood.marginal_log_likelihood`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import petab.v1 as petab
import pymc as pm
import pytensor.tensor as pt
import sympy as sp
from petab.v1 import C

from pymc_odesens.ops.failure_potential import failure_potential
from pymc_odesens.ops.marginal_likelihood import marginal_log_likelihood
from pymc_odesens.ops.marginal_structure import (
    MarginalColumn,
    MarginalNoise,
    MarginalNormalStructure,
)
from pymc_odesens.petab.errors import PetabError
from pymc_odesens.petab.marginal_priors import column_prior, noise_prior
from pymc_odesens.petab.tensor_expressions import expression_tensor

__all__ = ["MarginalizationPlan", "ObservationAnalysis", "observation_analysis"]

_LN10 = math.log(10.0)
_TINY = float(np.finfo(np.float64).tiny)
MARGINAL_NAME = "marginalized_measurements"
"""The name of the potential that holds the marginal likelihood of a marginalised model."""
SCALING, OFFSET, NOISE = "scaling", "offset", "noise_sd"


def _row_indices(graph, group) -> tuple[list, np.ndarray]:
    """The symbols of the group's formulas that read ``z`` and, per measurement, the index
    in ``z`` each reads: (symbols, (M, S) int array)."""
    system = graph.simulation.system
    observable = group.observable
    used = observable.formula.free_symbols | observable.noise_formula.free_symbols
    symbols, columns = [], []
    for k, s in enumerate(system.param_symbols):
        if s in used:
            symbols.append(s)
            columns.append(graph.parameters[group.experiment, k])
    for j, s in enumerate(observable.observable_placeholders):
        symbols.append(s)
        columns.append(group.observable_parameters[:, j])
    for j, s in enumerate(observable.noise_placeholders):
        symbols.append(s)
        columns.append(group.noise_parameters[:, j])
    for s, index in graph.table_parameters[observable.id].items():
        symbols.append(s)
        columns.append(np.full(len(group), index, dtype=np.int64))
    matrix = np.stack(columns, axis=1) if columns else np.zeros((len(group), 0), dtype=np.int64)
    return symbols, matrix.astype(np.int64)


def _event_symbols(event) -> set:
    """The symbols an event of a system reads: its condition, trigger, times, priority and
    assignments."""
    parts = [*event.affect, *event.times]
    for part in (event.condition, event.trigger, event.priority):
        if part is not None:
            parts.append(part)
    names = set()
    for part in parts:
        names |= {s.name for s in getattr(part, "free_symbols", ())}
    return names


def _dynamic_parameters(simulation) -> np.ndarray:
    """Mask over the simulated system's parameters: used by its dynamics (right-hand
    side, initial state, events, switching times), in any of its systems."""
    names = set()
    systems = [simulation.system, simulation.steady_state_system]
    if simulation.preequilibrated_system is not None:
        systems.append(simulation.preequilibrated_system)
    for system in systems:
        expressions = list(system.rhs_expressions) + list(system.initial_state_expressions or ())
        for e in expressions:
            names |= {s.name for s in e.free_symbols}
        for event in system.events:
            names |= _event_symbols(event)
    for switch in simulation.switches:
        names |= {s.name for s in (switch.time.free_symbols | switch.initial.free_symbols)}
    return np.array([s.name in names for s in simulation.system.param_symbols], dtype=bool)


@dataclass
class _Signature:
    """The measurements of one observable that read the same entries of ``z``."""

    group: int
    rows: np.ndarray
    indices: np.ndarray
    h: sp.Expr
    noise: sp.Expr
    # estimated index -> ("lin", coefficient is a number, estimated indices in its
    # coefficient) or ("log", exponent k)
    theta: dict = field(default_factory=dict)
    noise_use: tuple | None = None  # (estimated index, positive weight)


@dataclass
class _Facts:
    """What the signatures say about one estimated parameter."""

    reasons: list = field(default_factory=list)
    observables: list = field(default_factory=list)
    lin: bool = False
    log_scales: set = field(default_factory=set)
    offset_only: bool = True
    noise: bool = False

    def reason(self, text: str) -> None:
        if text not in self.reasons:
            self.reasons.append(text)

    def seen(self, observable: str) -> None:
        if observable not in self.observables:
            self.observables.append(observable)

    @property
    def kind(self) -> str:
        if self.noise and not (self.lin or self.log_scales):
            return NOISE
        if self.log_scales or not self.offset_only:
            return SCALING
        return OFFSET if self.lin else ""


class ObservationAnalysis:
    """Per estimated parameter: where it is read and whether it can be marginalised.

    Build it with :func:`observation_analysis`. ``candidates`` are the parameters that
    qualify on their own; :meth:`select` picks a jointly valid set.
    """

    def __init__(self, problem) -> None:
        self.problem = problem
        graph = problem.graph
        self.graph = graph
        parameters = problem.parameters
        self.ids = parameters.ids
        n_estimated = len(self.ids)
        constants = graph.values.constants
        self.symbols: dict[int, sp.Symbol] = {}

        def estimated_symbol(v: int) -> sp.Symbol:
            if v not in self.symbols:
                self.symbols[v] = sp.Dummy(f"x{v}", real=True)
            return self.symbols[v]

        self.facts = {v: _Facts() for v in range(n_estimated)}
        dynamic = _dynamic_parameters(graph.simulation)
        self.in_model = set()
        for table in (graph.parameters, graph.preequilibration_parameters):
            if table.size:
                used = table[:, dynamic]
                self.in_model |= set(used[used < n_estimated].tolist())
        reinitial = graph.reinitial_values[graph.reinitialize]
        self.in_model |= set(reinitial[reinitial < n_estimated].tolist())

        self.signatures: list[_Signature] = []
        self.group_symbols: list[list] = []
        for g, group in enumerate(graph.groups):
            observable = group.observable
            symbols, matrix = _row_indices(graph, group)
            self.group_symbols.append(symbols)
            if matrix.shape[1]:
                unique, inverse = np.unique(matrix, axis=0, return_inverse=True)
            else:
                unique, inverse = np.zeros((1, 0), dtype=np.int64), np.zeros(len(group), int)
            inverse = np.asarray(inverse).ravel()
            for u, indices in enumerate(unique):
                substitution = {}
                for s, v in zip(symbols, indices):
                    if v < n_estimated:
                        substitution[s] = estimated_symbol(int(v))
                    else:
                        substitution[s] = sp.Float(float(constants[v - n_estimated]), 17)
                signature = _Signature(
                    group=g,
                    rows=np.flatnonzero(inverse == u),
                    indices=indices,
                    h=observable.formula.xreplace(substitution),
                    noise=observable.noise_formula.xreplace(substitution),
                )
                self._analyse(signature, observable)
                self.signatures.append(signature)
        self._conclude()

    # the questions asked of one signature ------------------------------------------------
    def _estimated_in(self, expr: sp.Expr) -> list[int]:
        inverse = {s: v for v, s in self.symbols.items()}
        return sorted(inverse[s] for s in expr.free_symbols if s in inverse)

    def _analyse(self, signature: _Signature, observable) -> None:
        oid, transformation = observable.id, observable.transformation
        laplace = observable.distribution != C.NORMAL
        for v in self._estimated_in(signature.h):
            facts = self.facts[v]
            facts.seen(oid)
            if laplace:
                facts.reason(f"observable {oid!r} has laplace noise (no conjugate prior)")
                continue
            x = self.symbols[v]
            derivative = sp.diff(signature.h, x)
            if transformation == C.LIN:
                if x in derivative.free_symbols:
                    facts.reason(f"enters the observableFormula of {oid!r} non-linearly")
                    continue
                facts.lin = True
                number = bool(derivative.is_number)
                facts.offset_only &= number
                signature.theta[v] = ("lin", number, set(self._estimated_in(derivative)))
            else:
                exponent = sp.cancel(x * derivative / signature.h)
                if not (exponent.is_number and exponent.is_finite and exponent != 0):
                    facts.reason(
                        f"enters the observableFormula of {oid!r} ({transformation} scale) "
                        "other than as a factor s^k of it (an offset or a sum inside a "
                        "logarithm has no closed form)"
                    )
                    continue
                facts.log_scales.add(transformation)
                signature.theta[v] = ("log", float(exponent))
        for v in self._estimated_in(signature.noise):
            facts = self.facts[v]
            facts.seen(oid)
            if laplace:
                facts.reason(f"observable {oid!r} has laplace noise (no conjugate prior)")
                continue
            x = self.symbols[v]
            if v in signature.theta:
                continue  # reported below: read by both formulas
            if signature.noise.free_symbols == {x}:
                weight = sp.cancel(signature.noise / x)
                if weight.is_number and weight.is_finite and float(weight) > 0:
                    facts.noise = True
                    signature.noise_use = (v, float(weight))
                    continue
            facts.reason(
                f"enters the noiseFormula of {oid!r} as {sp.sstr(self._named(signature.noise))}"
                " (not one parameter times a positive constant)"
            )

    def _named(self, expr: sp.Expr) -> sp.Expr:
        return expr.xreplace({s: sp.Symbol(self.ids[v]) for v, s in self.symbols.items()})

    def _conclude(self) -> None:
        for v, facts in self.facts.items():
            if v in self.in_model:
                facts.reason("a parameter of the model's dynamics")
            theta = facts.lin or bool(facts.log_scales)
            if theta and facts.noise:
                facts.reason("read both by an observableFormula and as a noise parameter")
            read_in_noise = any(
                v in self._estimated_in(s.noise) and (s.noise_use is None or s.noise_use[0] != v)
                for s in self.signatures
            )
            if theta and read_in_noise:
                facts.reason("also enters a noiseFormula")
            scales = ({C.LIN} if facts.lin else set()) | facts.log_scales
            if len(scales) > 1:
                facts.reason(
                    f"enters observables on different scales ({', '.join(sorted(scales))})"
                )
        self.candidates = [
            v for v, f in self.facts.items() if not f.reasons and (f.lin or f.log_scales or f.noise)
        ]

    # joint choices -----------------------------------------------------------------------
    def variable(self, v: int) -> str:
        """``theta``'s variable of a scaling or offset: ``lin``, ``log`` or ``log10``."""
        facts = self.facts[v]
        return next(iter(facts.log_scales)) if facts.log_scales else C.LIN

    def select(self, wanted: list[int], strict: bool) -> tuple[list[int], dict]:
        """A jointly valid subset of ``wanted`` (candidates), in parameter-table order, and
        the reasons of those left out; ``strict``: raise instead of leaving out.

        Left out: a ``theta`` multiplied by another chosen ``theta`` in some formula (the
        later one), and noise parameters whose block has no closed form.
        """
        wanted = sorted(set(wanted))
        dropped: dict[int, str] = {}
        chosen: list[int] = []
        for v in wanted:
            clash = None
            for s in self.signatures:
                use = s.theta.get(v)
                if use is None or use[0] != "lin":
                    continue
                clash = next((u for u in chosen if u in use[2]), None)
                if clash is None:
                    clash = next(
                        (
                            u
                            for u in chosen
                            if s.theta.get(u, ("", 0, set()))[0] == "lin" and v in s.theta[u][2]
                        ),
                        None,
                    )
                if clash is not None:
                    oid = self.graph.groups[s.group].observable.id
                    text = (
                        f"enters the observableFormula of {oid!r} multiplied by "
                        f"{self.ids[clash]!r}, which is marginalised"
                    )
                    break
            if clash is None:
                chosen.append(v)
            elif strict:
                raise ValueError(
                    f"marginalize: {self.ids[v]!r} and {self.ids[clash]!r} cannot both be "
                    f"marginalised: {self.ids[v]!r} {text}"
                )
            else:
                dropped[v] = text
        while True:
            coupled = self._coupled_noise(chosen)
            if not coupled:
                return chosen, dropped
            if strict:
                v, text = next(iter(coupled.items()))
                raise ValueError(f"marginalize: {self.ids[v]!r} cannot be marginalised: {text}")
            for v, text in coupled.items():
                dropped[v] = text
                chosen.remove(v)

    def _coupled_noise(self, chosen: list[int]) -> dict[int, str]:
        """Noise parameters among ``chosen`` in blocks without a closed form: the reason."""
        chosen_set = set(chosen)
        parent = {v: v for v in chosen}

        def find(v):
            while parent[v] != v:
                parent[v] = parent[parent[v]]
                v = parent[v]
            return v

        rows_of = []  # (theta ids, noise id or None)
        for s in self.signatures:
            thetas = [v for v in s.theta if v in chosen_set]
            noise = s.noise_use[0] if s.noise_use and s.noise_use[0] in chosen_set else None
            members = thetas + ([noise] if noise is not None else [])
            for u in members[1:]:
                a, b = find(members[0]), find(u)
                if a != b:
                    parent[max(a, b)] = min(a, b)
            if thetas:
                rows_of.append((thetas, noise))
        blocks: dict[int, dict] = {}
        for thetas, noise in rows_of:
            block = blocks.setdefault(find(thetas[0]), {"thetas": set(), "noise": set()})
            block["thetas"].update(thetas)
            block["noise"].add(noise)
        coupled = {}
        for block in blocks.values():
            noise = block["noise"]
            if len(noise) > 1:
                marginal = sorted(q for q in noise if q is not None)
                thetas = ", ".join(repr(self.ids[t]) for t in sorted(block["thetas"]))
                for q in marginal:
                    others = [repr(self.ids[o]) for o in marginal if o != q]
                    if None in noise:
                        others.append("a noise that is not marginalised")
                    coupled[q] = (
                        f"the marginalised {thetas} link its measurements to those of "
                        f"{' and '.join(others)}: no closed form for the noise, so it is "
                        "sampled (the scalings and offsets are marginalised)"
                    )
        return coupled

    # the report -----------------------------------------------------------------------------
    def report(self) -> pd.DataFrame:
        """One row per observation parameter (see
        :meth:`PetabProblem.marginalizable_parameters`)."""
        chosen, dropped = self.select(self.candidates, strict=False)
        table = self.problem.parameters.table
        rows = []
        for v, facts in self.facts.items():
            if not facts.observables:
                continue
            pid = self.ids[v]
            kind = facts.kind
            variable = prior = ""
            qualifies = v in chosen
            reason = "; ".join(facts.reasons) if facts.reasons else dropped.get(v, "")
            if qualifies:
                scale = self.problem.parameters.scales[v]
                try:
                    if kind == NOISE:
                        variable = f"{pid}^2"
                        alpha, beta, how = noise_prior(table.loc[pid], pid, scale)
                        prior = f"InverseGamma(alpha={alpha:.4g}, beta={beta:.4g}) ({how})"
                    else:
                        t = self.variable(v)
                        variable = pid if t == C.LIN else f"{t}({pid})"
                        mean, sd, how = column_prior(table.loc[pid], pid, scale, t)
                        prior = f"Normal(mu={mean:.4g}, sigma={sd:.4g}) ({how})"
                except PetabError as error:
                    prior = f"none: {error}"
            rows.append(
                {
                    "parameterId": pid,
                    "kind": kind,
                    "marginalizable": qualifies,
                    "observables": ", ".join(facts.observables),
                    "variable": variable,
                    "prior": prior,
                    "reason": reason,
                }
            )
        for pid, observables in _fixed_observation_parameters(self.problem).items():
            rows.append(
                {
                    "parameterId": pid,
                    "kind": "",
                    "marginalizable": False,
                    "observables": ", ".join(observables),
                    "variable": "",
                    "prior": "",
                    "reason": "not estimated (estimate = 0)",
                }
            )
        columns = ["kind", "marginalizable", "observables", "variable", "prior", "reason"]
        if not rows:
            return pd.DataFrame(columns=columns, index=pd.Index([], name="parameterId"))
        return pd.DataFrame(rows).set_index("parameterId")[columns]


def _fixed_observation_parameters(problem) -> dict[str, list]:
    """Ids with ``estimate = 0`` that observable or noise formulas read (directly or
    through the measurement table's overrides), and the observables that read them."""
    df = problem.petab_problem.parameter_df
    fixed = set(df.index[df[C.ESTIMATE] != 1])
    found: dict[str, list] = {}

    def add(pid, oid):
        if pid in fixed and oid not in found.setdefault(pid, []):
            found[pid].append(oid)

    for oid, observable in problem.observables.items():
        for pid in observable.table_parameters.values():
            add(pid, oid)
    measurements = problem.petab_problem.measurement_df
    for column in (C.OBSERVABLE_PARAMETERS, C.NOISE_PARAMETERS):
        if column not in measurements:
            continue
        for oid, cell in zip(measurements[C.OBSERVABLE_ID], measurements[column]):
            for entry in petab.split_parameter_replacement_list(cell):
                if isinstance(entry, str):
                    add(entry, oid)
    return found


def observation_analysis(problem) -> ObservationAnalysis:
    """Analyse the problem's observation parameters (see the module docstring)."""
    return ObservationAnalysis(problem)


# the plan --------------------------------------------------------------------------------
def _check_priors(marginal_priors, ids: list, kinds: dict) -> dict:
    """The user's hyperparameters, checked: ``{id: {"mu", "sigma"}}`` for scalings and
    offsets, ``{id: {"alpha", "beta"}}`` for noise parameters."""
    if marginal_priors is None:
        return {}
    if not isinstance(marginal_priors, dict):
        raise TypeError(
            f"marginal_priors must be a dict of parameter ids to hyperparameters, got "
            f"{type(marginal_priors).__name__}"
        )
    checked = {}
    for pid, given in marginal_priors.items():
        if pid not in ids:
            raise ValueError(
                f"marginal_priors: {pid!r} is not a marginalised parameter (marginalised: "
                f"{', '.join(ids) or 'none'})"
            )
        noise = kinds[pid] == NOISE
        expected = ("alpha", "beta") if noise else ("mu", "sigma")
        meaning = (
            "the inverse-gamma prior of its square"
            if noise
            else "the normal prior of its marginalised variable"
        )
        if not isinstance(given, dict) or set(given) != set(expected):
            raise ValueError(
                f"marginal_priors[{pid!r}] must be a dict with the keys {expected} "
                f"({meaning}), got {given!r}"
            )
        values = {}
        for key in expected:
            value = float(given[key])
            if not math.isfinite(value) or (key != "mu" and value <= 0):
                raise ValueError(
                    f"marginal_priors[{pid!r}][{key!r}] must be a "
                    f"{'finite' if key == 'mu' else 'positive finite'} number, got {given[key]}"
                )
            values[key] = value
        checked[pid] = values
    return checked


class MarginalizationPlan:
    """The marginalised parameters of a PEtab problem and the pieces of their likelihood.

    Parameters
    ----------
    analysis : ObservationAnalysis
    marginalize : "auto" or sequence of str
        ``"auto"``: every parameter that qualifies; else these ids (each must qualify,
        jointly).
    marginal_priors : dict, optional
        Hyperparameters by id (``{"mu", "sigma"}`` or ``{"alpha", "beta"}``), replacing the
        defaults of :mod:`pymc_odesens.petab.marginal_priors`.

    Attributes
    ----------
    ids : tuple of str
        The marginalised parameters, in parameter-table order.
    indices : tuple of int
        Their positions among the estimated parameters.
    free_rows : dict of int to numpy.ndarray
        Per measurement group, the measurements that keep their own distribution.
    structure : MarginalNormalStructure
    """

    def __init__(self, analysis: ObservationAnalysis, marginalize, marginal_priors=None):
        self.analysis = analysis
        problem = analysis.problem
        ids = analysis.ids
        if isinstance(marginalize, str):
            if marginalize != "auto":
                raise ValueError(
                    f"marginalize must be 'auto', a list of parameter ids or None, got "
                    f"{marginalize!r}"
                )
            chosen, _ = analysis.select(analysis.candidates, strict=False)
        else:
            wanted = []
            for pid in marginalize:
                if pid not in ids:
                    raise ValueError(
                        f"marginalize: {pid!r} is not an estimated parameter of the problem"
                    )
                v = ids.index(pid)
                if v not in analysis.candidates:
                    reasons = (
                        "; ".join(analysis.facts[v].reasons) or "it is no observation parameter"
                    )
                    raise ValueError(f"marginalize: {pid!r} cannot be marginalised: {reasons}")
                wanted.append(v)
            chosen, _ = analysis.select(wanted, strict=True)
        if not chosen:
            raise ValueError(
                f"marginalize={marginalize!r}: no parameter of {problem.name!r} to marginalise "
                "(problem.marginalizable_parameters() says why)"
            )
        self.indices = tuple(chosen)
        self.ids = tuple(ids[v] for v in chosen)
        kinds = {ids[v]: analysis.facts[v].kind for v in chosen}
        self.kinds = kinds
        given = _check_priors(marginal_priors, list(self.ids), kinds)
        self._build(problem, set(chosen), given)

    def _build(self, problem, chosen: set, given: dict) -> None:
        analysis = self.analysis
        graph = analysis.graph
        parameters = problem.parameters
        table = parameters.table
        columns, noises = [], []
        column_of, noise_of = {}, {}
        for v in sorted(chosen):
            pid = parameters.ids[v]
            scale = parameters.scales[v]
            if self.kinds[pid] == NOISE:
                if pid in given:
                    alpha, beta = given[pid]["alpha"], given[pid]["beta"]
                else:
                    alpha, beta, _ = noise_prior(table.loc[pid], pid, scale)
                noise_of[v] = len(noises)
                noises.append(MarginalNoise(pid, alpha, beta, report=scale))
            else:
                variable = analysis.variable(v)
                if pid in given:
                    mean, sd = given[pid]["mu"], given[pid]["sigma"]
                else:
                    mean, sd, _ = column_prior(table.loc[pid], pid, scale, variable)
                column_of[v] = len(columns)
                columns.append(MarginalColumn(pid, mean, sd, variable=variable, report=scale))

        # the block rows, per group, in group order; their signatures
        block_rows: dict[int, list] = {}
        signature_of_row: dict[tuple, _Signature] = {}
        for s in analysis.signatures:
            involved = [v for v in s.theta if v in chosen]
            if s.noise_use is not None and s.noise_use[0] in chosen:
                involved.append(s.noise_use[0])
            if not involved:
                continue
            block_rows.setdefault(s.group, []).extend(s.rows.tolist())
            for r in s.rows:
                signature_of_row[(s.group, int(r))] = s
        self.free_rows = {}
        order = []  # (group, local row) of each structure row
        for g, group in enumerate(graph.groups):
            rows = sorted(block_rows.get(g, []))
            if rows:
                self.free_rows[g] = np.setdiff1d(np.arange(len(group)), rows)
            order += [(g, r) for r in rows]
        n = len(order)

        entry_row, entry_column, entry_constant = [], [], []
        row_noise = np.full(n, -1, dtype=np.int64)
        weight = np.ones(n)
        data = np.empty(n)
        jacobian = 0.0
        for i, (g, r) in enumerate(order):
            s = signature_of_row[(g, r)]
            group = graph.groups[g]
            observable = group.observable
            m = float(group.data[r])
            transformation = observable.transformation
            if transformation != C.LIN and not m > 0:
                raise PetabError(
                    f"measurement table, row {int(group.rows[r])} ({observable.id}): the "
                    f"measurement {m} is not positive, but the observableTransformation is "
                    f"{transformation!r}"
                )
            if transformation == C.LIN:
                data[i] = m
            elif transformation == C.LOG:
                data[i] = math.log(m)
                jacobian -= math.log(m)
            else:
                data[i] = math.log10(m)
                jacobian -= math.log(m * _LN10)
            for v, use in sorted(s.theta.items()):
                if v not in chosen:
                    continue
                entry_row.append(i)
                entry_column.append(column_of[v])
                entry_constant.append(use[1] if use[0] == "log" else math.nan)
            if s.noise_use is not None and s.noise_use[0] in chosen:
                row_noise[i] = noise_of[s.noise_use[0]]
                weight[i] = s.noise_use[1]
                jacobian -= math.log(s.noise_use[1])
        self.order = order
        self.structure = MarginalNormalStructure.build(
            n, entry_row, entry_column, columns, row_noise, noises
        )
        self.data = data / weight
        self.weight = weight
        self.jacobian = jacobian
        self.entry_constant = np.array(entry_constant, dtype=float)
        self.columns = tuple(columns)
        self.noises = tuple(noises)

    # the tensors ---------------------------------------------------------------------------
    def log_likelihood(self, graph, z, y):
        """The marginal log-likelihood of the block measurements (density of the
        measurements themselves, as PEtab's), given ``z`` and the states ``y``."""
        c, a, sigma, not_positive = self.tensors(graph, z, y)
        if not_positive:
            failure_potential(
                pm.modelcontext(None), f"{MARGINAL_NAME}_simulation_not_positive", not_positive
            )
        return marginal_log_likelihood(self.structure, self.data, c, a, sigma) + self.jacobian

    def tensors(self, graph, z, y):
        """``(c, a, sigma, not_positive)``: the fixed parts, ``A``'s entries and the given
        noise of the structure's rows (divided by their noise weights), and flags (int8,
        shape (1,)) of ``log`` / ``log10`` observables whose simulated factor ``f`` of
        ``h = s^k f`` is not positive somewhere: as for the observed measurements
        (:mod:`pymc_odesens.petab.noise`), the density is zero there, so the flag is a
        rejection, and ``ln f`` is taken of the smallest normal float instead, which keeps
        the gradient finite."""
        analysis = self.analysis
        chosen = set(self.indices)
        n = len(self.order)
        position = {key: i for i, key in enumerate(self.order)}
        c_parts, c_index = [], []
        not_positive = []
        a_parts, a_index = [], []
        sigma_parts, sigma_index = [], []
        entry_lookup = {}
        for e, (i, j) in enumerate(
            zip(self.structure.entry_row.tolist(), self.structure.entry_column.tolist())
        ):
            entry_lookup[(i, j)] = e
        column_of = {analysis.ids.index(col.name): j for j, col in enumerate(self.columns)}
        by_group: dict[int, list] = {}
        for g, r in self.order:
            by_group.setdefault(g, []).append(r)
        for g, rows in by_group.items():
            group = graph.groups[g]
            observable = group.observable
            symbols = analysis.group_symbols[g]
            _, matrix = _row_indices(graph, group)
            formula_symbols = observable.formula.free_symbols
            # rows of one pattern: the same marginalised positions (and equal ids among them)
            patterns: dict[tuple, list] = {}
            for r in rows:
                indices = matrix[r]
                key = []
                for symbol, v in zip(symbols, indices):
                    if symbol in formula_symbols and int(v) in chosen and int(v) in column_of:
                        key.append(int(np.flatnonzero(indices == v)[0]))
                    else:
                        key.append(-1)
                patterns.setdefault(tuple(key), []).append(r)
            for key, pattern_rows in patterns.items():
                structure_rows = np.array([position[(g, r)] for r in pattern_rows])
                weights = self.weight[structure_rows]
                values = graph.symbol_values(group, z, y, pattern_rows)
                label = f"observable {observable.id!r}"
                marginal = {symbols[p]: p for p in range(len(key)) if key[p] >= 0}
                classes: dict[int, list] = {}
                for p, rep in enumerate(key):
                    if rep >= 0:
                        classes.setdefault(rep, []).append(symbols[p])
                m = len(pattern_rows)

                def entries_of(rep, rows=pattern_rows, at=structure_rows, matrix=matrix):
                    return _entries(entry_lookup, column_of, matrix, rows, at, rep)

                if observable.transformation == C.LIN:
                    zero = {s: sp.S.Zero for s in marginal}
                    fixed = observable.formula.xreplace(zero)
                    c_value = expression_tensor(fixed, values, f"{label}: observableFormula")
                    for rep, members in classes.items():
                        coefficient = sum(
                            (sp.diff(observable.formula, s) for s in members), sp.S.Zero
                        ).xreplace(zero)
                        value = expression_tensor(coefficient, values, f"{label}: coefficient")
                        entries = entries_of(rep)
                        a_parts.append(pt.broadcast_to(value, (m,)) / weights)
                        a_index.append(entries)
                else:
                    one = {s: sp.S.One for s in marginal}
                    factor = expression_tensor(
                        observable.formula.xreplace(one), values, f"{label}: observableFormula"
                    )
                    factor = pt.as_tensor_variable(factor)
                    positive = pt.gt(factor, 0.0)
                    not_positive.append(pt.cast(pt.any(pt.invert(positive)), "int8")[None])
                    c_value = pt.log(pt.switch(positive, factor, _TINY))
                    if observable.transformation == C.LOG10:
                        c_value = c_value / _LN10
                    for rep in classes:
                        entries = entries_of(rep)
                        a_parts.append(pt.constant(self.entry_constant[entries] / weights))
                        a_index.append(entries)
                c_parts.append(pt.broadcast_to(c_value, (m,)) / weights)
                c_index.append(structure_rows)
                known = self.structure.row_noise[structure_rows] < 0
                if known.any():
                    sigma = expression_tensor(
                        observable.noise_formula, values, f"{label}: noiseFormula"
                    )
                    sigma = pt.broadcast_to(sigma, (m,))
                    sigma_parts.append(sigma[np.flatnonzero(known)])
                    sigma_index.append(structure_rows[known])
        c = _assemble(c_parts, c_index, n)
        a = _assemble(a_parts, a_index, self.structure.n_entries)
        if self.structure.n_entries and len(np.concatenate(a_index)) != self.structure.n_entries:
            raise AssertionError("marginalisation: entries of A left unassigned")
        sigma = _assemble(sigma_parts, sigma_index, n, fill=1.0)
        return c, a, sigma, not_positive


def _entries(entry_lookup: dict, column_of: dict, matrix, rows, structure_rows, rep: int):
    """The entries of ``A`` that the symbol at position ``rep`` gives in ``rows`` (the id
    it reads, and so its column, may differ from row to row)."""
    return np.array(
        [entry_lookup[(i, column_of[int(matrix[r, rep])])] for r, i in zip(rows, structure_rows)],
        dtype=np.int64,
    )


def _assemble(parts: list, indices: list, size: int, fill: float | None = None):
    """One vector of ``size`` from pieces placed at ``indices`` (``fill`` elsewhere)."""
    if not parts:
        return pt.constant(np.full(size, 1.0 if fill is None else fill))
    joined = pt.concatenate([pt.cast(p, "float64") for p in parts]) if len(parts) > 1 else parts[0]
    where = np.concatenate(indices)
    if fill is None:
        order = np.empty(size, dtype=np.int64)
        order[where] = np.arange(where.size)
        return joined[order]
    return pt.set_subtensor(pt.constant(np.full(size, fill))[where], joined)
