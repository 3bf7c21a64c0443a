"""Every problem of a PEtab collection folder with default options: log-likelihood at the
nominal values, its difference to the reference, first and warm time of llh + gradient,
and the gradient route ``sensitivity="auto"`` chose.

Each problem runs in a fresh process with an empty kernel cache (a model never used
before, the solvers already compiled), under a time limit; results are written after
every problem, so a stopped run keeps what it measured::

    python benchmarks/bench_petab_collection.py                       # ../shared/petab
    python benchmarks/bench_petab_collection.py --collection DIR --references FILE.yaml
    python benchmarks/bench_petab_collection.py --report              # the last results

``--references`` adds ``name: llh`` pairs (AMICI's ``benchmark_models.yaml`` format) to the
values of the collection's README tables (``| name | llh | ...``). Columns: ``llh`` at the
nominal parameters, ``diff`` to the reference, ``read`` (``PetabProblem.from_yaml``),
``first`` (the first llh + gradient: kernels generated and compiled, the route measured),
``warm`` (median of ``--repeats`` later calls), ``route``, ``grad rtol`` (the relative
tolerance of gradients after ``gradient_check``: the problem's own unless it tightened them),
and ``|grad|`` (its largest entry; non-finite values are flagged).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
from common import print_table, progress, report_load

CHILD = r"""
import json, math, statistics, sys, time
started = time.perf_counter()
from pymc_odesens.petab import PetabProblem
folder, repeats = sys.argv[1], int(sys.argv[2])
out = {}
t0 = time.perf_counter()
problem = PetabProblem.from_yaml(folder)
out["read_s"] = time.perf_counter() - t0
t0 = time.perf_counter()
llh, grad = problem.log_likelihood_and_gradient()
out["first_s"] = time.perf_counter() - t0
warm = []
for _ in range(repeats):
    t0 = time.perf_counter()
    problem.log_likelihood_and_gradient()
    warm.append(time.perf_counter() - t0)
out["warm_s"] = statistics.median(warm)
out["llh"] = float(llh)
out["grad_max_abs"] = float(max(abs(g) for g in grad)) if len(grad) else 0.0
out["grad_finite"] = bool(all(math.isfinite(g) for g in grad))
out["parameters"] = len(grad)
out["route"] = problem.gradient_route
# the seconds per route that sensitivity="auto" measured (only the first when it was quick)
out["route_seconds"] = dict(problem.route_choice.seconds)
# the gradients' tolerances after gradient_check, and the differences it measured
choice = problem.tolerance_choice
out["gradient_rtol"] = float(choice.relative_tolerance)
out["tolerance_differences"] = {f"{r:g}": d for r, d in choice.differences.items()}
out["tolerance_failures"] = {f"{r:g}": f for r, f in choice.failures.items()}
out["process_s"] = time.perf_counter() - started
print("RESULT " + json.dumps(out))
"""

REFERENCE_ROW = re.compile(r"^\|\s*([A-Za-z][\w]+_\w+)\s*\|\s*(-?[0-9.]+(?:e-?\d+)?)\s")


def readme_references(collection: Path) -> dict[str, float]:
    """``name -> llh`` from the rows ``| name | number | ...`` of the collection's README."""
    readme = collection / "README.md"
    if not readme.is_file():
        return {}
    found = {}
    for line in readme.read_text().splitlines():
        if match := REFERENCE_ROW.match(line):
            found[match.group(1)] = float(match.group(2))
    return found


def yaml_references(path: Path) -> dict[str, float]:
    """``name: llh`` lines of a YAML file (AMICI's benchmark_models.yaml, values only)."""
    found = {}
    for line in path.read_text().splitlines():
        if match := re.match(r"^([A-Za-z]\w+):\s*(-?[0-9.]+(?:e-?\d+)?)\s*$", line):
            found[match.group(1)] = float(match.group(2))
    return found


def run_problem(folder: Path, repeats: int, timeout: float) -> dict:
    """One problem in a fresh process with an empty kernel cache."""
    with tempfile.TemporaryDirectory(prefix="petab_collection_") as cache:
        env = {**os.environ, "PYMC_ODESENS_CACHE_DIR": cache}
        started = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(folder), str(repeats)],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=tempfile.gettempdir(),
            )
        except subprocess.TimeoutExpired:
            return {"error": f"time limit of {timeout:.0f} s reached"}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            result["wall_s"] = time.perf_counter() - started
            return result
    lines = [line.strip() for line in done.stderr.strip().splitlines() if line.strip()]
    # the exception's own line (PyTensor appends hints after it)
    errors = [line for line in lines if re.match(r"^[\w.]+(Error|Exception)\b", line)]
    return {"error": (errors or lines or [f"exit status {done.returncode}"])[-1]}


def report(results: dict, references: dict[str, float]) -> None:
    rows = []
    for name, r in results.items():
        if "error" in r:
            rows.append([name, "-", "-", "-", "-", "-", "-", "-", r["error"][:160]])
            continue
        ref = references.get(name)
        diff = f"{r['llh'] - ref:+.2e}" if ref is not None else "no reference"
        grad = f"{r['grad_max_abs']:.3g}" + ("" if r["grad_finite"] else " NON-FINITE")
        rows.append(
            [
                name,
                f"{r['llh']:.6f}",
                diff,
                f"{r['read_s']:.1f}",
                f"{r['first_s']:.1f}",
                f"{r['warm_s'] * 1e3:.1f}",
                r["route"],
                f"{r['gradient_rtol']:g}" if "gradient_rtol" in r else "-",
                grad,
            ]
        )
    print_table(
        [
            "problem",
            "llh",
            "diff",
            "read s",
            "first s",
            "warm ms",
            "route",
            "grad rtol",
            "|grad| max",
        ],
        rows,
        title="\nPEtab problems with default options at their nominal values",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shared = Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", common.REPO_DIR.parent / "shared"))
    parser.add_argument("--collection", type=Path, default=shared / "petab")
    parser.add_argument("--references", type=Path, default=None)
    parser.add_argument("--problems", default="", help="comma-separated names (default: all)")
    parser.add_argument("--repeats", type=int, default=3, help="warm calls per problem")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per problem")
    parser.add_argument("--output", default="bench_petab_collection")
    parser.add_argument("--report", action="store_true", help="print the last results")
    args = parser.parse_args()
    path = common.RESULTS_DIR / f"{args.output}.json"
    references = readme_references(args.collection)
    if args.references:
        references.update(yaml_references(args.references))
    if args.report:
        report(json.loads(path.read_text())["problems"], references)
        return
    names = [n for n in args.problems.split(",") if n] or sorted(
        p.name for p in args.collection.iterdir() if p.is_dir() and not p.name.startswith(".")
    )
    results: dict = {}
    record = {"collection": str(args.collection), "load_start": report_load("at start")}
    for k, name in enumerate(names, 1):
        progress(f"  [{k}/{len(names)}] {name} ...")
        results[name] = run_problem(args.collection / name, args.repeats, args.timeout)
        r = results[name]
        progress(
            f"    {r['error']}"
            if "error" in r
            else f"    llh {r['llh']:.6f}, first {r['first_s']:.1f} s, warm "
            f"{r['warm_s'] * 1e3:.1f} ms, route {r['route']}, gradient rtol "
            f"{r.get('gradient_rtol', float('nan')):g}"
        )
        record["problems"] = results
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1))
    record["load_end"] = report_load("at end")
    path.write_text(json.dumps(record, indent=1))
    report(results, references)
    print(f"\nresults written to {path}")


if __name__ == "__main__":
    main()
