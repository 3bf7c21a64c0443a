"""The modes of a saved SMC result and their weights (``smc_modes``, issue 38).

Reads the InferenceData that ``bench_smc.py --save-idata DIR`` wrote for a PEtab problem of
``../shared/petab`` and calls ``pymc_odesens.smc_modes(problem, idata,
particles_per_run=..., min_run_weight=..., random_seed=..., n_workers=...)``; records the
call's wall time, which runs were skipped (their evidence weight below
``min_run_weight``), every local maximisation (its particle, log-likelihood, time,
message) and every mode (weight, error, particles, log-likelihood at its optimum).

Run:  python benchmarks/bench_smc_modes.py Fujita_SciSignal2010 \
          --idata DIR/Fujita_SciSignal2010_smc_4x200.nc --particles-per-run 6
      python benchmarks/bench_smc_modes.py ... --min-run-weight 0   (every run optimised)
      (writes results/bench_smc_modes_<problem>.json, or results/<name>.json with
      --output <name>)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import petab_yaml, print_table, progress, write_results


def modes_of(name: str, args) -> dict:
    """``smc_modes`` on the saved result of ``name``: the call's figures."""
    import arviz as az

    from pymc_odesens.inference import smc_modes
    from pymc_odesens.petab import PetabProblem

    idata = az.from_netcdf(args.idata)
    problem = PetabProblem.from_yaml(petab_yaml(name))
    started = time.perf_counter()
    modes = smc_modes(
        problem,
        idata,
        particles_per_run=args.particles_per_run,
        min_run_weight=args.min_run_weight,
        random_seed=args.seed,
        n_workers=args.n_workers,
        max_iterations=args.max_iterations,
    )
    seconds = time.perf_counter() - started
    starts = [
        {
            "run": run,
            "particle": particle,
            "log_likelihood": float(start.log_likelihood),
            "log_posterior": float(start.log_posterior),
            "status": start.status,
            "iterations": start.iterations,
            "seconds": start.time,
            "message": str(start.message),
        }
        for (run, particle), start in zip(
            modes.optimised, sorted(modes.search.starts, key=lambda s: s.index), strict=True
        )
    ]
    return {
        "problem": name,
        "seconds": seconds,
        "log_evidence_runs": idata.sample_stats["log_marginal_likelihood"].values.tolist(),
        "evidence_weights": modes.evidence_weights.tolist(),
        "effective_runs": modes.effective_runs,
        "skipped_runs": list(modes.skipped_runs),
        "starts": starts,
        "modes": [
            {
                "rank": m.rank,
                "weight": m.weight,
                "weight_se": m.weight_se,
                "optimised_particles": m.optimum.size,
                "particles": len(m.particles),
                "log_likelihood": m.log_likelihood,
                "log_posterior": m.log_posterior,
            }
            for m in modes.modes
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem")
    parser.add_argument("--idata", type=Path, required=True, help="bench_smc.py's saved result")
    parser.add_argument("--particles-per-run", type=int, default=20)
    parser.add_argument("--min-run-weight", type=float, default=1e-8)
    parser.add_argument("--max-iterations", type=int, default=2000)
    parser.add_argument("--n-workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    progress(f"smc_modes on {args.idata}")
    result = modes_of(args.problem, args)
    print_table(
        ["mode", "weight", "weight se", "particles", "log-likelihood"],
        [
            [m["rank"], f"{m['weight']:.3g}", f"{m['weight_se']:.2g}", m["particles"]]
            + [f"{m['log_likelihood']:.3f}"]
            for m in result["modes"]
        ],
    )
    print(
        f"{result['seconds']:.1f} s; skipped runs {result['skipped_runs']}; "
        f"{len(result['starts'])} maximisations"
    )
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    path = write_results(
        args.output or f"bench_smc_modes_{args.problem}", {"settings": settings, **result}
    )
    progress(f"wrote {path}")


if __name__ == "__main__":
    main()
