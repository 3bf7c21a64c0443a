"""NUTS from a saved SMC result, and the optima its highest draws climb to (issue 38).

Reads the InferenceData that ``bench_smc.py --save-idata DIR`` wrote for a PEtab problem of
``../shared/petab``; calls ``pymc_odesens.sample_nuts_from_smc(problem, idata, draws=...,
tune=..., chains=..., cores=..., random_seed=...)`` and records its wall time, R-hat, bulk
and tail ESS per parameter, step sizes, leapfrog steps per draw, divergences, and the share
of draws whose log-density exceeds every particle's (``smc_draws_above_particles``: far
above ``1 / (N + 1)``, the SMC runs missed a denser region). Then, with ``--maximise K``,
``find_modes`` starts from the nominal values and the ``K`` draws of highest log-density
(distinct, spread over the chains) and records each optimum's log-likelihood and
parameters: the optima to give ``bench_smc.py --jump-initial-points``
(``--points-out FILE`` writes those draws in its format).

Run:  python benchmarks/smc_nuts_optima.py Fujita_SciSignal2010 \
          --idata DIR/Fujita_SciSignal2010_smc_4x100.nc --draws 200 --tune 200 --chains 2 \
          --maximise 4 --points-out DIR/starts.json
      (writes results/smc_nuts_optima_<problem>.json, or results/<name>.json with
      --output <name>; --save-idata FILE keeps the NUTS result)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from common import petab_yaml, print_table, progress, write_results


def highest_draws(posterior, lp: np.ndarray, ids: list[str], count: int) -> list[dict]:
    """The ``count`` distinct draws of highest ``lp`` (chain, draw), taken from the chains in
    turn (each chain's best first), as ``{parameter id: value}`` on the parameters' scales."""

    def best_first(chain: int):
        for draw in np.argsort(-lp[chain]):
            yield tuple(float(posterior[i].values[chain, draw]) for i in ids)

    streams, chosen, seen = [best_first(c) for c in range(len(lp))], [], set()
    while streams and len(chosen) < count:
        for stream in list(streams):
            point = next((p for p in stream if p not in seen), None)
            if point is None:
                streams.remove(stream)
                continue
            seen.add(point)
            chosen.append(dict(zip(ids, point)))
            if len(chosen) == count:
                break
    return chosen


def nuts_and_optima(name: str, args) -> dict:
    """``sample_nuts_from_smc`` on the saved result of ``name``, then the optima of its
    highest draws: the run's figures."""
    import arviz as az

    from pymc_odesens.inference import find_modes, sample_nuts_from_smc
    from pymc_odesens.petab import PetabProblem

    idata = az.from_netcdf(args.idata)
    problem = PetabProblem.from_yaml(petab_yaml(name))
    ids = list(problem.parameters.ids)
    started = time.perf_counter()
    fit = sample_nuts_from_smc(
        problem,
        idata,
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        cores=args.cores,
        random_seed=args.seed,
        progressbar=False,
    )
    seconds = time.perf_counter() - started
    if args.save_idata is not None:
        args.save_idata.parent.mkdir(parents=True, exist_ok=True)
        fit.to_netcdf(args.save_idata)
    summary = az.summary(fit, kind="diagnostics")
    stats = fit.sample_stats
    lp = stats["lp"].values
    particles = idata.sample_stats
    particle_ll = particles["particle_log_likelihood"].values
    record = {
        "problem": name,
        "seconds": seconds,
        "sampling_seconds": stats.attrs.get("sampling_time"),
        "r_hat_max": float(summary["r_hat"].max()),
        "ess_bulk_min": float(summary["ess_bulk"].min()),
        "ess_tail_min": float(summary["ess_tail"].min()),
        "per_parameter": summary.to_dict(orient="index"),
        "step_size_per_chain": stats["step_size"].mean("draw").values.tolist(),
        "leapfrog_steps_per_draw": float(stats["n_steps"].mean()),
        "tree_depth_mean": float(stats["tree_depth"].mean()),
        "divergences": int(stats["diverging"].sum()),
        "lp_per_chain_mean": lp.mean(axis=1).tolist(),
        "evidence_weights": fit.posterior.attrs["smc_evidence_weights"],
        "draws_above_particles": fit.posterior.attrs["smc_draws_above_particles"],
        "draws_above_particles_expected": fit.posterior.attrs["smc_draws_above_particles_expected"],
        "particles_log_likelihood_max_per_run": particle_ll.max(axis=1).tolist(),
    }
    if args.maximise:
        points = highest_draws(fit.posterior, lp, ids, args.maximise)
        if args.points_out is not None:
            args.points_out.parent.mkdir(parents=True, exist_ok=True)
            args.points_out.write_text(json.dumps(points, indent=1))
        nominal = dict(zip(ids, map(float, problem.parameters.nominal)))
        started = time.perf_counter()
        search = find_modes(
            problem,
            1,
            random_seed=args.seed,
            initial_points=[nominal, *points],
            start_time_limit=args.start_time_limit,
            n_workers=args.cores,
        )
        record["maximise_seconds"] = time.perf_counter() - started
        # start 0 is the one prior draw find_modes needs; 1 the nominal values; then the draws
        record["optima"] = [
            {
                "start": "prior draw"
                if s.index == 0
                else "nominal values"
                if s.index == 1
                else f"draw {s.index - 2}",
                "log_likelihood": float(s.log_likelihood),
                "log_posterior": float(s.log_posterior),
                "status": s.status,
                "seconds": s.time,
                "parameters": {k: float(v) for k, v in s.parameters.items()},
            }
            for s in sorted(search.starts, key=lambda s: s.index)
        ]
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem")
    parser.add_argument("--idata", type=Path, required=True, help="bench_smc.py's saved result")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--tune", type=int, default=200)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--maximise", type=int, default=0, help="maximise from this many highest draws"
    )
    parser.add_argument("--start-time-limit", type=float, default=180.0)
    parser.add_argument(
        "--points-out", type=Path, default=None, help="write those draws (JSON) for bench_smc"
    )
    parser.add_argument("--save-idata", type=Path, default=None, help="keep the NUTS result")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    progress(f"sample_nuts_from_smc on {args.idata}")
    result = nuts_and_optima(args.problem, args)
    print(
        f"{result['seconds']:.1f} s; R-hat max {result['r_hat_max']:.3f}; ESS bulk / tail min "
        f"{result['ess_bulk_min']:.0f} / {result['ess_tail_min']:.0f}; "
        f"{result['leapfrog_steps_per_draw']:.0f} leapfrog steps per draw; "
        f"{result['draws_above_particles']:.1%} of the draws above every particle "
        f"(expected {result['draws_above_particles_expected']:.2%})"
    )
    if "optima" in result:
        print_table(
            ["start", "log-likelihood", "status", "s"],
            [
                [o["start"], f"{o['log_likelihood']:.4f}", o["status"], f"{o['seconds']:.1f}"]
                for o in result["optima"]
            ],
        )
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    path = write_results(
        args.output or f"smc_nuts_optima_{args.problem}", {"settings": settings, **result}
    )
    progress(f"wrote {path}")


if __name__ == "__main__":
    main()
