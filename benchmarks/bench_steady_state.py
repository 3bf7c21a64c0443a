"""Cost of steady states (issue "steady states"): routes, sensitivities, the PyMC Ops.

Run:  python benchmarks/bench_steady_state.py  (about 30 s; writes results/bench_steady_state.json)
      python benchmarks/bench_steady_state.py --network 500
            (only the sparse vs dense comparison below; results/bench_steady_state_network.json)

On the 4-state receptor/substrate pathway of ``docs/steady_state.md`` (two conservation laws),
at the default tolerances (1e-10 / 1e-10), medians of warm calls:

1. ``steady_state`` by each route (Newton; integration; forward sensitivities integrated with
   the state), with and without implicit-function sensitivities, and its adjoint ``vjp``;
   ``solve_sensitivity`` to t = 100 (what integrating to the steady state costs) for scale;
2. a log-density and its gradient (forward route, 21 output times) with and without
   pre-equilibration, in FAST_RUN and NUMBA mode;
3. finding the conservation laws of a synthetic mass-action network of 400 states.

With ``--network N``: ``steady_state`` of the bounded mass-action network of
``benchmarks/mass_action_network.py`` with N species (conservation laws; Newton from ``x0``
fails, the integration fallback brings it into Newton's basin) with
``linear_solver="sparse"`` and ``"dense"``: the first call (the pattern's analysis and the
kernels loaded), then medians of warm calls with and without the implicit sensitivities,
and the adjoint ``vjp``; the results of the two paths are compared.

The comparison with AMICI's pre-equilibration (Brannmark_JBC2010) needs the SBML importer and
is not part of this script yet.
"""

from __future__ import annotations

import time

import common
import numpy as np
from common import fmt_ms, print_table, progress

TIMES = np.linspace(0.0, 10.0, 21)
P0 = np.array([0.1, 2.0, 1.0, 1.0, 3.0, 0.5])
Y0 = np.array([1.0, 0.0, 2.0, 0.0])


def pathway_system():
    from pymc_odesens import OdeSystem

    def pathway(t, y, p):
        act = (p.kb + p.ks * p.u) * y.R - p.koff * y.Rp
        xact = p.kx * y.Rp * y.X - p.kxoff * y.Xp
        return [-act, act, -xact, xact]

    return OdeSystem(
        pathway,
        states=["R", "Rp", "X", "Xp"],
        params=["kb", "ks", "u", "koff", "kx", "kxoff"],
        name="pathway",
    )


def network_system(n_states: int):
    """Enzyme modules S + E <-> C -> P + E, P -> S (catalysed by the next module's complex)."""
    from pymc_odesens import OdeSystem

    modules = n_states // 4

    def rhs(t, y, p):
        out = [0] * n_states
        for m in range(modules):
            e, s, c, q = 4 * m, 4 * m + 1, 4 * m + 2, 4 * m + 3
            v1 = p[3 * m] * y[e] * y[s] - p[3 * m + 1] * y[c]
            v2 = p[3 * m + 2] * y[c]
            v3 = 0.1 * y[q] * y[(4 * (m + 1) + 2) % n_states]
            out[e] += -v1 + v2
            out[s] += -v1 + v3
            out[c] += v1 - v2
            out[q] += v2 - v3
        return out

    return OdeSystem(rhs, n_states, 3 * modules, name=f"network_{n_states}")


def network_comparison(n_species: int) -> None:
    """``steady_state`` of a bounded mass-action network, sparse vs dense (``--network``)."""
    from mass_action_network import mass_action_network

    from pymc_odesens import steady_state

    started = time.perf_counter()
    load_start = common.report_load("at start")
    system = mass_action_network(n_species, bounded=True)
    progress(f"{system.name}: {system.conservation_laws.n_laws} conservation laws")
    y0, p = system.x0, system.p_nominal
    rows, data, results = [], {"n_species": n_species}, {}
    w = np.random.default_rng(0).normal(size=n_species)
    for kind in ("sparse", "dense"):
        start = time.perf_counter()
        result = steady_state(system, y0, p, linear_solver=kind)
        first_s = time.perf_counter() - start
        full = common.time_call(
            lambda k=kind: steady_state(system, y0, p, linear_solver=k), repeats=5
        )
        bare = common.time_call(
            lambda k=kind: steady_state(system, y0, p, linear_solver=k, sensitivity="none"),
            repeats=5,
        )
        vjp = common.time_call(lambda r=result: r.vjp(w), repeats=20)
        results[kind] = result
        rows.append(
            [
                kind,
                result.route,
                result.stats["n_newton_iterations"],
                result.stats["n_integration_steps"],
                f"{first_s:.2f}",
                fmt_ms(full["median_ms"]),
                fmt_ms(bare["median_ms"]),
                fmt_ms(vjp["median_ms"]),
            ]
        )
        data[kind] = {
            "first_call_s": first_s,
            "median_ms": full["median_ms"],
            "no_sensitivities_median_ms": bare["median_ms"],
            "vjp_median_ms": vjp["median_ms"],
            "stats": result.stats,
        }
    sparse, dense = results["sparse"], results["dense"]
    data["max_relative_difference"] = {
        name: float(np.abs(a - b).max() / np.abs(b).max())
        for name, a, b in (
            ("y", sparse.y, dense.y),
            ("S", sparse.S, dense.S),
            ("S_y0", sparse.S_y0, dense.S_y0),
        )
    }
    for key in ("median_ms", "no_sensitivities_median_ms", "vjp_median_ms"):
        data[f"dense_over_sparse_{key}"] = data["dense"][key] / data["sparse"][key]
    print_table(
        ["linear_solver", "route", "Newton its", "steps", "first s", "S, S_y0", "none", "vjp"],
        rows,
        title=f"steady_state of {system.name}",
    )
    progress(f"sparse vs dense, largest relative differences: {data['max_relative_difference']}")
    common.finish_run("bench_steady_state_network", data, [], load_start, started)


def main() -> None:
    started = time.perf_counter()
    load_start = common.report_load("at start")
    import pytensor
    import pytensor.tensor as pt

    from pymc_odesens import Preequilibration, ode_solution, solve_sensitivity, steady_state

    system = pathway_system()
    rows, data = [], {}
    routes = [
        ("Newton, implicit S and S_y0", {}),
        ("Newton, no sensitivities", {"sensitivity": "none"}),
        ("integration, implicit sensitivities", {"method": "integration"}),
        ("integrated sensitivities", {"sensitivity": "integration"}),
    ]
    for label, kwargs in routes:
        timing = common.time_call(lambda kw=kwargs: steady_state(system, Y0, P0, **kw), repeats=200)
        result = timing["result"]
        rows.append(
            [
                label,
                result.route,
                result.stats["n_newton_iterations"],
                result.stats["n_integration_steps"],
                fmt_ms(timing["median_ms"]),
            ]
        )
        data[label] = {"median_ms": timing["median_ms"], "stats": result.stats}
    result = steady_state(system, Y0, P0)
    vjp = common.time_call(lambda: result.vjp(np.ones(4)), repeats=500)
    rows.append(["result.vjp(w)", "-", "-", "-", fmt_ms(vjp["median_ms"])])
    long = common.time_call(
        lambda: solve_sensitivity(system, Y0, [100.0], P0, wrt="both"), repeats=100
    )
    rows.append(["solve_sensitivity to t=100", "-", "-", "-", fmt_ms(long["median_ms"])])
    data["vjp_ms"], data["solve_sensitivity_ms"] = vjp["median_ms"], long["median_ms"]
    print_table(["call", "route", "Newton its", "steps", "ms"], rows, title="steady_state")

    theta = pt.dvector("theta")
    rows = []
    for label, pre in (
        ("plain", None),
        ("pre-equilibrated", Preequilibration(pt.set_subtensor(theta[2], 0.0))),
    ):
        y = ode_solution(
            system,
            Y0,
            TIMES,
            theta,
            sensitivity="forward",
            on_failure="raise",
            preequilibration=pre,
        )
        loss = y.sum()
        for mode in ("FAST_RUN", "NUMBA"):
            f = pytensor.function([theta], [loss, pytensor.grad(loss, theta)], mode=mode)
            timing = common.time_call(lambda f=f: f(P0), repeats=300)
            rows.append([label, mode, fmt_ms(timing["median_ms"])])
            data[f"logp_grad_{label}_{mode}_ms"] = timing["median_ms"]
    print()
    print_table(["simulation", "mode", "ms"], rows, title="value and gradient, forward route")

    progress("\nconservation laws of a 400-state network ...")
    network = network_system(400)
    _ = network.J_y
    start = time.perf_counter()
    laws = network.conservation_laws
    seconds = time.perf_counter() - start
    progress(f"{laws.n_laws} laws, {laws.unresolved} unresolved, {seconds:.2f} s")
    data["conservation_laws_400_s"] = seconds
    common.finish_run("bench_steady_state", data, [], load_start, started)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--network", type=int, default=0, help="only: sparse vs dense on an N-species network"
    )
    arguments = parser.parse_args()
    if arguments.network:
        network_comparison(arguments.network)
    else:
        main()
