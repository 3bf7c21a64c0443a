"""Where a cold first use spends its CPU time: one process, numba's compile events recorded.

Run by ``bench_first_use.py --sections compile_profile`` in a fresh process with empty caches
(kernel cache, numba cache, PyTensor's compile directory); it can also be run alone::

    NUMBA_CACHE_DIR=$(mktemp -d) PYMC_ODESENS_CACHE_DIR=$(mktemp -d) \
    PYTENSOR_FLAGS=base_compiledir=$(mktemp -d) python benchmarks/compile_profile_child.py

Stages, each a JSON line ``{"stage": name, "wall_s", "cpu_s"}`` (process CPU time: the
steadier number on a shared machine): ``import``, ``system`` (the AKAR4 model of
``examples/data/akar4.json``), ``first_solve_bdf``, ``first_forward_sensitivity``,
``first_adjoint``, ``import_ops``, ``model``, ``logp_dlogp_numba`` (PyMC's log-density and
gradient compiled in NUMBA mode, as ``pymc_odesens.sample`` does) and its first call,
``first_sample`` (1 chain of 5 + 5 draws). The last line, ``{"compiles": [...]}``, lists every
function numba compiled: module, name, number of signatures, inclusive and exclusive CPU
seconds (exclusive: without the compiles of its callees nested in it), and the stage.
"""

from __future__ import annotations

import atexit
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

_wall0, _cpu0 = time.perf_counter(), time.process_time()
_last = [_wall0, _cpu0]
_stage = ["import"]

import numba.core.event as numba_event  # noqa: E402

_compiles: dict = defaultdict(lambda: {"signatures": 0, "inclusive_s": 0.0, "exclusive_s": 0.0})
_stack: list = []


def _name(dispatcher) -> tuple[str, str]:
    function = getattr(dispatcher, "py_func", None)
    if function is None:
        return (type(dispatcher).__module__, type(dispatcher).__name__)
    return (function.__module__ or "?", function.__qualname__)


class _Recorder(numba_event.Listener):
    def on_start(self, event):
        _stack.append([time.process_time(), 0.0])

    def on_end(self, event):
        start, children = _stack.pop()
        spent = time.process_time() - start
        if _stack:
            _stack[-1][1] += spent
        key = (*_name(event.data["dispatcher"]), _stage[0])
        entry = _compiles[key]
        entry["signatures"] += 1
        entry["inclusive_s"] += spent
        entry["exclusive_s"] += spent - children


numba_event.register("numba:compile", _Recorder())


@atexit.register
def _print_compiles() -> None:
    rows = [
        {"module": m, "function": f, "stage": s, **v}
        for (m, f, s), v in sorted(_compiles.items(), key=lambda kv: -kv[1]["exclusive_s"])
    ]
    print(json.dumps({"compiles": rows}), flush=True)


def stage(name: str) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    print(
        json.dumps({"stage": name, "wall_s": wall - _last[0], "cpu_s": cpu - _last[1]}),
        flush=True,
    )
    _last[0], _last[1] = time.perf_counter(), time.process_time()


def next_stage(name: str) -> None:
    _stage[0] = name


import numpy as np  # noqa: E402

import pymc_odesens  # noqa: E402
from pymc_odesens import OdeSystem, adjoint_gradient, solve, solve_sensitivity  # noqa: E402

stage("import")
repo = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
model_only = "--model-only" in sys.argv  # the NUMBA-mode model alone, as pymc_odesens.sample
next_stage("system")
system = OdeSystem.from_json(repo / "examples" / "data" / "akar4.json")
times = np.linspace(0.0, 600.0, 31)[1:]
y0, p = system.x0, system.p_nominal
stage("system")
controls = {"relative_tolerance": 1e-8, "absolute_tolerance": 1e-10}
if not model_only:
    next_stage("first_solve_bdf")
    solve(system, y0, times, p, method="bdf", **controls)
    stage("first_solve_bdf")
    next_stage("first_forward_sensitivity")
    solve_sensitivity(system, y0, times, p, method="bdf", **controls)
    stage("first_forward_sensitivity")
    next_stage("first_adjoint")
    adjoint_gradient(
        system, y0, times, p, np.ones((times.size, system.n_states)), solver_forward="bdf"
    )
    stage("first_adjoint")
next_stage("import_ops")
import pymc as pm  # noqa: E402

from pymc_odesens import ode_solution  # noqa: E402

stage("import_ops")
next_stage("model")
with pm.Model() as model:
    log10_k = pm.Normal("log10_k", np.log10(p), 1.0, shape=len(p))
    y = ode_solution(system, np.tile(y0, (3, 1)), times, 10.0**log10_k, method="bdf", **controls)
    pm.Normal("obs", y[..., 0], 1.0, observed=np.zeros((3, times.size)))
stage("model")
next_stage("logp_dlogp_numba")
logp_dlogp = model.logp_dlogp_function(ravel_inputs=True, mode="NUMBA")
logp_dlogp.set_extra_values({})
stage("logp_dlogp_numba")
next_stage("first_logp_dlogp")
logp_dlogp(np.log10(p))
stage("first_logp_dlogp")
next_stage("first_sample")
with model:
    pymc_odesens.sample(
        draws=5,
        tune=5,
        chains=1,
        cores=1,
        progressbar=False,
        random_seed=1,
        compute_convergence_checks=False,
    )
stage("first_sample")
