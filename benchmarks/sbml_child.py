"""One SBML model's path from file to first solve, in stages (run by bench_sbml.py).

    python sbml_child.py <model.xml> <t_end> <points> <rtol> <atol> [<memory limit GB>]

prints one JSON line per stage as it ends: ``import`` (``import pymc_odesens`` and libsbml),
``read``
(``OdeSystem.from_sbml``: libsbml, MathML to sympy, the model's semantics), ``codegen``
(sympy derivatives, CSE and the kernel module's source, written to the cache), ``compile``
(numba compiles the two kernels a bdf solve needs, or loads them from its cache),
``first_solve`` (the first ``solve``: the solvers load from numba's cache) and ``solve`` (the
median of later solves). The process's address space is capped (default 6 GB): a model too
large to compile ends with an error instead of exhausting a shared machine's memory (numba
compiling Chen_MSB2009's kernels grows past 23 GB).
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time


def stage(name: str, started: float, **extra) -> float:
    now = time.perf_counter()
    print(json.dumps({"stage": name, "seconds": now - started, **extra}), flush=True)
    return now


def main() -> None:
    path, t_end, points, rtol, atol = sys.argv[1:6]
    limit = int(float(sys.argv[6] if len(sys.argv) > 6 else 6.0) * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    t = time.perf_counter()
    import libsbml  # noqa: F401 - imported by from_sbml; its import is part of "import"
    import numpy as np

    from pymc_odesens import OdeSystem, solve
    from pymc_odesens.codegen import compile_kernels

    t = stage("import", t)
    system = OdeSystem.from_sbml(path)
    t = stage("read", t, n_states=system.n_states, n_params=system.n_params)
    kernels = compile_kernels(system)
    t = stage("codegen", t, source_bytes=kernels.path.stat().st_size)
    kernels.rhs, kernels.jac_y  # noqa: B018 - compiles (or loads) the two kernels
    t = stage("compile", t)
    times = np.linspace(0.0, float(t_end), int(points))

    def run():
        return solve(
            system,
            system.x0,
            times,
            system.p_nominal,
            method="bdf",
            relative_tolerance=float(rtol),
            absolute_tolerance=float(atol),
        )

    result = run()
    t = stage("first_solve", t, n_steps=result.stats["n_steps"])
    durations = []
    for _ in range(5):
        t0 = time.perf_counter()
        run()
        durations.append(time.perf_counter() - t0)
    print(json.dumps({"stage": "solve", "seconds": statistics.median(durations)}), flush=True)


if __name__ == "__main__":
    main()
