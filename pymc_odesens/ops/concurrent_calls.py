"""Refusing one compiled PyTensor function called from two threads at once.

A compiled ``pytensor.function`` keeps its inputs, outputs and intermediate results in
storage of its own, shared by all its calls: two threads calling it at once read each
other's values, and the numbers come out wrong without an error. The function is
PyTensor's object and cannot be made safe from here; the way to share it is one copy
per thread (:class:`~pymc_odesens.ops.per_thread_function.PerThreadFunction`).

What the package's Ops can do is notice it. Each node of a compiled function writes its
outputs into storage cells of that function (a copy of the function has cells of its
own; PyTensor's NUMBA fallback, which runs ``perform`` in object mode, gives every call
new ones), so one node's output cells used by two threads at once mean one function
called from two threads. :func:`exclusive_perform` around the package's Ops' ``perform``
then raises :class:`ConcurrentCallError` in both calls. It sees the overlaps that reach
such a node in one thread while the other is inside it (most of a call's time is spent
there: the solves), so it reports the sharing most of the time, not every time: only a
copy per thread makes the calls right.
"""

from __future__ import annotations

import functools
import threading

__all__ = ["ConcurrentCallError", "exclusive_perform"]


class ConcurrentCallError(RuntimeError):
    """One compiled PyTensor function was called from two threads at once."""


_lock = threading.Lock()
_running: dict[int, int] = {}  # id of an output storage cell -> the thread writing it
_contended: set[int] = set()  # cells another thread tried to write meanwhile


def _message(op) -> str:
    return (
        f"{op} was run by two threads at once in one compiled PyTensor function: a compiled "
        "function keeps its inputs, outputs and intermediate results in storage shared by "
        "all its calls, so calls that overlap read each other's values and their results "
        "are wrong. Give each thread its own copy of the function: "
        "pymc_odesens.PerThreadFunction(function) (also for PyMC's model.compile_logp(), "
        "compile_dlogp(), compile_fn()), or function.copy() in each thread."
    )


def exclusive_perform(perform):
    """Decorate an Op's ``perform(self, node, inputs, outputs)``: refuse two threads
    writing the same output storage at once.

    Raises
    ------
    ConcurrentCallError
        Another thread is running the same node of the same function (this call is
        refused), or another thread tried to while this call ran (its function is shared,
        so its result may be wrong).
    """

    @functools.wraps(perform)
    def exclusive(self, node, inputs, outputs):
        key, me = id(outputs[0]), threading.get_ident()
        with _lock:
            owner = _running.get(key)
            if owner is None:
                _running[key] = me
            elif owner != me:
                _contended.add(key)
        if owner is not None and owner != me:
            raise ConcurrentCallError(_message(self))
        try:
            return perform(self, node, inputs, outputs)
        finally:
            if owner is None:  # not a re-entry of this thread's own call
                with _lock:
                    _running.pop(key, None)
                    contended = key in _contended
                    _contended.discard(key)
                if contended:
                    raise ConcurrentCallError(_message(self))

    return exclusive
