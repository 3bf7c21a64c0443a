"""First use of an SBML model in one fresh process: import, ``OdeSystem.from_sbml``, first
solve, a second solve, first forward sensitivities, first adjoint gradient (seconds, JSON on
the last line of stdout). Needs the SBML importer (branch ``sbml`` until it lands on main).

Usage::

    PYMC_ODESENS_CACHE_DIR=/tmp/k python benchmarks/first_use_sbml.py model.xml [t_end] [solve]

Run it twice on the same cache directory: the first process is cold (empty kernel cache),
the second warm. bdf at rtol 1e-6 / atol 1e-8 on 20 output times in ``(0, t_end]`` (default
100), from the model's initial state and nominal parameters; ``solve`` as third argument
stops after the solves. The numbers of Chen_MSB2009 are in results/bench_large_chen.json.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def main(path: str, t_end: float, solve_only: bool) -> dict:
    out: dict = {}

    def tic(key, fn):
        start = time.perf_counter()
        result = fn()
        out[key] = round(time.perf_counter() - start, 2)
        print(key, out[key], file=sys.stderr, flush=True)
        return result

    pos = tic("import", lambda: __import__("pymc_odesens"))
    system = tic("construct", lambda: pos.OdeSystem.from_sbml(path))
    out["n_states"], out["n_params"] = system.n_states, system.n_params
    times = np.linspace(0.0, t_end, 21)[1:]
    controls = dict(method="bdf", relative_tolerance=1e-6, absolute_tolerance=1e-8)
    solution = tic(
        "first_solve", lambda: pos.solve(system, None, times, system.p_nominal, **controls)
    )
    out["solve_steps"] = int(solution.stats["n_steps"])
    tic("second_solve", lambda: pos.solve(system, None, times, system.p_nominal, **controls))
    if not solve_only:
        tic(
            "first_forward",
            lambda: pos.solve_sensitivity(system, None, times, system.p_nominal, **controls),
        )
        cotangent = np.ones((times.size, system.n_states))
        tic(
            "first_adjoint",
            lambda: pos.adjoint_gradient(system, None, times, system.p_nominal, cotangent),
        )
    return out


if __name__ == "__main__":
    arguments = sys.argv[1:]
    result = main(
        arguments[0],
        float(arguments[1]) if len(arguments) > 1 else 100.0,
        arguments[2:3] == ["solve"],
    )
    print(json.dumps(result), flush=True)
