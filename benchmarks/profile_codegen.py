"""Where code generation and compile time go, kernel by kernel (the llvmlite backend).

Usage: ``python benchmarks/profile_codegen.py <model or N> [rhs,jac_y_values,sens,adjoint]``
with a reference model name (../shared/models) or a size of the synthetic mass-action
network. Prints one JSON line with seconds per stage, in one process, nothing read from or
written to the kernel cache:

- ``construct``: the ``OdeSystem``; ``sympy_J_y`` / ``sympy_J_p``: the non-zeros of the
  Jacobians (only the symbols an expression contains are differentiated);
- per kernel: ``source`` (canonical symbols, sympy CSE, printing into the kernel language),
  ``ir`` (the kernel language translated to LLVM IR, :mod:`pymc_odesens.codegen.llvm_emitter`),
  ``llvm`` (LLVM's code generation into object code,
  :func:`pymc_odesens.codegen.machine_code.compile_object`), ``load`` (the object code
  loaded into the process), and the sizes of source and IR.

The numbers of the earlier numba-source backend (sympy -> Python source -> ``numba.cfunc``)
are kept in results/codegen_profile_numba_backend.json; those of this backend in
results/codegen_profile.json (``--write``).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pymc_odesens.codegen.adjoint_source import adjoint_module_source  # noqa: E402
from pymc_odesens.codegen.kernel_source import kernel_sources  # noqa: E402
from pymc_odesens.codegen.kernels import _ensure_externals, _external_calls  # noqa: E402
from pymc_odesens.codegen.llvm_emitter import function_definitions, kernel_ir  # noqa: E402
from pymc_odesens.codegen.machine_code import compile_object, load_object  # noqa: E402
from pymc_odesens.codegen.sensitivity_source import sensitivity_module_source  # noqa: E402

DEFAULT_KERNELS = ("rhs", "jac_y_values", "sens", "adjoint")


def load_system(which: str):
    """A reference model by name, or the mass-action network of that many species."""
    if which.isdigit():
        from mass_action_network import mass_action_network

        return mass_action_network(int(which))
    from pymc_odesens import OdeSystem

    shared = os.environ.get("PYMC_ODESENS_SHARED_DIR", "/work/shared")
    models = os.environ.get("PYMC_ODESENS_MODELS_DIR", f"{shared}/models")
    return OdeSystem.from_json(f"{models}/{which}.json")


def profile(which: str, kernels: list[str]) -> dict:
    """Seconds of each stage of code generation for the kernels ``kernels`` of ``which``."""
    res: dict = {"model": which}

    def tic(key, fn, into=res):
        start = time.perf_counter()
        out = fn()
        into[key] = round(time.perf_counter() - start, 3)
        return out

    system = tic("construct", lambda: load_system(which))
    res.update(N=system.n_states, P=system.n_params)
    res["nnz_J_y"] = tic("sympy_J_y", lambda: len(system.J_y_nonzeros))
    res["nnz_J_p"] = tic("sympy_J_p", lambda: len(system.J_p_nonzeros))
    basic = kernel_sources(system)
    modules = {
        "sens": lambda: sensitivity_module_source(system, "params"),
        "adjoint": lambda: adjoint_module_source(system),
    }
    for label in kernels:
        stages: dict = {}
        make_source = basic[label] if label in basic else modules[label]
        source = tic("source", make_source, stages)
        stages["source_chars"] = len(source)
        definitions = function_definitions(source)
        for name, function in definitions.items():
            symbol = f"profile_{which}_{name}"
            ir = tic(f"ir_{name}", lambda f=function, s=symbol: kernel_ir(f, s), stages)
            stages[f"ir_chars_{name}"] = len(ir)
            data = tic(f"llvm_{name}", lambda ir=ir: compile_object(ir), stages)
            _ensure_externals(_external_calls(function))  # the adjoint's trajectory reader
            tic(f"load_{name}", lambda d=data, s=symbol: load_object(d, [s]), stages)
        stages["total"] = round(sum(v for k, v in stages.items() if "chars" not in k), 3)
        res[label] = stages
        print(label, stages, file=sys.stderr, flush=True)
    res["max_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
    return res


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--write"]
    kernel_list = args[1].split(",") if len(args) > 1 else list(DEFAULT_KERNELS)
    result = profile(args[0], kernel_list)
    print(json.dumps(result))
    if "--write" in sys.argv:
        from common import RESULTS_DIR, load_average

        path = RESULTS_DIR / "codegen_profile.json"
        stored = json.loads(path.read_text()) if path.exists() else {"profiles": {}}
        stored["what"] = __doc__.splitlines()[0]
        stored["profiles"][args[0]] = {**result, "load_average_1min": load_average()}
        path.write_text(json.dumps(stored, indent=1))
