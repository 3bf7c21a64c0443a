"""Calling one object from several threads at once, and comparing bits with one thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["THREADS", "CALLS", "as_bytes", "in_threads", "assert_same_bits"]

THREADS = 4
CALLS = 50  # per thread


def as_bytes(value) -> bytes:
    """The bits of a result: a number, an array, or a (nested) tuple/list/dict of them."""
    if isinstance(value, dict):
        return b"|".join(k.encode() + b"=" + as_bytes(v) for k, v in sorted(value.items()))
    if isinstance(value, (tuple, list)):
        return b"|".join(as_bytes(v) for v in value)
    array = np.asarray(value)
    return str(array.dtype).encode() + str(array.shape).encode() + array.tobytes()


def in_threads(call: Callable, arguments: Sequence, threads: int = THREADS) -> list:
    """``[call(a) for a in arguments]``, the calls split over ``threads`` threads that start
    together (a barrier) and run at once; a call that raised leaves its exception in its
    place."""
    results: list = [None] * len(arguments)
    barrier = threading.Barrier(threads)

    def work(first: int) -> None:
        barrier.wait()
        for i in range(first, len(arguments), threads):
            try:
                results[i] = call(arguments[i])
            except Exception as error:  # kept: every thread runs to its end
                results[i] = error

    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return results


def assert_same_bits(expected: Sequence, got: Sequence) -> None:
    """Every result of ``got`` (from :func:`in_threads`) has the bits of the result at the
    same place in ``expected`` (one thread's): no call raised, none differs."""
    assert len(got) == len(expected)
    raised = [r for r in got if isinstance(r, Exception)]
    wrong = [
        i
        for i, (a, b) in enumerate(zip(expected, got))
        if not isinstance(b, Exception) and as_bytes(a) != as_bytes(b)
    ]
    assert not raised and not wrong, (
        f"of {len(got)} calls in threads, {len(wrong)} differ from one thread's results and "
        f"{len(raised)} raised" + (f"; the first error: {raised[0]!r}"[:600] if raised else "")
    )
