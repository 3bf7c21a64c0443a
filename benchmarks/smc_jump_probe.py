"""Would a run's particles jump to an optimum they lost? Jump moves probed on a saved SMC result.

Run:  python benchmarks/smc_jump_probe.py Fujita_SciSignal2010 \\
          --idata DIR/Fujita_SciSignal2010_smc_4x200.nc --run 0 --particles 40

Reads the InferenceData that ``bench_smc.py --save-idata DIR`` wrote for a PEtab problem of
``../shared/petab`` and takes run ``--run``'s final particles (``beta = 1``). The jump
targets are the problem's nominal parameter values (the collection's published best fit)
and, with ``--points FILE`` (a JSON list of parameter-id -> value dicts on the parameter
scale), further optima. For ``--particles`` particles (drawn with a seeded generator), one
jump move each (``sample_smc(jump_modes=...)``'s move: the mixture of
``pymc_odesens.inference.smc_jumps`` built from the whole run's population at ``--beta``,
by default 1, the library's ``independent_move``): the mean acceptance probability, how
many were accepted, the log-likelihoods before and after, and the time per move; the
curvature's evaluations are timed apart. One proposal per particle: a probe, not an
estimate with an error. Writes results/smc_jump_probe_<problem>.json (or --output).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from common import petab_yaml, print_table, write_results


def on_scale_points(problem, args) -> list[dict]:
    """The jump targets by parameter id on the parameter scale: nominal values, then
    ``--points``."""
    ids = list(problem.parameters.ids)
    points = [dict(zip(ids, np.asarray(problem.parameters.nominal, dtype=float)))]
    if args.points:
        with open(args.points) as handle:
            points += [{pid: float(p[pid]) for pid in ids} for p in json.load(handle)]
    return points


def probe(name: str, args) -> dict:
    import arviz as az

    from pymc_odesens.inference.mode_objective import ModeObjective
    from pymc_odesens.inference.smc_independent import independent_move
    from pymc_odesens.inference.smc_jumps import jump_prior_draws, jump_targets
    from pymc_odesens.inference.smc_target import ParticleLayout, PriorDraws, TemperedTarget
    from pymc_odesens.petab import PetabProblem

    problem = PetabProblem.from_yaml(petab_yaml(name))
    model = problem.build_model()
    layout = ParticleLayout.of(model)
    objective = ModeObjective(model)
    names = [c.name for c in objective.coordinates]

    def sampler_vector(values: dict) -> np.ndarray:
        x = np.concatenate([np.ravel(values[n]) for n in names])
        return layout.join(objective.sampler_point(x))

    posterior = az.from_netcdf(args.idata).posterior.isel(chain=args.run)
    n = posterior.sizes["draw"]
    positions = np.array(
        [sampler_vector({k: posterior[k].values[i] for k in names}) for i in range(n)]
    )
    points = np.array([sampler_vector(p) for p in on_scale_points(problem, args)])
    target = TemperedTarget(model, {"mode": "NUMBA"})
    target.evaluate(points[0])  # compiled here, not in the timings

    def evaluate_many(xs):
        evaluations = [target.evaluate(x) for x in xs]
        return (
            np.array([e.log_prior for e in evaluations]),
            np.array([e.log_likelihood for e in evaluations]),
            np.array([e.grad_log_likelihood for e in evaluations]),
        )

    started = time.perf_counter()
    prior_draws = jump_prior_draws(PriorDraws(model), np.random.SeedSequence(args.seed))
    targets = jump_targets(points, evaluate_many, args.population_weight, prior_draws)
    curvature_seconds = time.perf_counter() - started
    at_points = [float(target.evaluate(x).log_likelihood) for x in points]
    mixture = targets.proposal(positions, np.ones(n), args.beta)
    rng = np.random.default_rng(args.seed)
    chosen = rng.choice(n, size=min(args.particles, n), replace=False)
    rows = []
    started = time.perf_counter()
    for i in chosen:
        evaluation = target.evaluate(positions[i])
        outcome = independent_move(
            target.evaluate, positions[i], evaluation, args.beta, mixture, rng
        )
        rows.append(
            {
                "particle": int(i),
                "log_likelihood": float(evaluation.log_likelihood),
                "acceptance": float(outcome.acceptance),
                "accepted": bool(outcome.accepted),
                "failed": bool(outcome.failed),
                "log_likelihood_after": float(outcome.evaluation.log_likelihood),
            }
        )
    move_seconds = (time.perf_counter() - started) / len(chosen)
    return {
        "problem": name,
        "run": args.run,
        "beta": args.beta,
        "population_weight": args.population_weight,
        "targets_log_likelihood": at_points,
        "curvature_seconds": curvature_seconds,
        "seconds_per_move": move_seconds,
        "mean_acceptance": float(np.mean([r["acceptance"] for r in rows])),
        "accepted": int(sum(r["accepted"] for r in rows)),
        "failed": int(sum(r["failed"] for r in rows)),
        "moves": rows,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem")
    parser.add_argument("--idata", required=True, help="bench_smc.py --save-idata's file")
    parser.add_argument("--run", type=int, default=0)
    parser.add_argument("--particles", type=int, default=40)
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--population-weight", type=float, default=0.2)
    parser.add_argument("--points", help="JSON list of further optima by parameter id")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--output")
    args = parser.parse_args(argv)
    result = probe(args.problem, args)
    print_table(
        ["run", "beta", "targets' log-lik", "mean acceptance", "accepted", "failed", "s/move"],
        [
            [
                str(args.run),
                f"{args.beta:g}",
                ", ".join(f"{v:.2f}" for v in result["targets_log_likelihood"]),
                f"{result['mean_acceptance']:.3f}",
                f"{result['accepted']}/{len(result['moves'])}",
                str(result["failed"]),
                f"{result['seconds_per_move']:.3f}",
            ]
        ],
    )
    write_results(args.output or f"smc_jump_probe_{args.problem}", vars(args) | {"result": result})


if __name__ == "__main__":
    main()
