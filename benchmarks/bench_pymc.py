"""PyMC benchmark (issue "PyMC integration"): our ODE Op against ``pymc.ode.DifferentialEquation``.

Run:  python benchmarks/bench_pymc.py          (5-10 minutes; writes results/bench_pymc.json)
      python benchmarks/bench_pymc.py --quick  (log-density timings only)

Both models are the examples' (``examples/oscillator.py``: Stan's damped oscillator, 2 states,
theta and y0 unknown, 10 times; ``examples/lotka_volterra.py``: 2 states, 4 rates and y0
unknown, 20 times, log-normal noise). The peer model is the same PyMC model with the ODE
solution from ``pymc.ode.DifferentialEquation`` (scipy ``odeint``, LSODA at rtol = atol =
1.49e-8, gradients from forward sensitivities integrated by odeint as well).

1. Compiled log-density plus gradient (``pytensor.function`` of ``model.logp()`` and its
   gradient) at the initial point and at 20 points drawn from the prior: median wall time
   per evaluation. Ours at odeint's tolerances (rk45, rtol = atol = 1.49e-8) and at Stan's
   rk45 defaults (1e-6), with forward and adjoint gradients (the adjoint route requires
   bdf/adams), and in PyTensor's NUMBA mode (the path nutpie takes). The relative difference
   of the log-densities of ours and the peer is printed next to each time.
2. End to end NUTS (``pm.sample``, one chain, same seed, ``--draws`` / ``--tune``): wall time,
   minimum bulk ESS over the free variables, and ESS per second.
3. The AKAR4 fit of ``examples/akar4.py`` with its defaults (4 chains x 1000 draws after 1000
   tuning steps, 2 cores, bdf at 1e-8 / 1e-10, forward sensitivities): wall time, largest
   R-hat, smallest bulk ESS, divergences (``--no-akar4`` skips it).

The goals of the issue are printed next to the measurements at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

import numpy as np
from common import (
    REPO_DIR,
    fmt_ratio,
    print_table,
    progress,
    report_load,
    time_call,
    write_results,
)

ODEINT_TOL = 1.49012e-8
GOALS = {"logp_grad_speedup": 50.0, "akar4_rhat": 1.01, "akar4_divergences": 0}


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(
        f"bench_example_{name}", REPO_DIR / "examples" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- models


def oscillator_case():
    import pymc as pm
    from pymc.ode import DifferentialEquation

    from pymc_odesens import ode_solution

    ex = load_example("oscillator")
    data = ex.simulate_data(1)

    def build(kind: str, **controls):
        coords = {"state": ex.oscillator_system().states, "time": ex.TIMES}
        with pm.Model(coords=coords) as model:
            theta = pm.Normal("theta", 0.0, 1.0)
            y0 = pm.Normal("y0", 0.0, 1.0, dims="state")
            sigma = pm.HalfNormal("sigma", 2.5, dims="state")
            if kind == "pymc.ode":
                ode = DifferentialEquation(
                    func=lambda y, t, p: [y[1], -y[0] - p[0] * y[1]],
                    times=ex.TIMES,
                    n_states=2,
                    n_theta=1,
                    t0=0.0,
                )
                y = ode(y0=y0, theta=[theta])
            else:
                y = ode_solution(ex.oscillator_system(), y0, ex.TIMES, [theta], **controls)
            pm.Normal("y", mu=y, sigma=sigma, observed=data, dims=("time", "state"))
        return model

    return "oscillator", build


def lotka_volterra_case():
    import pymc as pm
    import pytensor.tensor as pt
    from pymc.ode import DifferentialEquation

    from pymc_odesens import OdeSystem, ode_solution

    ex = load_example("lotka_volterra")
    system = OdeSystem.from_json(ex.MODEL_PATH)
    times = np.linspace(system.t0, system.t_end, 21)[1:]
    data = ex.simulate_data(system, times, 1)

    def lv(y, t, p):
        return [p[0] * y[0] - p[1] * y[0] * y[1], p[2] * y[0] * y[1] - p[3] * y[1]]

    def build(kind: str, **controls):
        coords = {"parameter": system.params, "species": system.states, "time": times}
        with pm.Model(coords=coords) as model:
            rates = pm.LogNormal("rates", mu=0.0, sigma=1.0, dims="parameter")
            y0 = pm.LogNormal("y0", mu=0.0, sigma=1.0, dims="species")
            sigma = pm.LogNormal("sigma", mu=-1.0, sigma=1.0, dims="species")
            if kind == "pymc.ode":
                ode = DifferentialEquation(
                    func=lv, times=times, n_states=2, n_theta=4, t0=system.t0
                )
                y = ode(y0=y0, theta=rates)
            else:
                y = ode_solution(system, y0, times, rates, t0=system.t0, **controls)
            pm.LogNormal(
                "populations",
                mu=pt.log(pt.maximum(y, 1e-12)),
                sigma=sigma,
                observed=data,
                dims=("time", "species"),
            )
        return model

    return "lotka_volterra", build


VARIANTS = {
    # label: (kind, controls, compile mode)
    "pymc.ode (odeint)": ("pymc.ode", {}, None),
    "ours rk45 forward, odeint tol": (
        "ours",
        dict(
            method="rk45",
            sensitivity="forward",
            relative_tolerance=ODEINT_TOL,
            absolute_tolerance=ODEINT_TOL,
            max_num_steps=100_000,
        ),
        None,
    ),
    "ours rk45 forward, Stan defaults": (
        "ours",
        dict(method="rk45", sensitivity="forward", max_num_steps=100_000),
        None,
    ),
    "ours bdf adjoint, odeint tol": (
        "ours",
        dict(
            method="bdf",
            sensitivity="adjoint",
            relative_tolerance=ODEINT_TOL,
            absolute_tolerance=ODEINT_TOL,
        ),
        None,
    ),
    "ours rk45 forward, odeint tol, NUMBA mode": (
        "ours",
        dict(
            method="rk45",
            sensitivity="forward",
            relative_tolerance=ODEINT_TOL,
            absolute_tolerance=ODEINT_TOL,
            max_num_steps=100_000,
        ),
        "NUMBA",
    ),
}


# ----------------------------------------------------------------------------- measurements


def prior_points(model, count: int, seed: int) -> list[dict]:
    """``count`` points of the model's unconstrained space drawn from the prior."""
    import pymc as pm

    with model:
        prior = pm.sample_prior_predictive(draws=count, random_seed=seed)
    points = []
    for i in range(count):
        point = {}
        for rv in model.free_RVs:
            value = prior.prior[rv.name].values[0, i]
            transform = model.rvs_to_transforms[rv]
            vv = model.rvs_to_values[rv]
            if transform is not None:
                value = transform.forward(value, *rv.owner.inputs).eval()
            point[vv.name] = np.asarray(value, dtype=float)
        points.append(point)
    return points


def logp_dlogp_timing(model, mode, points: list[dict]) -> dict:
    import pytensor

    logp = model.logp()
    gradients = pytensor.grad(logp, model.value_vars)
    function = pytensor.function(model.value_vars, [logp, *gradients], mode=mode)
    names = [v.name for v in model.value_vars]
    arrays = [[np.asarray(p[n], dtype=float) for n in names] for p in points]
    start = time.perf_counter()
    first_value = function(*arrays[0])
    first_call = time.perf_counter() - start

    def run_all():
        return [function(*x) for x in arrays]

    timing = time_call(run_all, repeats=5, warmup=0, max_seconds=20.0)
    values = np.array([v[0] for v in timing["result"]])
    return {
        "first_call_s": first_call,
        "ms_per_eval": timing["median_ms"] / len(arrays),
        "logp": values,
        "logp_at_initial_point": float(first_value[0]),
    }


def nuts_run(model, draws: int, tune: int, seed: int) -> dict:
    import arviz as az
    import pymc as pm

    with model:
        start = time.perf_counter()
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=1,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
        seconds = time.perf_counter() - start
    names = [rv.name for rv in model.free_RVs]
    ess = az.ess(idata, var_names=names)
    ess_min = float(min(float(ess[n].min()) for n in names))
    steps = int(idata.sample_stats["n_steps"].sum())
    return {
        "seconds": seconds,
        "ess_bulk_min": ess_min,
        "ess_per_s": ess_min / seconds,
        "gradient_evals": steps,
        "divergences": int(idata.sample_stats["diverging"].sum()),
    }


def akar4_fit() -> dict:
    """``examples/akar4.py`` with its defaults (no plot, no progress bar)."""
    progress("bench_pymc: AKAR4 fit (examples/akar4.py defaults: 4 chains x 1000 draws) ...")
    out = load_example("akar4").main(["--no-plot", "--no-progressbar"])
    return {
        key: out[key]
        for key in ("divergences", "rhat_max", "ess_bulk_min", "sample_time", "total_time")
    }


def goals(results: dict) -> list[dict]:
    out = []
    for name in ("oscillator", "lotka_volterra"):
        timings = results["models"].get(name, {})
        peer = timings.get("pymc.ode (odeint)", {})
        for label in ("ours rk45 forward, odeint tol", "ours rk45 forward, odeint tol, NUMBA mode"):
            ours = timings.get(label, {})
            if "ms_per_eval" not in ours or "ms_per_eval" not in peer:
                continue
            ratio = peer["ms_per_eval"] / ours["ms_per_eval"]
            out.append(
                {
                    "goal": f"{name}: logp+grad >= 50x faster than pymc.ode ({label[5:]})",
                    "measured": f"{fmt_ratio(ratio)} ({peer['ms_per_eval']:.3f} vs "
                    f"{ours['ms_per_eval']:.3f} ms)",
                    "met": ratio >= GOALS["logp_grad_speedup"],
                }
            )
    fit = results.get("akar4")
    if fit:
        out.append(
            {
                "goal": "AKAR4 NUTS 4 x 1000: R-hat < 1.01, no divergences, minutes on 2 cores",
                "measured": f"R-hat max {fit['rhat_max']:.4f}, {fit['divergences']} divergences, "
                f"sampling {fit['sample_time']:.0f} s (total {fit['total_time']:.0f} s), "
                f"min bulk ESS {fit['ess_bulk_min']:.0f}",
                "met": fit["rhat_max"] < GOALS["akar4_rhat"]
                and fit["divergences"] <= GOALS["akar4_divergences"],
            }
        )
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="log-density timings only")
    parser.add_argument("--points", type=int, default=20, help="prior points per model (20)")
    parser.add_argument("--draws", type=int, default=500, help="NUTS draws (500)")
    parser.add_argument("--tune", type=int, default=500, help="NUTS tuning steps (500)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--no-akar4", action="store_true", help="skip the AKAR4 fit")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load_start = report_load("at start")

    import logging

    logging.getLogger("pymc").setLevel(logging.ERROR)
    results: dict = {"args": vars(args), "models": {}}
    for case in (oscillator_case, lotka_volterra_case):
        name, build = case()
        progress(f"bench_pymc: {name}: compiling and timing log-density + gradient")
        points = [build("pymc.ode").initial_point()] + prior_points(
            build("pymc.ode"), args.points, args.seed
        )
        rows, model_results = [], {}
        for label, (kind, controls, mode) in VARIANTS.items():
            model = build(kind, **controls)
            try:
                timing = logp_dlogp_timing(model, mode, points)
            except Exception as error:  # noqa: BLE001 - report, go on with the others
                progress(f"  {label}: failed ({type(error).__name__}: {error})")
                model_results[label] = {"error": f"{type(error).__name__}: {error}"}
                continue
            model_results[label] = timing
        peer = model_results["pymc.ode (odeint)"]
        for label, timing in model_results.items():
            if "error" in timing:
                rows.append([label, None, None, None, None])
                continue
            finite = np.isfinite(timing["logp"]) & np.isfinite(peer["logp"])
            a, b = timing["logp"][finite], peer["logp"][finite]
            diff = float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))
            timing["max_rel_logp_difference_to_peer"] = diff
            timing["speedup_vs_peer"] = peer["ms_per_eval"] / timing["ms_per_eval"]
            rows.append(
                [
                    label,
                    f"{timing['ms_per_eval']:.3f}",
                    fmt_ratio(timing["speedup_vs_peer"]),
                    f"{diff:.1e}",
                    f"{timing['first_call_s']:.2f}",
                ]
            )
        print_table(
            ["variant", "ms / logp+grad", "speed-up", "max rel dlogp", "first call s"],
            rows,
            title=f"{name}: compiled log-density + gradient at {len(points)} points",
        )
        if not args.quick:
            nuts_rows = []
            for label in ("pymc.ode (odeint)", "ours rk45 forward, odeint tol"):
                kind, controls, _ = VARIANTS[label]
                progress(f"  NUTS {label}: {args.tune} tune + {args.draws} draws, 1 chain")
                run = nuts_run(build(kind, **controls), args.draws, args.tune, args.seed)
                model_results[label]["nuts"] = run
                nuts_rows.append(
                    [
                        label,
                        f"{run['seconds']:.1f}",
                        f"{run['ess_bulk_min']:.0f}",
                        f"{run['ess_per_s']:.2f}",
                        run["gradient_evals"],
                        run["divergences"],
                    ]
                )
            ours = model_results["ours rk45 forward, odeint tol"]["nuts"]
            theirs = model_results["pymc.ode (odeint)"]["nuts"]
            nuts_rows.append(
                ["ESS/s ratio", None, None, fmt_ratio(ours["ess_per_s"] / theirs["ess_per_s"])]
            )
            print_table(
                ["sampler", "wall s", "min ESS", "ESS/s", "grad evals", "divergences"],
                nuts_rows,
                title=f"{name}: NUTS end to end",
            )
        results["models"][name] = model_results
    if not args.quick and not args.no_akar4:
        results["akar4"] = akar4_fit()
    results["goals"] = goals(results)
    print()
    print_table(
        ["goal", "measured", "met"],
        [
            [g["goal"], g["measured"], {True: "yes", False: "NO"}.get(g.get("met"), "-")]
            for g in results["goals"]
        ],
        title="Goals (issue 6)",
    )
    results["load_average"] = {"start": load_start, "end": report_load("at end")}
    results["runtime_s"] = time.perf_counter() - started
    path = write_results("bench_pymc", results)
    progress(f"results written to {path}")
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
