"""Marginalised observation parameters (issue 37.1): what qualifies on the benchmark problems,
and the cost of one log-density + gradient evaluation of the marginalised PyMC model
against the unmarginalised one.

Run:  python benchmarks/bench_marginal.py
      python benchmarks/bench_marginal.py --problems Boehm_JProteomeRes2014 --mode NUMBA
      (writes results/bench_marginal.json, or results/<name>.json with --output <name>)

For each problem of ``../shared/petab`` (``$PYMC_ODESENS_SHARED_DIR/petab``) at the
problem's default solver options: ``marginalizable_parameters()`` (how many estimated
parameters qualify, by kind, and how many do not, by reason), then both models'
``logp_dlogp_function`` (PyMC's, the one its NUTS calls: log-density and gradient in one
call) at the nominal point, timed warm (median), in PyTensor's default mode (FAST_RUN) or
``--mode NUMBA``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import time
from pathlib import Path

import common
import numpy as np
from common import fmt_ms, print_table, progress

PROBLEMS = (
    "Boehm_JProteomeRes2014",
    "Fujita_SciSignal2010",
    "Schwen_PONE2014",
    "Bachmann_MSB2011",
)


def problem_yaml(name: str) -> Path:
    shared = Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", common.REPO_DIR.parent / "shared"))
    return shared / "petab" / name / f"{name}.yaml"


def _reason_class(reason: str) -> str:
    """A short name of a report's reason (the first one, without ids)."""
    first = reason.split("; ")[0]
    for pattern, name in (
        ("dynamics", "a parameter of the dynamics"),
        ("laplace", "laplace noise"),
        ("inside a logarithm|other than as a factor", "offset or sum inside a logarithm"),
        ("noiseFormula of .* as", "noise formula of several parameters"),
        ("no closed form for the noise", "noise coupled by a marginalised scaling"),
        ("multiplied by", "multiplied by a marginalised parameter"),
        ("non-linearly", "non-linear in the observable"),
        ("estimate = 0", "not estimated"),
        ("different scales", "observables on different scales"),
        ("both by an observableFormula", "both observable and noise parameter"),
    ):
        if re.search(pattern, first):
            return name
    return first


def _evaluation(model, mode: str | None) -> dict:
    kwargs = {} if mode is None else {"mode": mode}
    start = time.perf_counter()
    function = model.logp_dlogp_function(ravel_inputs=True, **kwargs)
    function.set_extra_values({})
    point = model.initial_point()
    x = np.concatenate([np.ravel(point[v.name]) for v in function._grad_vars])
    logp, gradient = function(x)
    compile_s = time.perf_counter() - start
    timing = common.time_call(lambda: function(x), repeats=50, max_seconds=5.0)
    return {
        "free": int(x.size),
        "logp": float(logp),
        "finite": bool(np.isfinite(logp) and np.all(np.isfinite(gradient))),
        "compile_s": compile_s,
        "median_ms": timing["median_ms"],
        "n": timing["n"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--mode", default=None, help="PyTensor mode (default: FAST_RUN)")
    parser.add_argument("--output", default="bench_marginal")
    args = parser.parse_args()

    from pymc_odesens.petab import PetabProblem

    results = {}
    rows, reason_rows = [], []
    for name in args.problems.split(","):
        progress(f"{name}: reading")
        problem = PetabProblem.from_yaml(problem_yaml(name))
        report = problem.marginalizable_parameters()
        estimated = len(problem.parameters)
        listed = report[report["reason"] != "not estimated (estimate = 0)"]
        qualifying = listed[listed["marginalizable"]]
        kinds = collections.Counter(qualifying["kind"])
        reasons = collections.Counter(
            _reason_class(r) for r in listed.loc[~listed["marginalizable"], "reason"]
        )
        progress(f"{name}: the unmarginalised model")
        plain = _evaluation(problem.build_model(), args.mode)
        progress(f"{name}: the marginalised model")
        marginal = _evaluation(problem.build_model(marginalize="auto"), args.mode)
        results[name] = {
            "estimated": estimated,
            "observation_parameters": int(len(listed)),
            "qualifying": {k: int(v) for k, v in kinds.items()},
            "not_qualifying": {k: int(v) for k, v in reasons.items()},
            "plain": plain,
            "marginal": marginal,
        }
        rows.append(
            [
                name,
                estimated,
                f"{len(qualifying)} ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))})",
                f"{plain['free']} -> {marginal['free']}",
                fmt_ms(plain["median_ms"]),
                fmt_ms(marginal["median_ms"]),
                f"{marginal['median_ms'] / plain['median_ms']:.2f}",
                "yes" if plain["finite"] and marginal["finite"] else "NO",
            ]
        )
        for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
            reason_rows.append([name, reason, count])
    print_table(
        [
            "problem",
            "estimated",
            "marginalised",
            "free RVs",
            "plain ms",
            "marginal ms",
            "ratio",
            "finite",
        ],
        rows,
        title=f"log-density + gradient at the nominal point ({args.mode or 'FAST_RUN'}, median)",
    )
    print_table(
        ["problem", "why an observation parameter does not qualify", "count"],
        reason_rows,
    )
    path = common.write_results(args.output, {"mode": args.mode or "FAST_RUN", **results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
