"""The kernel cache: a second process with warm caches neither generates nor compiles anything,
on every route (solves, forward sensitivities wrt params / y0 / both, both adjoints, events,
observables, PBS, dense and sparse Newton matrices)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from pymc_odesens import OdeSystem
from pymc_odesens.codegen import compile_kernels
from pymc_odesens.codegen.kernels import kernel_cache_key
from tests.conftest import MODELS_DIR

REPO = Path(__file__).resolve().parents[2]

EVERY_ROUTE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from numba.core import event

    compiles = []

    class CountCompiles(event.Listener):
        def on_start(self, ev):
            pass

        def on_end(self, ev):
            compiles.append(str(ev.data.get("dispatcher")))

    event.register("numba:compile", CountCompiles())
    if len(sys.argv) > 1:  # warm: generating source, IR or object code is an error
        import pymc_odesens.codegen.kernels as kernels_module
        import pymc_odesens.codegen.observable_kernels as observable_module
        import pymc_odesens.model.derivatives as derivatives

        def fail(*args, **kwargs):
            raise AssertionError("code generation or compilation ran with a warm cache")

        kernels_module.compile_object = fail
        kernels_module.kernel_ir = fail
        kernels_module.GeneratedKernels._source = fail
        derivatives.jacobian_nonzeros = fail
        observable_module.jacobian_nonzeros = fail

    import pymc_odesens as pos
    from pymc_odesens import OdeSystem
    from pymc_odesens.codegen.observable_kernels import (
        compile_observable_kernels,
        evaluate_observable_kernel,
    )

    models, network_path = __MODELS__, __NETWORK__
    sys.path.insert(0, network_path)
    from mass_action_network import mass_action_network

    results = {}

    def routes(name, system, y0, times, params, t0, linear_solver, adjoint=True):
        tol = dict(relative_tolerance=1e-7, absolute_tolerance=1e-9)
        for method in ("rk45", "bdf", "adams"):
            sol = pos.solve(system, y0, times, params, t0=t0, method=method,
                            linear_solver=linear_solver, **tol)
            results[f"{name}/{method}/{linear_solver}"] = sol.y.tolist()
        for wrt in ("params", "y0", "both"):
            sens = pos.solve_sensitivity(system, y0, times, params, t0=t0, wrt=wrt,
                                         linear_solver=linear_solver, **tol)
            results[f"{name}/forward_{wrt}/{linear_solver}"] = sens.S.tolist()
        if adjoint:
            cot = np.ones((len(times), system.n_states))
            for how in ("continuous", "discrete"):
                g = pos.adjoint_gradient(system, y0, times, params, cot, t0=t0,
                                         adjoint_method=how, linear_solver=linear_solver)
                results[f"{name}/{how}/{linear_solver}"] = g.params.tolist()
            g = pos.adjoint_gradient(system, y0, times, params, cot, t0=t0, solver_forward=1,
                                     solver_backward=1, linear_solver=linear_solver)
            results[f"{name}/continuous_adams/{linear_solver}"] = g.params.tolist()

    pka = OdeSystem.from_json(f"{models}/pka.json")
    times = np.linspace(pka.t0, pka.t_end, 5)[1:]
    routes("pka", pka, pka.x0, times, pka.p_nominal, pka.t0, "dense")
    routes("pka", pka, pka.x0, times, pka.p_nominal, pka.t0, "sparse", adjoint=False)
    pbs = pos.solve_sensitivity(pka, pka.x0, times, pka.p_nominal, t0=pka.t0,
                                sensitivity="pbs", method="rk45")
    results["pka/pbs"] = pbs.S.tolist()
    obs = compile_observable_kernels(pka, [pka.state_symbols[0] * pka.param_symbols[1]])
    y = np.linspace(0.1, 1.0, pka.n_states)
    results["pka/observable_jac_y"] = evaluate_observable_kernel(
        obs.jac_y, 0.3, y, pka.p_nominal, pka.n_states).tolist()

    ball = OdeSystem.from_json(f"{models}/bouncing_ball.json")
    times = np.linspace(0.0, ball.t_end, 5)[1:]
    routes("ball", ball, ball.x0, times, ball.p_nominal, 0.0, "dense")

    from pymc_odesens.model import TriggerEvent

    logic = OdeSystem(
        lambda t, y, p: [-p.k * y.x, 0.0, 0.0],
        states=["x", "a", "b"],
        params=["k"],
        events=[
            TriggerEvent(lambda t, y, p: (y.x < 0.5) ^ (t > 2.0),
                         lambda t, y, p: {"a": y.a + p.k}, priority=lambda t, y, p: y.x,
                         name="xor"),
            TriggerEvent(lambda t, y, p: (y.x < 0.2) | (t > 3.0),
                         lambda t, y, p: {"b": y.b + y.x}, name="or"),
        ],
        name="cache_trigger_logic",
    )
    routes("logic", logic, [1.0, 0.0, 0.0], [0.5, 1.0, 2.5, 4.0], [1.0], 0.0, "dense")

    decay = OdeSystem(lambda t, y, p: [-p[0] * y[0], p[0] * y[0] - p[1] * y[1]], 2, 2,
                      initial_state=lambda p: [p[1], 0.0], name="decay_y0p")
    routes("decay", decay, None, [0.5, 1.0], [1.0, 2.0], 0.0, "dense")

    network = mass_action_network(50)
    times = np.array([10.0, 50.0])
    routes("network", network, network.x0, times, network.p_nominal, 0.0, "sparse")
    print(json.dumps({"compiles": compiles, "results": results}))
    """
)


def _run(tmp_path: Path, warm: bool) -> dict:
    env = {**os.environ, "PYMC_ODESENS_CACHE_DIR": str(tmp_path)}
    script = EVERY_ROUTE.replace("__MODELS__", repr(str(MODELS_DIR))).replace(
        "__NETWORK__", repr(str(REPO / "benchmarks"))
    )
    args = [sys.executable, "-c", script] + (["warm"] if warm else [])
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_second_process_generates_and_compiles_nothing(tmp_path):
    cold = _run(tmp_path, warm=False)
    warm = _run(tmp_path, warm=True)
    assert warm["compiles"] == [], f"numba compiled in the warm process: {warm['compiles']}"
    assert warm["results"] == cold["results"]
    assert len(cold["results"]) > 40
    objects = list(tmp_path.rglob("kernels_*.o"))
    names = {path.name.split(".")[-2] for path in objects}
    for kernel in (
        "rhs",
        "jac_y",
        "jac_y_values",
        "jac_p",
        "vjp_y",
        "vjp_p",
        "sens_rhs",
        "adjoint_rhs",
        "adjoint_jac",
        "event_conditions",
        "event_jump",
        "event_adjoint_jump",
        "event_time_sensitivity",
        "event_condition_rates",
        "event_times",
        "event_triggers",
        "event_priorities",
        "event_time_gradient",
        "observable_jac_y",
        "initial_state",
        "initial_state_jac",
    ):
        assert kernel in names, f"no object code of {kernel} in the cache"
    assert list(tmp_path.rglob("kernels_*.newton.*.npy")), "sparse analysis not stored"


def test_cache_is_keyed_by_expressions():
    a = OdeSystem(lambda t, y, p: [-p[0] * y[0]], 1, 1)
    b = OdeSystem(lambda t, y, p: [-p[0] * y[0] * y[0]], 1, 1)
    assert kernel_cache_key(a) != kernel_cache_key(b)
    assert compile_kernels(a).path != compile_kernels(b).path
    assert compile_kernels(a).path.exists()
    description = json.loads(compile_kernels(a).path.read_text())
    assert description["n_states"] == 1 and description["n_params"] == 1


def test_generated_source_keeps_no_user_names(tmp_path, monkeypatch):
    """Names of states and parameters never reach the generated source (only ``y[i]``,
    ``p[k]`` and the library's own locals)."""
    monkeypatch.setenv("PYMC_ODESENS_CACHE_DIR", str(tmp_path))
    # an expression no other test uses: its kernels are generated here, into tmp_path
    system = OdeSystem(
        lambda t, y, p: [-p.secret_rate * y.hidden_state + 0.7182818],
        states=["hidden_state"],
        params=["secret_rate"],
        name="named",
    )
    kernels = compile_kernels(system)
    np.testing.assert_allclose(kernels.evaluate("rhs", 0.0, [2.0], [3.0]), [-6.0 + 0.7182818])
    sources = [p.read_text() for p in tmp_path.rglob("kernels_*.py")]
    assert sources
    assert not any("secret_rate" in s or "hidden_state" in s for s in sources)
