"""Where NUTS chains start on a PEtab problem, and which local optimum each start leads to.

PyMC's default start (and nutpie's, which PyMC cannot change) is the model's initial point
plus uniform(-1, 1) jitter on each variable's transformed scale; for a parameter uniform on
its bounds that is the logit of its position between them. On wide bounds this jitter
moves parameters by decades. This script draws such starts around the nominal values and,
for each, reports the log-likelihood there and the local maximum that L-BFGS-B (with the
exact gradient, inside the bounds) reaches from it. Starts that end in different optima
are chains that would not meet. The near-nominal starts of
:meth:`pymc_odesens.petab.PetabProblem.start_values` are drawn for comparison.

Nothing here is timed.

Run:  python benchmarks/petab_starts.py \
          ../shared/petab/Fujita_SciSignal2010/Fujita_SciSignal2010.yaml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import common
import numpy as np
from scipy.optimize import minimize

from pymc_odesens.petab import PetabProblem
from pymc_odesens.petab.priors import bounds_on_scale, inside_bounds
from pymc_odesens.petab.start_values import start_intervals


def _bounds(problem: PetabProblem) -> tuple[np.ndarray, np.ndarray]:
    p = problem.parameters
    pairs = [
        inside_bounds(*bounds_on_scale(lo, hi, s)) for lo, hi, s in zip(p.lower, p.upper, p.scales)
    ]
    return np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])


def jittered_start(x0, lower, upper, rng) -> np.ndarray:
    """PyMC's jitter: uniform(-1, 1) added on the interval (logit) scale of each parameter."""
    u = (x0 - lower) / (upper - lower)
    y = np.log(u / (1.0 - u)) + rng.uniform(-1.0, 1.0, x0.size)
    return lower + (upper - lower) / (1.0 + np.exp(-y))


def near_start(problem: PetabProblem, spread: float, rng) -> np.ndarray:
    """:meth:`PetabProblem.start_values`' distribution, drawn with numpy."""
    return rng.uniform(*start_intervals(problem.parameters, spread))


def local_optimum(problem: PetabProblem, x, lower, upper) -> tuple[float, np.ndarray, int]:
    def negative(x):
        try:
            value, gradient = problem.log_likelihood_and_gradient(x)
        except Exception:  # a failed solve far from the data: a wall for the optimiser
            return 1e300, np.zeros_like(x)
        if not np.isfinite(value):
            return 1e300, np.zeros_like(x)
        return -value, -np.asarray(gradient)

    result = minimize(
        negative,
        x,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lower, upper)),
        options={"maxiter": 5000},
    )
    return -float(result.fun), result.x, int(result.nit)


def _llh(problem: PetabProblem, x) -> float:
    try:
        return float(problem.log_likelihood(x))
    except Exception:
        return float("nan")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", type=Path, help="PEtab YAML file")
    parser.add_argument("--starts", type=int, default=10, help="starts of each kind (10)")
    parser.add_argument("--spread", type=float, default=0.1, help="near-nominal half-width")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--output", default=None, help="results name: writes benchmarks/results/NAME.json"
    )
    args = parser.parse_args(argv)
    problem = PetabProblem.from_yaml(args.problem)
    x0 = problem.x_nominal
    lower, upper = _bounds(problem)
    nominal = _llh(problem, x0)
    print(
        f"{problem.name}: {x0.size} parameters; log-likelihood at the nominal values {nominal:.4f}"
    )
    rng = np.random.default_rng(args.seed)
    rows = []
    for kind in ("jitter", "near"):
        print(f"\n{kind} starts ({'PyMC/nutpie default' if kind == 'jitter' else args.spread})")
        print("start | llh at start | local optimum | iterations | max |x - nominal|")
        for k in range(args.starts):
            if kind == "jitter":
                x = jittered_start(x0, lower, upper, rng)
            else:
                x = near_start(problem, args.spread, rng)
            start_llh = _llh(problem, x)
            optimum, x_opt, iterations = local_optimum(problem, x, lower, upper)
            far = float(np.abs(x_opt - x0).max())
            rows.append(
                {
                    "kind": kind,
                    "start_llh": start_llh,
                    "optimum_llh": optimum,
                    "iterations": iterations,
                    "max_distance": far,
                }
            )
            print(f"{k:5d} | {start_llh:12.5g} | {optimum:13.4f} | {iterations:10d} | {far:.2f}")
            sys.stdout.flush()
    result = {"problem": problem.name, "nominal_llh": nominal, "starts": rows}
    if args.output:
        print(f"wrote {common.write_results(args.output, result)}")
    return result


if __name__ == "__main__":
    main()
