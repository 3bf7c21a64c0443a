"""Time to a converged posterior (issue 37.3): ``pymc_odesens.petab.sample_posterior`` on the
PEtab benchmark problems, with and without marginalised observation parameters.

Run:  python benchmarks/bench_posterior.py
      python benchmarks/bench_posterior.py --problems Boehm_JProteomeRes2014 --time-limit 600
      (writes results/bench_posterior.json, one JSON checkpoint per problem and variant in
      results/bench_posterior/, which a later run reuses unless --fresh)

For each problem of ``../shared/petab`` (``$PYMC_ODESENS_SHARED_DIR/petab``; default Boehm,
Fujita, Brannmark, Elowitz, Schwen and Bachmann) and each variant (``marginalize="auto"``
and ``None``), one process runs ``sample_posterior(problem, marginalize=..., chains=4,
time_limit=...)`` with the problem's default solver options and otherwise the defaults
(nutpie, in coordinates whitened by the Laplace approximation unless ``--whiten off``; 10
multistart starts; checks every 100 draws), and reports: the wall time from the
call to a posterior with R-hat <= 1.01 and bulk and tail ESS >= 400 for every estimated
parameter (marginalised ones included), or the time limit; R-hat max and the smallest ESS;
the smallest ESS per second of wall time; the modes found (and whether the posterior looks
multimodal); the wall time of each phase. The process is killed ``--grace`` seconds after
the limit (a phase that does not look at the clock: the multistart, tuning); it then reports
``"killed"``. The wall time includes the process's compiles (cold or warm caches as found).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import common
from common import print_table, progress

PROBLEMS = (
    "Boehm_JProteomeRes2014",
    "Fujita_SciSignal2010",
    "Brannmark_JBC2010",
    "Elowitz_Nature2000",
    "Schwen_PONE2014",
    "Bachmann_MSB2011",
)
VARIANTS = ("auto", "none")
CHECKPOINTS = common.RESULTS_DIR / "bench_posterior"


def problem_yaml(name: str) -> Path:
    shared = Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", common.REPO_DIR.parent / "shared"))
    return shared / "petab" / name / f"{name}.yaml"


def child(
    name: str,
    variant: str,
    time_limit: float,
    seed: int,
    n_starts: int,
    whiten: bool = True,
    sampler: str = "nutpie",
    tune: int = 500,
) -> dict:
    """One run, in this process: ``sample_posterior`` and its report."""
    called = time.perf_counter()
    from pymc_odesens.petab import PetabProblem, sample_posterior

    problem = PetabProblem.from_yaml(problem_yaml(name))
    read = time.perf_counter() - called
    idata = sample_posterior(
        problem,
        marginalize=None if variant == "none" else "auto",
        chains=4,
        n_starts=n_starts,
        time_limit=time_limit,
        random_seed=seed,
        whiten=whiten,
        sampler=sampler,
        tune=tune,
    )
    wall = time.perf_counter() - called
    import pymc_odesens

    attrs = {k: v for k, v in idata.sample_stats.attrs.items() if k not in ("created_at",)}
    attrs = {
        k: (list(v) if hasattr(v, "tolist") and not isinstance(v, str) else v)
        for k, v in attrs.items()
    }
    return {
        "problem": name,
        "variant": variant,
        "whiten": whiten,
        "sampler": sampler,
        "tune": tune,
        "status": "converged" if int(attrs["converged"]) else "not converged",
        "time_read_problem": read,
        "wall_time_with_import": wall,
        "ess_per_second_with_import": min(attrs["ess_bulk_min"], attrs["ess_tail_min"]) / wall,
        "report": attrs,
        "pymc_odesens_path": pymc_odesens.__file__,
    }


def run_one(name: str, variant: str, args) -> dict:
    """``child`` in its own process, killed ``args.grace`` seconds after the limit."""
    stem = f"{name}_{variant}" + ("" if args.whiten == "on" else "_unwhitened")
    stem += "" if args.sampler == "nutpie" else f"_{args.sampler}"
    stem += "" if args.tune == 500 else f"_tune{args.tune}"
    stem += "" if args.n_starts == 10 else f"_starts{args.n_starts}"
    path = CHECKPOINTS / f"{stem}.json"
    if path.exists() and not args.fresh:
        progress(f"{name} ({variant}): from the checkpoint {path}")
        return json.loads(path.read_text())
    argv = [
        sys.executable,
        __file__,
        "--child",
        name,
        variant,
        "--time-limit",
        str(args.time_limit),
        "--seed",
        str(args.seed),
        "--n-starts",
        str(args.n_starts),
        "--whiten",
        args.whiten,
        "--sampler",
        args.sampler,
        "--tune",
        str(args.tune),
    ]
    progress(f"{name} ({variant}): time limit {args.time_limit:.0f} s")
    # the child imports this checkout's package (not another installed copy)
    path_entries = [str(common.REPO_DIR), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path_entries if p)}
    CHECKPOINTS.mkdir(parents=True, exist_ok=True)
    log = CHECKPOINTS / f"{stem}.log"  # the child's phases (stderr)
    began = time.perf_counter()
    with log.open("w") as stderr:
        # its own process group: a kill also ends the multistart's worker processes
        child_process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, start_new_session=True
        )
        try:
            stdout, _ = child_process.communicate(timeout=args.time_limit + args.grace)
            killed = False
        except subprocess.TimeoutExpired:
            os.killpg(child_process.pid, signal.SIGKILL)
            child_process.communicate()
            killed = True
    if killed:
        result = {"problem": name, "variant": variant, "status": "killed"}
    else:
        lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
        if child_process.returncode == 0 and lines:
            result = json.loads(lines[-1][len("RESULT ") :])
        else:
            result = {"problem": name, "variant": variant, "status": "failed"}
    if result["status"] != "converged" and result["status"] != "not converged":
        phases = [line for line in log.read_text().splitlines() if "sample_posterior:" in line]
        result["last_phases"] = phases[-3:]
        result["stderr_tail"] = log.read_text().strip().splitlines()[-5:]
    result["process_wall_time"] = time.perf_counter() - began
    result["time_limit"] = args.time_limit
    result["load_average_1min_after"] = common.load_average()
    path.write_text(json.dumps(common._jsonable(result), indent=2) + "\n")
    return result


def row(result: dict) -> list:
    r = result.get("report", {})
    if not r:
        return [
            result["problem"],
            result["variant"],
            result["status"],
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
        ]
    return [
        result["problem"],
        result["variant"],
        result["status"],
        f"{r['wall_time']:.0f}",
        f"{r['rhat_max']:.4f}" if r.get("rhat_max") is not None else "-",
        f"{min(r['ess_bulk_min'], r['ess_tail_min']):.0f}" if r.get("ess_bulk_min") else "-",
        f"{r['ess_per_second']:.2f}" if r.get("ess_per_second") is not None else "-",
        f"{min(r['ess_bulk_min'], r['ess_tail_min']) / r['time_sampling']:.2f}"
        if r.get("ess_bulk_min") and r.get("time_sampling")
        else "-",
        f"{r['modes_found']}" + (" multimodal" if r.get("multimodal") else ""),
        f"{r['draws_per_chain']}",
    ]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS))
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--time-limit", type=float, default=3600.0, help="seconds per run (3600)")
    parser.add_argument(
        "--grace", type=float, default=600.0, help="seconds after the limit before a kill (600)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n-starts", type=int, default=10)
    parser.add_argument(
        "--whiten",
        choices=("on", "off"),
        default="on",
        help="nutpie in coordinates whitened by the Laplace approximation (sample_posterior's "
        "whiten; default on)",
    )
    parser.add_argument(
        "--sampler",
        choices=("nutpie", "pymc"),
        default="nutpie",
        help="sample_posterior's sampler (pymc: PyMC's NUTS with the dense Laplace metric)",
    )
    parser.add_argument(
        "--tune", type=int, default=500, help="sample_posterior's tuning steps per chain (500)"
    )
    parser.add_argument("--fresh", action="store_true", help="ignore the checkpoints")
    parser.add_argument("--output", default="bench_posterior")
    parser.add_argument("--child", nargs=2, metavar=("PROBLEM", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result = child(
            *args.child,
            args.time_limit,
            args.seed,
            args.n_starts,
            args.whiten == "on",
            args.sampler,
            args.tune,
        )
        print("RESULT " + json.dumps(common._jsonable(result)), flush=True)
        return result
    common.report_load("before")
    results = [run_one(name, variant, args) for name in args.problems for variant in args.variants]
    common.report_load("after")
    print_table(
        [
            "problem",
            "marginalize",
            "status",
            "wall s",
            "R-hat max",
            "min ESS",
            "min ESS/s",
            "per s of sampling",
            "modes",
            "draws/chain",
        ],
        [row(r) for r in results],
        title="Time to a converged posterior (sample_posterior, 4 chains, nutpie)",
    )
    path = common.write_results(
        args.output, {"time_limit": args.time_limit, "seed": args.seed, "results": results}
    )
    progress(f"wrote {path}")
    return {"results": results}


if __name__ == "__main__":
    main()
