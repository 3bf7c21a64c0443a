"""AKAR4 fitted to its real data with NUTS and with SMMALA (forward, PBSR and Exp metrics).

The model is the one of ``examples/akar4.py`` (imported from there): three
experiments, log10 rate constants with normal priors, the specificity
parameterisation, ``bdf`` at rtol 1e-8 / atol 1e-10, Normal likelihood with
the data's standard deviations. It is sampled four times:

- NUTS (PyMC's, ``target_accept`` 0.99 as in ``akar4.py``), gradients from exact
  forward sensitivities;
- :class:`pymc_odesens.SMMALA` with the expected Fisher information as metric,
  computed from forward sensitivities, from PBSR and from Exp (the Peano-Baker
  approximations; with those the gradient comes from the same approximate
  sensitivities, and the Metropolis-Hastings step keeps the chain exact).

It prints, per sampler: the sampling time (PyMC's ``sampling_time``: tuning and
draws of all chains, after the step methods are built and compiled) and the
wall time of the whole ``pm.sample`` call, the smallest bulk / tail ESS over
the three log10 rate constants, ESS per second of sampling time (and of wall
time), the largest R-hat, the posterior means with their Monte Carlo standard
errors and how far they are from NUTS's (in units of the combined MCSE), the
acceptance rate, the mean wall time of one iteration (one draw for NUTS), and
solver / metric failures (in tuning and draws). It also times one evaluation
of each sampler's function (log-density and gradient for NUTS; log-density,
gradient and metric for SMMALA) at the NUTS posterior mean, in this process
(minimum of repeats). The printed report is also written to
``<output>.txt`` and the numbers to ``<output>.json``
(default ``examples/output/akar4_smmala``).

Run:  python examples/akar4_smmala.py
      python examples/akar4_smmala.py --samplers nuts,exp --draws 500
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()  # the run's clock: the heavy imports below are part of it

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import akar4  # noqa: E402  (the model of examples/akar4.py; imports nothing heavy)

if TYPE_CHECKING:  # the heavy imports happen inside the functions (``--help`` stays fast)
    import arviz as az
    import numpy as np

SAMPLERS = ("nuts", "forward", "pbsr", "exp")
VARIABLE = "log10_k"
OUTPUT = Path(__file__).resolve().parent / "output" / "akar4_smmala"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=1000, help="draws per chain (1000)")
    parser.add_argument("--tune", type=int, default=1000, help="tuning steps per chain (1000)")
    parser.add_argument("--chains", type=int, default=4, help="number of chains (4)")
    parser.add_argument("--cores", type=int, default=2, help="chains run in parallel (2)")
    parser.add_argument("--seed", type=int, default=20240611, help="random seed")
    parser.add_argument(
        "--samplers",
        default=",".join(SAMPLERS),
        help="comma-separated subset of nuts,forward,pbsr,exp (all)",
    )
    parser.add_argument("--nuts-target-accept", type=float, default=0.99, help="NUTS (0.99)")
    parser.add_argument("--smmala-target-accept", type=float, default=0.574, help="SMMALA (0.574)")
    parser.add_argument("--rtol", type=float, default=1e-8, help="bdf relative tolerance")
    parser.add_argument("--atol", type=float, default=1e-10, help="bdf absolute tolerance")
    parser.add_argument("--repeats", type=int, default=30, help="timed evaluations (30)")
    parser.add_argument(
        "--output", type=Path, default=OUTPUT, help="report prefix (.txt, .json); '' for none"
    )
    parser.add_argument("--no-progressbar", action="store_true")
    args = parser.parse_args(argv)
    args.samplers = [s.strip() for s in args.samplers.split(",") if s.strip()]
    unknown = sorted(set(args.samplers) - set(SAMPLERS))
    if unknown:
        parser.error(f"unknown sampler(s) {unknown}; choose from {SAMPLERS}")
    return args


def sample(model, sampler: str, args) -> tuple[az.InferenceData, float]:
    """Sample with NUTS or SMMALA; returns the InferenceData and the wall time of pm.sample
    (its compiles included)."""
    import pymc as pm

    from pymc_odesens import SMMALA

    kwargs = {
        "draws": args.draws,
        "tune": args.tune,
        "chains": args.chains,
        "cores": args.cores,
        "random_seed": args.seed,
        "progressbar": not args.no_progressbar,
        "compute_convergence_checks": False,
        "discard_tuned_samples": False,  # keep the tuning phase's stats (failures, timing)
    }
    with model:
        if sampler == "nuts":
            kwargs["target_accept"] = args.nuts_target_accept
        else:
            kwargs["step"] = SMMALA(sensitivity=sampler, target_accept=args.smmala_target_accept)
        start = time.perf_counter()
        idata = pm.sample(**kwargs)
    return idata, time.perf_counter() - start


def time_evaluations(model, samplers, point, repeats: int, target_accept: float) -> dict:
    """Minimum wall time (ms) of one evaluation per sampler at ``point`` (in this process)."""
    import numpy as np

    from pymc_odesens import SMMALA

    out = {}
    with model:
        for sampler in samplers:
            if sampler == "nuts":
                function = model.logp_dlogp_function(ravel_inputs=True)
                function.set_extra_values({})
                x = np.concatenate([np.ravel(point[v.name]) for v in function._grad_vars])

                def call(function=function, x=x):
                    return function(x)
            else:
                step = SMMALA(sensitivity=sampler, target_accept=target_accept)
                x = np.concatenate([np.ravel(point[v.name]) for v in step.vars])

                def call(step=step, x=x):
                    return step.evaluate(x)

            call()
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            out[sampler] = 1e3 * min(times)
    return out


def summarise(idata, wall: float, sampler: str) -> dict:
    import arviz as az
    import numpy as np

    from pymc_odesens import convergence_report

    summary = az.summary(idata, var_names=[VARIABLE], round_to=6)
    stats = idata.sample_stats
    warmup = idata.get("warmup_sample_stats")
    draws = stats.sizes["chain"] * stats.sizes["draw"]
    sampling_time = float(idata.posterior.attrs.get("sampling_time", np.nan))
    row = {
        "wall_s": wall,
        "sampling_time_s": sampling_time,
        "ess_bulk_min": float(summary["ess_bulk"].min()),
        "ess_tail_min": float(summary["ess_tail"].min()),
        "r_hat_max": float(summary["r_hat"].max()),
        "mean": summary["mean"].to_numpy(),
        "sd": summary["sd"].to_numpy(),
        "mcse_mean": summary["mcse_mean"].to_numpy(),
        "names": list(summary.index),
        "checks": convergence_report(idata, var_names=[VARIABLE]),
    }
    row["ess_per_s"] = row["ess_bulk_min"] / sampling_time
    row["ess_per_s_wall"] = row["ess_bulk_min"] / wall
    row["ms_per_iteration"] = float(1e3 * stats["perf_counter_diff"].mean())
    if warmup is not None:
        row["ms_per_tuning_iteration"] = float(1e3 * warmup["perf_counter_diff"].mean())
    if sampler == "nuts":
        row["accept"] = float(stats["acceptance_rate"].mean())
        row["grad_evals_per_draw"] = float(stats["n_steps"].mean())
        row["divergences"] = int(stats["diverging"].sum())
        row["step_size"] = float(stats["step_size"].values[:, -1].mean())
    else:
        row["accept"] = float(stats["accept"].mean())
        row["step_size"] = float(stats["step_size"].values[:, -1].mean())
        for kind in ("solver", "metric"):
            n = int(stats[f"{kind}_failure"].sum())
            if warmup is not None:
                n += int(warmup[f"{kind}_failure"].sum())
            row[f"{kind}_failures"] = n
        row["metric_min_eigenvalue_median"] = float(stats["metric_min_eigenvalue"].median())
    row["draws"] = int(draws)
    row["ess_bulk_per_draw"] = row["ess_bulk_min"] / draws
    return row


class Report:
    """Prints and keeps the lines of the report."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)


def _jsonable(value):
    import numpy as np

    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "lines"):  # a convergence report
        return value.lines()
    return value


def main(argv=None) -> dict:
    args = parse_args(argv)
    clock = STARTED if __name__ == "__main__" else time.perf_counter()
    import numpy as np

    from pymc_odesens import OdeSystem

    akar4.note_missing_blas()
    report = Report()
    load_start = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    system = OdeSystem.from_json(akar4.MODEL_PATH)
    exp = akar4.load_experiments(system)
    model = akar4.build_model(system, exp, rtol=args.rtol, atol=args.atol)
    report(
        f"{system.name}: {system.n_states} states, {system.n_params} parameters, "
        f"{len(exp['ids'])} experiments x {exp['times'].shape[1]} data points; "
        f"{args.chains} chains x {args.draws} draws ({args.tune} tuning), {args.cores} cores"
    )
    results, idatas = {}, {}
    for sampler in args.samplers:
        label = "NUTS" if sampler == "nuts" else f"SMMALA ({sampler} metric)"
        report(f"\n--- {label}")
        idata, wall = sample(model, sampler, args)
        idatas[sampler] = idata
        results[sampler] = summarise(idata, wall, sampler)
        for line in results[sampler]["checks"].lines():
            report(line)

    reference = "nuts" if "nuts" in results else args.samplers[0]
    ref = results[reference]
    names = ref["names"]
    report(f"\nposterior means of {VARIABLE} (+- MCSE); z = |mean - {reference} mean| / MCSE")
    header = f"{'sampler':<10}" + "".join(f"{n:>28}" for n in names) + f"{'max z':>8}"
    report(header)
    for sampler, row in results.items():
        z = np.abs(row["mean"] - ref["mean"]) / np.sqrt(
            row["mcse_mean"] ** 2 + ref["mcse_mean"] ** 2
        )
        row["z_vs_reference"] = z if sampler != reference else np.zeros_like(z)
        cells = "".join(f"{m:>18.4f} +- {e:<7.4f}" for m, e in zip(row["mean"], row["mcse_mean"]))
        zmax = "-" if sampler == reference else f"{z.max():.2f}"
        report(f"{sampler:<10}{cells}{zmax:>8}")

    point = {
        v.name: np.asarray(idatas[reference].posterior[v.name].mean(("chain", "draw")))
        for v in model.value_vars
        if v.name in idatas[reference].posterior
    }
    missing = [v.name for v in model.value_vars if v.name not in point]
    if missing:  # transformed variables are not in the posterior: take the initial point
        initial = model.initial_point()
        point.update({name: initial[name] for name in missing})
    evaluation_ms = time_evaluations(
        model, args.samplers, point, args.repeats, args.smmala_target_accept
    )
    report(
        f"\n{'sampler':<9}{'wall s':>8}{'samp s':>8}{'ESS bulk':>9}{'ESS tail':>9}{'ESS/s':>8}"
        f"{'(wall)':>8}{'R-hat':>7}{'accept':>7}{'ms/iter':>9}{'eval ms':>9}{'failures':>10}"
    )
    for sampler, row in results.items():
        row["evaluation_ms"] = evaluation_ms.get(sampler)
        failures = (
            f"{row['divergences']} div"
            if sampler == "nuts"
            else f"{row['solver_failures']}+{row['metric_failures']}"
        )
        report(
            f"{sampler:<9}{row['wall_s']:>8.1f}{row['sampling_time_s']:>8.1f}"
            f"{row['ess_bulk_min']:>9.0f}{row['ess_tail_min']:>9.0f}{row['ess_per_s']:>8.2f}"
            f"{row['ess_per_s_wall']:>8.2f}{row['r_hat_max']:>7.3f}{row['accept']:>7.2f}"
            f"{row['ms_per_iteration']:>9.2f}{row['evaluation_ms']:>9.2f}{failures:>10}"
        )
    if "nuts" in results:
        report(
            f"\nNUTS: {results['nuts']['grad_evals_per_draw']:.1f} gradient evaluations per draw"
        )
    report(
        "ESS = smallest over the three rate constants; ESS/s = bulk ESS / sampling time "
        "(tuning + draws, after compilation); wall s and (wall): the whole pm.sample call, "
        "compiling included; "
        "ms/iter = mean wall time of one step in the draws (one NUTS draw); eval ms = one "
        "evaluation in this process (NUTS: logp + gradient; SMMALA: logp + gradient + metric), "
        f"minimum of {args.repeats}; SMMALA failures = solver + metric failures in tuning and "
        "draws (rejected proposals)."
    )
    solve_ms = time_solves(system, exp, point_rates(model, point), args)
    report(
        "\nODE solves of the three experiments at that point (ms, minimum of "
        f"{args.repeats}): " + ", ".join(f"{k} {v:.3f}" for k, v in solve_ms.items())
    )
    ratios = {}
    if "forward" in results and "exp" in results:
        ratios["iteration_forward_over_exp"] = (
            results["forward"]["ms_per_iteration"] / results["exp"]["ms_per_iteration"]
        )
        ratios["evaluation_forward_over_exp"] = (
            results["forward"]["evaluation_ms"] / results["exp"]["evaluation_ms"]
        )
        report(
            f"cost per iteration, forward / Exp metric: "
            f"{ratios['iteration_forward_over_exp']:.2f}x "
            f"(one evaluation: {ratios['evaluation_forward_over_exp']:.2f}x)"
        )
    ratios["solve_forward_over_states_only"] = solve_ms["forward"] / solve_ms["states only"]
    report(
        "bound on any route that solves the states at these tolerances: forward / states-only "
        f"solve = {ratios['solve_forward_over_states_only']:.2f}x"
    )
    load_end = os.getloadavg()
    report(
        f"\nmachine: {platform.node()}, {os.cpu_count()} cpus; load average (1, 5, 15 min) "
        f"at start {tuple(round(x, 2) for x in load_start)}, at end "
        f"{tuple(round(x, 2) for x in load_end)}; started {started}"
    )
    report(f"time: in all {time.perf_counter() - clock:.1f} s since the run started")
    out = {
        "results": results,
        "solve_ms": solve_ms,
        "ratios": ratios,
        "args": vars(args),
        "load_average_start": load_start,
        "load_average_end": load_end,
        "started": started,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if argv is None else argv,
    }
    if str(args.output):
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.with_suffix(".txt").write_text("\n".join(report.lines) + "\n")
        args.output.with_suffix(".json").write_text(json.dumps(_jsonable(out), indent=1) + "\n")
        print(f"wrote {args.output.with_suffix('.txt')} and .json")
    return {**out, "idata": idatas}


def point_rates(model, point) -> np.ndarray:
    """The rate constants ``k`` (P,) at a point of the model's value variables."""
    import numpy as np

    (k,) = model.replace_rvs_by_values([model["k"]])
    return np.asarray(model.compile_fn(k, inputs=model.value_vars, on_unused_input="ignore")(point))


def time_solves(system, exp, k, args) -> dict:
    """Minimum wall time (ms) of solving the three experiments (one after the other) with
    states only and with forward, PBSR and Exp sensitivities, at the sampling tolerances."""
    from pymc_odesens import solve, solve_sensitivity

    controls = {
        "t0": exp["t0"],
        "method": "bdf",
        "relative_tolerance": args.rtol,
        "absolute_tolerance": args.atol,
    }
    runs = {"states only": lambda y0, t: solve(system, y0, t, k, **controls)}
    for route in ("forward", "pbsr", "exp"):
        runs[route] = lambda y0, t, route=route: solve_sensitivity(
            system, y0, t, k, sensitivity=route, **controls
        )
    out = {}
    for name, run in runs.items():
        times = []
        for _ in range(args.repeats + 1):
            start = time.perf_counter()
            for e in range(len(exp["ids"])):
                run(exp["y0"][e], exp["times"][e])
            times.append(time.perf_counter() - start)
        out[name] = 1e3 * min(times[1:])
    return out


if __name__ == "__main__":
    main()
