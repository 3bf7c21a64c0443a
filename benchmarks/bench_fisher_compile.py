"""What building and compiling the Fisher information's function of a PEtab problem costs:
the package's Jacobian-vector products (each Op's ``R_op``, broadcasts differentiated at
their core) against the former ones (PyTensor's double ``L_op`` through the whole graph).

Run:  python benchmarks/bench_fisher_compile.py [--problems Boehm_JProteomeRes2014 ...]
      [--repeats 2]   (writes results/bench_fisher_compile.json)

The function is the one ``find_modes``' trust region compiles (``ModeObjective``: the
log-posterior, its gradient, the log-likelihood and the Fisher information of the full
model, parameters on their own scale). Each measurement is a fresh process with the
package's kernel caches warm (a warm-up process first), the two routes alternating; each
child reports the graph's construction, PyTensor's compile, the nodes after rewriting, the
mean of 30 evaluations at three prior draws, and saves the metrics at those draws: the
script reports the largest relative difference between the routes.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import textwrap

import common
import numpy as np
from common import print_table, progress

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import pytensor.tensor as pt
    from pymc.pytensorf import compile as compile_pytensor
    from pytensor.gradient import Rop
    from pytensor.graph.replace import vectorize_graph
    import pymc_odesens.inference.smmala_metric as smmala_metric
    from pymc_odesens.inference.mode_objective import ModeObjective
    from pymc_odesens.petab import PetabProblem

    yaml, route, out = sys.argv[1:4]
    if route == "double L_op":  # the former route, for comparison
        def columns(f, x, size):
            direction = pt.vector("direction", dtype=x.dtype, shape=(size,))
            jvp = Rop(f.ravel(), x, direction)
            return vectorize_graph(jvp, replace={direction: pt.eye(size, dtype=x.dtype)}).T
        smmala_metric._jacobian_columns = columns
    objective = ModeObjective(PetabProblem.from_yaml(yaml).build_model())
    points = [objective.draw_start(np.random.SeedSequence(s)) for s in range(3)]
    began = time.perf_counter()
    graph = smmala_metric.smmala_graph(
        objective.optimisation_model, objective._value_vars, objective._point, {}, "forward",
        jacobian=False,
    )
    built = time.perf_counter()
    outputs = [graph.logp, graph.dlogp, graph.log_likelihood, graph.metric]
    function = compile_pytensor([graph.x], outputs)
    compiled = time.perf_counter()
    metrics = np.stack([np.array(function(x)[3]) for x in points])
    timed = time.perf_counter()
    for _ in range(10):
        for x in points:
            function(x)
    evaluation = (time.perf_counter() - timed) / 30
    np.save(out, metrics)
    print(json.dumps({
        "graph_seconds": built - began,
        "compile_seconds": compiled - built,
        "nodes_after_rewriting": len(function.maker.fgraph.apply_nodes),
        "evaluation_ms": 1e3 * evaluation,
    }))
    """
)

ROUTES = ("R_op", "double L_op")


def run(yaml: str, route: str, out: str) -> dict:
    return common.run_code_child(CHILD, [yaml, route, out], route)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", nargs="+", default=["Boehm_JProteomeRes2014"])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    common.report_load("before")
    rows, results = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for problem in args.problems:
            yaml = str(common.petab_yaml(problem))
            progress(f"{problem}: warming the kernel caches")
            run(yaml, ROUTES[0], os.path.join(scratch, "warm.npy"))
            metrics = {}
            for _ in range(args.repeats):
                for route in ROUTES:
                    out = os.path.join(scratch, f"{problem}_{ROUTES.index(route)}.npy")
                    result = {"problem": problem, "route": route, **run(yaml, route, out)}
                    metrics[route] = np.load(out)
                    progress(
                        f"{problem}, {route}: graph {result['graph_seconds']:.1f} s, compile "
                        f"{result['compile_seconds']:.1f} s"
                    )
                    results.append(result)
                    rows.append(
                        [
                            problem,
                            route,
                            f"{result['graph_seconds']:.1f}",
                            f"{result['compile_seconds']:.1f}",
                            result["nodes_after_rewriting"],
                            f"{result['evaluation_ms']:.2f}",
                        ]
                    )
            a, b = metrics[ROUTES[0]], metrics[ROUTES[1]]
            scale = np.nanmax(np.abs(b))
            difference = float(np.nanmax(np.abs(a - b)) / scale) if scale > 0 else 0.0
            same_nan = bool(np.array_equal(np.isnan(a), np.isnan(b)))
            results.append(
                {"problem": problem, "max_relative_difference": difference, "same_nan": same_nan}
            )
            print(f"{problem}: largest relative difference of the metrics {difference:.2e}")
    print_table(
        ["problem", "route", "graph s", "compile s", "nodes", "evaluation ms"],
        rows,
        title="The Fisher information's function of find_modes, one process each",
    )
    common.report_load("after")
    common.write_results("bench_fisher_compile", {"results": results})


if __name__ == "__main__":
    main()
