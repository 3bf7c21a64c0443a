"""Peano-Baker-series gradients inside PyMC (issue 20): forward, PBSR and Exp gradients.

Run:  python benchmarks/bench_pbs_pymc.py          (writes results/bench_pbs_pymc.json)
      python benchmarks/bench_pbs_pymc.py --quick  (few sizes, short chains)

``ode_solution(..., sensitivity=...)`` with ``"forward"`` (exact forward sensitivities),
``"pbsr"``, ``"exp"`` and ``"exp"`` with ``pbs_options={"exp_step": "trapezoid"}``
(``exp-trapezoid``; S from one state solve, approximate), in one run:

1. Cost of one log-density + gradient: the compiled function of a PyMC model's
   log-density and its gradient (PyTensor's NUMBA mode, the function nutpie calls, and the
   default mode, the one of ``pm.sample()``): CPU time of the process (robust on a shared
   machine; wall time also recorded), mean over the initial point and ``--points`` prior
   draws, median of ``--rounds`` rounds in which the routes take turns; and the
   error of each route's gradient at the initial point against forward sensitivities at
   rtol 1e-10 / atol 1e-12 (relative 2-norm). Models:

   - AKAR4 (``examples/akar4.py``: N = 4, P = 3, three experiments, bdf 1e-8 / 1e-10);
   - a SIR model whose transmission rate is ``beta0 exp(sum_j c_j phi_j(t))`` with K
     Gaussian bumps ``phi_j`` (N = 3, P = K + 1: the ``c_j`` and the recovery rate; K from
     ``--sizes``; rk45 1e-6 / 1e-8; I and R observed at 50 times): P much larger than N;
   - pka (N = 11, P = 35) and camkii (N = 21, P = 59), stiff, bdf at the PBS paper's
     tolerances 1e-5 / 1e-6, 61 output times on [0, 600], Normal likelihood on every state.

2. NUTS (nutpie, ``--chains`` chains run one after the other, same seed and tree depth
   limit ``--maxdepth`` for every route) on AKAR4 (the example's model: ``target_accept``
   0.99) and on the SIR model with ``--nuts-size`` bumps: sampling wall and CPU time
   (compilation excluded), bulk ESS (smallest and median over all scalar parameters), ESS
   per second and per CPU second, gradient evaluations per draw, step size, divergences,
   solver failures (rejected proposals); ESS per 1000 gradient evaluations (tuning
   included) divided by section 1's cost, a load-robust estimate of the ESS/s ratio;
   whether the posterior means agree with the forward route's (largest ``|mean_a - mean_b|
   / sqrt(mcse_a^2 + mcse_b^2)``); and the branches the PBS routes took at 50 posterior
   draws (``pbs_branch_counts`` through ``pm.compute_deterministics``).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from bench_pbs import load_model
from bench_pymc import load_example, prior_points
from common import fmt_ratio, load_average, print_table, progress, report_load, write_results

ROUTES = {
    "forward": {"sensitivity": "forward"},
    "pbsr": {"sensitivity": "pbsr"},
    "exp": {"sensitivity": "exp"},
    "exp-trapezoid": {"sensitivity": "exp", "pbs_options": {"exp_step": "trapezoid"}},
}
"""Gradient routes compared: ``ode_solution`` arguments by label (``exp-trapezoid``: the Exp
algorithm with the Jacobians' mean over each step, second order, instead of the published
first-order step)."""
TIGHT = {"relative_tolerance": 1e-10, "absolute_tolerance": 1e-12}
SIR_TIMES = np.linspace(2.0, 100.0, 50)
SIR_Y0 = np.array([0.99, 0.01, 0.0])
SIR_TOL = {"relative_tolerance": 1e-6, "absolute_tolerance": 1e-8}
STIFF_TOL = {"relative_tolerance": 1e-5, "absolute_tolerance": 1e-6}


# ----------------------------------------------------------------------------- models


BETA0 = 0.35  # baseline transmission rate of the SIR model (known)


def sir_system(n_bumps: int):
    """SIR with transmission rate ``beta0 exp(sum_j c_j exp(-(t - t_j)^2 / (2 w^2)))``: bumps
    centred every ``d = 100 / (K - 1)`` days on [0, 100], width ``w = d / 2``; parameters
    ``gamma, c_0 ... c_K-1`` (P = K + 1)."""
    from pymc_odesens import OdeSystem
    from pymc_odesens import math as odemath

    centres = np.linspace(0.0, 100.0, n_bumps)
    width = 0.5 * 100.0 / (n_bumps - 1)

    def rhs(t, y, p):
        log_modulation = sum(
            p[1 + j] * odemath.exp(-((t - centres[j]) ** 2) / (2.0 * width**2))
            for j in range(n_bumps)
        )
        infection = BETA0 * odemath.exp(log_modulation) * y.S * y.I
        return [-infection, infection - p.gamma * y.I, p.gamma * y.I]

    params = ["gamma"] + [f"c{j}" for j in range(n_bumps)]
    return OdeSystem(rhs, states=["S", "I", "R"], params=params, name=f"sir_bumps_{n_bumps}")


def sir_truth(n_bumps: int) -> np.ndarray:
    bumps = 0.3 * np.sin(2.0 * np.pi * np.linspace(0.0, 100.0, n_bumps) / 60.0)
    return np.concatenate(([0.1], bumps))


def sir_model(n_bumps: int, route: str, controls: dict | None = None, seed: int = 20):
    """Log-normal observations (5 %) of I(t) and R(t) at 50 times; ``log gamma`` and the
    ``c_j`` have normal priors around (not at) the truth, the noise a half-normal one."""
    import pymc as pm
    import pytensor.tensor as pt

    from pymc_odesens import ode_solution, solve

    system = sir_system(n_bumps)
    truth = solve(system, SIR_Y0, SIR_TIMES, sir_truth(n_bumps), method="rk45", **TIGHT).y
    observed = truth[:, 1:]
    noise = np.random.default_rng(seed).normal(size=observed.shape)
    data = observed * np.exp(0.05 * noise)
    with pm.Model() as model:
        log_gamma = pm.Normal("log_gamma", np.log(0.12), 0.3)
        bumps = pm.Normal("c", 0.0, 0.5, shape=n_bumps)
        sigma = pm.HalfNormal("sigma", 0.1)
        params = pt.concatenate([pt.exp(log_gamma)[None], bumps])
        y = ode_solution(
            system,
            SIR_Y0,
            SIR_TIMES,
            params,
            method="rk45",
            **ROUTES[route],
            **(controls or SIR_TOL),
        )
        pm.LogNormal("I_R", pt.log(pt.maximum(y[:, 1:], 1e-12)), sigma, observed=data)
    return model


def akar4_model(route: str, controls: dict | None = None):
    """``examples/akar4.py``'s model (bdf at its 1e-8 / 1e-10 unless ``controls`` say)."""
    from pymc_odesens import OdeSystem

    example = load_example("akar4")
    system = OdeSystem.from_json(example.MODEL_PATH)
    experiments = example.load_experiments(system)
    controls = controls or {"relative_tolerance": 1e-8, "absolute_tolerance": 1e-10}
    return example.build_model(
        system,
        experiments,
        rtol=controls["relative_tolerance"],
        atol=controls["absolute_tolerance"],
        **ROUTES[route],
    )


def stiff_model(name: str, route: str, controls: dict | None = None):
    """pka / camkii: the nominal parameters times ``exp(log_scale)`` (some are zero), every
    state observed with noise (5 % of its range) at 61 times on [0, 600], bdf."""
    import pymc as pm
    import pytensor.tensor as pt

    from pymc_odesens import ode_solution, solve

    system, x0, p, _ = load_model(name)
    times = np.linspace(0.0, 600.0, 61)
    truth = solve(system, x0, times, p, method="bdf", **TIGHT).y
    sigma = 0.05 * np.maximum(truth.max(axis=0) - truth.min(axis=0), 1e-6)
    # noisy data: at noise-free data the gradient would vanish at the nominal parameters
    data = truth + sigma * np.random.default_rng(3).normal(size=truth.shape)
    with pm.Model() as model:
        log_scale = pm.Normal("log_scale", 0.0, 0.1, shape=p.size)
        y = ode_solution(
            system,
            x0,
            times,
            p * pt.exp(log_scale),
            method="bdf",
            **ROUTES[route],
            **(controls or STIFF_TOL),
        )
        pm.Normal("y", y, sigma, observed=data)
    return model


def cases(sizes: list[int], stiff: bool) -> list[tuple[str, dict, object]]:
    """``(label, sizes and solver, build(route, controls=None))`` of section 1."""
    out = [("AKAR4", {"N": 4, "P": 3, "E": 3, "T": 225, "solver": "bdf 1e-8/1e-10"}, akar4_model)]
    for k in sizes:
        info = {"N": 3, "P": k + 1, "E": 1, "T": SIR_TIMES.size, "solver": "rk45 1e-6/1e-8"}
        out.append((f"SIR, {k} bumps", info, lambda route, c=None, k=k: sir_model(k, route, c)))
    if stiff:
        for name, n, p in (("pka", 11, 35), ("camkii", 21, 59)):
            info = {"N": n, "P": p, "E": 1, "T": 61, "solver": "bdf 1e-5/1e-6"}
            out.append((name, info, lambda route, c=None, name=name: stiff_model(name, route, c)))
    return out


# ----------------------------------------------------------------------------- section 1


def gradient_at(model, point: dict, mode=None) -> np.ndarray:
    """The log-density's gradient at ``point`` (all value variables, raveled)."""
    import pytensor

    logp = model.logp()
    function = pytensor.function(model.value_vars, pytensor.grad(logp, model.value_vars), mode=mode)
    names = [v.name for v in model.value_vars]
    return np.concatenate([np.ravel(g) for g in function(*[point[n] for n in names])])


def compiled_logp_dlogp(model, mode):
    """``f(*values) -> [logp, *gradients]`` of ``model`` in PyTensor ``mode``."""
    import pytensor

    logp = model.logp()
    return pytensor.function(
        model.value_vars, [logp, *pytensor.grad(logp, model.value_vars)], mode=mode
    )


def gradient_cost(label: str, info: dict, build, points: int, seed: int, rounds: int) -> dict:
    """Section 1 for one model: times per log-density + gradient and gradient errors.

    The routes' compiled functions are timed in turn, ``rounds`` times over all points
    (median per route). ``ms_*`` is the process's CPU time per evaluation (the work done,
    all threads: robust on a shared machine), ``wall_ms_*`` the wall time.
    """
    reference_model = build("forward", TIGHT)
    point = reference_model.initial_point()
    reference = gradient_at(reference_model, point)
    names = [v.name for v in reference_model.value_vars]
    arrays = [
        [np.asarray(x[n], dtype=float) for n in names]
        for x in [point] + prior_points(reference_model, points, seed)
    ]
    out = {**info, "routes": {}}
    functions = {}
    for route in ROUTES:
        model = build(route)
        error = np.linalg.norm(gradient_at(model, point) - reference) / np.linalg.norm(reference)
        out["routes"][route] = {"gradient_error": float(error)}
        for mode_label, mode in (("numba", "NUMBA"), ("default", None)):
            start = time.perf_counter()
            function = compiled_logp_dlogp(model, mode)
            function(*arrays[0])
            out["routes"][route][f"first_call_s_{mode_label}"] = time.perf_counter() - start
            functions[route, mode_label] = function
    wall = {key: [] for key in functions}
    cpu = {key: [] for key in functions}
    for _ in range(rounds):
        for key, function in functions.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            for values in arrays:
                function(*values)
            cpu[key].append((time.process_time() - start_cpu) * 1e3 / len(arrays))
            wall[key].append((time.perf_counter() - start) * 1e3 / len(arrays))
    for route, mode_label in functions:
        result = out["routes"][route]
        result[f"ms_{mode_label}"] = float(np.median(cpu[route, mode_label]))
        result[f"wall_ms_{mode_label}"] = float(np.median(wall[route, mode_label]))
    for route, result in out["routes"].items():
        progress(
            f"  {label}, {route}: {result['ms_numba']:.3f} ms (NUMBA), "
            f"{result['ms_default']:.3f} ms (default), gradient error "
            f"{result['gradient_error']:.1e}"
        )
    return out


def print_gradient_costs(results: dict) -> None:
    rows = []
    for label, r in results.items():
        routes = r["routes"]
        forward = routes["forward"]["ms_numba"]
        row = [label, r["N"], r["P"], r["E"], r["solver"]]
        row += [f"{routes[route]['ms_numba']:.3f}" for route in ROUTES]
        row += [fmt_ratio(forward / routes[route]["ms_numba"]) for route in list(ROUTES)[1:]]
        row += [f"{routes[route]['ms_default']:.3f}" for route in ROUTES]
        row += [f"{routes[route]['gradient_error']:.1e}" for route in ROUTES]
        rows.append(row)
    short = {"forward": "FS", "pbsr": "PBSR", "exp": "Exp", "exp-trapezoid": "ExpT"}
    print_table(
        ["model", "N", "P", "E", "solver"]
        + [f"{short[r]} ms" for r in ROUTES]
        + [f"FS/{short[r]}" for r in list(ROUTES)[1:]]
        + [f"{short[r]} dflt" for r in ROUTES]
        + [f"err {short[r]}" for r in ROUTES],
        rows,
        title="1. log-density + gradient, CPU ms (NUMBA mode; 'dflt': default mode); "
        "gradient error against forward at 1e-10 / 1e-12 (ExpT: Exp with exp_step='trapezoid')",
    )


# ----------------------------------------------------------------------------- section 2


def nuts_run(model, args, target_accept: float) -> dict:
    """nutpie on ``model``: wall time of the sampling, ESS, statistics, the trace."""
    import arviz as az
    import nutpie

    import pymc_odesens

    free = [rv.name for rv in model.free_RVs]
    start = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model, var_names=free)
    compile_s = time.perf_counter() - start
    pymc_odesens.reset_failure_counts()
    start, start_cpu = time.perf_counter(), time.process_time()
    idata = nutpie.sample(
        compiled,
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        cores=1,
        seed=args.seed,
        progress_bar=False,
        target_accept=target_accept,
        maxdepth=args.maxdepth,
    )
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - start_cpu
    ess = az.ess(idata, var_names=free)
    values = np.concatenate([np.ravel(ess[n].values) for n in free])
    stats = idata.sample_stats
    evaluations = int(stats["n_steps"].sum() + idata.warmup_sample_stats["n_steps"].sum())
    return {
        "idata": idata,
        "compile_s": compile_s,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "load_average_end": load_average(),
        "gradient_evals_total": evaluations,
        "ms_per_gradient_eval": seconds * 1e3 / evaluations,
        "cpu_ms_per_gradient_eval": cpu_seconds * 1e3 / evaluations,
        "ess_median_per_cpu_s": float(np.median(values)) / cpu_seconds,
        "ess_median_per_1000_evals": 1e3 * float(np.median(values)) / evaluations,
        "ess_bulk_min": float(values.min()),
        "ess_bulk_median": float(np.median(values)),
        "ess_min_per_s": float(values.min()) / seconds,
        "ess_median_per_s": float(np.median(values)) / seconds,
        "gradient_evals_per_draw": float(stats["n_steps"].mean()),
        "step_size": float(stats["step_size"].mean()),
        "divergences": int(stats["diverging"].sum()),
        "solver_failures": pymc_odesens.failure_counts(),
    }


def agreement(reference, other, names: list[str]) -> float:
    """Largest ``|mean_a - mean_b| / sqrt(mcse_a^2 + mcse_b^2)`` over all scalar parameters."""
    import arviz as az

    worst = 0.0
    mcse_a = az.mcse(reference, var_names=names)
    mcse_b = az.mcse(other, var_names=names)
    for name in names:
        mean_a = reference.posterior[name].mean(("chain", "draw")).values
        mean_b = other.posterior[name].mean(("chain", "draw")).values
        scale = np.sqrt(mcse_a[name].values ** 2 + mcse_b[name].values ** 2)
        worst = max(worst, float(np.max(np.abs(mean_a - mean_b) / scale)))
    return worst


def branch_fractions(model, idata, draws: int = 50) -> dict:
    """``pbs_branch_summary`` of ``pbs_branch_counts`` at ``draws`` posterior draws, computed
    afterwards with ``pm.compute_deterministics`` (so the sampler did not pay for it)."""
    import pymc as pm

    from pymc_odesens import pbs_branch_counts, pbs_branch_summary
    from pymc_odesens.inference.smmala_sensitivities import ode_nodes
    from pymc_odesens.ops.ode_ops import OdePbsOp

    node = next(n for n in ode_nodes(model.observed_RVs) if isinstance(n.op, OdePbsOp))
    with model:
        pm.Deterministic("pbs_branches", pbs_branch_counts(node.outputs[0]))
    posterior = idata.posterior
    step = max(1, posterior.sizes["draw"] * posterior.sizes["chain"] // draws)
    thinned = posterior.isel(draw=slice(None, None, step))
    counts = pm.compute_deterministics(
        thinned, var_names=["pbs_branches"], model=model, progressbar=False
    )["pbs_branches"].values
    return pbs_branch_summary(counts)


def nuts_section(args, costs: dict) -> dict:
    """NUTS with every route; ``costs`` (section 1's results) give the load-robust estimate
    ESS/s = ESS per gradient evaluation / (ms per log-density + gradient, timed in turn)."""
    models = {
        "AKAR4": (akar4_model, 0.99),
        f"SIR, {args.nuts_size} bumps": (lambda route: sir_model(args.nuts_size, route), 0.8),
    }
    out = {}
    for label, (build, target_accept) in models.items():
        runs = {}
        for route in ROUTES:
            progress(
                f"  NUTS {label}, {route}: {args.chains} x ({args.tune} + {args.draws}), "
                f"target_accept {target_accept}, load {load_average()}"
            )
            model = build(route)
            run = nuts_run(model, args, target_accept)
            cost = costs.get(label, {}).get("routes", {}).get(route, {}).get("ms_numba")
            if cost:
                run["ess_median_per_s_from_section_1"] = run["ess_median_per_1000_evals"] / cost
            free = [rv.name for rv in model.free_RVs]
            if route != "forward":
                run["max_mean_difference_in_mcse"] = agreement(
                    runs["forward"]["idata"], run["idata"], free
                )
                run["branches"] = branch_fractions(model, run["idata"])
            runs[route] = run
        for run in runs.values():
            run.pop("idata")
        out[label] = runs
    return out


def print_nuts(results: dict) -> None:
    rows = []
    for label, runs in results.items():
        forward = runs["forward"]
        for route, run in runs.items():
            branches = run.get("branches")
            exp_share = (
                None
                if branches is None
                else f"{sum(v for k, v in branches.items() if k.startswith('exp')):.2f}"
            )
            rows.append(
                [
                    f"{label} {route}",
                    f"{run['seconds']:.1f}",
                    f"{run['cpu_seconds']:.1f}",
                    f"{run['ess_bulk_min']:.0f}",
                    f"{run['ess_bulk_median']:.0f}",
                    f"{run['ess_min_per_s']:.1f}",
                    f"{run['ess_median_per_s']:.1f}",
                    fmt_ratio(run["ess_median_per_s"] / forward["ess_median_per_s"]),
                    f"{run['ess_median_per_cpu_s']:.1f}",
                    fmt_ratio(run["ess_median_per_cpu_s"] / forward["ess_median_per_cpu_s"]),
                    f"{run['ess_median_per_1000_evals']:.1f}",
                    f"{run['cpu_ms_per_gradient_eval']:.3f}",
                    _estimate(run, forward),
                    f"{run['gradient_evals_per_draw']:.1f}",
                    f"{run['step_size']:.3g}",
                    run["divergences"],
                    None if route == "forward" else f"{run['max_mean_difference_in_mcse']:.1f}",
                    exp_share,
                ]
            )
    print_table(
        [
            "model, route",
            "wall s",
            "cpu s",
            "ESS min",
            "ESS med",
            "ESS min/s",
            "ESS med/s",
            "vs FS",
            "ESS med/cpu s",
            "vs FS (cpu)",
            "ESS med/1000 grads",
            "cpu ms/grad",
            "est. vs FS",
            "grads/draw",
            "step",
            "div",
            "max |dmean|/mcse",
            "Exp share",
        ],
        rows,
        title="2. NUTS (nutpie): sampling wall and CPU time, bulk ESS, ESS per (CPU) second; "
        "'est. vs FS': ESS per gradient evaluation / section 1's cost, relative to forward",
    )


def _estimate(run: dict, forward: dict) -> str | None:
    ours = run.get("ess_median_per_s_from_section_1")
    theirs = forward.get("ess_median_per_s_from_section_1")
    return fmt_ratio(ours / theirs) if ours and theirs else None


# ----------------------------------------------------------------------------- main


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes 10,40; 100 + 100 draws")
    parser.add_argument("--sizes", default="10,20,40,80,160", help="SIR bump counts K")
    parser.add_argument("--nuts-size", type=int, default=80, help="K of the SIR NUTS run (80)")
    parser.add_argument("--points", type=int, default=10, help="prior points per model (10)")
    parser.add_argument("--rounds", type=int, default=7, help="timing rounds per route (7)")
    parser.add_argument("--draws", type=int, default=400, help="draws per chain (400)")
    parser.add_argument("--tune", type=int, default=400, help="tuning steps per chain (400)")
    parser.add_argument("--chains", type=int, default=2, help="chains (2)")
    parser.add_argument(
        "--maxdepth",
        type=int,
        default=8,
        help="NUTS tree depth limit, every route (8: at most 255 gradients per draw)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-stiff", action="store_true", help="skip pka and camkii")
    parser.add_argument("--no-nuts", action="store_true", help="section 1 only")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.draws, args.tune, args.nuts_size = "10,40", 100, 100, 40
    started = time.perf_counter()
    load_start = report_load("at start")

    import logging

    logging.getLogger("pymc").setLevel(logging.ERROR)
    results: dict = {"args": vars(args), "gradient_cost": {}}
    sizes = sorted({int(k) for k in args.sizes.split(",") if k} | {args.nuts_size})
    progress("bench_pbs_pymc: 1. log-density + gradient")
    for label, info, build in cases(sizes, stiff=not args.no_stiff):
        results["gradient_cost"][label] = gradient_cost(
            label, info, build, args.points, args.seed, args.rounds
        )
    print_gradient_costs(results["gradient_cost"])
    results["load_average_after_section_1"] = report_load("after section 1")
    if not args.no_nuts:
        progress("bench_pbs_pymc: 2. NUTS")
        results["nuts"] = nuts_section(args, results["gradient_cost"])
        print_nuts(results["nuts"])
    results["load_average"] = {"start": load_start, "end": report_load("at end")}
    results["runtime_s"] = time.perf_counter() - started
    name = "bench_pbs_pymc_quick" if args.quick else "bench_pbs_pymc"
    path = write_results(name, results)
    progress(f"results written to {path}")
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
