"""A synthetic family of mass-action signalling networks, N = 50 ... 1000 species.

Until models arrive through SBML import, this family stands in for pathway models of the
PEtab benchmark collection: mass-action kinetics, uni- and bi-molecular reactions, many of
them reversible, conserved moieties, a sparse Jacobian with a few non-zeros per row, and
``P = max(8, N // 2)`` rate constants shared among the reactions. Everything is
deterministic from ``(n_species, seed)``.

Structure (``M = (N - 1) // 3`` phosphorylation modules, module ``m`` with species
``S<m>``, ``Sp<m>``, ``C<m>``):

- an input enzyme ``E`` activates module 0; the active form ``Sp<m-1>`` of each module is
  the enzyme of the next one:
  ``S<m> + Enz <-> C<m>`` (binding, reversible), ``C<m> -> Sp<m> + Enz`` (catalysis),
  ``Sp<m> -> S<m>`` (dephosphorylation);
- cross-talk: about a third of the modules are also phosphorylated directly by the active
  form of a random earlier module, ``S<m> + Sp<q> -> Sp<m> + Sp<q>`` (bi-molecular);
- turnover: about a fifth of the modules are synthesised and degraded
  (``-> S<m>``, ``S<m> ->``, ``Sp<m> ->``), which breaks their conservation; the others keep
  a conserved total (``S + Sp + C`` plus the complexes in which their active form is bound);
- the ``N - 1 - 3 M`` remaining species are reporters ``Z<j>``, produced by an active form
  and degraded (``Sp<q> -> Sp<q> + Z<j>``, ``Z<j> ->``).

Trajectories stay non-negative. A rate constant that no reaction drew gets a reaction of
its role; for a synthesis constant that is ``-> S<m>`` alone, which nothing may balance, so
that species can grow without bound and the network need not have a steady state.
``bounded=True`` pairs such a synthesis with a degradation of the same species: those
networks (another name, other draws) have steady states, for the steady-state tests and
benchmarks. Binding is fast against catalysis and dephosphorylation, which makes the system mildly
stiff, as signalling models are.

``network_spec(n)`` is the model in the neutral JSON format of ``shared/models`` (what the
AMICI peer builds), ``mass_action_network(n)`` the :class:`pymc_odesens.OdeSystem` with
``x0``, ``p_nominal``, ``t0`` and ``t_end`` set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "DEFAULT_SEED",
    "NETWORK_SIZES",
    "Reaction",
    "mass_action_network",
    "network_reactions",
    "network_spec",
    "write_network_json",
]

DEFAULT_SEED = 20240519
NETWORK_SIZES = (50, 100, 200, 500, 1000)
"""The sizes of the benchmark family (species)."""

_CROSS_TALK = 0.35
_TURNOVER = 0.2
# nominal values by the role of a rate constant (log-uniform in these ranges)
_RANGES = {
    "bind": (5.0, 50.0),
    "unbind": (0.5, 5.0),
    "cat": (0.5, 5.0),
    "dephos": (0.05, 0.5),
    "cross": (0.05, 0.5),
    "syn": (0.01, 0.1),
    "deg": (0.01, 0.1),
    "report": (0.1, 1.0),
}


@dataclass(frozen=True)
class Reaction:
    """One mass-action reaction: ``rate = p[constant] * prod(y[r] for r in reactants)``."""

    reactants: tuple[int, ...]
    products: tuple[int, ...]
    constant: int


def _module_species(n_species: int) -> tuple[list[str], int]:
    if n_species < 4:
        raise ValueError(f"n_species must be at least 4, got {n_species!r}")
    modules = (n_species - 1) // 3
    names = ["E"]
    for m in range(modules):
        names += [f"S{m}", f"Sp{m}", f"C{m}"]
    names += [f"Z{j}" for j in range(n_species - len(names))]
    return names, modules


def network_reactions(
    n_species: int, seed: int = DEFAULT_SEED, bounded: bool = False
) -> tuple[list[str], list[str], list[Reaction], np.ndarray, np.ndarray]:
    """``(species, parameters, reactions, x0, p_nominal)`` of the network with ``n_species``.

    Parameters
    ----------
    n_species : int
        N, at least 4.
    seed : int
        Seed of numpy's ``default_rng``: cross-talk, turnover, reporters and the
        assignment and values of the rate constants.
    bounded : bool
        Give every synthesis reaction a degradation of the same species, so that the
        network has a steady state (the members of the benchmark family, ``False``, may
        synthesise a species that nothing removes: their trajectories grow without bound).
    """
    names, modules = _module_species(n_species)
    rng = np.random.default_rng(seed)
    index = {name: i for i, name in enumerate(names)}
    n_params = max(len(_RANGES), n_species // 2)  # at least one constant per role
    # every rate constant has a role (so that one value suits every reaction using it);
    # the pool of each role is a share of the P constants
    roles = list(_RANGES)
    role_of = [roles[k % len(roles)] for k in range(n_params)]
    pools = {role: [k for k in range(n_params) if role_of[k] == role] for role in roles}
    used: set[int] = set()

    def constant(role: str) -> int:
        k = int(rng.choice(pools[role]))
        used.add(k)
        return k

    reactions: list[Reaction] = []

    def add(reactants, products, role):
        reactions.append(
            Reaction(
                tuple(index[r] for r in reactants),
                tuple(index[q] for q in products),
                constant(role),
            )
        )

    for m in range(modules):
        enzyme = "E" if m == 0 else f"Sp{m - 1}"
        s, sp_, c = f"S{m}", f"Sp{m}", f"C{m}"
        add((s, enzyme), (c,), "bind")
        add((c,), (s, enzyme), "unbind")
        add((c,), (sp_, enzyme), "cat")
        add((sp_,), (s,), "dephos")
        if m >= 2 and rng.random() < _CROSS_TALK:
            q = int(rng.integers(0, m - 1))
            add((s, f"Sp{q}"), (sp_, f"Sp{q}"), "cross")
        if rng.random() < _TURNOVER:
            add((), (s,), "syn")
            add((s,), (), "deg")
            add((sp_,), (), "deg")
    for name in names[1 + 3 * modules :]:
        q = int(rng.integers(0, modules))
        add((f"Sp{q}",), (f"Sp{q}", name), "report")
        add((name,), (), "deg")
    # constants no reaction drew are still parameters (with no influence); give each
    # a reaction of its role so that every parameter matters
    for k in range(n_params):
        if k in used:
            continue
        role = role_of[k]
        m = int(rng.integers(0, modules))
        s, sp_ = f"S{m}", f"Sp{m}"
        if role in ("bind", "cross"):
            q = int(rng.integers(0, modules))
            pair = ((s, f"Sp{q}"), (sp_, f"Sp{q}")) if q != m else ((s,), (sp_,))
        elif role in ("unbind", "cat", "dephos", "report"):
            pair = ((sp_,), (s,))
        elif role == "syn":
            pair = ((), (s,))
            if bounded:
                add((s,), (), "deg")
        else:
            pair = ((sp_,), ())
        reactions.append(
            Reaction(tuple(index[r] for r in pair[0]), tuple(index[q] for q in pair[1]), k)
        )
    params = [f"k{k}" for k in range(n_params)]
    low = np.array([_RANGES[r][0] for r in role_of])
    high = np.array([_RANGES[r][1] for r in role_of])
    p_nominal = np.exp(rng.uniform(np.log(low), np.log(high)))
    x0 = np.zeros(n_species)
    x0[index["E"]] = 1.0
    for m in range(modules):
        x0[index[f"S{m}"]] = 1.0
    return names, params, reactions, x0, p_nominal


def _rhs_strings(names, params, reactions) -> list[str]:
    terms: list[list[str]] = [[] for _ in names]
    for r in reactions:
        rate = "*".join([params[r.constant], *(names[i] for i in r.reactants)])
        for i in r.reactants:
            terms[i].append(f"-{rate}")
        for i in r.products:
            terms[i].append(f"+{rate}")
    out = []
    for t in terms:
        text = " ".join(t).lstrip("+") if t else "0"
        out.append(text.replace(" +", " + ").replace(" -", " - "))
    return out


def _network_name(n_species: int, seed: int, bounded: bool) -> str:
    return f"mass_action_{n_species}_seed{seed}" + ("_bounded" if bounded else "")


def network_spec(
    n_species: int, seed: int = DEFAULT_SEED, t_end: float = 100.0, bounded: bool = False
) -> dict:
    """The network in the neutral JSON model format of ``shared/models``.

    The name carries ``n_species``, ``seed`` and ``bounded``, so kernels and AMICI builds
    cache per member.
    """
    names, params, reactions, x0, p_nominal = network_reactions(n_species, seed, bounded)
    return {
        "name": _network_name(n_species, seed, bounded),
        "source": "benchmarks/mass_action_network.py (synthetic mass-action signalling network)",
        "states": names,
        "parameters": params,
        "expressions": {},
        "rhs": _rhs_strings(names, params, reactions),
        "p_nominal": [float(v) for v in p_nominal],
        "x0": [float(v) for v in x0],
        "t0": 0.0,
        "t_end": float(t_end),
    }


def mass_action_network(
    n_species: int, seed: int = DEFAULT_SEED, t_end: float = 100.0, bounded: bool = False
):
    """The :class:`pymc_odesens.OdeSystem` of the network, with ``x0``, ``p_nominal``,
    ``t0`` and ``t_end`` set.

    Built from the reactions directly (one sympy ``Add`` per species), not by parsing
    :func:`network_spec`; both give the same expressions.
    """
    import sympy as sp

    from pymc_odesens import OdeSystem

    names, params, reactions, x0, p_nominal = network_reactions(n_species, seed, bounded)
    from pymc_odesens.model.internal_symbols import time_symbol
    from pymc_odesens.model.symbol_vector import make_symbols

    y, k, t = make_symbols(names), make_symbols(params), time_symbol()
    terms: list[list] = [[] for _ in names]
    for r in reactions:
        rate = k[r.constant] * sp.Mul(*(y[i] for i in r.reactants))
        for i in r.reactants:
            terms[i].append(-rate)
        for i in r.products:
            terms[i].append(rate)
    rhs = [sp.Add(*t_i) for t_i in terms]
    system = OdeSystem.from_expressions(
        rhs, t, list(y), list(k), name=_network_name(n_species, seed, bounded)
    )
    system.x0 = x0
    system.p_nominal = p_nominal
    system.t0 = 0.0
    system.t_end = float(t_end)
    return system


def write_network_json(n_species: int, directory: str | Path, seed: int = DEFAULT_SEED) -> Path:
    """Write :func:`network_spec` to ``<directory>/<name>.json``; returns the path."""
    spec = network_spec(n_species, seed)
    path = Path(directory) / f"{spec['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec, indent=1))
    return path
