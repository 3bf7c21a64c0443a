"""Where code generation time goes with the numba-source backend (kernels of every route).

Usage: ``python benchmarks/profile_codegen.py <model or N> rhs,jac_y,sens,adjoint`` with a
reference model name (../shared/models) or a size of the synthetic mass-action network.
Prints one JSON line: seconds of sympy differentiation, CSE + printing per kernel, and
numba's compile per kernel (total, and the part under numba's LLVM lock; the rest is
numba's typing and lowering). The results of the numba-source backend are kept in
results/codegen_profile_numba_backend.json.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numba  # noqa: E402
from numba.core import event  # noqa: E402

from pymc_odesens.codegen import adjoint_source, kernel_source, sensitivity_source  # noqa: E402
from pymc_odesens.codegen.printer import KernelPrinter  # noqa: E402
from pymc_odesens.codegen.signature import KERNEL_SIGNATURE  # noqa: E402


def load_system(which: str):
    if which.isdigit():
        from mass_action_network import mass_action_network

        return mass_action_network(int(which))
    from pymc_odesens import OdeSystem

    models = os.environ.get("PYMC_ODESENS_MODELS_DIR", "/work/shared/models")
    return OdeSystem.from_json(f"{models}/{which}.json")


def main(which: str, stages: list[str]) -> dict:
    res: dict = {"model": which}

    def tic(key, fn):
        start = time.perf_counter()
        out = fn()
        res[key] = round(time.perf_counter() - start, 3)
        print(key, res[key], file=sys.stderr, flush=True)
        return out

    system = tic("construct", lambda: load_system(which))
    res.update(N=system.n_states, P=system.n_params)
    tic("sympy_J_y", lambda: system.J_y)
    tic("sympy_J_p", lambda: system.J_p)
    res["nnz_J_y"] = sum(1 for e in system.J_y if e != 0)
    res["nnz_J_p"] = sum(1 for e in system.J_p if e != 0)

    def numba_compile(label: str, source: str, names: list[str]) -> None:
        namespace: dict = {}
        source = source.replace("cache=True, ", "")
        llvm = [0.0]
        start = time.perf_counter()
        with event.install_timer("numba:llvm_lock", lambda dt: llvm.__setitem__(0, llvm[0] + dt)):
            exec(compile(source, label, "exec"), namespace)  # decorated kernels compile here
            for name in names:
                if not hasattr(namespace[name], "address"):
                    numba.cfunc(KERNEL_SIGNATURE, error_model="numpy")(namespace[name])
        total = time.perf_counter() - start
        res[f"numba_{label}"] = {"total": round(total, 3), "llvm": round(llvm[0], 3)}
        print(label, res[f"numba_{label}"], file=sys.stderr, flush=True)

    expressions = tic("sympy_canonical_and_list", lambda: kernel_source.kernel_expressions(system))
    for name in [s for s in stages if s in ("rhs", "jac_y")]:
        source = tic(
            f"cse_print_{name}",
            lambda name=name: kernel_source.kernel_function_source(
                name, expressions[name], KernelPrinter(), decorated=False
            ),
        )
        res[f"source_chars_{name}"] = len(source)
        header = kernel_source.HEADER.format(version="x", name="x", fingerprint="x")
        numba_compile(name, header + source, [name])
    if "sens" in stages:
        source = tic(
            "sympy_source_sens_params",
            lambda: sensitivity_source.sensitivity_module_source(system, "params"),
        )
        res["source_chars_sens"] = len(source)
        numba_compile("sens", source, ["sens_rhs"])
    if "adjoint" in stages:
        source = tic("sympy_source_adjoint", lambda: adjoint_source.adjoint_module_source(system))
        res["source_chars_adjoint"] = len(source)
        numba_compile("adjoint", source, ["adjoint_rhs", "adjoint_jac"])
    res["max_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
    return res


if __name__ == "__main__":
    stage_list = sys.argv[2].split(",") if len(sys.argv) > 2 else ["rhs", "jac_y"]
    print(json.dumps(main(sys.argv[1], stage_list)))
