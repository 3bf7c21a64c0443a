"""PEtab problems (issue "PEtab"): log-likelihood and gradient against AMICI, import + compile
against AMICI's model build, and (issue "steady states") pre-equilibration on Brannmark.

Run:  python benchmarks/bench_petab.py                  (the nine problems without Chen)
      python benchmarks/bench_petab.py --problems Boehm_JProteomeRes2014,Chen_MSB2009
      (writes results/bench_petab.json, or results/<name>.json with --output <name>;
      AMICI builds each model once, minutes each)
      python benchmarks/bench_petab.py --dask-workers 2     (or --scheduler tcp://host:8786)
      (each problem one work unit of a Dask cluster: a LocalCluster of 2 worker processes,
      or the cluster of that scheduler; the workers need the package and the files at the
      same paths; their times are measured while the other units run)

For every problem of ``../shared/petab`` (``$PYMC_ODESENS_SHARED_DIR/petab``), at AMICI's
default tolerances (rtol 1e-8, atol 1e-16) and the same step budget (100 000 steps between
output times, ours' default; AMICI's own is 10 000) on both sides, at the nominal parameters:

1. *import + compile* (ours), each in a fresh process running ``PetabProblem.from_yaml``
   and the first ``log_likelihood_and_gradient`` (code generation and compilation of the
   model's kernels, PyTensor compilation, one evaluation):

   - *new model*: an empty kernel cache, numba's cache of the solvers warm (one throwaway
     process first): what every new model costs; the goal is judged on this;
   - *new install* (``--install-compile``: by default one problem per solver route): a
     copy of the package without its numba cache and an empty kernel cache, *including*
     the import of the package (numba compiles the solvers then): the model's cost plus
     the once-per-install compilation (and the plain imports of PyMC and the package, a
     few seconds, which the other two leave out);
   - *2nd process*: the kernel cache filled by the new-model process (every later session).

   AMICI's *build* is ``import_petab_problem`` with compilation (SBML import, C++
   generation and compilation), timed once when the model is first built and kept with it.
   A problem whose gradient fails has its first log-likelihood timed instead (marked).
2. *log-likelihood and gradient* (warm, medians): ours with the problem's default route
   (``"auto"``) and with forward sensitivities, the log-likelihood alone; AMICI's
   ``simulate_petab`` (parameter mapping and ExpData prepared once) with forward and with
   adjoint sensitivities, and alone; both called from Python, so both include their
   per-call Python work. The gradients are compared (largest difference relative to the
   largest entry). A mode of AMICI whose simulations fail (status not 0) is shown with its
   status and is not a valid comparison: the ratio is against AMICI's best mode that
   succeeded.
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
import shutil
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
MAX_STEPS = 100_000  # integration steps between output times, both sides (AMICI's default: 1e4)
COMPILE_KINDS = ("install", "cold", "warm_process")
# one problem per solver route: forward, discrete adjoint, steady states + discrete adjoint
INSTALL_PROBLEMS = ("Boehm_JProteomeRes2014", "Bachmann_MSB2011", "Brannmark_JBC2010")


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
    problem = PetabProblem.from_yaml(
        yaml, relative_tolerance=RTOL, absolute_tolerance=ATOL, max_num_steps=MAX_STEPS
    )
    loaded = time.perf_counter()
    print(json.dumps({"stage": "from_yaml", "s": loaded - imported}), flush=True)
    try:
        problem.log_likelihood_and_gradient()
    except Exception as error:  # noqa: BLE001 - reported; the log-likelihood alone is timed
        failed = time.perf_counter()
        message = f"{type(error).__name__}: {str(error).splitlines()[0]}"
        problem.log_likelihood()
        first_llh = time.perf_counter() - failed
        print(
            json.dumps({"stage": "first_gradient", "error": message, "first_llh_s": first_llh}),
            flush=True,
        )
        return
    first = time.perf_counter()
    print(
        json.dumps(
            {"stage": "first_gradient", "s": first - loaded, "route": problem.gradient_route}
        ),
        flush=True,
    )


def import_and_compile(yaml: Path, cache: Path, timeout: float, package_root: Path) -> dict:
    """Stages of a fresh process that uses the kernel cache ``cache`` and the package
    found under ``package_root`` (with its numba cache, next to its sources)."""
    env = {**os.environ, "PYMC_ODESENS_CACHE_DIR": str(cache), "PYTHONPATH": str(package_root)}
    stages = common.run_staged_child(
        [str(Path(__file__).resolve()), "--child", str(yaml)],
        ["import", "from_yaml", "first_gradient"],
        stage_timeout=timeout,
        label=Path(yaml).stem,
        env=env,
    )
    out = {k: v.get("s") for k, v in stages.items()}
    failed = stages.get("first_gradient", {})
    if "first_llh_s" in failed:  # the gradient failed: the first log-likelihood instead
        out["gradient_error"] = failed["error"]
        out["first_llh"] = failed["first_llh_s"]
        out["import_compile_s"] = out["from_yaml"] + out["first_llh"]
    if all(isinstance(out.get(k), float) for k in ("from_yaml", "first_gradient")):
        out["import_compile_s"] = out["from_yaml"] + out["first_gradient"]
        # with the import of the package, where numba compiles (or loads) the solvers
        out["with_import_s"] = out["import"] + out["import_compile_s"]
    return out


def fresh_install(directory: Path) -> Path:
    """A copy of the package without any numba cache (a new install): its root."""
    source = common.REPO_DIR / "pymc_odesens"
    ignore = shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc", "*.pyc")
    shutil.copytree(source, directory / "pymc_odesens", ignore=ignore)
    return directory


def compile_costs(yaml: Path, timeout: float, install: bool) -> dict:
    """Import + compile of the problem in fresh processes.

    ``install`` (optional): a new install (a copy of the package with no numba cache) and
    an empty kernel cache: the once-per-install compilation of the solvers the problem
    uses plus the model's own cost. Then, with numba's cache of this checkout warmed by
    one throwaway process: ``cold`` (empty kernel cache: what every new model costs) and
    ``warm_process`` (the kernel cache filled by ``cold``: every later session).
    """
    out: dict = {}
    if install:
        with tempfile.TemporaryDirectory(prefix="petab_install_") as root:
            with tempfile.TemporaryDirectory(prefix="petab_kernels_") as cache:
                package = fresh_install(Path(root))
                out["install"] = import_and_compile(yaml, Path(cache), timeout, package)
    with tempfile.TemporaryDirectory(prefix="petab_kernels_") as cache:
        out["numba_warmup"] = import_and_compile(yaml, Path(cache), timeout, common.REPO_DIR)
    with tempfile.TemporaryDirectory(prefix="petab_kernels_") as cache:
        out["cold"] = import_and_compile(yaml, Path(cache), timeout, common.REPO_DIR)
        out["warm_process"] = import_and_compile(yaml, Path(cache), timeout, common.REPO_DIR)
    return out


# ----------------------------------------------------------------------------- ours, warm


def ours_warm(yaml: Path, repeats: int) -> dict:
    from pymc_odesens.petab import PetabProblem

    out = {}
    for route in ("auto", "forward"):
        problem = PetabProblem.from_yaml(
            yaml,
            relative_tolerance=RTOL,
            absolute_tolerance=ATOL,
            max_num_steps=MAX_STEPS,
            sensitivity=route,
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


# ----------------------------------------------------------------------------- the batch


def measure_problem(
    name: str,
    yaml: Path,
    repeats: int,
    cold: bool,
    install: bool,
    amici: bool,
    compile_timeout: float,
) -> dict:
    """One problem's entry (one work unit: a worker reads the problem from ``yaml``)."""
    progress(f"== {name}")
    entry: dict = {}
    if cold:
        entry.update(compile_costs(yaml, compile_timeout, install))
        progress(f"   ours: {', '.join(f'{k} {entry[k]}' for k in COMPILE_KINDS if k in entry)}")
    entry["ours"] = ours_warm(yaml, repeats)
    if amici:
        entry["amici"] = run_amici_petab(
            yaml,
            rtol=RTOL,
            atol=ATOL,
            repeats=repeats,
            steady_state_tolerances=(STEADY_RTOL, STEADY_ATOL),
            max_steps=MAX_STEPS,
        )
    return entry


def measure_problems(
    problems: dict[str, Path],
    *,
    repeats: int = 10,
    cold: bool = True,
    install: list[str] | tuple[str, ...] = (),
    amici: bool = True,
    compile_timeout: float = 1800.0,
    executor=None,
) -> dict[str, dict]:
    """The entries of ``problems`` (name -> YAML path), in their order.

    ``executor`` (None, a ``concurrent.futures.Executor`` or a ``dask.distributed.Client``):
    each problem is one work unit (its name, YAML path and options) run by a worker, which
    reads the problem and loads its kernels from its own cache; None runs them here, one
    after the other. The values (log-likelihoods, gradients) are those of a run here; the
    times are the workers', measured while the other units run.
    """
    with common.batch_executor(executor) as runner:
        works = [
            runner.submit(
                measure_problem,
                name,
                Path(yaml),
                repeats,
                cold,
                name in install,
                amici,
                compile_timeout,
                name=f"petab-{name}",
            )
            for name, yaml in problems.items()
        ]
        return dict(zip(problems, runner.gather(works)))


# ----------------------------------------------------------------------------- main


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--no-amici", action="store_true")
    parser.add_argument("--no-cold", action="store_true", help="skip the fresh-process timings")
    parser.add_argument("--compile-timeout", type=float, default=1800.0)
    parser.add_argument(
        "--install-compile",
        default=",".join(INSTALL_PROBLEMS),
        help="problems timed as a new install (a package copy with an empty numba cache); "
        "'' for none",
    )
    parser.add_argument(
        "--output",
        default="bench_petab",
        help="results file name (benchmarks/results/<output>.json)",
    )
    common.add_executor_arguments(parser)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return
    load_start = common.report_load("at start")
    names = [n for n in args.problems.split(",") if n]
    results: dict = {"rtol": RTOL, "atol": ATOL}
    with common.dask_client(args.scheduler, args.dask_workers) as client:
        results["problems"] = measure_problems(
            {name: problem_yaml(name) for name in names},
            repeats=args.repeats,
            cold=not args.no_cold,
            install=[n for n in args.install_compile.split(",") if n],
            amici=not args.no_amici,
            compile_timeout=args.compile_timeout,
            executor=client,
        )
    if "Brannmark_JBC2010" in names:
        results["steady_state"] = steady_state_comparison(args.repeats)
    load_end = common.report_load("at end")
    results["load_average"] = {"start": load_start, "end": load_end}
    report(results)
    path = common.write_results(args.output, results)
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


def _valid_modes(amici: dict) -> dict:
    """AMICI's gradient modes whose simulations all succeeded (status 0)."""
    modes = amici.get("modes", {})
    return {
        k: m
        for k, m in modes.items()
        if k in ("forward", "adjoint") and m.get("status") == [0] and "median_ms" in m
    }


def _amici_cell(mode: dict | None) -> str:
    if not mode:
        return "-"
    cell = fmt_ms(mode.get("median_ms"))
    return cell if mode.get("status") == [0] else f"failed {mode.get('status')}"


def _seconds(entry: dict, kind: str) -> float | None:
    # a new install compiles the solvers while the package is imported: that counts
    field = "with_import_s" if kind == "install" else "import_compile_s"
    value = entry.get(kind, {}).get(field)
    return value if isinstance(value, float) else None


def report(results: dict) -> None:
    rows, build_rows = [], []
    for name, entry in results["problems"].items():
        ours = entry["ours"]
        amici = entry.get("amici") or {}
        modes = amici.get("modes", {})
        auto = ours.get("auto", {})
        best_amici = min((m["median_ms"] for m in _valid_modes(amici).values()), default=None)
        ratio = best_amici / auto["median_ms"] if best_amici and "median_ms" in auto else None
        difference = _gradient_difference(auto, ours.get("x_ids", []), amici)
        rows.append(
            [
                name,
                ours.get("n_states"),
                ours.get("n_estimated"),
                ours.get("n_experiments"),
                fmt_ms(ours.get("llh", {}).get("median_ms")),
                f"{fmt_ms(auto.get('median_ms'))} ({auto.get('route', '-')})"
                if "median_ms" in auto
                else auto.get("error", "-")[:60],
                fmt_ms(ours.get("forward", {}).get("median_ms")),
                _amici_cell(modes.get("llh")),
                _amici_cell(modes.get("forward")),
                _amici_cell(modes.get("adjoint")),
                f"{ratio:.1f}x" if ratio else "-",
                f"{difference:.1e}" if difference is not None else "-",
            ]
        )
        build = amici.get("build_s")
        seconds = {kind: _seconds(entry, kind) for kind in COMPILE_KINDS}
        note = entry.get("cold", {}).get("gradient_error")

        def ratio_cell(ours_s, build=build):
            return f"{build / ours_s:.1f}x" if build and ours_s else "-"

        build_rows.append(
            [
                name + (" (llh only)" if note else ""),
                *(f"{v:.1f}" if v else "-" for v in seconds.values()),
                f"{build:.1f}" if build else "-",
                ratio_cell(seconds["cold"]),
                ratio_cell(seconds["install"]),
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
        title="log-likelihood and gradient at the nominal values (ms, medians of warm calls; "
        "AMICI's best of its modes that succeeded)",
    )
    print_table(
        [
            "problem",
            "ours, new install (s)",
            "ours, new model (s)",
            "ours, 2nd process (s)",
            "AMICI build (s)",
            "AMICI / new model",
            "AMICI / new install",
        ],
        build_rows,
        title="import + compile in a fresh process (from_yaml + first llh and gradient): a new "
        "model (empty kernel cache, numba's solver cache warm), a new install (no numba cache "
        "either), a later session (kernel cache filled) against AMICI's build",
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
