"""Model evidence by tempered SMC against pyPESTO's thermodynamic integration (issue 38).

For each PEtab problem of ``../shared/petab`` given (default Boehm_JProteomeRes2014), the
log evidence under the problem's own priors (PEtab's default: uniform on the bounds, on the
parameter's scale) is estimated twice in the same run:

- **ours**: ``pymc_odesens.sample_smc(problem, draws, runs, cores)``; the estimate and its
  Monte Carlo standard error from the ``runs`` independent runs (``log_evidence``), wall
  time of the call (the model's compiles included: a cold user pays them);
- **pyPESTO**: ``--pt-repeats`` independent runs (seeds ``seed``, ``seed + 1``, ...) of
  pyPESTO's ``ParallelTemperingSampler`` (``--pt-chains`` adaptive-Metropolis chains on
  pyPESTO's beta-decay ladder, ``--pt-samples`` iterations, started from its own multistart
  optimum, AMICI at the same tolerances; ``benchmarks/peers/pypesto_sampling_runner.py`` in
  the AMICI virtualenv, one process on one core each, ``--pt-parallel`` at a time) and
  ``pypesto.sample.evidence.parallel_tempering_log_evidence``, by thermodynamic
  integration (trapezoid, and Simpson) and by steppingstone sampling from the same chains
  (pyPESTO's function, and pyPESTO's ``steppingstone`` over every chain after half the
  iterations as burn-in: ``benchmarks/peers/pypesto_sampling_runner.py`` says why).
  Each estimate is the mean over the repeats and its error their standard deviation over
  ``sqrt(repeats)``. pyPESTO's time is the sum of the repeats' wall times (its time on one
  core): AMICI's model import (built once, then cached), multistart and sampling.

The table gives the estimates with their errors, ours minus each of pyPESTO's in units of
the combined error, and each side's time; ``time_ratio_per_core`` in the JSON is pyPESTO's
time on one core over ours times ``--cores``.

Run:  python benchmarks/bench_smc.py
      python benchmarks/bench_smc.py --draws 200 --runs 4 --pt-samples 20000 --pt-repeats 4
      python benchmarks/bench_smc.py --problems Fujita_SciSignal2010 --sides ours \
          --time-limit 3600 --checkpoint DIR   (again with the same options: continues)
      python benchmarks/bench_smc.py ... --jump-starts 4   (jump moves to the optima of a
          multistart from the nominal values and 4 prior draws)
      python benchmarks/bench_smc.py ... --jump-starts 0 --jump-initial-points FILE.json
          (the multistart also starts at the points of FILE: a JSON list of
          {parameter id: value on its parameterScale})
      (writes results/bench_smc.json, or results/<name>.json with --output <name>)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import common
import numpy as np
from common import petab_yaml, print_table, progress

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from amici import run_pypesto_sampling  # noqa: E402  (benchmarks/peers/amici.py, not AMICI)

PROBLEMS = ("Boehm_JProteomeRes2014",)


def ours(name: str, args) -> dict:
    """Our log evidence of ``name`` by ``sample_smc``, with its error and wall time."""
    import pymc_odesens
    from pymc_odesens.petab import PetabProblem

    started = time.perf_counter()
    problem = PetabProblem.from_yaml(petab_yaml(name))
    checkpoint = None if args.checkpoint is None else args.checkpoint / name
    trajectory = None
    if args.trajectory_tolerances is not None:
        # the leapfrog steps follow the gradient at looser tolerances; the acceptance
        # tests and weights use the problem's own (sample_smc's trajectory_model)
        rtol, atol = args.trajectory_tolerances
        trajectory = PetabProblem.from_yaml(
            petab_yaml(name), relative_tolerance=rtol, absolute_tolerance=atol, gradient_check=False
        )
    jump_modes = jump_log_likelihoods = None
    if args.jump_starts is not None:
        # the optima the jump moves go to: a multistart from the nominal values (the
        # collection's published fit) and --jump-starts prior draws
        from pymc_odesens.inference import find_modes

        ids, nominal = problem.parameters.ids, problem.parameters.nominal
        initial_points = [dict(zip(ids, map(float, nominal)))]
        if args.jump_initial_points is not None:
            initial_points += json.loads(args.jump_initial_points.read_text())
        progress(
            f"{name}: find_modes, the nominal start, {len(initial_points) - 1} given "
            f"and {args.jump_starts} from the prior"
        )
        jump_modes = find_modes(
            problem,
            max(args.jump_starts, 1) if args.jump_starts else 1,
            random_seed=args.seed,
            initial_points=initial_points,
            start_time_limit=args.jump_start_time_limit,
            n_workers=args.cores,
        )
        clusters = jump_modes.clusters
        if not args.jump_starts:  # the optima of the given starts only (after the one draw)
            clusters = [c for c in clusters if c.best.index >= 1] or clusters
        jump_log_likelihoods = [float(c.log_likelihood) for c in clusters]
        progress(
            f"{name}: {len(clusters)} optima to jump to, log-likelihoods "
            + ", ".join(f"{v:.2f}" for v in jump_log_likelihoods)
        )
        jump_modes = [jump_modes.objective.sampler_point(c.best.x) for c in clusters]
    try:
        idata = pymc_odesens.sample_smc(
            problem,
            jump_modes=jump_modes,
            trajectory_model=trajectory,
            draws=args.draws,
            runs=args.runs,
            cores=args.cores,
            random_seed=args.seed,
            adapt_n_leapfrog=args.adapt_n_leapfrog == "on",
            kernel=args.kernel,
            mass_matrix=args.mass_matrix,
            time_limit=args.time_limit,
            checkpoint=checkpoint,
            change_moves=args.change_moves,
        )
    except pymc_odesens.SmcTimeLimitReached as stopped:
        record = stopped_runs(stopped, checkpoint, time.perf_counter() - started, args)
        record["jump_optima_log_likelihoods"] = jump_log_likelihoods
        return record
    seconds = time.perf_counter() - started
    if args.save_idata is not None:
        args.save_idata.mkdir(parents=True, exist_ok=True)
        idata.to_netcdf(args.save_idata / f"{name}_smc_{args.runs}x{args.draws}.nc")
    estimate, error = pymc_odesens.log_evidence(idata)
    stats = idata.sample_stats
    stages = stats["beta"].notnull().sum("stage").values
    return {
        "log_evidence": float(estimate),
        "mcse": float(error),
        "per_run": [float(v) for v in stats["log_marginal_likelihood"].values],
        "stages": [int(v) for v in stages],
        "gradient_evaluations": [int(v) for v in stats["gradient_evaluations"].sum("stage").values],
        "independent_per_stage": stats["independent"].values.tolist(),
        "acceptance_per_stage": stats["acceptance_rate"].values.tolist(),
        "beta_per_stage": stats["beta"].values.tolist(),
        "failed_evaluations": [int(v) for v in stats["failed_evaluations"].sum("stage").values],
        "moves_per_stage": stats["moves"].values.tolist(),
        "correlation_per_stage": stats["correlation"].values.tolist(),
        "stopping_threshold_per_stage": stats["stopping_threshold"].values.tolist(),
        "n_leapfrog_per_stage": stats["n_leapfrog"].values.tolist(),
        "stage_seconds": stats["stage_seconds"].values.tolist(),
        "jumped_per_stage": stats["jumped"].values.tolist(),
        "jump_acceptance_per_stage": stats["jump_acceptance"].values.tolist(),
        "jump_optima_log_likelihoods": jump_log_likelihoods,
        "seconds": seconds,
        "draws": args.draws,
        "runs": args.runs,
        "cores": args.cores,
    }


def stopped_runs(stopped, checkpoint, seconds: float, args) -> dict:
    """What the runs stopped by the time limit reached, from their checkpoints."""
    from pymc_odesens.inference.smc_checkpoint import SmcCheckpoint

    record = {
        "stopped_by_time_limit": True,
        "beta": stopped.betas,
        "stages": stopped.stages,
        "moves_in_stage": stopped.moves_in_stage,
        "seconds": seconds,
        "draws": args.draws,
        "runs": args.runs,
        "cores": args.cores,
        "checkpoint": None if checkpoint is None else str(checkpoint),
    }
    if checkpoint is None:
        return record
    states = [SmcCheckpoint(checkpoint).load(run) for run in range(args.runs)]
    record.update(
        {
            "run_seconds": [s.seconds for s in states],
            "prior_failures": [s.prior_failures for s in states],
            "gradient_evaluations": [
                sum(r.gradient_evaluations for r in s.records)
                + (0 if s.partial is None else s.partial.gradients)
                for s in states
            ],
            "failed_evaluations": [sum(r.failed_evaluations for r in s.records) for s in states],
            "beta_per_stage": [[r.beta for r in s.records] for s in states],
            "moves_per_stage": [[r.moves for r in s.records] for s in states],
            "acceptance_per_stage": [[r.acceptance_rate for r in s.records] for s in states],
            "step_size_per_stage": [[r.step_size for r in s.records] for s in states],
            "stage_seconds": [[r.seconds for r in s.records] for s in states],
            "jumped_per_stage": [[r.jumped for r in s.records] for s in states],
            "jump_acceptance_per_stage": [[r.jump_acceptance for r in s.records] for s in states],
            "log_evidence_so_far": [s.log_evidence for s in states],
        }
    )
    return record


def pypesto_repeat(name: str, args, repeat: int) -> dict | None:
    """One pyPESTO parallel-tempering run of ``name`` with its evidence, or None."""
    seed = args.seed + repeat
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        run = run_pypesto_sampling(
            petab_yaml(name),
            out,
            n_starts=args.n_starts,
            samplers=["pt"],
            n_samples=args.pt_samples,
            rtol=args.rtol,
            atol=args.atol,
            seed=seed,
            timeout=args.timeout,
            pt_chains=args.pt_chains,
        )
    seconds = time.perf_counter() - started
    if run is None:
        return None
    sampled = run["samplers"]["pt"]
    sampled.pop("trace")
    return {
        "seed": seed,
        "seconds": seconds,
        "build_s": run["build_s"],
        "optimize_s": run["optimize_s"],
        "best_negative_log_posterior": run["best_negative_log_posterior"],
        **sampled,
    }


def pypesto(name: str, args) -> dict:
    """pyPESTO's log evidence of ``name`` over ``--pt-repeats`` independent runs.

    The repeats run concurrently, ``--pt-parallel`` at a time, each in one process on one
    core; ``seconds`` is the sum of their wall times (the time on one core).
    """
    progress(
        f"{name}: pyPESTO parallel tempering, {args.pt_repeats} repeats "
        f"({args.pt_parallel} at a time), {args.pt_chains} chains x {args.pt_samples} iterations"
    )
    # the AMICI model is built (once, then cached) by the first repeat alone
    first = pypesto_repeat(name, args, 0)
    with ThreadPoolExecutor(max_workers=args.pt_parallel) as pool:
        rest = list(pool.map(lambda r: pypesto_repeat(name, args, r), range(1, args.pt_repeats)))
    repeats = [first, *rest]
    if any(r is None for r in repeats):
        return {"error": "the pyPESTO runner failed", "repeats": repeats}
    estimates = {}
    for method in ("trapezoid", "simpson", "steppingstone", "steppingstone_all_chains"):
        values = np.array([r["evidence"]["log_evidence"][method] for r in repeats])
        finite = values[np.isfinite(values)]
        estimates[method] = {
            "log_evidence": float(np.mean(finite)) if finite.size else float("nan"),
            "mcse": float(np.std(finite, ddof=1) / np.sqrt(finite.size))
            if finite.size > 1
            else float("nan"),
            "repeats_with_estimate": int(finite.size),
        }
    return {
        "estimates": estimates,
        "seconds": float(sum(r["seconds"] for r in repeats)),
        "seconds_without_build": float(sum(r["seconds"] - r["build_s"] for r in repeats)),
        "chains": args.pt_chains,
        "iterations": args.pt_samples,
        "repeats": repeats,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--draws", type=int, default=200, help="SMC particles per run")
    parser.add_argument("--runs", type=int, default=4, help="independent SMC runs")
    parser.add_argument("--cores", type=int, default=None, help="SMC worker processes")
    parser.add_argument(
        "--adapt-n-leapfrog",
        choices=("on", "off"),
        default="on",
        help="adapt the moves' trajectory length (sample_smc's adapt_n_leapfrog)",
    )
    parser.add_argument(
        "--kernel", choices=("auto", "hmc"), default="auto", help="sample_smc's kernel"
    )
    parser.add_argument(
        "--time-limit", type=float, default=None, help="seconds for our sample_smc call"
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="folder of our runs' checkpoints (one subfolder per problem): a later call with "
        "the same options continues them",
    )
    parser.add_argument(
        "--mass-matrix", choices=("diag", "dense"), default="diag", help="sample_smc's"
    )
    parser.add_argument(
        "--change-moves",
        action="store_true",
        help="continue --checkpoint's runs with this call's moves (sample_smc's change_moves)",
    )
    parser.add_argument(
        "--trajectory-tolerances",
        type=float,
        nargs=2,
        metavar=("RTOL", "ATOL"),
        default=None,
        help="the HMC moves follow the gradient of the problem solved at these tolerances "
        "(sample_smc's trajectory_model); default: the problem's own gradient",
    )
    parser.add_argument(
        "--jump-starts",
        type=int,
        default=None,
        help="jump moves (sample_smc's jump_modes) to the optima of a multistart from the "
        "nominal values and this many prior draws (0: the nominal start's optimum only); "
        "default: no jump moves",
    )
    parser.add_argument(
        "--jump-initial-points",
        type=Path,
        default=None,
        help="a JSON file, a list of {parameter id: value on its parameterScale}: more starts "
        "of that multistart (after the nominal values)",
    )
    parser.add_argument(
        "--jump-start-time-limit",
        type=float,
        default=300.0,
        help="seconds per start of that multistart",
    )
    parser.add_argument("--pt-chains", type=int, default=20)
    parser.add_argument("--pt-samples", type=int, default=10_000, help="PT iterations")
    parser.add_argument("--pt-repeats", type=int, default=4, help="independent PT runs")
    parser.add_argument(
        "--pt-parallel", type=int, default=2, help="PT runs at a time (one core each)"
    )
    parser.add_argument("--n-starts", type=int, default=10, help="pyPESTO multistart")
    parser.add_argument("--rtol", type=float, default=1e-8)
    parser.add_argument("--atol", type=float, default=1e-16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sides", default="ours,pypesto")
    parser.add_argument("--timeout", type=float, default=7200.0, help="per pyPESTO run, s")
    parser.add_argument("--output", default="bench_smc")
    parser.add_argument(
        "--save-idata", type=Path, default=None, help="folder for our runs' InferenceData"
    )
    args = parser.parse_args(argv)
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    sides = [s for s in args.sides.split(",") if s]
    unknown = set(sides) - {"ours", "pypesto"}
    if unknown:
        parser.error(f"--sides: unknown {sorted(unknown)} (expected ours and/or pypesto)")
    common.report_load("before")
    records, rows = [], []
    for name in [p for p in args.problems.split(",") if p]:
        record = {"problem": name}
        if "pypesto" in sides:
            record["pypesto"] = pypesto(name, args)
            common.write_results(
                args.output, {"settings": settings, "problems": records + [record]}
            )
        if "ours" in sides:
            progress(f"{name}: sample_smc, {args.runs} runs x {args.draws} particles")
            record["ours"] = ours(name, args)
        records.append(record)
        common.write_results(args.output, {"settings": settings, "problems": records})
        mine, theirs = record.get("ours"), record.get("pypesto")
        if mine and mine.get("stopped_by_time_limit"):
            rows.append(
                [
                    name,
                    f"sample_smc, {args.runs} x {args.draws} particles: stopped by the time "
                    f"limit at beta {', '.join(f'{b:.3g}' for b in mine['beta'])}",
                    "-",
                    "-",
                    f"{mine['seconds']:.0f} on {args.cores or os.cpu_count()} cores",
                    "",
                ]
            )
            mine = None
        if mine:
            rows.append(
                [
                    name,
                    f"sample_smc, {args.runs} x {args.draws} particles",
                    f"{mine['log_evidence']:.2f}",
                    f"{mine['mcse']:.2f}",
                    f"{mine['seconds']:.0f} on {args.cores or os.cpu_count()} cores",
                    "",
                ]
            )
        if theirs and "estimates" in theirs:
            for method, label in (
                ("trapezoid", "TI (trapezoid)"),
                ("steppingstone", "steppingstone"),
                ("steppingstone_all_chains", "steppingstone, all chains"),
            ):
                side = theirs["estimates"][method]
                difference = ""
                if mine and np.isfinite(side["log_evidence"]):
                    combined = np.hypot(mine["mcse"], side["mcse"])
                    side["ours_minus_this_in_errors"] = float(
                        (mine["log_evidence"] - side["log_evidence"]) / combined
                    )
                    difference = f"{side['ours_minus_this_in_errors']:+.1f}"
                rows.append(
                    [
                        name,
                        f"pyPESTO PT {label}, {args.pt_repeats} runs",
                        f"{side['log_evidence']:.2f}",
                        f"{side['mcse']:.2f}",
                        f"{theirs['seconds']:.0f} on 1 core",
                        difference,
                    ]
                )
            if mine:
                record["time_ratio_per_core"] = float(
                    theirs["seconds"] / (mine["seconds"] * (args.cores or os.cpu_count()))
                )
        common.write_results(args.output, {"settings": settings, "problems": records})
    common.report_load("after")
    print_table(
        ["problem", "method", "log evidence", "error", "wall s", "ours - this (errors)"],
        rows,
        title="Log evidence under the PEtab priors",
    )


if __name__ == "__main__":
    main()
