"""What compiling a model for nutpie costs per process: nutpie's own ``compile_pymc_model``
against ``pymc_odesens.compile_nutpie_model`` (callbacks cached across processes).

Run:  python benchmarks/bench_nutpie_compile.py [--problem Boehm_JProteomeRes2014] [--repeats 2]
      (writes results/bench_nutpie_compile.json)

The model is the one ``sample_posterior`` hands nutpie: the PEtab problem's model with its
observation parameters marginalised, in the coordinates whitened by a Laplace approximation.
Each measurement is a fresh process (PyTensor's and numba's caches of the graph warm, as
after a first run): first nutpie's compile, then ours with an empty callback cache (its
first process), then ours again ``--repeats`` times (later processes). Each child also
compares the two compiled log-densities at the chains' first start.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import textwrap

import common
from common import print_table, progress

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    from pymc_odesens.petab import PetabProblem
    from pymc_odesens.inference.laplace_start import laplace_approximation
    from pymc_odesens.inference.whitened_model import whitened_model
    from pymc_odesens.inference.nutpie_callbacks import compile_nutpie_model
    import nutpie

    problem = PetabProblem.from_yaml(sys.argv[1])
    model = problem.build_model(marginalize="auto")
    laplace = laplace_approximation(model, model.initial_point(), hessian="finite-differences")
    white = whitened_model(laplace).model
    compile = nutpie.compile_pymc_model if sys.argv[2] == "nutpie" else compile_nutpie_model
    began = time.perf_counter()
    compiled = compile(white, jitter_rvs=set())
    seconds = time.perf_counter() - began
    x = compiled.initial_point_func(0)
    value, _ = compiled.logp_func(x)
    print(json.dumps({
        "seconds": seconds,
        "cache_hits": getattr(compiled.compiled_logp_func, "_cache_hits", 0),
        "logp_at_start": float(value),
    }))
    """
)


def run(yaml: str, which: str, cache: str) -> dict:
    env = {**os.environ, "PYMC_ODESENS_CACHE_DIR": cache}
    return common.run_code_child(CHILD, [yaml, which], which, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", default="Boehm_JProteomeRes2014")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    common.report_load("before")
    yaml = str(common.petab_yaml(args.problem))
    rows, results = [], []
    with tempfile.TemporaryDirectory() as cache:
        progress("warming PyTensor's and numba's caches of the graph (nutpie's compile)")
        run(yaml, "nutpie", cache)
        plan = [("nutpie", "nutpie.compile_pymc_model")]
        plan += [("ours", "compile_nutpie_model, empty callback cache")]
        plan += [("ours", "compile_nutpie_model, later process")] * args.repeats
        for which, label in plan:
            result = {"which": which, "label": label, **run(yaml, which, cache)}
            progress(f"{label}: {result['seconds']:.1f} s")
            results.append(result)
            rows.append([label, f"{result['seconds']:.1f}", result["cache_hits"]])
    same = len({r["logp_at_start"] for r in results}) == 1
    print_table(
        ["compile", "seconds", "callback loaded"],
        rows,
        title=f"Compiling {args.problem} (marginalised, whitened) for nutpie, one process each",
    )
    print(f"log-density at the first start equal in every process: {same}")
    common.report_load("after")
    common.write_results(
        "bench_nutpie_compile",
        {"problem": args.problem, "results": results, "same_logp_at_start": same},
    )


if __name__ == "__main__":
    main()
