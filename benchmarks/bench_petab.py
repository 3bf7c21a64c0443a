"""PEtab problems (issue "PEtab"): log-likelihood and gradient against AMICI, import + compile
against AMICI's model build, and (issue "steady states") pre-equilibration on Brannmark.

Run:  python benchmarks/bench_petab.py                  (the nine problems without Chen)
      python benchmarks/bench_petab.py --problems Boehm_JProteomeRes2014,Chen_MSB2009
      (writes results/bench_petab.json; AMICI builds each model once, minutes each)

For every problem of ``../shared/petab`` (``$PYMC_ODESENS_SHARED_DIR/petab``), at AMICI's
default tolerances (rtol 1e-8, atol 1e-16) on both sides and at the nominal parameters:

1. *import + compile* (ours): a fresh process with an empty kernel cache runs
   ``PetabProblem.from_yaml`` and the first ``log_likelihood_and_gradient`` (code generation,
   numba compilation of the kernels, PyTensor compilation, one evaluation); then a second
   fresh process with the kernel cache now filled (what every later session pays). AMICI's
   *build* is ``import_petab_problem`` with compilation (SBML import, C++ generation and
   compilation), timed once when the model is first built and kept with it.
2. *log-likelihood and gradient* (warm, medians): ours with the problem's default route
   (``"auto"``) and with forward sensitivities, the log-likelihood alone; AMICI's
   ``simulate_petab`` (parameter mapping and ExpData prepared once) with forward and with
   adjoint sensitivities, and alone; both called from Python, so both include their
   per-call Python work. The gradients are compared (largest difference relative to the
   largest entry).
3. Brannmark_JBC2010: the steady state with its sensitivities (``steady_state`` with the
   implicit-function ``S``) of the pre-equilibration condition, once per experiment, against
   AMICI's pre-equilibration CPU time in its forward-sensitivity run (same steady-state
   tolerances on both sides).

Goals: our gradient at least 3x faster than AMICI's faster gradient on every problem of at
most 50 species; import + compile at least 10x faster than AMICI's build; the steady state
with sensitivities faster than AMICI's pre-equilibration.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import common
import numpy as np
from common import fmt_ms, print_table, progress

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from amici import run_amici_petab  # noqa: E402  (benchmarks/peers/amici.py, not AMICI)

PROBLEMS = (
    "Boehm_JProteomeRes2014",
    "Fujita_SciSignal2010",
    "Brannmark_JBC2010",
    "Elowitz_Nature2000",
    "Fiedler_BMCSystBiol2016",
    "Schwen_PONE2014",
    "Bachmann_MSB2011",
    "Beer_MolBioSystems2014",
    "Isensee_JCB2018",
)
RTOL, ATOL = 1e-8, 1e-16
STEADY_RTOL, STEADY_ATOL = 1e-8, 1e-16  # AMICI's steady-state defaults, set on both sides


def petab_dir() -> Path:
    shared = Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", common.REPO_DIR.parent / "shared"))
    return shared / "petab"


def problem_yaml(name: str) -> Path:
    return petab_dir() / name / f"{name}.yaml"


# ----------------------------------------------------------------------------- child


def child(yaml: str) -> None:
    """One fresh process: import + first log-likelihood and gradient, timed by stage."""
    start = time.perf_counter()
    from pymc_odesens.petab import PetabProblem

    imported = time.perf_counter()
    print(json.dumps({"stage": "import", "s": imported - start}), flush=True)
    problem = PetabProblem.from_yaml(yaml, relative_tolerance=RTOL, absolute_tolerance=ATOL)
    loaded = time.perf_counter()
    print(json.dumps({"stage": "from_yaml", "s": loaded - imported}), flush=True)
    problem.log_likelihood_and_gradient()
    first = time.perf_counter()
    print(
        json.dumps(
            {"stage": "first_gradient", "s": first - loaded, "route": problem.gradient_route}
        ),
        flush=True,
    )


def import_and_compile(name: str, cache: Path, timeout: float) -> dict:
    """Stages of a fresh process that uses the kernel cache ``cache``."""
    env_before = dict(os.environ)
    os.environ["PYMC_ODESENS_CACHE_DIR"] = str(cache)
    os.environ["PYTHONPATH"] = str(common.REPO_DIR)
    try:
        stages = common.run_staged_child(
            [str(Path(__file__).resolve()), "--child", str(problem_yaml(name))],
            ["import", "from_yaml", "first_gradient"],
            stage_timeout=timeout,
            label=name,
        )
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    out = {k: v.get("s") for k, v in stages.items()}
    if all(isinstance(out.get(k), float) for k in ("from_yaml", "first_gradient")):
        out["import_compile_s"] = out["from_yaml"] + out["first_gradient"]
    return out


# ----------------------------------------------------------------------------- ours, warm


def ours_warm(name: str, repeats: int) -> dict:
    from pymc_odesens.petab import PetabProblem

    out = {}
    for route in ("auto", "forward"):
        problem = PetabProblem.from_yaml(
            problem_yaml(name), relative_tolerance=RTOL, absolute_tolerance=ATOL, sensitivity=route
        )
        try:
            timed = common.time_call(
                problem.log_likelihood_and_gradient, repeats=repeats, max_seconds=10.0
            )
        except Exception as error:  # noqa: BLE001 - reported in the table
            out[route] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0]}"}
            continue
        llh, gradient = timed["result"]
        out[route] = {
            "route": problem.gradient_route,
            "median_ms": timed["median_ms"],
            "min_ms": timed["min_ms"],
            "llh": llh,
            "gradient": gradient.tolist(),
        }
        if route == "auto":
            value = common.time_call(problem.log_likelihood, repeats=repeats, max_seconds=10.0)
            out["llh"] = {"median_ms": value["median_ms"], "llh": value["result"]}
            out["x_ids"] = list(problem.parameters.ids)
            out["n_states"] = problem.model_system.n_states
            out["n_estimated"] = len(problem.parameters)
            out["n_experiments"] = len(problem.experiments)
    return out


def steady_state_comparison(repeats: int) -> dict:
    """Brannmark: the pre-equilibration steady state with its sensitivities, per experiment."""
    from pymc_odesens import steady_state
    from pymc_odesens.petab import PetabProblem

    problem = PetabProblem.from_yaml(problem_yaml("Brannmark_JBC2010"))
    graph = problem.graph
    z = graph.values.values(problem.parameters.unscale(None))
    system = problem.simulation.steady_state_system
    rows = graph.preequilibration_parameters
    controls = {"relative_tolerance": STEADY_RTOL, "absolute_tolerance": STEADY_ATOL}

    def all_experiments():
        return [steady_state(system, None, z[row], **controls) for row in rows]

    timed = common.time_call(all_experiments, repeats=repeats, max_seconds=5.0)
    first = timed["result"][0]
    return {
        "experiments": len(rows),
        "median_ms": timed["median_ms"],
        "route": first.route,
        "newton_iterations": first.stats["n_newton_iterations"],
        "integration_steps": first.stats["n_integration_steps"],
    }


# ----------------------------------------------------------------------------- main


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--no-amici", action="store_true")
    parser.add_argument("--no-cold", action="store_true", help="skip the fresh-process timings")
    parser.add_argument("--compile-timeout", type=float, default=1800.0)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return
    load_start = common.report_load("at start")
    names = [n for n in args.problems.split(",") if n]
    results: dict = {"rtol": RTOL, "atol": ATOL, "problems": {}}
    for name in names:
        progress(f"== {name}")
        entry: dict = {}
        if not args.no_cold:
            with tempfile.TemporaryDirectory(prefix="petab_kernels_") as cache:
                entry["cold"] = import_and_compile(name, Path(cache), args.compile_timeout)
                entry["warm_process"] = import_and_compile(name, Path(cache), args.compile_timeout)
            progress(f"   ours cold {entry['cold']}, second process {entry['warm_process']}")
        entry["ours"] = ours_warm(name, args.repeats)
        if not args.no_amici:
            entry["amici"] = run_amici_petab(
                problem_yaml(name),
                rtol=RTOL,
                atol=ATOL,
                repeats=args.repeats,
                steady_state_tolerances=(STEADY_RTOL, STEADY_ATOL),
            )
        results["problems"][name] = entry
    if "Brannmark_JBC2010" in names:
        results["steady_state"] = steady_state_comparison(args.repeats)
    load_end = common.report_load("at end")
    results["load_average"] = {"start": load_start, "end": load_end}
    report(results)
    path = common.write_results("bench_petab", results)
    progress(f"wrote {path}")


def _gradient_difference(auto: dict, ids: list, amici: dict | None) -> float | None:
    """Largest difference of our gradient from AMICI's, relative to AMICI's largest entry."""
    if not amici or "gradient" not in auto:
        return None
    mode = amici["modes"].get("forward") or amici["modes"].get("adjoint")
    if not mode or "gradient" not in mode:
        return None
    theirs = dict(zip(amici["x_free_ids"], mode["gradient"]))
    a = np.array(auto["gradient"])
    b = np.array([theirs.get(pid, np.nan) for pid in ids])
    return float(np.nanmax(np.abs(a - b)) / max(np.nanmax(np.abs(b)), 1e-300))


def report(results: dict) -> None:
    rows, build_rows = [], []
    for name, entry in results["problems"].items():
        ours = entry["ours"]
        amici = entry.get("amici") or {}
        modes = amici.get("modes", {})
        auto = ours.get("auto", {})
        best_amici = min(
            (m["median_ms"] for k, m in modes.items() if k in ("forward", "adjoint")),
            default=None,
        )
        ratio = best_amici / auto["median_ms"] if best_amici and "median_ms" in auto else None
        difference = _gradient_difference(auto, ours.get("x_ids", []), amici)
        rows.append(
            [
                name,
                ours.get("n_states"),
                ours.get("n_estimated"),
                ours.get("n_experiments"),
                fmt_ms(ours.get("llh", {}).get("median_ms")),
                f"{fmt_ms(auto.get('median_ms'))} ({auto.get('route', '-')})",
                fmt_ms(ours.get("forward", {}).get("median_ms")),
                fmt_ms(modes.get("llh", {}).get("median_ms")),
                fmt_ms(modes.get("forward", {}).get("median_ms")),
                fmt_ms(modes.get("adjoint", {}).get("median_ms")),
                f"{ratio:.1f}x" if ratio else "-",
                f"{difference:.1e}" if difference is not None else "-",
            ]
        )
        cold = entry.get("cold", {})
        build = amici.get("build_s")
        ours_s = cold.get("import_compile_s")
        build_rows.append(
            [
                name,
                f"{ours_s:.1f}" if ours_s else "-",
                f"{entry.get('warm_process', {}).get('import_compile_s', 0):.1f}",
                f"{build:.1f}" if build else "-",
                f"{build / ours_s:.1f}x" if build and ours_s else "-",
            ]
        )
    print_table(
        [
            "problem",
            "N",
            "K",
            "E",
            "llh",
            "llh+grad (route)",
            "forward",
            "AMICI llh",
            "AMICI fwd",
            "AMICI adj",
            "AMICI best / ours",
            "grad diff",
        ],
        rows,
        title="log-likelihood and gradient at the nominal values (ms, medians of warm calls)",
    )
    print_table(
        [
            "problem",
            "ours import+compile (s)",
            "ours, 2nd process (s)",
            "AMICI build (s)",
            "AMICI / ours",
        ],
        build_rows,
        title="import + compile (a fresh process, empty kernel cache) against AMICI's build",
    )
    steady = results.get("steady_state")
    brannmark = results["problems"].get("Brannmark_JBC2010", {}).get("amici") or {}
    if steady:
        amici_preeq = brannmark.get("modes", {}).get("forward", {}).get("preeq_cpu_ms")
        print_table(
            [
                "Brannmark pre-equilibration",
                "experiments",
                "ours (ms)",
                "AMICI preeq CPU (ms)",
                "AMICI / ours",
            ],
            [
                [
                    steady["route"],
                    steady["experiments"],
                    fmt_ms(steady["median_ms"]),
                    fmt_ms(amici_preeq),
                    f"{amici_preeq / steady['median_ms']:.1f}x" if amici_preeq else "-",
                ]
            ],
            title="steady state + sensitivities (ours: steady_state with S; AMICI: its "
            "pre-equilibration in the forward-sensitivity run)",
        )


if __name__ == "__main__":
    main()
