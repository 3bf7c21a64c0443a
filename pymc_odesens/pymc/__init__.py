"""Deprecated: the former PyMC layer, now split into :mod:`pymc_odesens.ops` (PyTensor Ops,
``ode_solution``, ``steady_state_solution``, Fisher tensors) and :mod:`pymc_odesens.inference`
(SMMALA, sampling helpers, metrics, checkpoints, time limits).

Importing ``pymc_odesens.pymc`` or one of its former modules (``pymc_odesens.pymc.ops``,
``pymc_odesens.pymc.sampling``, ...) still works for one release and gives a
``DeprecationWarning`` naming the new place; :data:`MOVED_MODULES` lists them. The names
users import are also at the package root (``pymc_odesens.ode_solution``,
``pymc_odesens.sample``, ...), which is the stable place.
"""

import sys
import warnings
from importlib import import_module

MOVED_MODULES = {
    "anchored_potential": "pymc_odesens.inference.anchored_potential",
    "checkpoint": "pymc_odesens.inference.checkpoint",
    "compiled_entries": "pymc_odesens.ops.compiled_entries",
    "experiments": "pymc_odesens.ops.experiments",
    "failures": "pymc_odesens.ops.failures",
    "fisher": "pymc_odesens.ops.fisher_tensor",
    "graph_inputs": "pymc_odesens.ops.graph_inputs",
    "graph_traversal": "pymc_odesens.ops.graph_traversal",
    "mode_metric": "pymc_odesens.inference.mode_metric",
    "numba_cache": "pymc_odesens.ops.numba_cache",
    "numba_dispatch": "pymc_odesens.ops.numba_dispatch",
    "numba_pbs": "pymc_odesens.ops.numba_pbs",
    "numba_scipy_special": "pymc_odesens.ops.numba_scipy_special",
    "nutpie_start": "pymc_odesens.inference.nutpie_start",
    "ode_solution": "pymc_odesens.ops.ode_solution",
    "ops": "pymc_odesens.ops.ode_ops",
    "pbs_branches": "pymc_odesens.ops.pbs_branches",
    "pooled_metric": "pymc_odesens.inference.pooled_metric",
    "rejection": "pymc_odesens.ops.rejection",
    "sampling": "pymc_odesens.inference.sampling",
    "smmala": "pymc_odesens.inference.smmala",
    "smmala_metric": "pymc_odesens.inference.smmala_metric",
    "smmala_sensitivities": "pymc_odesens.inference.smmala_sensitivities",
    "steady_state_entries": "pymc_odesens.ops.steady_state_entries",
    "steady_state_experiments": "pymc_odesens.ops.steady_state_experiments",
    "steady_state_numba": "pymc_odesens.ops.steady_state_numba",
    "steady_state_ops": "pymc_odesens.ops.steady_state_ops",
    "steady_state_solution": "pymc_odesens.ops.steady_state_solution",
    "step_assignment": "pymc_odesens.inference.step_assignment",
    "time_limit": "pymc_odesens.inference.time_limit",
}
"""Former module ``pymc_odesens.pymc.<name>`` -> the module that holds it now."""


warnings.warn(
    "pymc_odesens.pymc is deprecated and will be removed in the next release: its Ops and "
    "tensors moved to pymc_odesens.ops, its samplers and sampling tools to "
    "pymc_odesens.inference (the names users import are also at the package root, e.g. "
    "pymc_odesens.ode_solution, pymc_odesens.sample)",
    DeprecationWarning,
    stacklevel=2,  # the importing line (Python skips importlib's own frames)
)

# the former submodules are the new modules under their old names, so that
# `import pymc_odesens.pymc.ops` and `from pymc_odesens.pymc.sampling import sample` work
for _old, _new in MOVED_MODULES.items():
    _module = import_module(_new)
    sys.modules[f"{__name__}.{_old}"] = _module
    globals()[_old] = _module

from pymc_odesens.inference import *  # noqa: E402, F403
from pymc_odesens.inference import __all__ as _inference_names  # noqa: E402
from pymc_odesens.ops import *  # noqa: E402, F403
from pymc_odesens.ops import __all__ as _ops_names  # noqa: E402

__all__ = [*_ops_names, *_inference_names]
