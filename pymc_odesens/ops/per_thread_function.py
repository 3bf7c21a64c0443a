"""A compiled PyTensor function that several threads may call at once: one copy per thread.

A compiled ``pytensor.function`` (and what PyMC builds on it: ``model.compile_logp()``,
``compile_dlogp()``, ``compile_fn()``) is not safe to call from two threads at once: its
inputs, outputs and intermediate results live in storage that belongs to the function,
so two overlapping calls read each other's values (wrong numbers, or PyTensor errors such
as ``'NoneType' object has no attribute 'copy'``). :class:`PerThreadFunction` gives each
thread its own copy (``Function.copy()``: the same compiled graph and the same machine
code, with storage of its own), made on that thread's first call, so that every call
computes bit for bit what the function computes when called alone.
"""

from __future__ import annotations

import threading

from pytensor.compile.function.types import Function

__all__ = ["PerThreadFunction"]


def _compiled_function(function) -> Function:
    """The PyTensor ``Function`` of ``function`` (itself, or a PyMC ``PointFunc``'s ``f``)."""
    if isinstance(function, Function):
        return function
    inner = getattr(function, "f", None)
    if isinstance(inner, Function):
        return inner
    raise TypeError(
        "PerThreadFunction: function must be a compiled PyTensor function (what "
        "pytensor.function returns) or a PyMC function wrapping one (model.compile_logp(), "
        f"compile_dlogp(), compile_fn()); got {type(function).__name__}"
    )


class PerThreadFunction:
    """A compiled PyTensor function that each calling thread calls through its own copy.

    Parameters
    ----------
    function : pytensor.compile.function.types.Function or pymc.pytensorf.PointFunc
        What ``pytensor.function`` returns, or what PyMC's ``model.compile_logp()``,
        ``compile_dlogp()`` and ``compile_fn()`` return (a ``PointFunc``, called with a
        dict of values). It must not update shared variables (``updates=``): the copies
        would update the same variables from several threads.

    Notes
    -----
    Each thread's first call makes its copy (``Function.copy()``: no rewriting and no
    compilation, about a millisecond for a graph of a few dozen nodes); later calls of that
    thread use it. The copies share the function's shared variables (their current values,
    e.g. ``pm.Data``), not its storage. ``function`` itself is never called by this object:
    a thread may go on calling it directly as long as no other thread does.

    Raises
    ------
    TypeError
        ``function`` is not a compiled PyTensor function or a PyMC function wrapping one.
    ValueError
        ``function`` updates shared variables.
    """

    def __init__(self, function) -> None:
        compiled = _compiled_function(function)
        updated = [
            str(i.variable) for i in compiled.maker.inputs if getattr(i, "update", None) is not None
        ]
        if updated:
            raise ValueError(
                f"PerThreadFunction: the function updates the shared variables {updated}; its "
                "copies would update them from several threads at once. Compile it without "
                "updates, or give each thread a function of its own."
            )
        self._function = function
        self._local = threading.local()
        self._copy_lock = threading.Lock()

    @property
    def function(self):
        """The calling thread's copy of the function (made on its first use)."""
        own = getattr(self._local, "function", None)
        if own is None:
            with self._copy_lock:
                original = self._function
                if isinstance(original, Function):
                    own = original.copy()
                else:
                    own = type(original)(original.f.copy())
            self._local.function = own
        return own

    def __call__(self, *args, **kwargs):
        """Call the calling thread's copy with the arguments of the function."""
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"PerThreadFunction({self._function!r})"
