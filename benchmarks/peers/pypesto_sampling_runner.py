"""Sample a PEtab problem's posterior with pyPESTO.  Runs INSIDE the AMICI virtualenv.

Started by ``benchmarks/bench_pypesto_posterior.py`` with the interpreter of the AMICI
virtualenv (pyPESTO installed there with AMICI); never imports pymc_odesens; prints one JSON
document to stdout (progress to stderr) and writes each sampler's chain at inverse
temperature 1 to ``<out>/<sampler>.npy`` (shape ``(iterations, parameters)``, on pyPESTO's
parameter scale, in ``x_free_ids`` order).

What it does, the way a pyPESTO user samples a posterior:

1. ``PetabImporter(problem).create_problem()`` with AMICI as the simulator (the model is
   built once into ``<cache>/<problem>_<amici version>``; the build is timed and kept), at
   the given tolerances (``--rtol``, ``--atol``: integration, sensitivities, backward
   problem and quadratures alike).
2. Multistart optimisation (``pypesto.optimize.minimize``, pyPESTO's default optimiser,
   L-BFGS-B through SciPy, ``--n-starts`` starts drawn by pyPESTO, one process): timed.
3. For each sampler of ``--samplers`` (``am``: ``AdaptiveMetropolisSampler``; ``apt``:
   ``AdaptiveParallelTemperingSampler`` with ``--apt-chains`` adaptive-Metropolis chains),
   ``pypesto.sample.sample`` from the best optimum for ``--n-samples`` iterations: timed.
   The burn-in is pyPESTO's Geweke test (``pypesto.sample.geweke_test``), reported; the
   caller computes effective sample sizes from the whole chain and from the chain after it.
4. ``pt``: pyPESTO's ``ParallelTemperingSampler`` with ``--pt-chains`` adaptive-Metropolis
   chains at fixed inverse temperatures from its beta-decay ladder (Xie et al. 2011,
   ``alpha`` 0.3, from 1 down to 0), the set-up pyPESTO's documentation prescribes for
   thermodynamic integration; after sampling, the log evidence by
   ``pypesto.sample.evidence.parallel_tempering_log_evidence`` (trapezoid, Simpson and
   steppingstone; all chains after the largest Geweke burn-in, or only the chains that pass
   the test when some do not, pyPESTO's fallback; NaN when fewer than two pass), and
   pyPESTO's ``steppingstone`` over every chain after a burn-in of half the iterations
   (``steppingstone_all_chains``: the fallback's integral starts at the coldest passing
   chain's beta instead of 0, and the trapezoid's first interval is weighted by the mean
   log-likelihood of prior draws, -1e12 on Boehm's ten-decade priors). With no
   PEtab prior, pyPESTO's chain at beta 0 samples the uniform density on the bounds (on the
   parameter scale), so the estimate is the log evidence under that normalised uniform
   prior, the PEtab default.

CLI
---
    python pypesto_sampling_runner.py --yaml problem.yaml --out DIR --n-starts 10 \
        --samplers am,apt --n-samples 100000 --rtol 1e-8 --atol 1e-16 --seed 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# this folder holds benchmarks/peers/amici.py, which would shadow the AMICI package
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != _HERE]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def thermodynamic_evidence(sampled) -> dict:
    """pyPESTO's log evidence estimates from a parallel-tempering result, timed.

    All chains are used when every chain passes pyPESTO's Geweke test, otherwise pyPESTO's
    fallback (only the chains that pass); with fewer than two such chains there is no
    estimate (NaN, where pyPESTO would return 0 from an empty integral).
    """
    import numpy as np
    from pypesto.sample.diagnostics import geweke_test
    from pypesto.sample.evidence import parallel_tempering_log_evidence, steppingstone

    started = time.perf_counter()
    record = sampled.sample_result
    n_chains, n_iterations = record.trace_x.shape[:2]
    burn_ins = [int(geweke_test(sampled, chain_number=i)) for i in range(n_chains)]
    converged = [b < n_iterations for b in burn_ins]
    use_all_chains = all(converged)
    estimates = {}
    for method in ("trapezoid", "simpson", "steppingstone"):
        if sum(converged) < 2:
            estimates[method] = float("nan")
            continue
        value = parallel_tempering_log_evidence(
            sampled, method=method, use_all_chains=use_all_chains
        )
        estimates[method] = float(value)
    loglike = record.trace_neglogprior - record.trace_neglogpost  # (chains, iterations)
    # pyPESTO's steppingstone estimator over every chain after a fixed burn-in of half the
    # iterations: the hot chains rarely pass the Geweke test, and pyPESTO's fallback then
    # integrates over the colder chains only (from their smallest beta, not from 0)
    half = loglike.shape[1] // 2
    temps, chains_low_first = record.betas[::-1], loglike[::-1, half:]
    estimates["steppingstone_all_chains"] = float(steppingstone(temps, chains_low_first))
    return {
        "log_evidence": estimates,
        "all_chains_converged": use_all_chains,
        "burn_ins": burn_ins,
        "betas": [float(b) for b in record.betas],
        "mean_log_likelihood_per_beta": [float(v) for v in np.mean(loglike, axis=1)],
        "evidence_s": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--yaml", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--n-starts", type=int, default=10)
    parser.add_argument("--samplers", default="am,apt")
    parser.add_argument("--n-samples", type=int, default=100_000)
    parser.add_argument("--apt-chains", type=int, default=3)
    parser.add_argument("--pt-chains", type=int, default=20)
    parser.add_argument("--rtol", type=float, default=1e-8)
    parser.add_argument("--atol", type=float, default=1e-16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--nominal-start",
        action="store_true",
        help="one more start at the parameter table's nominal values (x_guesses), as "
        "sample_posterior's nominal_start",
    )
    parser.add_argument(
        "--cache",
        default=os.path.join(os.path.expanduser("~"), ".cache", "pymc_odesens_peers", "pypesto"),
    )
    args = parser.parse_args()

    from importlib.metadata import version

    import numpy as np
    import petab.v1 as petab
    import pypesto
    import pypesto.optimize as optimize
    import pypesto.sample as sample
    from pypesto.petab import PetabImporter

    np.random.seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    problem_name = Path(args.yaml).stem
    petab_problem = petab.Problem.from_yaml(args.yaml)
    folder = Path(args.cache) / f"{problem_name}_{version('amici')}"
    built_before = folder.is_dir()
    started = time.perf_counter()
    importer = PetabImporter(
        petab_problem, output_folder=str(folder), model_name=f"{problem_name}_pypesto"
    )
    problem = importer.create_problem()
    build_s = time.perf_counter() - started
    log(f"{problem_name}: pyPESTO problem ready in {build_s:.1f} s (built before: {built_before})")
    solver = problem.objective.amici_solver
    solver.set_relative_tolerance(args.rtol)
    solver.set_absolute_tolerance(args.atol)
    solver.set_relative_tolerance_quadratures(args.rtol)
    solver.set_absolute_tolerance_quadratures(args.atol)
    solver.set_relative_tolerance_b(args.rtol)
    solver.set_absolute_tolerance_b(args.atol)

    n_starts = args.n_starts
    if args.nominal_start:  # pyPESTO runs its x_guesses as its first starts
        problem.set_x_guesses([petab_problem.x_nominal_scaled])
        n_starts += 1
    started = time.perf_counter()
    result = optimize.minimize(
        problem=problem, n_starts=n_starts, progress_bar=False, filename=None
    )
    optimize_s = time.perf_counter() - started
    best = result.optimize_result.list[0]
    log(f"{problem_name}: {n_starts} starts in {optimize_s:.1f} s, best fval {best.fval:.6f}")

    samplers = {}
    for name in [s for s in args.samplers.split(",") if s]:
        if name == "am":
            sampler = sample.AdaptiveMetropolisSampler()
        elif name == "apt":
            sampler = sample.AdaptiveParallelTemperingSampler(
                internal_sampler=sample.AdaptiveMetropolisSampler(), n_chains=args.apt_chains
            )
        elif name == "pt":
            sampler = sample.ParallelTemperingSampler(
                internal_sampler=sample.AdaptiveMetropolisSampler(), n_chains=args.pt_chains
            )
        else:
            raise SystemExit(f"--samplers: unknown sampler {name!r} (expected am, apt or pt)")
        started = time.perf_counter()
        sampled = sample.sample(
            problem, n_samples=args.n_samples, sampler=sampler, result=result, filename=None
        )
        sample_s = time.perf_counter() - started
        burn_in = int(sample.geweke_test(sampled))
        trace = np.asarray(sampled.sample_result.trace_x[0])
        np.save(out / f"{name}.npy", trace)
        log(f"{problem_name}: {name} {trace.shape[0]} iterations in {sample_s:.1f} s")
        samplers[name] = {
            "sample_s": sample_s,
            "iterations": int(trace.shape[0]),
            "burn_in": burn_in,
            "trace": str(out / f"{name}.npy"),
        }
        if name == "pt":
            samplers[name]["evidence"] = thermodynamic_evidence(sampled)

    print(
        json.dumps(
            {
                "problem": problem_name,
                "pypesto": pypesto.__version__,
                "amici": version("amici"),
                "rtol": args.rtol,
                "atol": args.atol,
                "build_s": build_s,
                "built_before": built_before,
                "n_starts": n_starts,
                "nominal_start": args.nominal_start,
                "optimize_s": optimize_s,
                "best_negative_log_posterior": float(best.fval),
                "parameter_ids": list(problem.x_names[i] for i in problem.x_free_indices),
                "samplers": samplers,
            }
        )
    )


if __name__ == "__main__":
    main()
