"""Call a solver core from Python without the dispatcher's typing of its arguments.

The cores are compiled for one explicit signature. Calling the numba dispatcher
types every argument first, and typing a generated kernel (a ``cfunc`` passed as
a first-class function) costs about 30 us each time: for a small model that is a
third of a whole solve (measured on the damped oscillator: 62 us of 225 us per
log-density and gradient). The compiled overload's entry point takes the same
arguments and skips that step.
"""

from __future__ import annotations

__all__ = ["compiled_entry"]


def compiled_entry(dispatcher):
    """The entry point of ``dispatcher``'s one compiled signature (else the dispatcher).

    Parameters
    ----------
    dispatcher : numba Dispatcher
        A core decorated with an explicit signature (compiled, or loaded from
        numba's cache, when its module was imported).
    """
    entry = _ENTRIES.get(dispatcher)
    if entry is None:
        overloads = dispatcher.overloads
        if len(overloads) != 1:
            return dispatcher
        entry = _ENTRIES[dispatcher] = next(iter(overloads.values())).entry_point
    return entry


_ENTRIES: dict = {}
