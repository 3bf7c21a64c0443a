"""Which solver for which model: the numbers behind docs/choosing_methods.md.

Run:  python benchmarks/bench_method_choice.py            (a few minutes)
      python benchmarks/bench_method_choice.py --repeats 5 --models lotka_volterra,pka

For non-stiff (lotka_volterra, chua, the boarding-school SIR model) and stiff (pka,
robertson, akar4) reference models: states and forward sensitivities
(``solve_sensitivity``, what a gradient-based sampler pays per log-density and gradient
with ``ode_solution``'s forward route) with each of the four methods,

- at Stan's per-method defaults (rk45 / ckrk 1e-6, bdf / adams 1e-10: what
  ``ode_solution`` gives when only ``method`` is chosen; its default method is bdf), and
- at one common tolerance, rtol 1e-6 / atol 1e-8 (the method alone).

Reported: median wall time of ``--repeats`` calls in this process, steps, and the
error of the states against the model's ground truth (``shared/models/*_truth.npz``; for
SIR against rk45 at 1e-12), as the largest error of any state relative to its largest
magnitude. Explicit methods on the stiff models are capped at ``--max-steps`` steps
between output times: a run that exceeds it is reported as failed.
Results: ``benchmarks/results/bench_method_choice.json``.
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np
from common import fmt_ms, print_table, progress, report_load

NON_STIFF = ("lotka_volterra", "chua", "sir")
STIFF = ("pka", "robertson", "akar4")
METHODS = ("rk45", "ckrk", "bdf", "adams")
COMMON_TOLERANCE = (1e-6, 1e-8)


def sir_model():
    """The boarding-school SIR model (Stan case study), 14 daily outputs; truth: rk45 at 1e-12."""
    from pymc_odesens import OdeSystem, solve

    def sir(t, y, p):
        infection = p.beta * y.S * y.I / 763.0
        return [-infection, infection - p.gamma * y.I, p.gamma * y.I]

    system = OdeSystem(sir, states=["S", "I", "R"], params=["beta", "gamma"], name="sir")
    y0, params, times = [762.0, 1.0, 0.0], [1.7, 0.5], np.arange(1.0, 15.0)
    truth = solve(
        system, y0, times, params, method="rk45", relative_tolerance=1e-12, absolute_tolerance=1e-12
    ).y
    return system, y0, params, times, 0.0, {"t": times, "y": truth}


def reference_model(name: str):
    from pymc_odesens import OdeSystem

    if name == "sir":
        return sir_model()
    system = OdeSystem.from_json(common.model_path(name))
    truth = common.load_truth(name)
    return system, system.x0, system.p_nominal, truth["t"], system.t0, truth


def run(system, y0, params, times, t0, truth, method, controls, repeats):
    from pymc_odesens import OdeSolverError, solve_sensitivity

    def call():
        return solve_sensitivity(system, y0, times, params, t0=t0, method=method, **controls)

    try:
        timing = common.time_call(call, repeats=repeats, max_seconds=5.0)
    except OdeSolverError as error:
        return {"method": method, "failed": type(error).__name__, "message": str(error)[:200]}
    result = timing["result"]
    return {
        "method": method,
        "median_ms": timing["median_ms"],
        "n_steps": result.stats["n_steps"],
        "y_scaled_err": common.scaled_error(result.y, truth["y"], axis=0),
        "rtol": float(result.controls.relative_tolerance),
        "atol": float(np.max(result.controls.absolute_tolerance)),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(NON_STIFF + STIFF))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--max-steps", type=int, default=100_000)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load_start = report_load("at start")
    results: dict = {"models": {}}
    for name in args.models.split(","):
        system, y0, params, times, t0, truth = reference_model(name)
        progress(f"{name}: {system.n_states} states, {system.n_params} parameters")
        rows = {"stan_defaults": [], "common_tolerance": []}
        for method in METHODS:
            cap = {} if method in ("bdf", "adams") else {"max_num_steps": args.max_steps}
            rows["stan_defaults"].append(
                run(system, y0, params, times, t0, truth, method, cap, args.repeats)
            )
            rtol, atol = COMMON_TOLERANCE
            controls = dict(cap, relative_tolerance=rtol, absolute_tolerance=atol)
            rows["common_tolerance"].append(
                run(system, y0, params, times, t0, truth, method, controls, args.repeats)
            )
        results["models"][name] = {
            "stiff": name in STIFF,
            "n_states": system.n_states,
            "n_params": system.n_params,
            "n_times": len(times),
            **rows,
        }
        table = []
        for setting, label in (
            ("stan_defaults", "Stan's defaults"),
            ("common_tolerance", "1e-6/1e-8"),
        ):
            bdf = next(r for r in rows[setting] if r["method"] == "bdf")
            for r in rows[setting]:
                if "failed" in r:
                    table.append([label, r["method"], "failed", "-", "-", r["failed"]])
                    continue
                ratio = bdf.get("median_ms", np.nan) / r["median_ms"]
                table.append(
                    [
                        label,
                        r["method"],
                        fmt_ms(r["median_ms"]),
                        r["n_steps"],
                        f"{r['y_scaled_err']:.1e}",
                        f"{ratio:.2f}x",
                    ]
                )
        print_table(
            ["tolerances", "method", "ms", "steps", "y err", "bdf time / this"],
            table,
            title=f"\n{name} (forward sensitivities, {len(times)} output times)",
        )
    common.finish_run("bench_method_choice", results, [], load_start, started)


if __name__ == "__main__":
    main()
