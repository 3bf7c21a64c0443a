"""Cost of SBML import (issue "SBML models in"): from file to first solve, beside libRoadRunner.

Run:  python benchmarks/bench_sbml.py  [--stage-timeout 900] [--cases 20]
      (writes results/bench_sbml.json; about 10 minutes, most of it Chen_MSB2009)
      python benchmarks/bench_sbml.py --dask-workers 2   (or --scheduler tcp://host:8786)
      (each model one work unit of a Dask cluster: its file's path and the options; the
      worker runs its fresh processes; times measured while the other units run)

For each of the ten PEtab benchmark models of ``../shared/petab`` (8 to 500 species) and an
evenly spread set of SBML Test Suite cases, in a fresh process per run (``sbml_child.py``):
``import pymc_odesens``, ``from_sbml`` (libsbml, MathML to sympy, SBML semantics), code
generation (sympy derivatives and CSE, the kernel module's source), compile (numba, the two
kernels a bdf solve needs), first ``solve`` (bdf, rtol 1e-8, atol 1e-10, 51 output times over
[0, 10]) and a warm solve; once with an empty kernel cache (cold) and once more with it (warm).
Every stage has a time limit (``--stage-timeout``) and each child a memory cap
(``--memory-gb``): a model that exceeds either is reported as stopped in that stage.
libRoadRunner (in the AMICI venv, ``peers/libroadrunner.py``) loads the same files
(``RoadRunner(path)``: parse and LLVM JIT; it keeps no cache between processes) and simulates
them at the same tolerances.

The time of the full SBML Test Suite run is read from ``results/sbml_suite.json``
(``python -m tests.sbml_suite.run_suite``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import common
from common import BENCH_DIR, RESULTS_DIR, fmt_ratio, print_table, progress, run_staged_child
from peers.libroadrunner import run_roadrunner

STAGES = ["import", "read", "codegen", "compile", "first_solve", "solve"]
"""The child's stages (see sbml_child.py)."""

FIRST_SOLVE = ["read", "codegen", "compile", "first_solve"]
"""The stages from the file to the first solution (after ``import pymc_odesens``)."""

T_END, POINTS, RTOL, ATOL = 10.0, 51, 1e-8, 1e-10


def shared_dir() -> Path:
    import os

    return Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", common.REPO_DIR.parent / "shared"))


def petab_models() -> dict[str, Path]:
    folder = shared_dir() / "petab"
    return {
        p.name: next(p.glob("model_*.xml"))
        for p in sorted(folder.iterdir())
        if p.is_dir() and any(p.glob("model_*.xml"))
    }


def suite_cases(count: int) -> dict[str, Path]:
    """``count`` goal cases evenly spread over the suite (those that pass in the last run)."""
    record = RESULTS_DIR / "sbml_suite.json"
    folder = shared_dir() / "sbml-test-suite" / "cases" / "semantic"
    if record.exists():
        results = json.loads(record.read_text())["results"]
        passing = sorted(c for c, r in results.items() if r["outcome"] == "pass")
    else:
        passing = sorted(p.name for p in folder.iterdir() if p.name.isdigit())
    chosen = [passing[round(j * (len(passing) - 1) / (count - 1))] for j in range(count)]
    return {f"case {c}": next((folder / c).glob(f"{c}-sbml-*.xml")) for c in chosen}


def run_model(path: Path, cache: Path, stage_timeout: float, label: str, memory_gb: float) -> dict:
    import os

    env = {**os.environ, "PYMC_ODESENS_CACHE_DIR": str(cache)}
    argv = [str(BENCH_DIR / "sbml_child.py"), str(path), repr(T_END), str(POINTS)]
    argv += [repr(RTOL), repr(ATOL), repr(memory_gb)]
    return run_staged_child(argv, STAGES, stage_timeout=stage_timeout, label=label, env=env)


def measure_model(label: str, path: Path, stage_timeout: float, memory_gb: float) -> dict:
    """One model (one work unit): a fresh process with an empty kernel cache (cold), then
    one with the cache it filled (warm)."""
    cache = Path(tempfile.mkdtemp(prefix="bench_sbml_"))
    try:
        progress(f"{label}: cold")
        cold = run_model(path, cache, stage_timeout, label, memory_gb)
        progress(f"{label}: warm")
        warm = run_model(path, cache, stage_timeout, label, memory_gb) if "solve" in cold else {}
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {"file": str(path), "cold": cold, "warm": warm}


def measure_models(
    models: dict[str, Path], stage_timeout: float, memory_gb: float, *, executor=None
) -> dict[str, dict]:
    """:func:`measure_model` of each of ``models`` (label -> SBML file), in their order:
    here (``executor=None``) or each as a work unit of ``executor`` (a
    ``concurrent.futures.Executor`` or ``dask.distributed.Client``)."""
    with common.batch_executor(executor) as runner:
        works = [
            runner.submit(
                measure_model, label, path, stage_timeout, memory_gb, name=f"sbml-{label}"
            )
            for label, path in models.items()
        ]
        return dict(zip(models, runner.gather(works)))


def total(stages: dict, names: list[str]) -> float | None:
    if not all(n in stages and "seconds" in stages[n] for n in names):
        return None
    return sum(stages[n]["seconds"] for n in names)


def fmt_s(value) -> str:
    return "-" if value is None else (f"{value:.2f}" if value < 100 else f"{value:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stage-timeout", type=float, default=900.0)
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument(
        "--memory-gb", type=float, default=6.0, help="address-space cap of each child process"
    )
    parser.add_argument("--models", nargs="*", default=None, help="PEtab model names")
    common.add_executor_arguments(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    load_start = common.report_load("at start")
    models = petab_models()
    if args.models is not None:
        models = {k: v for k, v in models.items() if k in args.models}
    models.update(suite_cases(args.cases) if args.cases else {})
    rows = []
    with common.dask_client(args.scheduler, args.dask_workers) as client:
        records = measure_models(models, args.stage_timeout, args.memory_gb, executor=client)
    progress("libRoadRunner")
    peer = run_roadrunner(
        [str(p) for p in models.values()], t_end=T_END, points=POINTS, rtol=RTOL, atol=ATOL
    )
    for label, path in models.items():
        record = records[label]
        rr = (peer or {}).get(str(path), {})
        record["libroadrunner"] = rr
        cold, warm = record["cold"], record["warm"]
        read = cold.get("read", {})
        cold_total = total(cold, FIRST_SOLVE)
        warm_total = total(warm, FIRST_SOLVE)
        stopped = next(
            (n for n in STAGES if "timeout_s" in cold.get(n, {}) or "error" in cold.get(n, {})),
            None,
        )
        rows.append(
            [
                label,
                read.get("n_states", "-"),
                read.get("n_params", "-"),
                fmt_s(cold.get("read", {}).get("seconds")),
                fmt_s(cold.get("codegen", {}).get("seconds")),
                fmt_s(cold.get("compile", {}).get("seconds")),
                fmt_s(cold.get("first_solve", {}).get("seconds")),
                fmt_s(cold_total) if stopped is None else f"stopped in {stopped}",
                fmt_s(warm_total),
                fmt_s(rr.get("load_s")),
                fmt_ratio(cold_total / rr["load_s"]) if cold_total and rr.get("load_s") else "-",
                fmt_ratio(warm_total / rr["load_s"]) if warm_total and rr.get("load_s") else "-",
                f"{1e3 * warm['solve']['seconds']:.2f}" if "solve" in warm else "-",
                f"{1e3 * rr['simulate_s']:.2f}" if rr.get("simulate_s") else "-",
            ]
        )
    print()
    print_table(
        [
            "model",
            "N",
            "P",
            "read s",
            "codegen s",
            "compile s",
            "1st solve s",
            "cold total s",
            "warm total s",
            "rr load s",
            "cold/rr",
            "warm/rr",
            "solve ms",
            "rr sim ms",
        ],
        rows,
        title="From SBML file to first solve (after import pymc_odesens), cold and warm kernel "
        "cache, beside libRoadRunner's load",
    )
    imports = [r["cold"]["import"]["seconds"] for r in records.values() if "import" in r["cold"]]
    suite = RESULTS_DIR / "sbml_suite.json"
    suite_record = json.loads(suite.read_text()) if suite.exists() else None
    summary = {
        "import_pymc_odesens_s_median": statistics.median(imports) if imports else None,
        "libroadrunner_import_s": (peer or {}).get("import_s"),
    }
    if suite_record is not None:
        summary["suite_wall_s"] = suite_record["wall_seconds"]
        summary["suite_cases"] = suite_record["cases"]
        summary["suite_workers"] = suite_record["workers"]
        seconds = [r["seconds"] for r in suite_record["results"].values()]
        summary["suite_case_s_median"] = statistics.median(seconds)
        progress(
            f"\nfull SBML Test Suite run: {suite_record['cases']} cases in "
            f"{suite_record['wall_seconds']:.0f} s on {suite_record['workers']} workers "
            f"(median {summary['suite_case_s_median']:.2f} s per case)"
        )
    common.finish_run(
        "bench_sbml",
        {
            "settings": {"t_end": T_END, "points": POINTS, "rtol": RTOL, "atol": ATOL},
            "stage_timeout_s": args.stage_timeout,
            "models": records,
            "summary": summary,
        },
        [],
        load_start,
        started,
    )


if __name__ == "__main__":
    main()
