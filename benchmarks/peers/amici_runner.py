"""Time AMICI (CVODES) on a shared/models JSON model.  Runs INSIDE the AMICI virtualenv.

This script never imports pymc_odesens: it is started by ``benchmarks/peers/amici.py``
with the interpreter of a separate virtualenv holding ``amici`` (>= 1.0), ``python-libsbml``
and ``sympy``, and prints one JSON document to stdout (progress goes to stderr).

What it does
------------
1. Converts the JSON model to SBML with libsbml: one compartment of size 1; every state is a
   species (``hasOnlySubstanceUnits``, initial amount = ``x0``) driven by a rate rule; every
   parameter is a constant SBML parameter (value = ``p_nominal``); every intermediate of
   ``expressions`` is a non-constant parameter with an assignment rule.  All identifiers are
   renamed (``x_i``, ``p_k``, ``w_j``) so that model names never clash with SBML/L3-parser
   reserved words; the JSON's ``t`` is SBML ``time``.
2. Builds the AMICI model once into ``<cache>/amici/<model>_<hash>`` (hash of the SBML text,
   the observation model and the AMICI version).  The one observable per state is
   ``y_i = x_i`` with normal noise of fixed ``sigma`` (default 1).  Later runs import it.
3. Times, at the given tolerances (``--tolerances rtol/atol,...`` or ``--rtol --atol``),
   output times = the truth file's ``t`` (61 points on [t0, t_end] when there is none):

   plain    simulation without sensitivities;
   forward  forward sensitivities of every state w.r.t. every parameter (no data);
            ``S`` is compared with the truth file;
   adjoint  gradient of the Gaussian log-likelihood
            ``sum_{t,i} log N(data[t, i] | y_i(t), sigma^2)`` w.r.t. all parameters,
            i.e. the vector-Jacobian product.  ``data = data_scale * y_truth`` (default
            ``data_scale = 1.1``: with data equal to the truth the residuals, and with them
            the adjoint state, would be ~1e-9, a trivially easy backward problem).  The
            gradient is checked against ``sum_{t,i} (data - y_truth)/sigma^2 * S_truth``.

   Each timing is the median wall time of ``--repeats`` calls of
   ``amici.sim.sundials.run_simulation`` after one warm-up call (``median_ms``: what a Python
   user waits for); ``core_median_ms`` times the underlying C++ ``run_simulation`` without
   the Python ``ReturnDataView`` wrapping, and ``amici_cpu_ms`` is AMICI's own ``cpu_time``
   (+ ``cpu_time_b``) of the integration alone.
   AMICI's defaults are kept (CVODES BDF, AMICI's default linear solver, staggered
   forward sensitivities, Hermite interpolation for the adjoint, forward-sensitivity and
   backward tolerances following the state tolerances) except: the tolerances (the
   quadrature tolerances of the adjoint gradient are set to rtol/atol as well);
   ``max_steps`` (1e8; 1e5 in the adjoint mode, where it also sizes CVODES' checkpoint
   storage); parameter scaling, which is switched off (plain linear parameters); and, with
   ``--lmm adams``, stability-limit detection (CVODES allows it for BDF only).
   Fewer than ``--repeats`` calls are timed when they take more than 3 s in all.

CLI
---
    python amici_runner.py --model pka --modes plain,forward,adjoint \
        --rtol 1e-6 --atol 1e-8 --repeats 20 --models-dir /work/shared/models
"""

from __future__ import annotations

import argparse
import contextlib
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

MODES = ("plain", "forward", "adjoint")
RUNNER_VERSION = "1"  # bump to force a rebuild of every cached AMICI model


def log(message: str) -> None:
    print(f"[amici] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- SBML export


def _formula(expr) -> str:
    """A sympy expression as an SBML Level 3 infix formula (``^`` for powers)."""
    import sympy as sp

    text = sp.sstr(expr, full_prec=True)
    return text.replace("**", "^")


def model_to_sbml(spec: dict) -> tuple[str, dict]:
    """SBML text of a shared/models JSON spec and the id mapping used."""
    import libsbml
    import sympy as sp

    states, params = spec["states"], spec["parameters"]
    ids = {name: f"x_{i}" for i, name in enumerate(states)}
    ids.update({name: f"p_{k}" for k, name in enumerate(params)})
    names = {name: sp.Symbol(ids[name]) for name in (*states, *params)}
    names["t"] = sp.Symbol("time")
    expression_ids = {}
    for j, name in enumerate(spec.get("expressions", {})):
        expression_ids[name] = f"w_{j}"
    document = libsbml.SBMLDocument(3, 1)
    model = document.createModel()
    model.setId(f"bench_{spec['name']}")
    compartment = model.createCompartment()
    compartment.setId("c")
    compartment.setSize(1.0)
    compartment.setConstant(True)
    compartment.setSpatialDimensions(3)
    for i, _name in enumerate(states):
        species = model.createSpecies()
        species.setId(f"x_{i}")
        species.setCompartment("c")
        species.setInitialAmount(float(spec["x0"][i]))
        species.setHasOnlySubstanceUnits(True)
        species.setBoundaryCondition(False)
        species.setConstant(False)
    for k, _name in enumerate(params):
        parameter = model.createParameter()
        parameter.setId(f"p_{k}")
        parameter.setValue(float(spec["p_nominal"][k]))
        parameter.setConstant(True)

    def math_of(text: str, where: str):
        expr = sp.sympify(text, locals=names)
        formula = _formula(expr)
        ast = libsbml.parseL3Formula(formula)
        if ast is None:
            raise ValueError(f"{where}: libsbml cannot parse {formula!r}")
        return ast

    for name, text in spec.get("expressions", {}).items():
        wid = expression_ids[name]
        parameter = model.createParameter()
        parameter.setId(wid)
        parameter.setConstant(False)
        rule = model.createAssignmentRule()
        rule.setVariable(wid)
        rule.setMath(math_of(text, f"expressions[{name}]"))
        names[name] = sp.Symbol(wid)  # later entries refer to the intermediate by its id
    for i, text in enumerate(spec["rhs"]):
        rule = model.createRateRule()
        rule.setVariable(f"x_{i}")
        rule.setMath(math_of(text, f"rhs[{i}]"))
    sbml = libsbml.writeSBMLToString(document)
    return sbml, {"states": ids, "expressions": expression_ids}


# ----------------------------------------------------------------------------- AMICI build


def cache_root() -> Path:
    base = os.environ.get("PYMC_ODESENS_BENCH_CACHE_DIR")
    if base:
        return Path(base) / "amici"
    return Path.home() / ".cache" / "pymc_odesens_bench" / "amici"


def build_model(spec: dict, sigma: float):
    """The AMICI model module of ``spec`` (built on first use, then imported from the cache)."""
    import amici

    sbml, _ = model_to_sbml(spec)
    n = len(spec["states"])
    key_text = json.dumps(
        [sbml, sigma, amici.__version__, RUNNER_VERSION, sys.version_info[:2]], sort_keys=True
    )
    digest = hashlib.sha256(key_text.encode()).hexdigest()[:12]
    module_name = f"bench_{spec['name']}_{digest}"
    out_dir = cache_root() / f"{spec['name']}_{digest}"
    marker = out_dir / ".built"
    info = {"directory": str(out_dir), "module": module_name, "cached": marker.exists()}
    if not marker.exists():
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
        (out_dir / "model.xml").write_text(sbml)
        # cmake must find swig, which lives next to this interpreter in the AMICI venv
        bin_dir = str(Path(sys.executable).parent)
        if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
        log(f"building AMICI model {module_name} in {out_dir} (one-time, may take minutes)")
        start = time.perf_counter()
        importer = amici.SbmlImporter(sbml, from_file=False)
        channels = [
            amici.MeasurementChannel(
                f"y_{i}", formula=f"x_{i}", noise_distribution="normal", sigma=float(sigma)
            )
            for i in range(n)
        ]
        # compiler output (also from child processes) must not corrupt our JSON on stdout
        sys.stdout.flush()
        saved_stdout = os.dup(1)
        os.dup2(2, 1)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                importer.sbml2amici(module_name, out_dir, observation_model=channels, verbose=False)
        finally:
            sys.stdout.flush()
            os.dup2(saved_stdout, 1)
            os.close(saved_stdout)
        info["build_seconds"] = time.perf_counter() - start
        marker.write_text(module_name)
        log(f"built in {info['build_seconds']:.1f} s")
    module = amici.import_model_module(module_name, out_dir)
    return module, info


# ----------------------------------------------------------------------------- timing


def _median_ms(fn, repeats: int, max_seconds: float = 3.0) -> tuple[float, list[float], object]:
    """Median of up to ``repeats`` timed calls after one warm-up (fewer past ``max_seconds``)."""
    result = fn()  # warm-up
    times = []
    while len(times) < max(repeats, 1) and sum(times) < max_seconds * 1e3:
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), times, result


def _core_call(model, solver, edata):
    """The C++ ``run_simulation`` without the Python ``ReturnDataView`` wrapping and logging
    that :func:`amici.sim.sundials.run_simulation` adds (private API: None if unavailable)."""
    try:
        from amici._installation import amici as swig

        ptrs = (swig._get_ptr(solver), swig._get_ptr(edata), swig._get_ptr(model))
        swig.run_simulation(*ptrs)
    except (ImportError, AttributeError, TypeError):
        return None
    return lambda: swig.run_simulation(*ptrs)


def _steps(rdata) -> dict:
    def last(name):
        try:
            value = np.asarray(getattr(rdata, name))
            return int(value[-1]) if value.size else None
        except (AttributeError, TypeError, ValueError, IndexError):
            return None

    def total(name):  # cumulative counters, backward ones run from the last output time
        try:
            value = np.asarray(getattr(rdata, name))
            return int(value.max()) if value.size else None
        except (AttributeError, TypeError, ValueError):
            return None

    stats = {
        "n_steps": last("numsteps"),
        "n_rhs_evals": last("num_rhs_evals"),
        "n_err_test_fails": last("num_err_test_fails"),
        "n_nonlin_conv_fails": last("num_non_lin_solv_conv_fails"),
    }
    steps_b = total("numsteps_b")
    if steps_b:
        stats["n_steps_backward"] = steps_b
        stats["n_rhs_evals_backward"] = total("num_rhs_evals_b")
    return stats


def scaled_error(value: np.ndarray, truth: np.ndarray, axis) -> float:
    """max over components of max|value - truth| / max|truth| (components with truth == 0
    are scaled by 1)."""
    scale = np.abs(truth).max(axis=axis, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    return float((np.abs(value - truth) / scale).max())


def run(args) -> dict:
    import amici
    import amici.sim.sundials as asim

    models_dir = Path(args.models_dir)
    spec = json.loads((models_dir / f"{args.model}.json").read_text())
    truth_path = models_dir / f"{args.model}_truth.npz"
    truth = dict(np.load(truth_path)) if truth_path.exists() else None
    if truth is not None:
        times = np.asarray(truth["t"], float)
    else:
        times = np.linspace(float(spec.get("t0", 0.0)), float(spec["t_end"]), 61)
    t0 = float(spec.get("t0", 0.0))
    n, p = len(spec["states"]), len(spec["parameters"])

    module, build_info = build_model(spec, args.sigma)
    model = module.get_model()
    model.set_parameter_scale(asim.ParameterScaling.none)
    model.set_free_parameters([float(v) for v in spec["p_nominal"]])
    model.set_t0(t0)
    model.set_timepoints([float(v) for v in times])
    model.require_sensitivities_for_all_parameters()
    if tuple(model.get_state_ids()) != tuple(f"x_{i}" for i in range(n)):
        raise RuntimeError(f"unexpected AMICI state order {model.get_state_ids()}")

    tolerances = [(args.rtol, args.atol)]
    if args.tolerances:
        tolerances = [
            tuple(float(v) for v in item.split("/")) for item in args.tolerances.split(",")
        ]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"unknown mode {m!r}; choose from {MODES}")

    data = None
    if truth is not None:
        data = args.data_scale * truth["y"]
    else:
        data = np.ones((times.size, n))

    out = {
        "model": args.model,
        "n_states": n,
        "n_params": p,
        "amici_version": amici.__version__,
        "n_times": int(times.size),
        "repeats": args.repeats,
        "sigma": args.sigma,
        "data_scale": args.data_scale,
        "linear_multistep_method": args.lmm,
        "build": build_info,
        "nx_solver": int(model.nx_solver),
        "results": [],
    }
    for rtol, atol in tolerances:
        entry = {"rtol": rtol, "atol": atol}
        for mode in modes:
            solver = model.create_solver()
            solver.set_relative_tolerance(rtol)
            solver.set_absolute_tolerance(atol)
            # max_steps is also CVodeAdjInit's number of steps between checkpoints, for
            # which CVODES allocates interpolation storage up front: 1e8 would exhaust
            # memory, so the adjoint mode uses 1e5 (every model here needs far fewer steps)
            solver.set_max_steps(10**5 if mode == "adjoint" else 10**8)
            # the quadrature (adjoint gradient) tolerances do not follow the state ones
            solver.set_relative_tolerance_quadratures(rtol)
            solver.set_absolute_tolerance_quadratures(atol)
            if args.lmm == "adams":
                solver.set_linear_multistep_method(asim.LinearMultistepMethod.adams)
                # AMICI enables BDF stability-limit detection by default; CVODES rejects it
                # for Adams
                solver.set_stability_limit_flag(False)
            edata = None
            if mode == "plain":
                solver.set_sensitivity_order(asim.SensitivityOrder.none)
            elif mode == "forward":
                solver.set_sensitivity_order(asim.SensitivityOrder.first)
                solver.set_sensitivity_method(asim.SensitivityMethod.forward)
            else:
                solver.set_max_steps_backward_problem(10**8)
                solver.set_sensitivity_order(asim.SensitivityOrder.first)
                solver.set_sensitivity_method(asim.SensitivityMethod.adjoint)
                edata = asim.ExpData(model)
                edata.set_timepoints([float(v) for v in times])
                edata.set_measurements([float(v) for v in data.ravel()])
                edata.set_noise_scales(float(args.sigma))

            def call(solver=solver, edata=edata):
                return asim.run_simulation(model, solver, edata)

            median, samples, rdata = _median_ms(call, args.repeats)
            res_n = len(samples)
            status = int(rdata.status)
            res = {
                "median_ms": median,
                "min_ms": min(samples),
                "n_timed": res_n,
                "amici_cpu_ms": float(rdata.cpu_time) + float(rdata.cpu_time_b or 0.0),
                "amici_cpu_total_ms": float(getattr(rdata, "cpu_time_total", 0.0) or 0.0),
                "status": status,
                **_steps(rdata),
            }
            core = _core_call(model, solver, edata)
            if core is not None:
                res["core_median_ms"] = _median_ms(core, args.repeats)[0]
            if status != asim.AMICI_SUCCESS:
                res["error"] = asim.simulation_status_to_str(status)
            else:
                x = np.asarray(rdata.x)
                if truth is not None:
                    res["y_max_abs_err"] = float(np.abs(x - truth["y"]).max())
                    res["y_scaled_err"] = scaled_error(x, truth["y"], axis=0)
                if mode == "forward" and truth is not None:
                    s = np.transpose(np.asarray(rdata.sx), (0, 2, 1))  # (T, P, N) -> (T, N, P)
                    diff = np.abs(s - truth["S"])
                    res["S_max_abs_err"] = float(diff.max())
                    res["S_max_abs_truth"] = float(np.abs(truth["S"]).max())
                    res["S_rel_err"] = float(diff.max() / max(np.abs(truth["S"]).max(), 1e-300))
                    res["S_scaled_err"] = scaled_error(s, truth["S"], axis=(0, 1))
                if mode == "adjoint":
                    grad = np.asarray(rdata.sllh, float)
                    res["llh"] = float(rdata.llh)
                    res["gradient"] = grad.tolist()
                    if truth is not None:
                        resid = (data - truth["y"]) / args.sigma**2
                        ref = np.einsum("ti,tik->k", resid, truth["S"])
                        res["gradient_rel_err"] = float(
                            np.abs(grad - ref).max() / max(np.abs(ref).max(), 1e-300)
                        )
            log(
                f"{args.model} {mode:7s} rtol={rtol:g} atol={atol:g}: {median:9.3f} ms "
                f"({res.get('n_steps')} steps) status={status}"
            )
            entry[mode] = res
        out["results"].append(entry)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="stem of a JSON file in --models-dir")
    parser.add_argument(
        "--models-dir",
        default=os.environ.get(
            "PYMC_ODESENS_MODELS_DIR",
            str(Path(__file__).resolve().parents[3] / "shared" / "models"),
        ),
    )
    parser.add_argument("--modes", default="plain,forward,adjoint")
    parser.add_argument("--rtol", type=float, default=1e-6)
    parser.add_argument("--atol", type=float, default=1e-8)
    parser.add_argument(
        "--tolerances", default="", help="several 'rtol/atol' pairs, comma separated"
    )
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--data-scale", type=float, default=1.1)
    parser.add_argument("--lmm", choices=("bdf", "adams"), default="bdf")
    parser.add_argument("--build-only", action="store_true")
    args = parser.parse_args(argv)
    if args.build_only:
        spec = json.loads((Path(args.models_dir) / f"{args.model}.json").read_text())
        _, info = build_model(spec, args.sigma)
        print(json.dumps({"model": args.model, "build": info}))
        return
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
