"""NUMBA-mode graphs with ODE Ops go into PyTensor's on-disk cache (a warm compile loads them).

Two fresh processes compile the same model's log-density and gradient in NUMBA mode: the
second loads the graph's machine code (numba compiles no graph function), evaluates the
same numbers as the first and as PyTensor's Python implementation, and reports a solver
failure with its name, through the failure callback that the cached code calls by its
linker symbol.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

# a child process's preamble: ``compiled`` lists the functions numba compiles (not loads)
COMPILE_LISTENER = r"""
import json
from numba.core import event

compiled = []


class Compiles(event.Listener):
    def on_start(self, e):
        pass

    def on_end(self, e):
        compiled.append(e.data["dispatcher"].py_func.__qualname__)


event.register("numba:compile", Compiles())
"""

CHILD = r"""
import numpy as np
import pymc as pm
from pytensor.compile.mode import Mode

import pymc_odesens
from pymc_odesens import OdeSystem, ode_solution


def rhs(t, y, p):
    return [p.a * y[0] - p.b * y[0] * y[1], p.b * y[0] * y[1] - p.c * y[1]]


system = OdeSystem(rhs, states=["prey", "predator"], params=["a", "b", "c"], name="lv_cache")
with pm.Model() as model:
    k = pm.LogNormal("k", 0.0, 0.5, shape=3)
    y = ode_solution(
        system, [1.0, 1.0], np.linspace(1.0, 5.0, 9), k, method="rk45", max_num_steps=200
    )
    pm.Normal("obs", y, 0.1, observed=np.ones((9, 2)))
points = [np.zeros(3), np.array([0.3, -0.2, 0.1]), np.full(3, 6.0)]  # the last one fails
numba_mode = model.logp_dlogp_function(ravel_inputs=True, mode="NUMBA")
python_mode = model.logp_dlogp_function(ravel_inputs=True, mode=Mode(linker="py"))
for f in (numba_mode, python_mode):
    f.set_extra_values({})
out = {"compiled": compiled}
out["numba"] = [[float(v) for v in (f[0], *f[1])] for f in map(numba_mode, points)]
out["failures"] = pymc_odesens.failure_counts()
out["python"] = [[float(v) for v in (f[0], *f[1])] for f in map(python_mode, points)]
print("RESULT " + json.dumps(out))
"""


def run_child(code: str) -> dict:
    """Run ``COMPILE_LISTENER + code`` in a fresh process; the JSON it prints after "RESULT "."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", COMPILE_LISTENER + code],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(s for s in proc.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def test_a_second_process_loads_the_compiled_graph():
    first = run_child(CHILD)  # compiles the graph, or loads it if an earlier run cached it
    second = run_child(CHILD)
    assert "numba_funcified_fgraph" not in second["compiled"], second["compiled"]
    for run in (first, second):
        numba_values, python_values = np.array(run["numba"]), np.array(run["python"])
        assert np.isneginf(numba_values[2, 0]) and np.isneginf(python_values[2, 0])
        np.testing.assert_allclose(numba_values[:2], python_values[:2], rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(numba_values[2, 1:], 0.0)  # rejected: zero gradient
        assert run["failures"] == {"MaxNumStepsError": 1}
    np.testing.assert_array_equal(first["numba"], second["numba"])


def test_cache_keys_follow_what_the_compiled_code_bakes_in():
    pytest.importorskip("pymc")
    from pytensor.link.numba.dispatch.basic import numba_funcify

    from pymc_odesens import OdeSystem, ode_solution
    from pymc_odesens.ops.numba_cache import op_cache_key

    def rhs(t, y, p):
        return [-p.k * y[0], p.k * y[0]]

    def key_of(system, times, **controls):
        y = ode_solution(system, [1.0, 0.0], times, [0.5], method="rk45", **controls)
        op = y.owner.inputs[0].owner.op  # y[0] of the Op's (E, T, N) output
        return op_cache_key(op, numba_funcify(op))

    system = OdeSystem(rhs, states=["a", "b"], params=["k"], name="decay_key")
    same = OdeSystem(rhs, states=["a", "b"], params=["k"], name="decay_key")
    other = OdeSystem(
        lambda t, y, p: [-p.k * y[0], 2 * p.k * y[0]],
        states=["a", "b"],
        params=["k"],
        name="decay_key",
    )
    times = np.linspace(1.0, 2.0, 3)
    key = key_of(system, times)
    assert key is not None and key.startswith("pymc_odesens_")
    assert key_of(same, times) == key  # equal content, other objects: the same key
    assert key_of(system, times + 1.0) != key
    assert key_of(system, times, relative_tolerance=1e-8) != key
    assert key_of(other, times) != key


def _pbs_op(system, times, **settings):
    from pymc_odesens import ode_solution

    settings = {"sensitivity": "pbsr", "method": "rk45", **settings}
    y = ode_solution(system, [1.0, 0.0], times, [0.5], on_failure="raise", **settings)
    return y.owner.inputs[0].owner.op  # y[0] of the Op's (E, T, N) output


def test_pbs_cache_keys_follow_every_setting():
    """A PBS Op's key changes with each setting its compiled code bakes in: the route, the
    solver, a control, each PBS option, the output times and the system."""
    from pytensor.link.numba.dispatch.basic import numba_funcify

    from pymc_odesens import OdeSystem
    from pymc_odesens.ops.numba_cache import op_cache_key
    from pymc_odesens.ops.ode_ops import OdePbsOp

    def rhs(t, y, p):
        return [-p.k * y[0], p.k * y[0]]

    system = OdeSystem(rhs, states=["a", "b"], params=["k"], name="decay_pbs_key")
    same = OdeSystem(rhs, states=["a", "b"], params=["k"], name="decay_pbs_key")
    other = OdeSystem(
        lambda t, y, p: [-p.k * y[0], 2 * p.k * y[0]], states=["a", "b"], params=["k"]
    )
    times = np.linspace(1.0, 2.0, 3)
    variants = {
        "base": (system, times, {}),
        "route": (system, times, {"sensitivity": "pbs"}),
        "method": (system, times, {"method": "ckrk"}),
        "implicit method": (system, times, {"method": "bdf"}),
        "tolerance": (system, times, {"relative_tolerance": 1e-8}),
        "max steps": (system, times, {"max_num_steps": 777}),
        "times": (system, times + 1.0, {}),
        "system": (other, times, {}),
    }
    for option, value in [
        ("c", 5.0),
        ("eps", 1e-3),
        ("n_max", 20),
        ("norm", 1),
        ("steady_state_test", "state_jacobian"),
        ("interpolation", "hermite"),
        ("exp_step", "trapezoid"),
        ("max_step", 0.5),
    ]:
        variants[option] = (system, times, {"pbs_options": {option: value}})
    keys = {}
    for name, (sys_, t, settings) in variants.items():
        op = _pbs_op(sys_, t, **settings)
        assert isinstance(op, OdePbsOp)
        keys[name] = op_cache_key(op, numba_funcify(op))
        assert keys[name] is not None, name
    assert len(set(keys.values())) == len(keys), keys
    base = _pbs_op(same, times)
    assert op_cache_key(base, numba_funcify(base)) == keys["base"]


def test_two_pbs_ops_in_one_process_keep_their_own_compiled_function(oscillator):
    """Two NUMBA-mode PBSR graphs that differ only in the refinement factor ``c`` (different
    sensitivities) each give the values of PyTensor's Python implementation: neither loads
    the other's compiled function from the cache."""
    import pytensor
    import pytensor.tensor as pt

    from pymc_odesens import ode_solution

    theta = pt.dscalar("theta")
    times = np.linspace(0.5, 6.0, 5)
    weights = np.random.default_rng(1).normal(size=(times.size, 2))
    values = []
    for c in (0.5, 20.0):
        y = ode_solution(
            oscillator,
            [1.0, 0.0],
            times,
            [theta],
            sensitivity="pbsr",
            method="rk45",
            pbs_options={"c": c, "eps": 0.0, "n_max": None},
            on_failure="raise",
        )
        grad = pytensor.grad((y * weights).sum(), theta)
        got = [pytensor.function([theta], grad, mode=m)(0.3) for m in ("FAST_RUN", "NUMBA")]
        np.testing.assert_array_equal(got[0], got[1])
        values.append(got[1])
    assert values[0] != values[1]  # the two settings give different sensitivities


_SCALE = 2.0


def test_cache_keys_follow_the_globals_a_jitted_function_reads(monkeypatch):
    """numba bakes a global's value into the compiled code: the key changes with it, also
    when the global is read by a jitted function that the Op's function calls."""
    import numba

    from pymc_odesens.ops.numba_cache import op_cache_key

    @numba.njit
    def scaled(x):
        return _SCALE * x

    @numba.njit
    def outer(x):
        return scaled(x) + 1.0

    class ConstantOp:
        __props__ = ()

    keys = [op_cache_key(ConstantOp(), outer)]
    monkeypatch.setitem(scaled.py_func.__globals__, "_SCALE", 3.0)
    keys.append(op_cache_key(ConstantOp(), outer))
    monkeypatch.setitem(scaled.py_func.__globals__, "_SCALE", object())
    keys.append(op_cache_key(ConstantOp(), outer))
    assert keys[0] is not None and keys[1] is not None and keys[0] != keys[1]
    assert keys[2] is None  # a global with no stable representation: not cached
