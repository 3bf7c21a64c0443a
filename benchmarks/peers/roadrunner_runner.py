"""libRoadRunner's load and first-simulation times for SBML files (run in the AMICI venv).

Run by :mod:`benchmarks.peers.roadrunner` with the interpreter of the venv where
libroadrunner is installed; never imported by pymc_odesens or its tests. For each file:
``load_s`` (``RoadRunner(path)``: parse, and JIT-compile through LLVM), ``first_simulate_s``
(the first ``simulate`` over the output times, CVODE at the given tolerances) and
``simulate_s`` (the median of later ones). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+")
    parser.add_argument("--t-end", type=float, default=10.0)
    parser.add_argument("--points", type=int, default=51)
    parser.add_argument("--rtol", type=float, default=1e-8)
    parser.add_argument("--atol", type=float, default=1e-10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    started = time.perf_counter()
    import roadrunner

    results = {"import_s": time.perf_counter() - started, "version": roadrunner.__version__}
    for path in args.files:
        entry: dict = {}
        try:
            t0 = time.perf_counter()
            rr = roadrunner.RoadRunner(path)
            entry["load_s"] = time.perf_counter() - t0
            rr.integrator.relative_tolerance = args.rtol
            rr.integrator.absolute_tolerance = args.atol
            t0 = time.perf_counter()
            rr.simulate(0.0, args.t_end, args.points)
            entry["first_simulate_s"] = time.perf_counter() - t0
            times = []
            for _ in range(args.repeats):
                rr.reset()
                t0 = time.perf_counter()
                rr.simulate(0.0, args.t_end, args.points)
                times.append(time.perf_counter() - t0)
            entry["simulate_s"] = statistics.median(times)
        except Exception as err:  # noqa: BLE001 - reported per file
            entry["error"] = f"{type(err).__name__}: {err}"
        results[path] = entry
    print(json.dumps(results))


if __name__ == "__main__":
    main()
