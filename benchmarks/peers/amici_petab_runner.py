"""Time AMICI on a PEtab problem.  Runs INSIDE the AMICI virtualenv.

Started by ``benchmarks/peers/amici.py`` (``run_amici_petab``) with the interpreter of the
AMICI virtualenv; never imports pymc_odesens; prints one JSON document to stdout (progress
to stderr).

What it does
------------
1. Builds the problem's AMICI model with ``amici.importers.petab.v1.import_petab_problem``
   (AMICI's defaults: non-estimated parameters as constants) into
   ``<cache>/amici_petab/<problem>_<hash>`` (hash of the problem's files and the AMICI
   version) and records the wall time of that build (``build_s``: SBML import, C++ code
   generation and compilation). Later runs import the built model and report the build
   time recorded then (``build_cached: true``); ``--rebuild`` builds again.
2. At the given tolerances (``--rtol``, ``--atol``: integration, forward sensitivities and
   the adjoint's backward problem and quadratures alike; steady states keep AMICI's own
   defaults unless ``--steady-state-rtol/atol`` are given; ``--max-steps``: the steps
   allowed between output times, forward and backward, AMICI's default 10 000 otherwise),
   with the parameter mapping and ``ExpData`` objects created once, times ``simulate_petab``
   at the nominal parameters:

   llh       the log-likelihood alone (no sensitivities);
   forward   log-likelihood and gradient by forward sensitivities;
   adjoint   log-likelihood and gradient by the adjoint method.

   Each is the median wall time of ``--repeats`` calls after one warm-up call (fewer when
   they take more than 10 s in all); ``cpu_ms`` is AMICI's own ``cpu_time_total`` summed
   over the conditions, ``preeq_cpu_ms`` its pre-equilibration part (steady state and, in
   the gradient modes, its sensitivities or adjoint). Gradients are on the parameter scale
   (``scaled_gradients=True``), in ``petab_problem.x_free_ids`` order.

CLI
---
    python amici_petab_runner.py --yaml problem.yaml --modes llh,forward,adjoint \
        --rtol 1e-8 --atol 1e-16 --repeats 10
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

# this file's folder also holds the main environment's ``amici.py`` wrapper: never let it
# shadow the real AMICI package
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != _HERE]

import numpy as np  # noqa: E402

MODES = ("llh", "forward", "adjoint")
RUNNER_VERSION = "1"


def log(message: str) -> None:
    print(f"[amici-petab] {message}", file=sys.stderr, flush=True)


def _cache_dir() -> Path:
    base = os.environ.get("PYMC_ODESENS_BENCH_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "pymc_odesens_bench"
    return root / "amici_petab"


def _problem_hash(yaml_path: Path) -> str:
    import amici

    digest = hashlib.sha256()
    for path in sorted(yaml_path.parent.glob("*")):
        if path.is_file() and path.suffix in (".yaml", ".tsv", ".xml"):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    digest.update(amici.__version__.encode())
    digest.update(RUNNER_VERSION.encode())
    return digest.hexdigest()[:12]


def build_model(problem, yaml_path: Path, rebuild: bool):
    """``(model, build_s, cached)``: the AMICI model, its build time, whether it was cached."""
    from amici.importers.petab.v1 import import_petab_problem

    name = yaml_path.stem
    out_dir = _cache_dir() / f"{name}_{_problem_hash(yaml_path)}"
    record = out_dir.parent / f"{out_dir.name}.json"
    module_name = f"amici_{name}"
    if rebuild and out_dir.exists():
        shutil.rmtree(out_dir)
    if out_dir.exists() and record.exists():
        model = import_petab_problem(
            problem, output_dir=out_dir, model_name=module_name, compile_=False
        )
        return model, json.loads(record.read_text())["build_s"], True
    if out_dir.exists():
        shutil.rmtree(out_dir)
    log(f"building {name} (minutes)")
    start = time.perf_counter()
    model = import_petab_problem(problem, output_dir=out_dir, model_name=module_name, compile_=True)
    build_s = time.perf_counter() - start
    record.write_text(json.dumps({"build_s": build_s}))
    log(f"built {name} in {build_s:.1f} s")
    return model, build_s, False


def _median_ms(call, repeats: int):
    result = call()  # warm-up
    samples = []
    total = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        elapsed = time.perf_counter() - start
        samples.append(1e3 * elapsed)
        total += elapsed
        if total > 10.0 and len(samples) >= 3:
            break
    return statistics.median(samples), samples, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--yaml", required=True)
    parser.add_argument("--modes", default="llh,forward,adjoint")
    parser.add_argument("--rtol", type=float, default=1e-8)
    parser.add_argument("--atol", type=float, default=1e-16)
    parser.add_argument("--steady-state-rtol", type=float, default=None)
    parser.add_argument("--steady-state-atol", type=float, default=None)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()

    import amici
    import amici.sim.sundials as asim
    import petab.v1 as petab
    from amici.sim.sundials.petab.v1 import LLH, RDATAS, SLLH, create_edatas, simulate_petab
    from amici.sim.sundials.petab.v1._parameter_mapping import create_parameter_mapping

    yaml_path = Path(args.yaml).resolve()
    problem = petab.Problem.from_yaml(str(yaml_path))
    flattened = petab.lint.measurement_table_has_timepoint_specific_mappings(
        problem.measurement_df, allow_scalar_numeric_noise_parameters=True
    )
    if flattened:
        # AMICI needs one override set per observable and condition: flatten as AMICI's own
        # benchmark tests do (observables per override set; the log-likelihood is the same)
        petab.flatten_timepoint_specific_output_overrides(problem)
    model, build_s, cached = build_model(problem, yaml_path, args.rebuild)
    conditions = problem.get_simulation_conditions_from_measurement_df()
    edatas = create_edatas(
        amici_model=model, petab_problem=problem, simulation_conditions=conditions
    )
    mapping = create_parameter_mapping(
        petab_problem=problem,
        simulation_conditions=conditions,
        scaled_parameters=True,
        amici_model=model,
    )
    out = {
        "problem": yaml_path.stem,
        "amici_version": amici.__version__,
        "build_s": build_s,
        "build_cached": cached,
        "nx": int(model.nx_solver),
        "np": int(model.np()),
        "rtol": args.rtol,
        "atol": args.atol,
        "max_steps": args.max_steps,
        "x_free_ids": list(problem.x_free_ids),
        "flattened": bool(flattened),
        "modes": {},
    }
    for mode in args.modes.split(","):
        if mode not in MODES:
            raise SystemExit(f"unknown mode {mode!r}; modes: {MODES}")
        solver = model.create_solver()
        solver.set_relative_tolerance(args.rtol)
        solver.set_absolute_tolerance(args.atol)
        solver.set_relative_tolerance_quadratures(args.rtol)
        solver.set_absolute_tolerance_quadratures(args.atol)
        solver.set_relative_tolerance_b(args.rtol)
        solver.set_absolute_tolerance_b(args.atol)
        if args.max_steps is not None:
            solver.set_max_steps(args.max_steps)
            solver.set_max_steps_backward_problem(args.max_steps)
        if args.steady_state_rtol is not None:
            solver.set_relative_tolerance_steady_state(args.steady_state_rtol)
        if args.steady_state_atol is not None:
            solver.set_absolute_tolerance_steady_state(args.steady_state_atol)
        if mode == "llh":
            solver.set_sensitivity_order(asim.SensitivityOrder.none)
        else:
            solver.set_sensitivity_order(asim.SensitivityOrder.first)
            method = (
                asim.SensitivityMethod.forward
                if mode == "forward"
                else asim.SensitivityMethod.adjoint
            )
            solver.set_sensitivity_method(method)

        def call(solver=solver):
            return simulate_petab(
                problem,
                amici_model=model,
                solver=solver,
                edatas=edatas,
                parameter_mapping=mapping,
                scaled_parameters=True,
                scaled_gradients=True,
            )

        log(f"{yaml_path.stem}: {mode}")
        median, samples, result = _median_ms(call, args.repeats)
        rdatas = result[RDATAS]
        statuses = sorted({int(r.status) for r in rdatas})
        entry = {
            "median_ms": median,
            "samples_ms": samples,
            "llh": float(result[LLH]),
            "status": statuses,
            "cpu_ms": float(sum(float(r.cpu_time_total or 0.0) for r in rdatas)),
            "preeq_cpu_ms": float(
                sum(
                    float(r.preeq_cpu_time or 0.0) + float(r.preeq_cpu_time_b or 0.0)
                    for r in rdatas
                )
            ),
        }
        if mode != "llh" and result.get(SLLH) is not None:
            gradient = result[SLLH]
            entry["gradient"] = [float(gradient[k]) for k in problem.x_free_ids]
        out["modes"][mode] = entry
    print(json.dumps(out))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
