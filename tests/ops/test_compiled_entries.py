"""A model compiles only the solver cores its graphs call (each core compiles, or loads
from numba's cache, when its module is first imported)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import sys
import numpy as np
import pymc as pm
from pymc_odesens import OdeSystem, ode_solution

system = OdeSystem(lambda t, y, p: [-p[0] * y[0]], states=["x"], params=["k"], name="decay")
with pm.Model() as model:
    k = pm.LogNormal("k", 0.0, 1.0)
    y = ode_solution(system, [1.0], np.linspace(0.5, 2.0, 4), [k], method={method!r})
    pm.Normal("obs", y[:, 0], 0.1, observed=np.ones(4))
f = model.logp_dlogp_function(ravel_inputs=True, mode="NUMBA")
f.set_extra_values({{}})
logp, grad = f(np.zeros(1))
assert np.isfinite(logp) and np.isfinite(grad).all()
cores = ("solvers.runge_kutta", "solvers.multistep", "solvers.hybrid",
         "sensitivity.adjoint_backward", "sensitivity.discrete_adjoint",
         "sensitivity.pbs_march", "sensitivity.fisher_accumulation",
         "codegen.recorded_trajectory")
print("LOADED", ",".join(c for c in cores if "pymc_odesens." + c in sys.modules))
"""


@pytest.mark.parametrize(
    ("method", "loaded"),
    [
        ("bdf", "solvers.multistep"),
        pytest.param("rk45", "solvers.runge_kutta", marks=pytest.mark.slow),  # -m slow
    ],
)
def test_a_forward_model_without_events_loads_its_integrator_only(tmp_path, method, loaded):
    # no hybrid driver, no adjoint, PBS or recording cores: those are minutes of compiling
    # on a new installation that such a model never needs
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE.format(method=method))],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(s for s in done.stdout.splitlines() if s.startswith("LOADED"))
    assert line == f"LOADED {loaded}"


def test_an_unknown_entry_names_itself():
    from pymc_odesens.ops import compiled_entries

    with pytest.raises(AttributeError, match="has no attribute 'no_such_entry'"):
        compiled_entries.no_such_entry  # noqa: B018
