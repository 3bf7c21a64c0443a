"""The numba implementation of :class:`~pymc_odesens.ops.distributed_likelihood_op.
DistributedLogLikelihoodOp`: the one place where compiled code calls back into Python.

A distributed log-likelihood is evaluated by Python code (it sends ``x`` to the workers and
waits for their parts), so the compiled function of a NUMBA-mode graph (PyTensor's NUMBA
mode, nutpie) leaves numba for it through one ``numba.objmode`` block: the block takes the
GIL (nutpie calls the log-density from threads of its own, without it), calls the
evaluator registered for the Op, and returns the value and gradient as float64 arrays. An
exception of the evaluator (a lost cluster) propagates out of the compiled function as
it is; nutpie counts such an error as a divergence and goes on, so the evaluator keeps
raising it on every later call, and :func:`pymc_odesens.sample` raises it after the run
(:meth:`pymc_odesens.inference.DistributedLogLikelihood.check`).

The evaluator is found by a number, the key of a registry of this process (the compiled
function closes over the number, not the object). Such a graph is not put into PyTensor's
on-disk cache (the key means nothing in another process): its numba compile is repeated
per process (seconds).
"""

from __future__ import annotations

import itertools
import threading

import numba
import numpy as np
from pytensor.link.numba.dispatch import numba_funcify

from pymc_odesens.ops.distributed_likelihood_op import DistributedLogLikelihoodOp

__all__ = ["evaluate_registered", "register_evaluator"]

_evaluators: dict[int, object] = {}
_keys: dict[int, int] = {}  # id(evaluator) -> key
_counter = itertools.count(1)
_lock = threading.Lock()


def register_evaluator(evaluator) -> int:
    """The registry key of ``evaluator`` (registered on first use; kept alive)."""
    with _lock:
        key = _keys.get(id(evaluator))
        if key is None or _evaluators.get(key) is not evaluator:
            key = next(_counter)
            _evaluators[key] = evaluator
            _keys[id(evaluator)] = key
        return key


def evaluate_registered(key: int, x: np.ndarray, gradient: bool):
    """The callback: ``(value, gradient)`` of the evaluator registered as ``key``, as
    float64 (an empty gradient when not asked for)."""
    value, grad = _evaluators[key](x, gradient)
    grad = np.asarray(grad, dtype=np.float64) if gradient else np.empty(0)
    return float(value), grad


@numba_funcify.register(DistributedLogLikelihoodOp)
def _funcify_distributed(op, node=None, **kwargs):
    key = register_evaluator(op.evaluator)

    if op.gradient:

        @numba.njit
        def value_and_gradient(x):
            with numba.objmode(value="float64", grad="float64[:]"):
                value, grad = evaluate_registered(key, np.ascontiguousarray(x), True)
            return np.asarray(value), grad

        return value_and_gradient

    @numba.njit
    def value_only(x):
        with numba.objmode(value="float64"):
            value, _ = evaluate_registered(key, np.ascontiguousarray(x), False)
        return np.asarray(value)

    return value_only
