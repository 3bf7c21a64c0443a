"""Stan's damped harmonic oscillator, fitted with NUTS.

The ODE example of the Stan User's Guide ("Ordinary Differential Equations"):

    y1' = y2,    y2' = -y1 - theta y2,

with ``theta = 0.15`` and ``y(0) = (1, 0)``, both states observed at
``t = 1, ..., 10`` with independent normal noise of standard deviation 0.1
(simulated here with a fixed seed). As in the guide, ``theta``, the initial
state ``y0`` and one noise scale per state are unknown, with the guide's
priors: ``theta ~ normal(0, 1)``, ``y0 ~ normal(0, 1)``,
``sigma ~ half-normal(2.5)``; the solution uses ``rk45`` like the guide's
``ode_rk45``. Gradients with respect to ``theta`` and ``y0`` come from
forward sensitivities.

Run:  python examples/oscillator.py
      python examples/oscillator.py --nuts-sampler nutpie   (if nutpie is installed)
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()  # the run's clock: the heavy imports below are part of it

import argparse  # noqa: E402
from functools import cache  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:  # the heavy imports happen inside the functions (``--help`` stays fast)
    import numpy as np
    import pymc as pm

    from pymc_odesens import OdeSystem

THETA = 0.15
Y0 = (1.0, 0.0)
SIGMA = 0.1
TIMES = tuple(float(t) for t in range(1, 11))
HDI_PROB = 0.94


def damped_oscillator(t, y, p):
    return [y[1], -y[0] - p.theta * y[1]]


@cache
def oscillator_system() -> OdeSystem:
    """The ODE system (built on first use: ``--help`` does not import the package)."""
    from pymc_odesens import OdeSystem

    return OdeSystem(
        damped_oscillator, states=["y1", "y2"], params=["theta"], name="damped_oscillator"
    )


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=1000, help="draws per chain (1000)")
    parser.add_argument("--tune", type=int, default=1000, help="tuning steps per chain (1000)")
    parser.add_argument("--chains", type=int, default=4, help="number of chains (4)")
    parser.add_argument("--cores", type=int, default=2, help="chains run in parallel (2)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the data and the sampler")
    parser.add_argument(
        "--nuts-sampler",
        choices=("pymc", "nutpie"),
        default="pymc",
        help="PyMC's NUTS (default) or nutpie's (needs `pip install nutpie`)",
    )
    parser.add_argument("--no-progressbar", action="store_true")
    return parser.parse_args(argv)


def simulate_data(seed: int) -> np.ndarray:
    """Observations (10, 2): the exact solution plus normal noise of sd 0.1."""
    import numpy as np

    from pymc_odesens import solve

    exact = solve(
        oscillator_system(),
        Y0,
        TIMES,
        [THETA],
        method="rk45",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-10,
    ).y
    return exact + np.random.default_rng(seed).normal(0.0, SIGMA, size=exact.shape)


def build_model(data: np.ndarray) -> pm.Model:
    import pymc as pm

    from pymc_odesens import ode_solution

    system = oscillator_system()
    coords = {"state": system.states, "time": TIMES}
    with pm.Model(coords=coords) as model:
        theta = pm.Normal("theta", 0.0, 1.0)
        y0 = pm.Normal("y0", 0.0, 1.0, dims="state")
        sigma = pm.HalfNormal("sigma", 2.5, dims="state")
        y = ode_solution(system, y0, TIMES, [theta], method="rk45")
        pm.Normal("y", mu=y, sigma=sigma, observed=data, dims=("time", "state"))
    return model


def truth_in_hdi(idata) -> list[tuple[str, float, float, float, bool]]:
    """``(name, truth, low, high, inside)`` for theta, y0 and sigma."""
    import arviz as az

    states = oscillator_system().states
    hdi = az.hdi(idata, hdi_prob=HDI_PROB, var_names=["theta", "y0", "sigma"])
    rows = [("theta", THETA, *hdi["theta"].values)]
    for i, state in enumerate(states):
        rows.append((f"y0[{state}]", Y0[i], *hdi["y0"].sel(state=state).values))
    for state in states:
        rows.append((f"sigma[{state}]", SIGMA, *hdi["sigma"].sel(state=state).values))
    return [(name, truth, lo, hi, bool(lo <= truth <= hi)) for name, truth, lo, hi in rows]


def main(argv=None) -> dict:
    args = parse_args(argv)
    started = STARTED if __name__ == "__main__" else time.perf_counter()
    import arviz as az

    import pymc_odesens

    data = simulate_data(args.seed)
    model = build_model(data)
    with model:
        # pm.sample with the log-density compiled in NUMBA mode (docs/pymc.md)
        idata = pymc_odesens.sample(
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            cores=args.cores,
            random_seed=args.seed,
            nuts_sampler=args.nuts_sampler,
            progressbar=not args.no_progressbar,
        )
    setup_time, sample_time = pymc_odesens.inference.sampling_times(idata)

    summary = az.summary(idata, var_names=["theta", "y0", "sigma"], round_to=4)
    print(summary.to_string())
    checks = pymc_odesens.convergence_report(idata, var_names=["theta", "y0", "sigma"])
    print(
        f"\n{args.nuts_sampler} NUTS, {args.chains} chains x {args.draws} draws "
        f"({args.tune} tuning)"
    )
    print(checks)

    rows = truth_in_hdi(idata)
    print(f"\n{'quantity':<12}{'truth':>8}   {HDI_PROB:.0%} HDI")
    for name, truth, lo, hi, inside in rows:
        print(
            f"{name:<12}{truth:>8.3f}   [{lo:7.3f}, {hi:7.3f}]  {'inside' if inside else 'OUTSIDE'}"
        )
    all_inside = all(row[-1] for row in rows)
    print("truth inside every 94% HDI" if all_inside else "truth OUTSIDE some 94% HDI")
    print(pymc_odesens.inference.times_line(idata, started))
    return {
        "idata": idata,
        "summary": summary,
        "checks": checks,
        "divergences": checks.divergences,
        "rhat_max": checks.rhat_max,
        "ess_bulk_min": checks.ess_bulk_min,
        "setup_time": setup_time,
        "sample_time": sample_time,
        "hdi_rows": rows,
        "truth_in_hdi": all_inside,
    }


if __name__ == "__main__":
    main()
