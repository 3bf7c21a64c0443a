"""The first hour of a new user: import, first solves, compiles and the sampler's overhead.

Run:  python benchmarks/bench_first_use.py            (about 10 to 20 minutes on 2 cores)
      python benchmarks/bench_first_use.py --sections import,solve
      python benchmarks/bench_first_use.py --package-root /tmp/other-checkout --output NAME

Every measurement runs in a fresh Python process, so that nothing is warm by accident, and
reports wall time next to the process's CPU time (on a shared machine the CPU time is the
steadier number). "cold" means empty caches: a fresh temporary directory for our generated
kernels (``PYMC_ODESENS_CACHE_DIR``), for numba's compile cache (``NUMBA_CACHE_DIR``: the
solvers' machine code) and for PyTensor's compile directory (``PYTENSOR_FLAGS=
base_compiledir=...``: its C code and its cache of NUMBA-mode graphs), as after a fresh
install. "new model" empties the kernel cache only (a model never solved before, on an
installation that has been used). "warm" repeats the run with the caches the previous one
filled.

Sections (``--sections``, default all):

1. ``import``: ``import pymc_odesens`` (without ops and inference), the same plus
   ``pymc_odesens.ode_solution`` (the ops layer, which imports pymc and pytensor), and
   ``import pymc`` alone for reference; median of ``--repeats`` processes.
2. ``solve``: a new small model (SIR: 3 states, 2 parameters, the boarding-school influenza
   data of Stan's case study), its first ``solve`` (rk45) and first ``solve`` with bdf,
   cold / new model / warm.
3. ``eval``: the first ``ode_solution(...).eval()`` of the same model (graph build with the
   kernels' compile, then PyTensor's compile and the first solve), and the first
   log-density + gradient of the SIR PyMC model, cold / new model / warm.
4. ``nutpie``: ``nutpie.compile_pymc_model`` of the SIR PyMC model and a short first sample
   (20 + 20 draws, 1 chain), cold / new model / warm.
5. ``nutpie_floor``: what nutpie and PyTensor cost without an ODE: ``compile_pymc_model`` of a
   pure-PyTensor model of the same size (the SIR model's priors, data and negative binomial
   likelihood, with a closed-form infected curve instead of the ODE Op), warm, alone and
   with ``pymc_odesens.ops`` imported (which gives scipy.special's digamma a NUMBA cache
   key); median of ``--repeats`` processes after one that fills the caches.
6. ``sample``: ``pm.sample`` (PyMC's NUTS) on the Lotka-Volterra model of
   ``examples/lotka_volterra.py`` (``--chains`` x (``--tune`` + ``--draws``), one core, the
   example's dense mass matrix), once per ``--sample-modes`` entry: ``default`` (PyTensor's
   default mode), ``numba`` (``compile_kwargs={"mode": "NUMBA"}``) and ``helper``
   (``pymc_odesens.sample``, if the package has it). Reported: sampling wall and CPU time
   (PyMC's ``sampling_time``, after compilation), the number of log-density + gradient
   evaluations (the sum of the leapfrog steps of every draw, tuning included), the time of
   one evaluation (the compiled function PyMC samples with, timed at every 8th draw's
   point), their product (the time the sampler spent in the model) and the overhead ratio
   sampling time / that product.

7. ``compile_profile``: where a cold first use spends its CPU time
   (``compile_profile_child.py``, empty caches): import, the AKAR4 model's first ``bdf``
   solve, forward sensitivities and adjoint, then its PyMC log-density and gradient in
   NUMBA mode and a short ``pymc_odesens.sample``; every function numba compiles, with its
   CPU seconds (inclusive and without its callees) and stage. ``--profile-model-only``
   profiles the PyMC model alone (what ``examples/akar4.py`` compiles).
8. ``cold_install`` (not in the default list: it takes many minutes): a new user's first
   run. A fresh virtual environment (``python -m venv --system-site-packages``, so that
   pymc, numba and the rest come from this interpreter and nothing is downloaded) gets
   the package from ``--package-root`` by ``pip install --no-deps`` (not editable; offline
   with ``--no-build-isolation`` when the installed setuptools can build it), and runs
   ``examples/akar4.py`` (``--cold-install-args``, default: its defaults, as README's first
   command) with empty caches (kernels, numba, PyTensor's compile directory) on a
   pseudo-terminal, as a user sees it; then once more on the same caches (the later run).
   Recorded: the process's wall and CPU time (its children's, the C compiler's included),
   the longest interval without output and where it ended, the example's own phase
   times (compiling and initialising, sampling, in all) and the whole transcript
   (``results/<output>_cold_install_{first,later}.txt``).

Results: ``benchmarks/results/<output>.json`` (default ``bench_first_use``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
from common import print_table, progress, report_load

SECTIONS = ("import", "solve", "eval", "nutpie", "nutpie_floor", "sample", "compile_profile")
EXTRA_SECTIONS = ("cold_install",)
SAMPLE_MODES = ("default", "numba", "helper", "nutpie")

# The SIR model of the boarding-school influenza outbreak (Stan case study "Bayesian
# workflow for disease transmission modeling"; data from the R package outbreaks,
# influenza_england_1978_school): 763 pupils, one infected at t = 0, 14 daily counts.
SIR_SOURCE = r"""
import numpy as np
from pymc_odesens import OdeSystem

CASES = np.array([3, 8, 26, 76, 225, 298, 258, 233, 189, 128, 68, 29, 14, 4])
TIMES = np.arange(1.0, 15.0)
POPULATION = 763.0


def sir(t, y, p):
    infection = p.beta * y.S * y.I / POPULATION
    return [-infection, infection - p.gamma * y.I, p.gamma * y.I]


def sir_system():
    return OdeSystem(sir, states=["S", "I", "R"], params=["beta", "gamma"], name="sir")


def sir_model(system):
    import pymc as pm
    from pymc_odesens import ode_solution

    with pm.Model() as model:
        beta = pm.LogNormal("beta", np.log(2.0), 0.5)
        gamma = pm.LogNormal("gamma", np.log(0.4), 0.5)
        phi_inv = pm.Exponential("phi_inv", 5.0)
        y = ode_solution(
            system, [POPULATION - 1.0, 1.0, 0.0], TIMES, [beta, gamma], method="rk45"
        )
        pm.NegativeBinomial("cases", mu=y[:, 1] + 1e-9, alpha=1.0 / phi_inv, observed=CASES)
    return model
"""

CLOCK = r"""
import json, sys, time
_wall0, _cpu0 = time.perf_counter(), time.process_time()
_last = [_wall0, _cpu0]


def stage(name, **extra):
    # one JSON line per stage: wall and CPU seconds since the previous stage
    wall, cpu = time.perf_counter(), time.process_time()
    print(json.dumps({"stage": name, "wall_s": wall - _last[0], "cpu_s": cpu - _last[1], **extra}),
          flush=True)
    _last[0], _last[1] = time.perf_counter(), time.process_time()
"""

CHILD_IMPORT = (
    CLOCK
    + r"""
what = sys.argv[1]
if what == "pymc":
    import pymc
else:
    import pymc_odesens
    if what == "pymc_layer":
        pymc_odesens.ode_solution
stage("import", pymc_loaded="pymc" in sys.modules, pytensor_loaded="pytensor" in sys.modules)
"""
)

CHILD_SOLVE = (
    CLOCK
    + r"""
import numpy as np
import pymc_odesens
from pymc_odesens import solve
stage("import", package=pymc_odesens.__file__)
exec(compile(SIR_SOURCE, "sir", "exec"))
system = sir_system()
stage("build")
y0, params = [POPULATION - 1.0, 1.0, 0.0], [1.7, 0.5]
solve(system, y0, TIMES, params, method="rk45")
stage("first_solve_rk45")
solve(system, y0, TIMES, params, method="rk45")
stage("second_solve_rk45")
solve(system, y0, TIMES, params, method="bdf")
stage("first_solve_bdf")
"""
)

CHILD_EVAL = (
    CLOCK
    + r"""
import numpy as np
import pymc_odesens
stage("import", package=pymc_odesens.__file__)
from pymc_odesens import ode_solution
stage("import_pymc_layer")
exec(compile(SIR_SOURCE, "sir", "exec"))
system = sir_system()
stage("build")
y = ode_solution(system, [POPULATION - 1.0, 1.0, 0.0], TIMES, [1.7, 0.5], method="rk45")
stage("graph")
y.eval()
stage("first_eval")
model = sir_model(system)
stage("model")
logp_dlogp = model.logp_dlogp_function(ravel_inputs=True)
logp_dlogp.set_extra_values({})
point = model.initial_point()
x = np.concatenate([np.ravel(point[v.name]) for v in logp_dlogp._grad_vars])
stage("logp_dlogp_compile")
logp_dlogp(x)
stage("first_logp_dlogp")
"""
)

CHILD_NUTPIE = (
    CLOCK
    + r"""
import numpy as np
import pymc_odesens
stage("import", package=pymc_odesens.__file__)
import nutpie
exec(compile(SIR_SOURCE, "sir", "exec"))
model = sir_model(sir_system())
stage("model")
compiled = nutpie.compile_pymc_model(model)
stage("compile")
nutpie.sample(compiled, draws=20, tune=20, chains=1, seed=1, progress_bar=False)
stage("first_sample")
"""
)

CHILD_NUTPIE_FLOOR = (
    CLOCK
    + r"""
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import nutpie
if sys.argv[1] == "with_pymc_odesens":
    import pymc_odesens.ops
stage("import")
CASES = np.array([3, 8, 26, 76, 225, 298, 258, 233, 189, 128, 68, 29, 14, 4])
TIMES = np.arange(1.0, 15.0)
with pm.Model() as model:
    beta = pm.LogNormal("beta", np.log(2.0), 0.5)
    gamma = pm.LogNormal("gamma", np.log(0.4), 0.5)
    phi_inv = pm.Exponential("phi_inv", 5.0)
    growth = pt.exp((beta - gamma) * TIMES)  # logistic growth, damped by recovery
    infected = growth / (1.0 + (growth - 1.0) / 763.0) * pt.exp(-gamma * TIMES / 4.0)
    pm.NegativeBinomial("cases", mu=infected + 1e-9, alpha=1.0 / phi_inv, observed=CASES)
stage("model")
compiled = nutpie.compile_pymc_model(model)
stage("compile")
"""
)

CHILD_SAMPLE = (
    CLOCK
    + r"""
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pymc_odesens
from pymc_odesens import OdeSystem, ode_solution, solve
stage("import", package=pymc_odesens.__file__)
mode, model_path, draws, tune, chains = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
system = OdeSystem.from_json(model_path)
times = np.linspace(system.t0, system.t_end, 21)[1:]
exact = solve(system, system.x0, times, system.p_nominal, t0=system.t0, method="rk45",
              relative_tolerance=1e-10, absolute_tolerance=1e-10).y
data = exact * np.exp(np.random.default_rng(3).normal(0.0, 0.1, size=exact.shape))
with pm.Model() as model:  # examples/lotka_volterra.py
    rates = pm.LogNormal("rates", mu=0.0, sigma=1.0, shape=4)
    y0 = pm.LogNormal("y0", mu=0.0, sigma=1.0, shape=2)
    sigma = pm.LogNormal("sigma", mu=-1.0, sigma=1.0, shape=2)
    y = ode_solution(system, y0, times, rates, t0=system.t0, method="rk45", max_num_steps=10_000)
    pm.LogNormal("populations", mu=pt.log(pt.maximum(y, 1e-12)), sigma=sigma, observed=data)
stage("model")
names = [v.name for v in model.value_vars]
points, steps, draw_cpu = [], [], []


def callback(trace, draw):
    points.append(np.concatenate([np.ravel(draw.point[n]) for n in names]))
    steps.append(int(draw.stats[0]["tree_size"]))  # leapfrog steps of this draw
    draw_cpu.append(float(draw.stats[0]["process_time_diff"]))


compile_kwargs = {"mode": "NUMBA"} if mode in ("numba", "nutpie") else {}
if mode == "helper":
    compile_kwargs = pymc_odesens.sampling_compile_kwargs(model)
wall, cpu = time.perf_counter(), time.process_time()
if mode == "nutpie":
    import nutpie

    compiled = nutpie.compile_pymc_model(model)
    compile_wall, compile_cpu = time.perf_counter() - wall, time.process_time() - cpu
    idata = nutpie.sample(compiled, draws=draws, tune=tune, chains=chains, cores=1, seed=3,
                          progress_bar=False, save_warmup=True)
    tree = np.concatenate([idata.warmup_sample_stats["n_steps"].values.ravel(),
                           idata.sample_stats["n_steps"].values.ravel()])
    steps = [int(s) for s in tree]
    posterior = idata.warmup_posterior if "warmup_posterior" in idata else idata.posterior
    divergences = int(idata.sample_stats["diverging"].sum())
    sampling_wall = time.perf_counter() - wall - compile_wall
    sampling_cpu = time.process_time() - cpu - compile_cpu
else:
    kwargs = dict(draws=draws, tune=tune, chains=chains, cores=1, random_seed=3,
                  init="jitter+adapt_full", progressbar=False, callback=callback,
                  discard_tuned_samples=False, compile_kwargs=compile_kwargs)
    sample = pymc_odesens.sample if mode == "helper" else pm.sample
    with model:
        idata = sample(**kwargs)
    sampling_wall = float(idata.sample_stats.attrs.get("sampling_time", float("nan")))
    sampling_cpu = float(np.sum(draw_cpu))
    divergences = int(idata.sample_stats["diverging"].sum())
total_wall, total_cpu = time.perf_counter() - wall, time.process_time() - cpu
stage("sample", sample_wall_s=total_wall, sample_cpu_s=total_cpu, sampling_wall_s=sampling_wall,
      sampling_cpu_s=sampling_cpu, n_evaluations=int(sum(steps)), n_draws=len(steps),
      divergences=divergences)
logp_dlogp = model.logp_dlogp_function(ravel_inputs=True, **compile_kwargs)
logp_dlogp.set_extra_values({})
x0 = np.concatenate([np.ravel(model.initial_point()[n]) for n in names])
logp_dlogp(x0)
if not points:  # nutpie: its draws (warm-up first); every free variable here is log-transformed
    for c in range(chains):
        for d in range(len(steps) // chains):
            group, draw = (idata.warmup_posterior, d) if d < tune else (idata.posterior, d - tune)
            values = [np.log(np.ravel(group[n.removesuffix("_log__")].values[c, draw]))
                      for n in names]
            points.append(np.concatenate(values))
eval_wall, eval_cpu = [], []
for k in range(0, len(points), 8):
    best_wall, best_cpu = float("inf"), float("inf")
    for _ in range(3):
        w, c = time.perf_counter(), time.process_time()
        for _ in range(10):
            logp_dlogp(points[k])
        best_wall = min(best_wall, (time.perf_counter() - w) / 10)
        best_cpu = min(best_cpu, (time.process_time() - c) / 10)
    eval_wall.append(best_wall)
    eval_cpu.append(best_cpu)
# every draw's trajectory costs tree_size evaluations, each about as long as one at its point
in_model_wall = sum(s * eval_wall[k // 8] for k, s in enumerate(steps))
in_model_cpu = sum(s * eval_cpu[k // 8] for k, s in enumerate(steps))
stage("evaluations", median_eval_ms=1e3 * float(np.median(eval_wall)),
      median_eval_cpu_ms=1e3 * float(np.median(eval_cpu)), in_model_wall_s=in_model_wall,
      in_model_cpu_s=in_model_cpu, overhead_ratio_wall=sampling_wall / in_model_wall,
      overhead_ratio_cpu=sampling_cpu / in_model_cpu,
      compile_mode=str(compile_kwargs.get("mode", "default")))
"""
)


def run_child(code: str, args: list[str], env: dict, label: str, timeout: float) -> dict:
    """Run ``code`` in a fresh interpreter (in a temporary directory); ``{stage: fields}``."""
    progress(f"  {label} ...")
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", f"SIR_SOURCE = {SIR_SOURCE!r}\n" + code, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        progress(f"    exceeded {timeout:.0f} s, stopped")
        return {"error": f"timeout after {timeout:.0f} s"}
    stages = {}
    for line in proc.stdout.splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and "stage" in data:
            stages[data.pop("stage")] = data
    stages["process_wall_s"] = time.perf_counter() - start
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        progress(f"    failed (exit {proc.returncode}):\n{tail}")
        stages["error"] = tail
    else:
        shown = ", ".join(
            f"{k} {v['wall_s']:.2f}/{v['cpu_s']:.2f}"
            for k, v in stages.items()
            if isinstance(v, dict)
        )
        progress(f"    {shown}  (wall/cpu s; process {stages['process_wall_s']:.1f} s)")
    return stages


class Environments:
    """Child environments: cold (all caches empty), new model (kernel cache empty), warm."""

    def __init__(self, root: Path, package_root: Path) -> None:
        self.root = root
        self.base = dict(os.environ)
        self.base["PYTHONPATH"] = os.pathsep.join(
            [str(package_root), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        self.base.pop("PYTENSOR_FLAGS", None)
        self.count = 0

    def fresh(self, *, numba: bool, pytensor: bool) -> dict:
        """An environment with a new kernel cache, and new numba / PyTensor caches if asked."""
        self.count += 1
        tag = self.root / f"env{self.count}"
        env = dict(self.base)
        env["PYMC_ODESENS_CACHE_DIR"] = str(tag / "kernels")
        if numba:
            env["NUMBA_CACHE_DIR"] = str(tag / "numba")
        if pytensor:
            env["PYTENSOR_FLAGS"] = f"base_compiledir={tag / 'pytensor'}"
        return env


def cold_new_warm(code, args, envs: Environments, label: str, timeout: float) -> dict:
    """The three first-use conditions of one child program."""
    cold = envs.fresh(numba=True, pytensor=True)
    out = {"cold": run_child(code, args, cold, f"{label}, cold (all caches empty)", timeout)}
    out["warm"] = run_child(code, args, cold, f"{label}, warm (same caches again)", timeout)
    # the usual numba and PyTensor caches must hold the solvers, as after any earlier use
    run_child(code, args, envs.fresh(numba=False, pytensor=False), "  (warm-up)", timeout)
    new = envs.fresh(numba=False, pytensor=False)
    out["new_model"] = run_child(
        code, args, new, f"{label}, new model (kernel cache empty)", timeout
    )
    return out


def bench_import(envs: Environments, repeats: int) -> dict:
    out = {}
    env = envs.fresh(numba=False, pytensor=False)
    run_child(CHILD_IMPORT, ["pymc_layer"], env, "import warm-up (file cache)", 300)
    for what in ("package", "pymc_layer", "pymc"):
        runs = [
            run_child(CHILD_IMPORT, [what], env, f"import {what} ({i + 1}/{repeats})", 300)
            for i in range(repeats)
        ]
        ok = [r["import"] for r in runs if "import" in r]
        out[what] = {
            "wall_s": statistics.median(r["wall_s"] for r in ok) if ok else None,
            "cpu_s": statistics.median(r["cpu_s"] for r in ok) if ok else None,
            "pymc_loaded": ok[0]["pymc_loaded"] if ok else None,
            "runs": ok,
        }
    rows = [
        [what, f"{d['wall_s']:.2f}", f"{d['cpu_s']:.2f}", d["pymc_loaded"]]
        for what, d in out.items()
        if d["wall_s"] is not None
    ]
    print_table(["import", "wall s", "cpu s", "pymc imported"], rows, title="\nImport (median)")
    return out


def _stage_cells(result: dict, stages: list[str]) -> list[str]:
    cells = []
    for name in stages:
        d = result.get(name)
        cells.append("-" if not isinstance(d, dict) else f"{d['wall_s']:.2f} / {d['cpu_s']:.2f}")
    return cells


def print_conditions(title: str, data: dict, stages: list[str]) -> None:
    rows = [[cond, *_stage_cells(data.get(cond, {}), stages)] for cond in data]
    print_table(["caches", *[f"{s} (wall / cpu s)" for s in stages]], rows, title=title)


def bench_sample(envs, args) -> dict:
    model_path = Path(args.package_root) / "examples" / "data" / "lotka_volterra.json"
    out = {}
    for mode in args.sample_modes:
        env = envs.fresh(numba=False, pytensor=False)
        child_args = [mode, str(model_path), str(args.draws), str(args.tune), str(args.chains)]
        label = f"pm.sample {mode}: {args.chains} chains x ({args.tune} + {args.draws}), 1 core"
        # a first run compiles the kernels and any NUMBA-mode graph; the second is measured
        run_child(CHILD_SAMPLE, [mode, str(model_path), "5", "5", "1"], env, "warm-up", 1800)
        out[mode] = run_child(CHILD_SAMPLE, child_args, env, label, 3600)
    rows = []
    for mode, d in out.items():
        s, e = d.get("sample", {}), d.get("evaluations", {})
        if not s or not e:
            continue
        rows.append(
            [
                mode,
                f"{s['sample_wall_s']:.1f} / {s['sample_cpu_s']:.1f}",
                f"{s['sampling_wall_s']:.1f} / {s['sampling_cpu_s']:.1f}",
                s["n_evaluations"],
                f"{e['median_eval_ms']:.3f} / {e['median_eval_cpu_ms']:.3f}",
                f"{e['in_model_wall_s']:.1f} / {e['in_model_cpu_s']:.1f}",
                f"{e['overhead_ratio_wall']:.2f} / {e['overhead_ratio_cpu']:.2f}",
            ]
        )
    print_table(
        [
            "mode",
            "whole call s",
            "sampling s",
            "logp+grad evals",
            "eval ms",
            "evals x eval s",
            "overhead ratio",
        ],
        rows,
        title=f"\npm.sample on Lotka-Volterra ({args.chains} x ({args.tune} + {args.draws})); "
        "each cell wall / cpu",
    )
    return out


def bench_nutpie_floor(envs: Environments, args) -> dict:
    out = {}
    env = envs.fresh(numba=False, pytensor=False)
    for variant in ("pytensor_only", "with_pymc_odesens"):
        run_child(CHILD_NUTPIE_FLOOR, [variant], env, f"floor {variant}: warm-up", args.timeout)
        runs = [
            run_child(
                CHILD_NUTPIE_FLOOR, [variant], env, f"floor {variant} ({i + 1})", args.timeout
            )
            for i in range(args.repeats)
        ]
        ok = [r["compile"] for r in runs if "compile" in r]
        out[variant] = {
            "compile_wall_s": statistics.median(r["wall_s"] for r in ok) if ok else None,
            "compile_cpu_s": statistics.median(r["cpu_s"] for r in ok) if ok else None,
            "runs": ok,
        }
    rows = [
        [name, f"{d['compile_wall_s']:.2f}", f"{d['compile_cpu_s']:.2f}"]
        for name, d in out.items()
        if d["compile_wall_s"] is not None
    ]
    print_table(
        ["model without ODE, warm", "compile wall s", "compile cpu s"],
        rows,
        title="\nnutpie floor (median)",
    )
    return out


def bench_compile_profile(envs: Environments, args) -> dict:
    """Section ``compile_profile``: one cold process with numba's compile events recorded."""
    child = Path(__file__).resolve().parent / "compile_profile_child.py"
    env = envs.fresh(numba=True, pytensor=True)
    command = [sys.executable, str(child), str(args.package_root)]
    if args.profile_model_only:
        command.append("--model-only")
    progress("  compile profile, cold (all caches empty) ...")
    started = time.perf_counter()
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        timeout=args.timeout,
    )
    stages, compiles = {}, []
    for line in proc.stdout.splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "stage" in data:
            stages[data.pop("stage")] = data
        elif "compiles" in data:
            compiles = data["compiles"]
    if proc.returncode != 0:
        progress("    failed:\n" + "\n".join(proc.stderr.strip().splitlines()[-6:]))
    per_stage: dict = {}
    for row in compiles:
        per_stage[row["stage"]] = per_stage.get(row["stage"], 0.0) + row["exclusive_s"]
    rows = [
        [name, f"{d['wall_s']:.1f}", f"{d['cpu_s']:.1f}", f"{per_stage.get(name, 0.0):.1f}"]
        for name, d in stages.items()
    ]
    print_table(
        ["stage", "wall s", "cpu s", "numba compiling, cpu s"],
        rows,
        title="\nCold first use of the AKAR4 model, stage by stage",
    )
    top = sorted(compiles, key=lambda r: -r["inclusive_s"])[:15]
    print_table(
        ["function", "stage", "signatures", "cpu s (with callees)", "cpu s (own)"],
        [
            [
                f"{r['module']}.{r['function']}",
                r["stage"],
                r["signatures"],
                f"{r['inclusive_s']:.1f}",
                f"{r['exclusive_s']:.1f}",
            ]
            for r in top
        ],
        title="\nThe longest numba compiles",
    )
    return {
        "stages": stages,
        "compiles": compiles,
        "process_wall_s": time.perf_counter() - started,
        "model_only": args.profile_model_only,
    }


def run_on_terminal(command: list[str], env: dict, cwd: Path, timeout: float) -> dict:
    """Run ``command`` on a pseudo-terminal (as a user sees it: PyMC's progress bar, our
    in-place notices); every chunk of output with its time.

    Returns ``{"returncode", "wall_s", "cpu_s" (the children's), "chunks": [(t, text)],
    "longest_silence_s", "silence_ended_at_s", "silence_ended_by"}``.
    """
    import pty
    import resource
    import select

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    main_fd, child_fd = pty.openpty()
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=child_fd, stdout=child_fd, stderr=child_fd, env=env, cwd=cwd
    )
    os.close(child_fd)
    chunks: list[tuple[float, str]] = []
    deadline = started + timeout
    while True:
        ready, _, _ = select.select([main_fd], [], [], 1.0)
        if ready:
            try:
                data = os.read(main_fd, 65536)
            except OSError:  # the child closed the terminal
                data = b""
            if not data:
                break
            chunks.append((time.perf_counter() - started, data.decode(errors="replace")))
        elif process.poll() is not None:
            break
        if time.perf_counter() > deadline:
            process.kill()
            chunks.append((time.perf_counter() - started, "\n[benchmark: timeout, killed]\n"))
            break
    returncode = process.wait()
    wall = time.perf_counter() - started
    os.close(main_fd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    longest, ended_at, ended_by, last = 0.0, 0.0, "", 0.0
    for t, text in [*chunks, (wall, "[end of the process]")]:
        if t - last > longest:
            longest, ended_at, ended_by = t - last, t, text.strip()[:160]
        last = t
    return {
        "returncode": returncode,
        "wall_s": wall,
        "cpu_s": cpu,
        "chunks": chunks,
        "longest_silence_s": longest,
        "silence_ended_at_s": ended_at,
        "silence_ended_by": ended_by,
    }


def _example_times(transcript: str) -> dict:
    """The example's own figures: its ``time:`` line and the sampler's phase line."""
    import re

    out = {}
    for key, pattern in (
        ("compiling_and_initialising_s", r"compiling and initialising ([0-9.]+) s"),
        ("sampling_s", r"sampling \(tuning and draws\) ([0-9.]+) s"),
        ("in_all_s", r"in all ([0-9.]+) s since the run started"),
        ("rhat_max", r"R-hat max ([0-9.]+)"),
    ):
        found = re.findall(pattern, transcript)
        if found:
            out[key] = float(found[-1])
    return out


def bench_cold_install(tmp: Path, package_root: Path, args) -> dict:
    """Section ``cold_install``: examples/akar4.py in a fresh virtual environment with
    empty caches, on a pseudo-terminal; then again on the same caches."""
    root = tmp / "cold_install"
    venv = root / "venv"
    progress(f"  creating a virtual environment in {venv} ...")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = [python, "-m", "pip", "install", "--no-deps", "--quiet", str(package_root)]
    began = time.perf_counter()
    done = subprocess.run([*install, "--no-build-isolation", "--no-index"], capture_output=True)
    how = "offline (--no-build-isolation --no-index)"
    if done.returncode != 0:  # the installed setuptools cannot build it: pip's own way
        done = subprocess.run(install, capture_output=True, text=True)
        how = "with build isolation (pip fetched the build requirements)"
    if done.returncode != 0:
        progress(f"    pip install failed:\n{done.stderr[-2000:]}")
        return {"error": "pip install failed"}
    install_s = time.perf_counter() - began
    where = subprocess.run(
        [python, "-c", "import pymc_odesens; print(pymc_odesens.__file__)"],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYMC_ODESENS_CACHE_DIR": str(root / "probe")},
    ).stdout.strip()
    progress(f"    installed {how} in {install_s:.0f} s: {where}")
    if str(venv) not in where:
        return {"error": f"the venv imports pymc_odesens from {where}, not its own copy"}
    env = dict(os.environ)
    env.pop("PYTENSOR_FLAGS", None)
    env.pop("PYTHONPATH", None)
    env.update(
        PYMC_ODESENS_CACHE_DIR=str(root / "kernels"),
        NUMBA_CACHE_DIR=str(root / "numba"),
        PYTENSOR_FLAGS=f"base_compiledir={root / 'pytensor'}",
        TERM=os.environ.get("TERM", "xterm"),
        COLUMNS="120",
    )
    example = package_root / "examples" / "akar4.py"
    command = [python, str(example), "--plot", str(root / "akar4_fit.png")]
    command += args.cold_install_args.split()
    out: dict = {"install": how, "install_s": install_s, "command": command[1:]}
    for run in ("first", "later"):
        load = report_load(f"before the {run} run")
        progress(f"  {run} run: {' '.join(command[1:])} ...")
        result = run_on_terminal(command, env, root, args.timeout)
        transcript = "".join(text for _, text in result.pop("chunks"))
        path = common.RESULTS_DIR / f"{args.output}_cold_install_{run}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(transcript)
        result.update(_example_times(transcript), load_before=load, transcript=str(path))
        result["load_after"] = report_load(f"after the {run} run")
        out[run] = result
        progress(
            f"    exit {result['returncode']}, wall {result['wall_s']:.0f} s, cpu "
            f"{result['cpu_s']:.0f} s, longest silence {result['longest_silence_s']:.1f} s "
            f"(ended at {result['silence_ended_at_s']:.0f} s by {result['silence_ended_by']!r})"
        )
    rows = [
        [
            run,
            f"{d['wall_s']:.0f}",
            f"{d['cpu_s']:.0f}",
            f"{d.get('compiling_and_initialising_s', float('nan')):.1f}",
            f"{d.get('sampling_s', float('nan')):.1f}",
            f"{d['longest_silence_s']:.1f}",
        ]
        for run, d in ((r, out[r]) for r in ("first", "later"))
    ]
    print_table(
        ["run", "wall s", "cpu s", "compile + init s", "sampling s", "longest silence s"],
        rows,
        title="\nexamples/akar4.py in a new virtual environment, empty caches, then again",
    )
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--package-root", default=str(common.REPO_DIR), help="checkout measured")
    parser.add_argument("--output", default="bench_first_use", help="results file name")
    parser.add_argument("--repeats", type=int, default=3, help="processes per import timing")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--tune", type=int, default=200)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--sample-modes", default="default,numba,helper,nutpie")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per process")
    parser.add_argument(
        "--profile-model-only",
        action="store_true",
        help="compile_profile: the PyMC model alone (no plain solves first)",
    )
    parser.add_argument(
        "--cold-install-args",
        default="",
        help="cold_install: arguments of examples/akar4.py (default: none, its defaults)",
    )
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    unknown = set(sections) - set(SECTIONS) - set(EXTRA_SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; known: {SECTIONS + EXTRA_SECTIONS}")
    args.sample_modes = [m for m in args.sample_modes.split(",") if m]
    if set(args.sample_modes) - set(SAMPLE_MODES):
        parser.error(f"--sample-modes must be among {SAMPLE_MODES}")
    package_root = Path(args.package_root).resolve()
    if "helper" in args.sample_modes and "sampling_compile_kwargs" not in _package_text(
        package_root
    ):
        progress("(pymc_odesens.sample does not exist in this checkout: no 'helper' mode)")
        args.sample_modes.remove("helper")
    started = time.perf_counter()
    load_start = report_load("at start")
    results: dict = {
        "package_root": str(package_root),
        "package_commit": _git_commit(package_root),
        "arguments": vars(args),
    }
    with tempfile.TemporaryDirectory(prefix="pymc_odesens_first_use_") as tmp:
        envs = Environments(Path(tmp), package_root)
        if "import" in sections:
            results["import"] = bench_import(envs, args.repeats)
        if "solve" in sections:
            data = cold_new_warm(CHILD_SOLVE, [], envs, "first solve", args.timeout)
            print_conditions(
                "\nA new small model (SIR), first solves",
                data,
                ["import", "first_solve_rk45", "first_solve_bdf"],
            )
            results["solve"] = data
        if "eval" in sections:
            data = cold_new_warm(CHILD_EVAL, [], envs, "first eval", args.timeout)
            print_conditions(
                "\nA new small model (SIR) in PyTensor: ode_solution(...).eval(), logp + grad",
                data,
                [
                    "import_pymc_layer",
                    "graph",
                    "first_eval",
                    "logp_dlogp_compile",
                    "first_logp_dlogp",
                ],
            )
            results["eval"] = data
        if "nutpie" in sections:
            data = cold_new_warm(CHILD_NUTPIE, [], envs, "nutpie", args.timeout)
            print_conditions(
                "\nnutpie on the SIR model", data, ["model", "compile", "first_sample"]
            )
            results["nutpie"] = data
        if "nutpie_floor" in sections:
            results["nutpie_floor"] = bench_nutpie_floor(envs, args)
        if "sample" in sections:
            results["sample"] = bench_sample(envs, args)
        if "compile_profile" in sections:
            results["compile_profile"] = bench_compile_profile(envs, args)
        if "cold_install" in sections:
            results["cold_install"] = bench_cold_install(Path(tmp), package_root, args)
        load_end = report_load("at end")
    results["load_average"] = {"start": load_start, "end": load_end}
    results["runtime_s"] = time.perf_counter() - started
    path = common.write_results(args.output, results)
    progress(f"\nresults written to {path} ({results['runtime_s']:.0f} s)")


def _git_commit(root: Path) -> str | None:
    try:
        return subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _package_text(package_root: Path) -> str:
    init = package_root / "pymc_odesens" / "__init__.py"
    return init.read_text() if init.exists() else ""


if __name__ == "__main__":
    main()
