"""A pharmacokinetic model with a repeated dosing schedule, fitted with NUTS.

One-compartment model with first-order absorption: an oral dose ``D = 100 mg``
enters the gut every 12 h, after an absorption lag ``t_lag`` that is itself
unknown, so the dosing times ``t_lag + 12 k`` (k = 0..6) depend on a parameter::

    gut'     = -ka gut
    central' =  ka gut - (CL / V) central          (amounts, mg)
    at t_lag + 12 k:  gut <- gut + D               (explicit events)

The observed plasma concentration ``C = central / V`` (mg/L) is measured 24 times
over 3 days with the usual combined error model of pharmacokinetics, a proportional
error of 15 % and an additive one of 0.05 mg/L (sd ``sqrt((0.15 C)^2 + 0.05^2)``; the
additive part keeps the likelihood proper before the first dose is absorbed); the data
are simulated here with a fixed seed from ``ka = 1.1 /h``, ``CL = 4 L/h``,
``V = 30 L``, ``t_lag = 0.6 h``. The doses are events of the ODE system, so the gradient with
respect to ``t_lag`` includes how every dose moves with it (forward sensitivities
jump at each dose, including the event-time term); NUTS samples ``ka``, ``CL``,
``V``, ``t_lag`` and the noise scale.

Run:  python examples/pk_dosing.py            (writes examples/output/pk_dosing_fit.png)
      python examples/pk_dosing.py --help     (draws, chains, cores, sensitivity route)
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()  # the run's clock: the heavy imports below are part of it

import argparse  # noqa: E402
from functools import cache  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:  # the heavy imports happen inside the functions (``--help`` stays fast)
    import numpy as np
    import pymc as pm

    from pymc_odesens import OdeSystem

DOSE = 100.0  # mg every 12 h
N_DOSES = 7
INTERVAL = 12.0
TRUTH = {"ka": 1.1, "CL": 4.0, "V": 30.0, "t_lag": 0.6, "sigma": 0.15}
ADDITIVE_SD = 0.05  # mg/L, known
TIMES = tuple(
    float(t)
    for t in [
        0.5,
        1,
        2,
        3,
        4,
        6,
        8,
        11.5,
        13,
        15,
        19,
        23.5,
        25,
        27,
        31,
        35.5,
        37,
        40,
        47.5,
        49,
        53,
        59.5,
        64,
        72.0,
    ]
)
OUTPUT = Path(__file__).resolve().parent / "output" / "pk_dosing_fit.png"
HDI_PROB = 0.94


def one_compartment(t, y, p):
    return [-p.ka * y.gut, p.ka * y.gut - p.CL / p.V * y.central]


@cache
def pk_system() -> OdeSystem:
    """The ODE system with its doses as explicit events (built on first use)."""
    from pymc_odesens import ExplicitEvent, OdeSystem

    dosing = ExplicitEvent(
        lambda p: [p.t_lag + INTERVAL * k for k in range(N_DOSES)],
        affect=lambda t, y, p: [y.gut + DOSE, y.central],
        name="dose",
    )
    return OdeSystem(
        one_compartment,
        states=["gut", "central"],
        params=["ka", "CL", "V", "t_lag"],
        events=[dosing],
        name="one_compartment_oral",
    )


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=1000, help="draws per chain (1000)")
    parser.add_argument("--tune", type=int, default=1000, help="tuning steps per chain (1000)")
    parser.add_argument("--chains", type=int, default=4, help="number of chains (4)")
    parser.add_argument("--cores", type=int, default=2, help="chains run in parallel (2)")
    parser.add_argument("--seed", type=int, default=5, help="seed of the data and the sampler")
    parser.add_argument(
        "--target-accept", type=float, default=0.95, help="NUTS target acceptance (0.95)"
    )
    parser.add_argument(
        "--sensitivity",
        choices=("forward", "adjoint"),
        default="forward",
        help="gradient route of the ODE solution (forward)",
    )
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG")
    parser.add_argument("--no-progressbar", action="store_true")
    return parser.parse_args(argv)


def concentration(params: np.ndarray, times=TIMES) -> np.ndarray:
    """Plasma concentration ``central / V`` at ``times`` (a plain solve)."""
    from pymc_odesens import solve

    y = solve(
        pk_system(),
        [0.0, 0.0],
        times,
        params,
        method="bdf",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-10,
    ).y
    return y[:, 1] / params[2]


def simulate_data(seed: int) -> np.ndarray:
    import numpy as np

    exact = concentration(np.array([TRUTH[k] for k in ("ka", "CL", "V", "t_lag")]))
    sd = np.sqrt((TRUTH["sigma"] * exact) ** 2 + ADDITIVE_SD**2)
    return exact + sd * np.random.default_rng(seed).normal(size=exact.shape)


def build_model(data: np.ndarray, sensitivity: str = "forward") -> pm.Model:
    import numpy as np
    import pymc as pm

    from pymc_odesens import ode_solution

    with pm.Model(coords={"time": TIMES}) as model:
        ka = pm.LogNormal("ka", np.log(1.0), 0.5)
        cl = pm.LogNormal("CL", np.log(5.0), 0.5)
        v = pm.LogNormal("V", np.log(25.0), 0.5)
        t_lag = pm.LogNormal("t_lag", np.log(0.5), 0.5)
        sigma = pm.HalfNormal("sigma", 0.5)
        y = ode_solution(
            pk_system(),
            [0.0, 0.0],
            TIMES,
            [ka, cl, v, t_lag],
            method="bdf",
            sensitivity=sensitivity,
            relative_tolerance=1e-8,
            absolute_tolerance=1e-8,
        )
        conc = pm.Deterministic("concentration", y[:, 1] / v, dims="time")
        sd = pm.math.sqrt((sigma * conc) ** 2 + ADDITIVE_SD**2)
        pm.Normal("C_obs", mu=conc, sigma=sd, observed=data, dims="time")
    return model


def plot_fit(idata, data: np.ndarray, path: Path) -> None:
    """The data with the noise sd the model fits, posterior trajectories of the concentration,
    its 90 % posterior predictive band (with the fitted noise), and the truth."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    post = idata.posterior
    draws = np.stack([post[name].values.ravel() for name in ("ka", "CL", "V", "t_lag")], axis=1)
    sigma = post["sigma"].values.ravel()
    grid = np.linspace(0.0, 72.0, 600)
    rng = np.random.default_rng(0)
    chosen = rng.choice(len(draws), size=min(60, len(draws)), replace=False)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    curves = np.stack([concentration(draws[index], grid) for index in chosen])
    # the measurement model on the grid: each curve with its draw's noise (several noise
    # draws per curve, so that the quantiles are smooth)
    sd = np.sqrt((sigma[chosen, None] * curves) ** 2 + ADDITIVE_SD**2)
    noisy = curves[:, None] + sd[:, None] * rng.standard_normal((len(chosen), 50, grid.size))
    band = np.quantile(noisy.reshape(-1, grid.size), [0.05, 0.95], axis=0)
    ax.fill_between(
        grid, band[0], band[1], color="C0", alpha=0.2, lw=0, label="posterior predictive 90 %"
    )
    for curve in curves:
        ax.plot(grid, curve, color="C0", alpha=0.12, lw=1)
    ax.plot([], [], color="C0", label=f"concentration of {len(chosen)} posterior draws")
    truth = np.array([TRUTH[k] for k in ("ka", "CL", "V", "t_lag")])
    ax.plot(grid, concentration(truth, grid), color="k", lw=1.2, ls="--", label="truth")
    ax.plot(TIMES, data, "o", color="C3", ms=4, label="data (simulated)")
    ax.set_xlabel("time [h]")
    ax.set_ylabel("plasma concentration [mg/L]")
    ax.set_title(f"oral dosing every {INTERVAL:g} h: data and posterior")
    ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> dict:
    args = parse_args(argv)
    started = STARTED if __name__ == "__main__" else time.perf_counter()
    import arviz as az

    import pymc_odesens

    data = simulate_data(args.seed)
    model = build_model(data, args.sensitivity)
    with model:
        # pm.sample with the log-density compiled in NUMBA mode (docs/pymc.md)
        idata = pymc_odesens.sample(
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            cores=args.cores,
            random_seed=args.seed,
            target_accept=args.target_accept,
            progressbar=not args.no_progressbar,
        )
    setup_time, sample_time = pymc_odesens.inference.sampling_times(idata)
    names = ["ka", "CL", "V", "t_lag", "sigma"]
    summary = az.summary(idata, var_names=names, round_to=4)
    print(summary.to_string())
    checks = pymc_odesens.convergence_report(idata, var_names=names)
    print(
        f"\nNUTS ({args.sensitivity} sensitivities), {args.chains} chains x {args.draws} draws "
        f"({args.tune} tuning)"
    )
    print(checks)
    hdi = az.hdi(idata, hdi_prob=HDI_PROB, var_names=names)
    rows = [(name, TRUTH[name], *hdi[name].values) for name in names]
    print(f"\n{'quantity':<8}{'truth':>8}   {HDI_PROB:.0%} HDI")
    for name, truth, lo, hi in rows:
        inside = "inside" if lo <= truth <= hi else "OUTSIDE"
        print(f"{name:<8}{truth:>8.3f}   [{lo:7.3f}, {hi:7.3f}]  {inside}")
    if not args.no_plot:
        plot_fit(idata, data, OUTPUT)
        print(f"\nwrote {OUTPUT}")
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
        "truth_in_hdi": all(lo <= truth <= hi for _, truth, lo, hi in rows),
    }


if __name__ == "__main__":
    main()
