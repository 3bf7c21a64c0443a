"""Where the sparse Newton solves start to pay: the threshold of ``linear_solver="auto"``.

Times ``solve(method="bdf")`` and ``solve_sensitivity`` with ``linear_solver="dense"`` and
``"sparse"`` in one process on

- the mass-action networks (:mod:`mass_action_network`) of N = 8 ... 100 species (a few
  non-zeros per row), and
- random sparse systems of N = 60 and 100 states whose Jacobian has 2 ... 40 % of its
  entries non-zero (``y' = A y - p y_i y_j``, ``A`` diagonally dominant),

at rtol 1e-6 / atol 1e-8. The ratio dense/sparse above 1 means the sparse path is faster.
The constants ``SPARSE_MIN_STATES`` and ``SPARSE_MAX_DENSITY`` of
``pymc_odesens.solvers.newton_matrix`` are read off these tables (docs/solvers.md).

Usage: ``python benchmarks/bench_linear_solver.py [--quick]``; results in
``benchmarks/results/bench_linear_solver.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from common import (  # noqa: E402
    fmt_ms,
    fmt_ratio,
    print_table,
    progress,
    report_load,
    time_call,
    write_results,  # noqa: E402
)

NETWORK_SIZES = (8, 16, 24, 32, 40, 50, 64, 80, 100)
RANDOM_SIZES = (60, 100)
DENSITIES = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4)


def random_system(n: int, density: float, seed: int = 7):
    import sympy as sp

    from pymc_odesens import OdeSystem
    from pymc_odesens.model.internal_symbols import time_symbol
    from pymc_odesens.model.symbol_vector import make_symbols

    rng = np.random.default_rng(seed)
    y = make_symbols([f"x{i}" for i in range(n)])
    p = make_symbols(["k0", "k1"])
    a = (rng.random((n, n)) < density) * rng.normal(size=(n, n))
    np.fill_diagonal(a, 0.0)
    np.fill_diagonal(a, -(1.0 + np.abs(a).sum(axis=1)))
    rhs = [
        sp.Add(*[float(a[i, j]) * y[j] for j in np.nonzero(a[i])[0]])
        - p[i % 2] * y[i] * y[(i + 1) % n] / 10
        for i in range(n)
    ]
    name = f"random_sparse_{n}_{int(1000 * density)}_{seed}"
    system = OdeSystem.from_expressions(rhs, time_symbol(), y, p, name=name)
    return system, rng.uniform(0.5, 1.5, n), np.array([1.0, 2.0]), 5.0


def network(n: int):
    from mass_action_network import mass_action_network

    system = mass_action_network(n)
    return system, system.x0, system.p_nominal, system.t_end


def measure(system, y0, params, t_end, repeats) -> dict:
    import pymc_odesens as pos

    times = np.linspace(0.0, t_end, 21)[1:]
    out = {"n": system.n_states}
    rows, cols = (
        __import__("pymc_odesens.codegen", fromlist=["x"]).compile_kernels(system).jacobian_pattern
    )
    diagonal = np.count_nonzero(rows == cols)
    out["density"] = (rows.size + system.n_states - diagonal) / system.n_states**2
    for kind in ("dense", "sparse"):
        controls = dict(
            method="bdf", relative_tolerance=1e-6, absolute_tolerance=1e-8, linear_solver=kind
        )
        solve = time_call(
            lambda c=controls: pos.solve(system, y0, times, params, **c), repeats=repeats
        )
        sens = time_call(
            lambda c=controls: pos.solve_sensitivity(system, y0, times, params, **c),
            repeats=max(1, repeats // 3),
        )
        # the fastest run: on a busy machine medians catch preemptions of ~20 ms
        out[kind] = {"solve_ms": solve["min_ms"], "forward_ms": sens["min_ms"]}
    out["solve_ratio"] = out["dense"]["solve_ms"] / out["sparse"]["solve_ms"]
    out["forward_ratio"] = out["dense"]["forward_ms"] / out["sparse"]["forward_ms"]
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    repeats = 5 if args.quick else 15
    load = report_load("at start")
    results = {"networks": [], "random": []}
    for n in NETWORK_SIZES:
        progress(f"network N={n}")
        results["networks"].append(measure(*network(n), repeats))
    for n in RANDOM_SIZES:
        for density in DENSITIES:
            progress(f"random N={n} density {density}")
            results["random"].append(measure(*random_system(n, density), repeats))
    for label, entries in (("mass-action networks", "networks"), ("random", "random")):
        print_table(
            ["N", "density", "dense ms", "sparse ms", "dense/sparse", "FS dense/sparse"],
            [
                [
                    e["n"],
                    f"{e['density']:.3f}",
                    fmt_ms(e["dense"]["solve_ms"]),
                    fmt_ms(e["sparse"]["solve_ms"]),
                    fmt_ratio(e["solve_ratio"]),
                    fmt_ratio(e["forward_ratio"]),
                ]
                for e in results[entries]
            ],
            title=f"\nbdf solve, dense vs sparse Newton matrices: {label}",
        )
    results["load_average_end"] = report_load("at end")
    path = write_results("bench_linear_solver", {**results, "load_average_start": load})
    progress(f"results: {path}")


if __name__ == "__main__":
    main()
