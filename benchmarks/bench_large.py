"""Pathway-sized models: code generation and compile, solves, forward sensitivities and
adjoint gradients of the synthetic mass-action networks (N = 50 ... 1000), against AMICI.

For each size N of :mod:`mass_action_network`:

1. **First use**, in fresh processes (run_staged_child): construction of the ``OdeSystem``,
   then the first ``solve`` (bdf), the first forward-sensitivity solve and the first adjoint
   gradient, each including the code generation and compile of the kernels it needs. Cold:
   an empty kernel cache (``PYMC_ODESENS_CACHE_DIR`` in a new temporary folder; numba's
   cache of the solvers, shared by all models, is warm). Warm: a second process on the same
   cache.
2. **Solves** in this process (warm): median wall times of ``solve``, ``solve_sensitivity``
   (all P parameters) and an adjoint gradient (``adjoint_forward`` + ``backward``) with bdf at
   rtol 1e-6 / atol 1e-8 on 61 output times in [0, 100], with ``linear_solver="auto"``
   (sparse at these sizes) and, up to ``--dense-max``, ``"dense"``.
3. **AMICI** (CVODES BDF with KLU, its defaults) on the same equations, tolerances and
   output times, through ``peers/amici_runner.py`` (the network written as a shared/models
   JSON file; the adjoint mode is the gradient of a Gaussian log-likelihood with data 1 and
   sigma 1, which we compute with the cotangent ``(1 - y)``). The first run of a size builds
   the AMICI model (minutes; cached under ``~/.cache/pymc_odesens_bench/amici``).
4. **Per-step cost**: the sparse solve's time per step next to ``nnz(L) + nnz(U)`` of a
   factorised Newton matrix, against ``N^3`` (what a dense LU costs).

Models from SBML (../shared/petab through ``OdeSystem.from_sbml``) join once the SBML
importer is on main: see :func:`petab_systems` (``--petab``).

Usage::

    python benchmarks/bench_large.py                       # N = 50,100,200,500,1000 with AMICI
    python benchmarks/bench_large.py --sizes 50,100 --no-amici --quick
    python benchmarks/bench_large.py --sizes 500 --add     # add N = 500 to the last results
    python benchmarks/bench_large.py --report              # the tables of the last results

Results: ``benchmarks/results/bench_large.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from common import (  # noqa: E402
    fit_power_law,
    fmt_ms,
    fmt_ratio,
    print_table,
    progress,
    relative_error,
    report_load,
    run_staged_child,
    time_call,
    write_results,
)

SIZES = (50, 100, 200, 500, 1000)
RTOL, ATOL = 1e-6, 1e-8
N_TIMES = 61
FIRST_USE_STAGES = ["import", "construct", "first_solve", "first_forward", "first_adjoint"]


# ----------------------------------------------------------------------------- child


def child(n: int, cache_dir: str) -> None:
    """One fresh process: print one JSON line per first-use stage (seconds)."""
    os.environ["PYMC_ODESENS_CACHE_DIR"] = cache_dir

    def stage(name: str, start: float, **extra) -> None:
        print(json.dumps({"stage": name, "seconds": time.perf_counter() - start, **extra}))
        sys.stdout.flush()

    start = time.perf_counter()
    from mass_action_network import mass_action_network

    import pymc_odesens as pos

    stage("import", start)
    start = time.perf_counter()
    system = mass_action_network(n)
    stage("construct", start)
    times = np.linspace(0.0, system.t_end, N_TIMES)
    controls = dict(method="bdf", relative_tolerance=RTOL, absolute_tolerance=ATOL)
    start = time.perf_counter()
    pos.solve(system, system.x0, times, system.p_nominal, **controls)
    stage("first_solve", start)
    start = time.perf_counter()
    pos.solve_sensitivity(system, system.x0, times, system.p_nominal, **controls)
    stage("first_forward", start)
    start = time.perf_counter()
    cot = np.ones((N_TIMES, n))
    pos.adjoint_gradient(system, system.x0, times, system.p_nominal, cot, **adjoint_controls())
    stage("first_adjoint", start)


def adjoint_controls() -> dict:
    return {
        f"{kind}_tolerance_{phase}": value
        for phase in ("forward", "backward", "quadrature")
        for kind, value in (("relative", RTOL), ("absolute", ATOL))
    }


def first_use(n: int, timeout: float) -> dict:
    """Cold and warm first-use stages of size ``n`` (fresh processes)."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench_large_kernels_") as cache:
        argv = [os.path.abspath(__file__), "--child", str(n), "--cache-dir", cache]
        for which in ("cold", "warm"):
            out[which] = run_staged_child(
                argv, FIRST_USE_STAGES, stage_timeout=timeout, label=f"N={n} {which}"
            )
    return out


# ----------------------------------------------------------------------------- solves


def our_routes(system, linear_solver: str, repeats: int, max_seconds: float) -> dict:
    import pymc_odesens as pos

    times = np.linspace(0.0, system.t_end, N_TIMES)
    controls = dict(
        method="bdf", relative_tolerance=RTOL, absolute_tolerance=ATOL, linear_solver=linear_solver
    )
    x0, p = system.x0, system.p_nominal
    out = {}
    plain = time_call(
        lambda: pos.solve(system, x0, times, p, **controls),
        repeats=repeats,
        max_seconds=max_seconds,
    )
    out["plain"] = {**_timing(plain), **_steps(plain["result"].stats), "y": plain["result"].y}
    forward = time_call(
        lambda: pos.solve_sensitivity(system, x0, times, p, **controls),
        repeats=max(1, repeats // 4),
        max_seconds=max_seconds,
    )
    out["forward"] = {**_timing(forward), **_steps(forward["result"].stats)}
    out["forward"]["S"] = forward["result"].S

    def gradient():
        checkpoints = pos.adjoint_forward(
            system, x0, times, p, linear_solver=linear_solver, **adjoint_controls()
        )
        return checkpoints.backward(1.0 - checkpoints.y)  # d/dy of -0.5 sum (1 - y)^2

    adjoint = time_call(gradient, repeats=max(1, repeats // 4), max_seconds=max_seconds)
    out["adjoint"] = {**_timing(adjoint), **_steps(adjoint["result"].stats["forward"])}
    out["adjoint"]["gradient"] = adjoint["result"].params
    return out


def _timing(t: dict) -> dict:
    return {"median_ms": t["median_ms"], "min_ms": t["min_ms"], "n_timed": t["n"]}


def _steps(stats: dict) -> dict:
    return {k: stats.get(k) for k in ("n_steps", "n_lu_decompositions", "n_rhs_evals")}


def factor_size(system) -> dict:
    """``nnz`` of ``I - c J_y`` and of its sparse factors (at x0, c = 1)."""
    from pymc_odesens.codegen import compile_kernels
    from pymc_odesens.solvers import newton_matrix as nm
    from pymc_odesens.solvers.sparse_lu import sparse_factor_sizes
    from pymc_odesens.solvers.status import new_stats

    kernels = compile_kernels(system)
    structure = nm.newton_structure(kernels, "sparse")
    values = kernels.evaluate("jac_y_values", 0.0, system.x0, system.p_nominal)
    ints, floats = nm.new_newton_factor(structure)
    _, ints, floats = nm.factor_newton_matrix(structure, ints, floats, values, 1.0, new_stats())
    nnz_l, nnz_u, _ = sparse_factor_sizes(ints)
    n = system.n_states
    nnz_a = int(values.size + n - np.count_nonzero(np.equal(*kernels.jacobian_pattern)))
    return {"nnz_J": int(values.size), "nnz_A": nnz_a, "nnz_LU": int(nnz_l + nnz_u)}


# ----------------------------------------------------------------------------- AMICI


def amici(n: int, repeats: int, timeout: float) -> dict | None:
    from mass_action_network import write_network_json
    from peers.amici import run_amici

    models = Path(tempfile.gettempdir()) / "pymc_odesens_bench_networks"
    path = write_network_json(n, models)
    result = run_amici(
        path.stem,
        modes=("plain", "forward", "adjoint"),
        tolerances=((RTOL, ATOL),),
        repeats=repeats,
        models_dir=models,
        timeout=timeout,
    )
    if result is None:
        return None
    return {"build": result.get("build"), **result["results"][0]}


# ----------------------------------------------------------------------------- SBML hook


def petab_systems():
    """``(name, OdeSystem)`` of the SBML models of ../shared/petab, through ``from_sbml``.

    The hook for the SBML importer: until ``OdeSystem.from_sbml`` exists this raises, naming
    what is missing; then ``--petab`` runs sections 1-2 (and AMICI, whose runner would
    need the SBML file itself) on these models.
    """
    from pymc_odesens import OdeSystem

    if not hasattr(OdeSystem, "from_sbml"):
        raise SystemExit(
            "--petab needs OdeSystem.from_sbml (the SBML importer), which this checkout lacks"
        )
    root = Path(
        os.environ.get("PYMC_ODESENS_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared")
    )
    for folder in sorted((root / "petab").iterdir()):
        models = sorted(folder.glob("model_*.xml"))
        if models:
            yield folder.name, OdeSystem.from_sbml(models[0])


# ----------------------------------------------------------------------------- report


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--no-amici", action="store_true")
    parser.add_argument("--quick", action="store_true", help="few repeats")
    parser.add_argument("--dense-max", type=int, default=500, help="largest N timed dense")
    parser.add_argument("--stage-timeout", type=float, default=900.0)
    parser.add_argument("--amici-timeout", type=float, default=3600.0)
    parser.add_argument("--petab", action="store_true", help="the PEtab models (from_sbml)")
    parser.add_argument(
        "--report", action="store_true", help="print the tables of the last results file"
    )
    parser.add_argument(
        "--add",
        action="store_true",
        help="keep the other sizes of the last results file (these sizes replace theirs)",
    )
    parser.add_argument(
        "--amici-max", type=int, default=1000, help="largest N run with AMICI (its build grows)"
    )
    parser.add_argument(
        "--amici-only",
        action="store_true",
        help="run AMICI alone for these sizes and add it to the last results (ours kept)",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.cache_dir)
        return
    if args.report:
        from common import RESULTS_DIR

        results = json.loads((RESULTS_DIR / "bench_large.json").read_text())
        for entry in results["networks"].values():
            _compare_with_amici(entry)
        _tables(results)
        _goals(results)
        return
    if args.amici_only:
        from common import RESULTS_DIR

        results = json.loads((RESULTS_DIR / "bench_large.json").read_text())
        for n in [int(s) for s in args.sizes.split(",")]:
            entry = results["networks"][str(n)]
            entry["amici_load_average_start"] = report_load(f"N = {n}, AMICI")
            entry["amici"] = amici(n, 3 if args.quick else 10, args.amici_timeout)
            _compare_with_amici(entry)
            (RESULTS_DIR / "bench_large.json").write_text(json.dumps(results, indent=1))
        _tables(results)
        _goals(results)
        return
    if args.petab:
        for name, system in petab_systems():
            progress(f"{name}: {system.n_states} states, {system.n_params} parameters")
        return
    from mass_action_network import mass_action_network

    sizes = [int(s) for s in args.sizes.split(",")]
    repeats = 3 if args.quick else 10
    load_start = report_load("at start")
    results = {"sizes": sizes, "rtol": RTOL, "atol": ATOL, "n_times": N_TIMES, "networks": {}}
    if args.add:
        from common import RESULTS_DIR

        previous = json.loads((RESULTS_DIR / "bench_large.json").read_text())
        results["networks"] = {k: v for k, v in previous["networks"].items() if int(k) not in sizes}
        for kept in results["networks"].values():  # which code and load measured them
            kept.setdefault("machine", previous.get("machine"))
            kept.setdefault("load_average_start", previous.get("load_average_start"))
        results["sizes"] = sorted({*sizes, *map(int, results["networks"])})
    for n in sizes:
        progress(f"N = {n}: first use (cold and warm processes)")
        entry: dict = {"load_average_start": report_load(f"N = {n}")}
        entry["first_use"] = first_use(n, args.stage_timeout)
        system = mass_action_network(n)
        entry["n_params"] = system.n_params
        entry["factor"] = factor_size(system)
        progress(f"N = {n}: solves (sparse)")
        entry["sparse"] = our_routes(system, "auto", repeats, 20.0)
        if n <= args.dense_max:
            progress(f"N = {n}: solves (dense)")
            entry["dense"] = our_routes(system, "dense", max(1, repeats // 3), 20.0)
            entry["dense_vs_sparse"] = {
                "y": relative_error(entry["sparse"]["plain"]["y"], entry["dense"]["plain"]["y"]),
                "S": relative_error(
                    entry["sparse"]["forward"]["S"], entry["dense"]["forward"]["S"]
                ),
                "gradient": relative_error(
                    entry["sparse"]["adjoint"]["gradient"], entry["dense"]["adjoint"]["gradient"]
                ),
            }
        for route in ("sparse", "dense"):
            for mode in entry.get(route, {}).values():
                mode.pop("y", None)
                mode.pop("S", None)
        results["networks"][str(n)] = entry
        results["networks"] = dict(sorted(results["networks"].items(), key=lambda kv: int(kv[0])))
        write_results("bench_large", {**results, "load_average_start": load_start})
        if not args.no_amici and n <= args.amici_max:
            progress(f"N = {n}: AMICI (a first run builds the model)")
            entry["amici"] = amici(n, repeats, args.amici_timeout)
            _compare_with_amici(entry)
        for kept in results["networks"].values():
            _compare_with_amici(kept)
        _tables(results)
        write_results("bench_large", {**results, "load_average_start": load_start})
    results["load_average_end"] = report_load("at end")
    _tables(results)
    _goals(results)
    path = write_results("bench_large", {**results, "load_average_start": load_start})
    progress(f"results: {path}")


def amici_ms(theirs: dict) -> float | None:
    """AMICI's time of one call: its C++ ``run_simulation`` without the Python wrapping of
    the results (``core_median_ms``), else the wall time through its Python API."""
    return theirs.get("core_median_ms", theirs.get("median_ms"))


def _compare_with_amici(entry: dict) -> None:
    amici_result = entry.get("amici")
    if not amici_result:
        return
    ours = entry["sparse"]
    for mode in ("plain", "forward", "adjoint"):
        theirs = amici_result.get(mode) or {}
        if amici_ms(theirs) is not None and "median_ms" in ours[mode]:
            ours[mode]["amici_over_ours"] = amici_ms(theirs) / ours[mode]["median_ms"]
        if theirs.get("amici_cpu_ms") and "median_ms" in ours[mode]:
            ours[mode]["amici_cpu_over_ours"] = theirs["amici_cpu_ms"] / ours[mode]["median_ms"]
    theirs = amici_result.get("adjoint") or {}
    if "gradient" in theirs:
        # AMICI: d/dp of sum log N(1 | y, 1) = sum (1 - y) dy/dp, the same cotangent as ours
        ours["adjoint"]["gradient_vs_amici"] = relative_error(
            ours["adjoint"]["gradient"], np.asarray(theirs["gradient"])
        )


def _stage(first_use: dict, which: str, stage: str):
    data = first_use.get(which, {}).get(stage, {})
    return data.get("seconds")


def _tables(results: dict) -> None:
    rows = []
    for n, e in results["networks"].items():
        fu = e["first_use"]
        cold = [_stage(fu, "cold", s) for s in ("construct", "first_solve")]
        warm = [_stage(fu, "warm", s) for s in ("construct", "first_solve")]
        rows.append(
            [
                n,
                e["n_params"],
                _seconds(sum(cold) if None not in cold else None),
                _seconds(_stage(fu, "cold", "first_forward")),
                _seconds(_stage(fu, "cold", "first_adjoint")),
                _seconds(sum(warm) if None not in warm else None),
                _seconds(_stage(fu, "warm", "first_forward")),
                _seconds(_stage(fu, "warm", "first_adjoint")),
                _seconds((e.get("amici") or {}).get("build", {}).get("build_seconds")),
            ]
        )
    print_table(
        [
            "N",
            "P",
            "cold: to 1st solve s",
            "1st FS s",
            "1st adjoint s",
            "warm: to 1st solve s",
            "1st FS s",
            "1st adjoint s",
            "AMICI build s",
        ],
        rows,
        title="\nFirst use (fresh processes; construction + code generation + compile + solve)",
    )
    rows = []
    for n, e in results["networks"].items():
        for mode in ("plain", "forward", "adjoint"):
            ours = e["sparse"][mode]
            dense = e.get("dense", {}).get(mode, {})
            theirs = (e.get("amici") or {}).get(mode) or {}
            rows.append(
                [
                    n,
                    mode,
                    fmt_ms(ours.get("median_ms")),
                    fmt_ms(dense.get("median_ms")),
                    fmt_ms(amici_ms(theirs)),
                    fmt_ms(theirs.get("amici_cpu_ms")),
                    fmt_ratio(ours.get("amici_over_ours")),
                    fmt_ratio(ours.get("amici_cpu_over_ours")),
                    ours.get("n_steps"),
                    theirs.get("n_steps"),
                ]
            )
    print_table(
        [
            "N",
            "route",
            "ours sparse ms",
            "ours dense ms",
            "AMICI call ms",
            "AMICI CPU ms",
            "call/ours",
            "CPU/ours",
            "steps",
            "AMICI steps",
        ],
        rows,
        title=(
            "\nWarm solves (bdf, rtol 1e-6, atol 1e-8, 61 output times; AMICI call ms: wall time "
            "of its C++ run_simulation call; AMICI CPU ms: the CPU time AMICI reports for its "
            "integration (cpu_time + cpu_time_b); ratios: AMICI's time over ours, > 1: we are "
            "faster)"
        ),
    )


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _slower_than_amici(nets: dict, ratio: str) -> list[str]:
    """``N=<n> <route>`` where AMICI's time over ours (``ratio``) is below 1."""
    return [
        f"N={n} {mode}"
        for n, e in nets.items()
        for mode in ("plain", "forward", "adjoint")
        if e["sparse"][mode].get(ratio) is not None and e["sparse"][mode][ratio] < 1.0
    ]


def _goals(results: dict) -> None:
    nets = results["networks"]
    lines = ["\nGoals"]
    if "500" in nets:
        fu = nets["500"]["first_use"]
        cold = [_stage(fu, "cold", s) for s in ("construct", "first_solve")]
        warm = [_stage(fu, "warm", s) for s in ("construct", "first_solve")]
        if None not in cold and None not in warm:
            lines.append(
                f"  N=500 construction to first solve: cold {sum(cold):.1f} s (goal < 60), "
                f"warm {sum(warm):.2f} s (goal < 2)"
            )
    slower = _slower_than_amici(nets, "amici_over_ours")
    without = [n for n, e in nets.items() if not e.get("amici")]
    if without:
        lines.append(f"  no AMICI comparison at N = {', '.join(without)} (see the results file)")
    lines.append(
        "  every timed route faster than AMICI's C++ call: "
        + ("yes" if not slower else f"no ({', '.join(slower)})")
    )
    slower_cpu = _slower_than_amici(nets, "amici_cpu_over_ours")
    lines.append(
        "  every timed route faster than AMICI's reported integration CPU time: "
        + ("yes" if not slower_cpu else f"no ({', '.join(slower_cpu)})")
    )
    sizes = [int(n) for n in nets]
    per_step = [
        nets[str(n)]["sparse"]["plain"]["median_ms"] / nets[str(n)]["sparse"]["plain"]["n_steps"]
        for n in sizes
    ]
    nnz = [nets[str(n)]["factor"]["nnz_LU"] for n in sizes]
    exponent = fit_power_law(nnz, per_step)
    exponent_n = fit_power_law(sizes, per_step)
    lines.append(
        f"  per-step cost of the sparse solve ~ nnz(L+U)^{exponent:.2f} ~ N^{exponent_n:.2f} "
        "(a dense LU would grow like N^3)"
        if exponent is not None and exponent_n is not None
        else "  per-step cost: fewer than two sizes"
    )
    results["goals"] = lines[1:]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
