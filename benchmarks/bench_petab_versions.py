"""Speed of two versions of the package on the PEtab benchmark problems, in one run.

Issue "PEtab: every problem" asks that its work does not make the log-likelihood and
gradient of the earlier problems slower (within 10 % of the main before it). This script
times a *baseline* checkout (another git worktree of the repository, e.g. ``git worktree add
--detach ../base <commit>``) against the *candidate* (this checkout) on the same problems, in
the same run: each measurement is a fresh process that imports the package from one checkout
(``PYTHONPATH``, checked), reads the problem with default options (or the options given per
problem), calls ``log_likelihood_and_gradient`` until its kernels are compiled and loaded,
and then times ``--repeats`` warm calls of ``log_likelihood_and_gradient`` and of
``log_likelihood``. The versions alternate within each round (baseline first in odd rounds,
candidate first in even ones), so that a change of the machine's load hits both alike; the
figure per version is the median over all rounds' calls.

Run:  python benchmarks/bench_petab_versions.py --baseline ../base
      python benchmarks/bench_petab_versions.py --baseline ../base --problems Boehm_JProteomeRes2014
      (writes results/bench_petab_versions.json, or results/<name>.json with --output <name>)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import common
from bench_petab import PROBLEMS as BENCH_PETAB_PROBLEMS
from common import print_table, progress

HERE = Path(__file__).resolve().parent
CANDIDATE = HERE.parent
# the ten problems of issue 36's speed check: bench_petab.py's nine and Chen
PROBLEMS = (*BENCH_PETAB_PROBLEMS, "Chen_MSB2009")
# Chen_MSB2009 failed at the default tolerances before that issue (bdf step-size underflow):
# both versions are timed at the options its tests used then
OPTIONS = {"Chen_MSB2009": {"relative_tolerance": 1e-8, "absolute_tolerance": 1e-8}}
GOAL = 1.10  # candidate / baseline, at most


def shared_dir() -> Path:
    return Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", common.REPO_DIR.parent / "shared"))


def child(args: argparse.Namespace) -> None:
    import numpy as np

    import pymc_odesens
    from pymc_odesens.petab import PetabProblem

    where = Path(pymc_odesens.__file__).resolve()
    if Path(args.checkout).resolve() not in where.parents:
        raise SystemExit(f"imported {where}, not the checkout {args.checkout}")
    path = shared_dir() / "petab" / args.child / f"{args.child}.yaml"
    problem = PetabProblem.from_yaml(path, **json.loads(args.options))
    for _ in range(2):  # compile, load, measure the route ("auto"), warm the caches
        value, gradient = problem.log_likelihood_and_gradient()
    both, alone = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        problem.log_likelihood_and_gradient()
        both.append(time.perf_counter() - start)
        start = time.perf_counter()
        problem.log_likelihood()
        alone.append(time.perf_counter() - start)
    route = getattr(problem, "gradient_route", None)
    print(
        json.dumps(
            {
                "llh": float(value),
                "gradient_norm": float(np.linalg.norm(gradient)),
                "route": route if isinstance(route, str) else None,
                "llh_and_gradient_s": both,
                "llh_s": alone,
            }
        )
    )


def measure(checkout: Path, problem: str, repeats: int, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    env.setdefault("PYMC_ODESENS_SHARED_DIR", str(shared_dir()))
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        problem,
        "--checkout",
        str(checkout),
        "--repeats",
        str(repeats),
        "--options",
        json.dumps(OPTIONS.get(problem, {})),
    ]
    try:
        done = subprocess.run(
            command, env=env, cwd=checkout, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="checkout of the baseline version")
    parser.add_argument("--candidate", type=Path, default=CANDIDATE)
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--repeats", type=int, default=7, help="warm calls per process")
    parser.add_argument("--rounds", type=int, default=2, help="processes per version")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per process, s")
    parser.add_argument("--output", default="bench_petab_versions")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--checkout", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--options", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return
    if args.baseline is None:
        parser.error("--baseline: give the checkout of the version to compare with")
    versions = {"baseline": args.baseline.resolve(), "candidate": args.candidate.resolve()}
    problems = [p for p in args.problems.split(",") if p]
    samples = {p: {v: {"both": [], "alone": [], "runs": []} for v in versions} for p in problems}
    for round_ in range(args.rounds):
        order = list(versions) if round_ % 2 == 0 else list(reversed(versions))
        for problem in problems:
            for version in order:
                progress(f"round {round_ + 1}/{args.rounds}: {problem}, {version}")
                result = measure(versions[version], problem, args.repeats, args.timeout)
                entry = samples[problem][version]
                entry["runs"].append(result)
                entry["both"] += result.get("llh_and_gradient_s", [])
                entry["alone"] += result.get("llh_s", [])
    rows, records = [], []
    for problem in problems:
        record = {"problem": problem, "options": OPTIONS.get(problem, {})}
        for version in versions:
            entry = samples[problem][version]
            errors = [r["error"] for r in entry["runs"] if "error" in r]
            done = [r for r in entry["runs"] if "error" not in r]
            record[version] = {
                "llh_and_gradient_ms": 1e3 * statistics.median(entry["both"])
                if entry["both"]
                else None,
                "llh_ms": 1e3 * statistics.median(entry["alone"]) if entry["alone"] else None,
                "llh": done[-1]["llh"] if done else None,
                "route": done[-1]["route"] if done else None,
                "errors": errors,
            }
        a, b = record["baseline"], record["candidate"]
        ratio = (
            b["llh_and_gradient_ms"] / a["llh_and_gradient_ms"]
            if a["llh_and_gradient_ms"] and b["llh_and_gradient_ms"]
            else None
        )
        record["ratio"] = ratio
        records.append(record)
        rows.append(
            [
                problem,
                f"{a['llh_and_gradient_ms']:.1f}" if a["llh_and_gradient_ms"] else "failed",
                f"{b['llh_and_gradient_ms']:.1f}" if b["llh_and_gradient_ms"] else "failed",
                f"{ratio:.2f}" if ratio else "-",
                f"{a['route']} / {b['route']}",
                "yes" if ratio and ratio <= GOAL else "NO",
            ]
        )
    print_table(
        ["problem", "baseline ms", "candidate ms", "ratio", "route", f"<= {GOAL}"],
        rows,
    )
    common.write_results(
        args.output,
        {
            "baseline": str(versions["baseline"]),
            "candidate": str(versions["candidate"]),
            "repeats": args.repeats,
            "rounds": args.rounds,
            "problems": records,
        },
    )


if __name__ == "__main__":
    main()
