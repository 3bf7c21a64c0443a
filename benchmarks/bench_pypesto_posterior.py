"""pyPESTO's side of the time-to-posterior table (issue "converged posteriors in minutes").

For each problem of ``../shared/petab`` given (default Boehm_JProteomeRes2014,
Fujita_SciSignal2010 and Bachmann_MSB2011), pyPESTO samples the posterior the way its users
do (``benchmarks/peers/pypesto_sampling_runner.py``, run with the AMICI virtualenv's
interpreter, one process, one core): AMICI as the simulator at the same tolerances as ours
(rtol 1e-8, atol 1e-16 by default), a multistart optimisation (``--n-starts``), then each
sampler (``AdaptiveMetropolisSampler``; ``AdaptiveParallelTemperingSampler`` with 3 chains)
from the best optimum for ``--n-samples`` iterations. From the chain at inverse
temperature 1, after pyPESTO's Geweke burn-in, ArviZ's bulk and tail effective sample
sizes per parameter; the table gives the smallest of them, the sampler's wall time and the
smallest ESS per second (of sampling, and of optimisation plus sampling). The ESS of one
long chain is ArviZ's single-chain estimate (no R-hat: one chain).

Run:  python benchmarks/bench_pypesto_posterior.py
      python benchmarks/bench_pypesto_posterior.py --problems Boehm_JProteomeRes2014
      (writes results/pypesto_posterior.json, or results/<name>.json with --output <name>)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import arviz as az
import common
import numpy as np
from common import petab_yaml, print_table, progress

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from amici import run_pypesto_sampling  # noqa: E402  (benchmarks/peers/amici.py, not AMICI)

PROBLEMS = ("Boehm_JProteomeRes2014", "Fujita_SciSignal2010", "Bachmann_MSB2011")
SAMPLER_NAMES = {"am": "AdaptiveMetropolis", "apt": "AdaptiveParallelTempering"}


def chain_ess(trace: np.ndarray, burn_in: int) -> dict:
    """Smallest bulk and tail ESS over the parameters of one chain after its burn-in."""
    kept = trace[burn_in:]
    data = az.convert_to_dataset(kept[np.newaxis])  # (chain, draw, parameter)
    bulk = az.ess(data, method="bulk").to_array().values.ravel()
    tail = az.ess(data, method="tail").to_array().values.ravel()
    return {
        "kept": int(kept.shape[0]),
        "bulk_min": float(bulk.min()),
        "tail_min": float(tail.min()),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--samplers", default="am,apt")
    parser.add_argument("--n-samples", type=int, default=100_000)
    parser.add_argument("--n-starts", type=int, default=10)
    parser.add_argument("--rtol", type=float, default=1e-8)
    parser.add_argument("--atol", type=float, default=1e-16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--nominal-start",
        action="store_true",
        help="one more multistart start at the nominal values (x_guesses), as sample_posterior",
    )
    parser.add_argument("--timeout", type=float, default=7200.0, help="per problem, s")
    parser.add_argument("--output", default="pypesto_posterior")
    args = parser.parse_args(argv)
    records, rows = [], []
    for name in [p for p in args.problems.split(",") if p]:
        progress(
            f"{name}: pyPESTO, {args.n_starts} starts, {args.n_samples} iterations per sampler"
        )
        with tempfile.TemporaryDirectory() as out:
            run = run_pypesto_sampling(
                petab_yaml(name),
                out,
                n_starts=args.n_starts,
                samplers=args.samplers.split(","),
                n_samples=args.n_samples,
                rtol=args.rtol,
                atol=args.atol,
                seed=args.seed,
                timeout=args.timeout,
                nominal_start=args.nominal_start,
            )
            if run is None:
                records.append({"problem": name, "error": "the pyPESTO runner failed"})
                continue
            for key, sampled in run["samplers"].items():
                ess = chain_ess(np.load(sampled.pop("trace")), sampled["burn_in"])
                smallest = min(ess["bulk_min"], ess["tail_min"])
                sampled.update(
                    ess,
                    ess_per_s=smallest / sampled["sample_s"],
                    ess_per_s_with_optimisation=smallest
                    / (sampled["sample_s"] + run["optimize_s"]),
                )
                rows.append(
                    [
                        name,
                        SAMPLER_NAMES[key],
                        f"{sampled['iterations']}",
                        f"{sampled['burn_in']}",
                        f"{sampled['sample_s']:.0f}",
                        f"{ess['bulk_min']:.0f} / {ess['tail_min']:.0f}",
                        f"{sampled['ess_per_s']:.2f}",
                        f"{run['optimize_s']:.0f}",
                    ]
                )
        records.append(run)
        common.write_results(args.output, {"settings": vars(args), "problems": records})
    print_table(
        [
            "problem",
            "sampler",
            "iterations",
            "burn-in",
            "sampling s",
            "min ESS bulk / tail",
            "min ESS / s",
            "optimisation s",
        ],
        rows,
        title="pyPESTO (AMICI), one core",
    )


if __name__ == "__main__":
    main()
