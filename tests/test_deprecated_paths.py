"""The import paths of the former PyMC layer (``pymc_odesens.pymc`` and its modules) keep
working for one release, with a ``DeprecationWarning`` that names the new place.

The list below is the public surface users imported before the split into
``pymc_odesens.ops`` and ``pymc_odesens.inference``; each name must resolve to the object
now defined in its new module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FORMER_NAMES = {
    # name in pymc_odesens.pymc -> the module that defines it now
    "ode_solution": "pymc_odesens.ops.ode_solution",
    "steady_state_solution": "pymc_odesens.ops.steady_state_solution",
    "Preequilibration": "pymc_odesens.ops.steady_state_solution",
    "choose_sensitivity_route": "pymc_odesens.ops.ode_solution",
    "SENSITIVITY_ROUTES": "pymc_odesens.ops.ode_solution",
    "OdeSolverFailureWarning": "pymc_odesens.ops.failures",
    "failure_counts": "pymc_odesens.ops.failures",
    "failure_summary": "pymc_odesens.ops.failures",
    "reset_failure_counts": "pymc_odesens.ops.failures",
    "fisher_information_tensor": "pymc_odesens.ops.fisher_tensor",
    "pbs_branch_counts": "pymc_odesens.ops.pbs_branches",
    "pbs_branch_summary": "pymc_odesens.ops.pbs_branches",
    "OdeStatesOp": "pymc_odesens.ops.ode_ops",
    "OdeForwardOp": "pymc_odesens.ops.ode_ops",
    "OdePbsOp": "pymc_odesens.ops.ode_ops",
    "OdeAdjointOp": "pymc_odesens.ops.ode_ops",
    "OdeAdjointVJPOp": "pymc_odesens.ops.ode_ops",
    "OdeDiscreteAdjointOp": "pymc_odesens.ops.ode_ops",
    "OdeDiscreteAdjointVJPOp": "pymc_odesens.ops.ode_ops",
    "SteadyStateOp": "pymc_odesens.ops.steady_state_ops",
    "SteadyStateVJPOp": "pymc_odesens.ops.steady_state_ops",
    "SMMALA": "pymc_odesens.inference.smmala",
    "sample": "pymc_odesens.inference.sampling",
    "sample_posterior_predictive": "pymc_odesens.inference.sampling",
    "sampling_compile_kwargs": "pymc_odesens.inference.sampling",
    "mode_metric_nuts": "pymc_odesens.inference.mode_metric",
    "find_posterior_mode": "pymc_odesens.inference.mode_metric",
    "PosteriorMode": "pymc_odesens.inference.mode_metric",
    "sample_pooled_metric": "pymc_odesens.inference.pooled_metric",
    "pooled_covariance": "pymc_odesens.inference.pooled_metric",
    "resume_pooled_metric": "pymc_odesens.inference.pooled_metric",
    "sampler_coordinates": "pymc_odesens.inference.pooled_metric",
    "TraceCheckpoint": "pymc_odesens.inference.checkpoint",
    "TimeLimit": "pymc_odesens.inference.time_limit",
}

FORMER_MODULES = [
    "anchored_potential",
    "checkpoint",
    "compiled_entries",
    "experiments",
    "failures",
    "fisher",
    "graph_inputs",
    "graph_traversal",
    "mode_metric",
    "numba_cache",
    "numba_dispatch",
    "numba_pbs",
    "numba_scipy_special",
    "nutpie_start",
    "ode_solution",
    "ops",
    "pbs_branches",
    "pooled_metric",
    "rejection",
    "sampling",
    "smmala",
    "smmala_metric",
    "smmala_sensitivities",
    "steady_state_entries",
    "steady_state_experiments",
    "steady_state_numba",
    "steady_state_ops",
    "steady_state_solution",
    "step_assignment",
    "time_limit",
]

CHILD = r"""
import importlib, json, sys, warnings

names, modules = json.loads(sys.argv[1]), json.loads(sys.argv[2])
import pymc_odesens.inference, pymc_odesens.ops  # the new places load without a warning

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import pymc_odesens.pymc as old
deprecations = [str(w.message) for w in caught if w.category is DeprecationWarning]
warned_at = [w.filename for w in caught if w.category is DeprecationWarning]

wrong_names = []
for name, home in names.items():
    if getattr(old, name) is not getattr(importlib.import_module(home), name):
        wrong_names.append(name)
wrong_modules = []
for name in modules:
    module = importlib.import_module(f"pymc_odesens.pymc.{name}")
    if module is not importlib.import_module(old.MOVED_MODULES[name]):
        wrong_modules.append(name)
from pymc_odesens.pymc.ops import OdeForwardOp
from pymc_odesens.pymc.sampling import sample

print(json.dumps({
    "deprecations": deprecations,
    "warned_at": warned_at,
    "wrong_names": wrong_names,
    "wrong_modules": wrong_modules,
    "moved": sorted(old.MOVED_MODULES),
    "forward_op": OdeForwardOp.__module__,
    "sample": sample.__module__,
}))
"""


def test_former_paths_resolve_with_one_deprecation_warning(tmp_path):
    script = tmp_path / "uses_old_paths.py"
    script.write_text(CHILD)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, str(script), json.dumps(FORMER_NAMES), json.dumps(FORMER_MODULES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(report["deprecations"]) == 1
    message = report["deprecations"][0]
    assert "pymc_odesens.pymc is deprecated" in message
    assert "pymc_odesens.ops" in message and "pymc_odesens.inference" in message
    # attributed to the user's import line, not to importlib
    assert report["warned_at"] == [str(script)]
    assert report["wrong_names"] == []
    assert report["wrong_modules"] == []
    assert report["moved"] == sorted(FORMER_MODULES)
    assert report["forward_op"] == "pymc_odesens.ops.ode_ops"
    assert report["sample"] == "pymc_odesens.inference.sampling"


def test_root_names_come_from_the_new_layers():
    import pymc_odesens

    assert pymc_odesens.ode_solution.__module__ == "pymc_odesens.ops.ode_solution"
    assert pymc_odesens.sample.__module__ == "pymc_odesens.inference.sampling"
    assert pymc_odesens.SMMALA.__module__ == "pymc_odesens.inference.smmala"
    assert "pymc" not in dir(pymc_odesens)  # the deprecated module is not advertised
