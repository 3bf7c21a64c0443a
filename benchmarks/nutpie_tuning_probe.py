"""How nutpie's tuning goes on a PEtab problem: tuning steps, gradients per step, step sizes.

Run:  python benchmarks/nutpie_tuning_probe.py Elowitz_Nature2000 --whiten on --tune 100 \\
          --seconds 180

The problem's marginalised model (``marginalize="auto"``), its best optimum of a multistart
of one prior draw and the nominal values (one process), the Laplace approximation there as
in ``sample_posterior``; then nutpie (2 chains, both cores) from draws of it, whitened by it
or not, with its tuning statistics printed every 15 s until ``--seconds`` have passed or the
run ends. What ``bench_posterior.py`` cannot show when a run is killed in tuning.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import petab_yaml, progress


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem")
    parser.add_argument("--whiten", choices=("on", "off"), default="on")
    parser.add_argument("--tune", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    import nutpie

    from pymc_odesens.inference import find_modes
    from pymc_odesens.inference.converged_sampling import nutpie_model
    from pymc_odesens.inference.marginal_recovery import marginal_nodes
    from pymc_odesens.petab import PetabProblem
    from pymc_odesens.petab.posterior import _laplace, _nominal_start

    problem = PetabProblem.from_yaml(petab_yaml(args.problem))
    model = problem.build_model(marginalize="auto")
    began = time.perf_counter()
    nominal = _nominal_start(problem)
    modes = find_modes(
        problem, 1, random_seed=args.seed, n_workers=1, initial_points=[nominal] if nominal else []
    )
    progress(
        f"modes in {time.perf_counter() - began:.1f} s; best log-likelihood "
        f"{modes.best.log_likelihood:.6g}"
    )
    values = {v.name for v in model.value_vars}
    start = {k: v for k, v in modes.objective.sampler_point(modes.best.x).items() if k in values}
    laplace = _laplace(model, start, bool(marginal_nodes(model)))
    sd = np.sqrt(np.diag(laplace.covariance))
    progress(
        f"Laplace ({laplace.hessian}): standard deviations {sd.min():.3g}-{sd.max():.3g}, "
        f"condition number {np.linalg.cond(laplace.covariance):.3g}"
    )
    if args.whiten == "on":
        compiled, _ = nutpie_model(model, whiten=laplace)
    else:
        compiled, _ = nutpie_model(model, laplace.start_values())
    began = time.perf_counter()
    sampler = nutpie.sample(
        compiled,
        draws=20,
        tune=args.tune,
        chains=2,
        cores=2,
        seed=args.seed,
        save_warmup=True,
        progress_bar=False,
        blocking=False,
    )
    while True:
        time.sleep(15)
        try:
            finished = sampler.is_finished
        except TimeoutError:
            finished = False
        stats = sampler.inspect().warmup_sample_stats
        steps, sizes = stats["n_steps"].values, stats["step_size"].values
        done = np.isfinite(sizes)
        last = [f"{sizes[c][done[c]][-1]:.3g}" if done[c].any() else "-" for c in range(2)]
        progress(
            f"{time.perf_counter() - began:.0f} s: tuning steps per chain {done.sum(axis=1)}, "
            f"gradients per step mean {np.nanmean(steps):.1f} max {np.nanmax(steps):.0f}, "
            f"last step sizes {last}, divergences {int(np.nansum(stats['diverging'].values))}"
        )
        if finished or time.perf_counter() - began > args.seconds:
            break
    if not finished:
        sampler.abort()


if __name__ == "__main__":
    main()
