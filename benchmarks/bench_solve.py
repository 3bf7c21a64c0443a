"""Benchmark of ``pymc_odesens.solve`` (issue "core") against scipy and AMICI, in one run.

Run:  python benchmarks/bench_solve.py          (about 2-4 minutes; writes results/bench_solve.json)
      python benchmarks/bench_solve.py --quick  (fewer repeats, no cold-start subprocesses)

1. Warm solves of the stiff reference models ``pka`` (11 states) and ``robertson`` (3 states),
   output times = the truth file's 61 points, at rtol 1e-6 / atol 1e-8 and at Stan's defaults
   for ``bdf``/``adams`` (rtol 1e-10 / atol 1e-10):

   - ours: ``solve(method="bdf")`` and ``solve(method="adams")``;
   - scipy: ``solve_ivp`` BDF and LSODA with a numpy right-hand side and the analytic
     Jacobian, both lambdified from sympy by ``shared/models/load_model.py``;
   - AMICI (CVODES BDF and Adams, C++ code generated from the same equations), plain
     simulation, run in its own virtualenv through ``peers/amici_runner.py``.

   Every solver gets the same tolerances and output times; its error against the truth file
   is printed next to its time so that the comparison is fair. Times are medians of repeated
   warm calls (compile and model build excluded).
2. Cold and warm first calls, each in a fresh subprocess (``bdf`` on pka):
   (i) very first use after installation: fresh ``NUMBA_CACHE_DIR`` and fresh
       ``PYMC_ODESENS_CACHE_DIR`` (solvers compile, kernels are generated and compiled);
   (ii) a new model in a process whose solvers are compiled: fresh ``PYMC_ODESENS_CACHE_DIR``
        only (numba's solver cache as usual, warmed beforehand);
   (iii) the same model again in a new process (kernels cached on disk).
   Import time, ``OdeSystem.from_json``, the first ``solve`` and the first
   ``solve_sensitivity`` (its kernel's generation and compile) are reported separately.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
import numpy as np
from common import fmt_err, fmt_ms, fmt_ratio, print_table, progress
from peers.amici import run_amici
from scipy.integrate import solve_ivp

MODELS = ("pka", "robertson")
TOLERANCES = (("1e-6/1e-8", 1e-6, 1e-8), ("Stan default", None, None))
GOALS = {
    "scipy_bdf_over_ours_bdf_pka": 20.0,
    "amici_over_ours_bdf_pka": 1.0,
    "new_model_first_solve_s": 5.0,
    "same_model_new_process_s": 2.0,
    "very_first_use_s": 60.0,
}

# Runs in a fresh interpreter: times the import separately from the first solve.
CHILD_CODE = r"""
import json, sys, time
clock, cpu = time.perf_counter, time.process_time
start, start_cpu = clock(), cpu()
import numpy as np
numpy_done, numpy_cpu = clock(), cpu()
from pymc_odesens import OdeSystem, solve, solve_sensitivity
import_done, import_cpu = clock(), cpu()
system = OdeSystem.from_json(sys.argv[1])
built, built_cpu = clock(), cpu()
times = np.linspace(system.t0, system.t_end, 61)
kwargs = dict(t0=system.t0, method="bdf", relative_tolerance=1e-6, absolute_tolerance=1e-8)
solve(system, system.x0, times, system.p_nominal, **kwargs)
first, first_cpu = clock(), cpu()
solve(system, system.x0, times, system.p_nominal, **kwargs)
second, second_cpu = clock(), cpu()
# the forward-sensitivity kernel is generated and compiled on its first use
solve_sensitivity(system, system.x0, times, system.p_nominal, **kwargs)
sens, sens_cpu = clock(), cpu()
print(json.dumps({
    "numpy_import_s": numpy_done - start,
    "import_s": import_done - numpy_done,
    "import_cpu_s": import_cpu - numpy_cpu,
    "from_json_s": built - import_done,
    "first_solve_s": first - built,
    "first_solve_cpu_s": first_cpu - built_cpu,
    "from_json_cpu_s": built_cpu - import_cpu,
    "second_solve_ms": (second - first) * 1e3,
    "first_sensitivity_s": sens - second,
    "first_sensitivity_cpu_s": sens_cpu - second_cpu,
}))
"""


# ----------------------------------------------------------------------------- warm solves


def bench_ours(system, truth, method, rtol, atol, repeats):
    from pymc_odesens import solve

    row, result = common.time_reference_solve(
        solve, system, truth, method, rtol, atol, repeats, max_seconds=3.0
    )
    return {
        **row,
        "rtol": float(result.controls.relative_tolerance),
        "atol": float(np.max(result.controls.absolute_tolerance)),
        "y_scaled_err": common.scaled_error(result.y, truth["y"], axis=0),
        "y_max_abs_err": float(np.abs(result.y - truth["y"]).max()),
    }


def bench_scipy(reference, truth, method, rtol, atol, repeats):
    p = reference.p_nominal

    def fun(t, y):
        return reference.rhs(t, y, p)

    def jac(t, y):
        return reference.jac_y(t, y, p)

    times = truth["t"]

    def call():
        return solve_ivp(
            fun,
            (reference.t0, float(times[-1])),
            reference.x0,
            method=method,
            t_eval=times,
            rtol=rtol,
            atol=atol,
            jac=jac,
        )

    timing = common.time_call(call, repeats=repeats, max_seconds=6.0)
    sol = timing["result"]
    out = {
        "solver": f"scipy {method}",
        "median_ms": timing["median_ms"],
        "min_ms": timing["min_ms"],
        "n_timed": timing["n"],
        "n_steps": None,
        "n_rhs_evals": int(sol.nfev),
        "n_jac_evals": int(sol.njev),
        "n_lu_decompositions": int(sol.nlu),
        "rtol": rtol,
        "atol": atol,
        "success": bool(sol.success),
    }
    if sol.success:
        y = sol.y.T
        out["y_scaled_err"] = common.scaled_error(y, truth["y"], axis=0)
        out["y_max_abs_err"] = float(np.abs(y - truth["y"]).max())
    else:
        out["message"] = sol.message
    return out


def amici_rows(name, tolerance_pairs, repeats, lmm):
    progress(f"  AMICI {lmm} plain simulation of {name} (subprocess) ...")
    data = run_amici(
        name,
        modes=("plain",),
        tolerances=tolerance_pairs,
        repeats=repeats,
        lmm=lmm,
        models_dir=common.models_dir(),
    )
    if data is None:
        return None, None
    rows = {}
    for entry in data["results"]:
        res = entry["plain"]
        rows[(entry["rtol"], entry["atol"])] = {
            "solver": f"AMICI {lmm}",
            "median_ms": res["median_ms"],
            "min_ms": res["min_ms"],
            "core_median_ms": res.get("core_median_ms"),
            "amici_cpu_ms": res.get("amici_cpu_ms"),
            "n_steps": res.get("n_steps"),
            "n_rhs_evals": res.get("n_rhs_evals"),
            "rtol": entry["rtol"],
            "atol": entry["atol"],
            "y_scaled_err": res.get("y_scaled_err"),
            "y_max_abs_err": res.get("y_max_abs_err"),
            "status": res.get("status"),
            "error": res.get("error"),
        }
    return rows, {k: v for k, v in data.items() if k != "results"}


def warm_benchmarks(args) -> dict:
    from pymc_odesens import OdeSystem, solve

    out = {}
    for name in MODELS:
        progress(f"\n== {name} ==")
        system = OdeSystem.from_json(common.model_path(name))
        truth = common.load_truth(name)
        reference = common.load_reference(name)
        # compile every kernel and solver used before any timing
        for method in ("bdf", "adams"):
            start = time.perf_counter()
            solve(system, system.x0, truth["t"], system.p_nominal, t0=system.t0, method=method)
            progress(
                f"  first {method} call (compile / cache load): {time.perf_counter() - start:.2f} s"
            )
        rows = []
        pairs = []
        for label, rtol, atol in TOLERANCES:
            for method in ("bdf", "adams"):
                row = bench_ours(system, truth, method, rtol, atol, args.repeats)
                row["tolerance"] = label
                rows.append(row)
                progress(
                    f"  {label:12s} {row['solver']:12s} {row['median_ms']:9.3f} ms "
                    f"{row['n_steps']:6d} steps  y err {row['y_scaled_err']:.1e}"
                )
            resolved = (rows[-1]["rtol"], rows[-1]["atol"])  # Stan's defaults filled in
            pairs.append((label, *resolved))
        for label, rtol, atol in pairs:
            for method in ("BDF", "LSODA"):
                row = bench_scipy(reference, truth, method, rtol, atol, args.scipy_repeats)
                row["tolerance"] = label
                rows.append(row)
                progress(
                    f"  {label:12s} {row['solver']:12s} {row['median_ms']:9.3f} ms "
                    f"{row['n_rhs_evals']:6d} rhs  y err {fmt_err(row.get('y_scaled_err'))}"
                )
        amici_meta = {}
        if not args.no_amici:
            for lmm in ("bdf", "adams"):
                found, meta = amici_rows(name, [(r, a) for _, r, a in pairs], args.repeats, lmm)
                if found is None:
                    break
                amici_meta[lmm] = meta
                for label, rtol, atol in pairs:
                    row = found[(rtol, atol)]
                    row["tolerance"] = label
                    rows.append(row)
        out[name] = {"rows": rows, "amici": amici_meta}
    return out


def print_warm_tables(warm: dict) -> None:
    for name, data in warm.items():
        rows = data["rows"]
        table = []
        for label, _, _ in TOLERANCES:
            ours = {r["solver"]: r for r in rows if r["tolerance"] == label}
            base_bdf = ours["ours bdf"]["median_ms"]
            base_adams = ours["ours adams"]["median_ms"]
            for r in rows:
                if r["tolerance"] != label:
                    continue
                extra = ""
                if r.get("error"):
                    table.append(
                        [label, r["solver"], "failed", "-", "-", "-", "-", "-", "-", r["error"]]
                    )
                    continue
                if r.get("core_median_ms") is not None:
                    extra = f"core {fmt_ms(r['core_median_ms'])} / cpu {fmt_ms(r['amici_cpu_ms'])}"
                table.append(
                    [
                        label,
                        r["solver"],
                        fmt_ms(r["median_ms"]),
                        r.get("n_steps") if r.get("n_steps") is not None else "-",
                        r.get("n_rhs_evals"),
                        fmt_err(r.get("y_scaled_err")),
                        fmt_err(r.get("y_max_abs_err")),
                        fmt_ratio(r["median_ms"] / base_bdf),
                        fmt_ratio(r["median_ms"] / base_adams),
                        extra,
                    ]
                )
        print()
        print_table(
            [
                "tolerance",
                "solver",
                "ms",
                "steps",
                "rhs",
                "y err (scaled)",
                "y err (abs)",
                "t/ours-bdf",
                "t/ours-adams",
                "AMICI ms (C++ call / cpu_time)",
            ],
            table,
            title=f"{name}: warm solve, 61 output times (median of repeats)",
        )
    print(
        "y err (scaled) = max over states of max_t |y - y_truth| / max_t |y_truth|;"
        " t/ours-x = this solver's time / ours x (>1: ours faster).\n"
        "AMICI ms = Python run_simulation wall time; C++ call = the same without the Python"
        " ReturnDataView; cpu_time = AMICI's own integration time."
    )


# ----------------------------------------------------------------------------- first calls


def run_child(model_file: Path, env: dict, label: str) -> dict:
    progress(f"  {label} ...")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD_CODE, str(model_file)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        progress(f"    failed (exit {proc.returncode}):\n{tail}")
        return {"error": tail, "process_wall_s": wall}
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    data["process_wall_s"] = wall
    data["first_use_s"] = data["from_json_s"] + data["first_solve_s"]
    data["total_s"] = data["import_s"] + data["first_use_s"]
    data["first_use_cpu_s"] = data["from_json_cpu_s"] + data["first_solve_cpu_s"]
    data["total_cpu_s"] = data["import_cpu_s"] + data["first_use_cpu_s"]
    progress(
        f"    import {data['import_s']:.2f} s, from_json {data['from_json_s']:.2f} s, "
        f"first solve {data['first_solve_s']:.2f} s (cpu {data['first_solve_cpu_s']:.2f} s), "
        f"second solve {data['second_solve_ms']:.2f} ms (process {wall:.1f} s)"
    )
    return data


def first_call_benchmarks() -> dict:
    model_file = common.model_path("pka")
    base_env = dict(os.environ)
    out = {}
    with tempfile.TemporaryDirectory(prefix="pymc_odesens_bench_") as tmp:
        tmp = Path(tmp)
        cold = dict(base_env)
        cold["NUMBA_CACHE_DIR"] = str(tmp / "numba_cold")
        cold["PYMC_ODESENS_CACHE_DIR"] = str(tmp / "kernels_cold")
        out["very_first_use"] = run_child(
            model_file, cold, "(i) very first use: fresh NUMBA_CACHE_DIR and kernel cache"
        )
        # make sure the solvers are compiled in the usual numba cache (the package's
        # __pycache__ or the user's NUMBA_CACHE_DIR), as after any earlier use
        warm_env = dict(base_env)
        warm_env["PYMC_ODESENS_CACHE_DIR"] = str(tmp / "kernels_warmup")
        run_child(model_file, warm_env, "    (warm-up of the usual solver cache)")
        fresh = dict(base_env)
        fresh["PYMC_ODESENS_CACHE_DIR"] = str(tmp / "kernels_new")
        out["new_model"] = run_child(
            model_file, fresh, "(ii) new model, solvers compiled: fresh kernel cache only"
        )
        out["same_model_new_process"] = run_child(
            model_file, fresh, "(iii) same model again in a new process"
        )
    return out


def print_first_call_table(first: dict) -> None:
    labels = {
        "very_first_use": "(i) very first use (fresh numba + kernel caches)",
        "new_model": "(ii) new model, solvers compiled",
        "same_model_new_process": "(iii) same model, new process",
    }
    rows = []
    for key, label in labels.items():
        d = first.get(key, {})
        if "error" in d or not d:
            rows.append([label, "failed", "-", "-", "-", "-", "-", "-", "-"])
            continue
        rows.append(
            [
                label,
                f"{d['import_s']:.2f}",
                f"{d['from_json_s']:.2f}",
                f"{d['first_solve_s']:.2f}",
                f"{d['first_use_s']:.2f}",
                f"{d['total_s']:.2f}",
                f"{d['first_use_cpu_s']:.2f} / {d['total_cpu_s']:.2f}",
                f"{d['second_solve_ms']:.2f}",
                f"{d['first_sensitivity_s']:.2f} / {d['first_sensitivity_cpu_s']:.2f}",
            ]
        )
    print()
    print_table(
        [
            "scenario (pka, bdf)",
            "import s",
            "from_json s",
            "first solve s",
            "from_json+solve s",
            "with import s",
            "cpu s (same two)",
            "2nd solve ms",
            "1st solve_sensitivity s (cpu)",
        ],
        rows,
        title="First calls, each in a fresh subprocess (wall time; cpu = process CPU time)",
    )


# ----------------------------------------------------------------------------- goals


def goals(warm: dict, first: dict) -> list[dict]:
    out = []

    def find(model, solver, label="1e-6/1e-8"):
        for r in warm.get(model, {}).get("rows", []):
            if r["solver"] == solver and r["tolerance"] == label:
                return r
        return None

    ours = find("pka", "ours bdf")
    scipy_bdf = find("pka", "scipy BDF")
    amici = find("pka", "AMICI bdf")
    if ours and scipy_bdf:
        ratio = scipy_bdf["median_ms"] / ours["median_ms"]
        best = scipy_bdf["min_ms"] / ours["min_ms"]
        out.append(
            {
                "goal": "pka bdf >= 20x faster than scipy BDF (1e-6/1e-8)",
                "measured": f"{fmt_ratio(ratio)} (fastest runs: {fmt_ratio(best)})",
                "met": ratio >= GOALS["scipy_bdf_over_ours_bdf_pka"],
            }
        )
    if ours and amici and not amici.get("error"):
        ratio = amici["median_ms"] / ours["median_ms"]
        best = amici["min_ms"] / ours["min_ms"]
        out.append(
            {
                "goal": "pka bdf no slower than AMICI plain (Python call)",
                "measured": f"AMICI/ours = {fmt_ratio(ratio)} (fastest runs: {fmt_ratio(best)})",
                "met": ratio >= GOALS["amici_over_ours_bdf_pka"],
            }
        )
        for key, text in (
            ("core_median_ms", "  (same, AMICI's C++ call without Python wrapping)"),
            ("amici_cpu_ms", "  (same, AMICI's own cpu_time of the integration only)"),
        ):
            if amici.get(key):
                ratio = amici[key] / ours["median_ms"]
                out.append(
                    {
                        "goal": text,
                        "measured": f"AMICI/ours = {fmt_ratio(ratio)}",
                        "met": ratio >= GOALS["amici_over_ours_bdf_pka"],
                    }
                )
    elif ours:
        out.append({"goal": "pka bdf no slower than AMICI plain", "measured": "AMICI skipped"})
    checks = (
        ("new_model", "first_use_s", "first solve of a new model < 5 s", "new_model_first_solve_s"),
        (
            "same_model_new_process",
            "first_use_s",
            "same model in a new process < 2 s",
            "same_model_new_process_s",
        ),
        ("very_first_use", "total_s", "very first use < 60 s", "very_first_use_s"),
    )
    for key, field, text, goal in checks:
        d = first.get(key)
        if not d or field not in d:
            continue
        cpu = d[field.replace("_s", "_cpu_s")]
        measured = (
            f"{d[field]:.2f} s, cpu {cpu:.2f} s (import {d['import_s']:.2f} s separate)"
            if field == "first_use_s"
            else f"{d[field]:.2f} s, cpu {cpu:.2f} s, incl. import"
        )
        out.append({"goal": text, "measured": measured, "met": d[field] < GOALS[goal]})
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Benchmark of solve against scipy and AMICI.")
    parser.add_argument("--repeats", type=int, default=50, help="timed calls of ours / AMICI")
    parser.add_argument("--scipy-repeats", type=int, default=5, help="timed calls of scipy")
    parser.add_argument("--no-amici", action="store_true", help="skip the AMICI peer")
    parser.add_argument("--no-first-call", action="store_true", help="skip the subprocesses")
    parser.add_argument("--quick", action="store_true", help="few repeats, no first-call runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.scipy_repeats, args.no_first_call = 5, 1, True
    started = time.perf_counter()
    load_start = common.report_load("at start")
    progress("bench_solve: warm solves (pka, robertson) against scipy solve_ivp and AMICI")
    warm = warm_benchmarks(args)
    first = {}
    if not args.no_first_call:
        progress("\nFirst calls in fresh subprocesses (pka, bdf, rtol 1e-6, atol 1e-8):")
        first = first_call_benchmarks()
    print_warm_tables(warm)
    if first:
        print_first_call_table(first)
    common.finish_run(
        "bench_solve", {"warm": warm, "first_calls": first}, goals(warm, first), load_start, started
    )


if __name__ == "__main__":
    main()
