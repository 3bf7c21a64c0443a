"""One compiled function called from two threads at once is refused, in both calls; copies
and PyTensor's per-call storage (NUMBA's object-mode fallback) are not."""

import threading

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_odesens.ops.ode_ops as ops
from pymc_odesens import (
    ConcurrentCallError,
    NonFiniteInputError,
    PerThreadFunction,
    ode_solution,
)
from pymc_odesens.ops.graph_traversal import ancestors
from tests.threads import in_threads

TIMES = np.linspace(0.5, 5.0, 6)


class _Held:
    """Replaces ``solve_states`` in the Op: the first call waits until released, inside
    the Op's ``perform``, so that a second thread surely overlaps it."""

    def __init__(self, solve_states):
        self.solve_states = solve_states
        self.entered = threading.Event()
        self.release = threading.Event()
        self.first = True

    def __call__(self, *args):
        if self.first:
            self.first = False
            self.entered.set()
            assert self.release.wait(30), "the held call was never released"
        return self.solve_states(*args)


def _states(oscillator):
    theta = pt.dvector("theta")
    y = ode_solution(oscillator, [1.0, 0.0], TIMES, theta, sensitivity="none", on_failure="raise")
    return theta, y


def _overlap(monkeypatch, first_call, second_call):
    """Start ``first_call`` in a thread, hold it inside the Op, run ``second_call`` here,
    then release the first: ``(result or error of the first, of the second)``."""
    held = _Held(ops.solve_states)
    monkeypatch.setattr(ops, "solve_states", held)
    outcome = {}

    def first():
        try:
            outcome["first"] = first_call()
        except Exception as error:
            outcome["first"] = error

    thread = threading.Thread(target=first)
    thread.start()
    assert held.entered.wait(30)
    try:
        second = second_call()
    except Exception as error:
        second = error
    held.release.set()
    thread.join()
    return outcome["first"], second


def test_a_shared_function_is_refused_in_both_calls(oscillator, monkeypatch):
    theta, y = _states(oscillator)
    function = pytensor.function([theta], y)
    first, second = _overlap(monkeypatch, lambda: function([0.2]), lambda: function([0.3]))
    for error in (first, second):
        assert isinstance(error, ConcurrentCallError), error
        message = str(error)
        assert "OdeStatesOp" in message and "two threads at once" in message
        assert "PerThreadFunction" in message and "function.copy()" in message
    # used by one thread again, it computes what a function used by one thread computes
    np.testing.assert_array_equal(function([0.3]), pytensor.function([theta], y)([0.3]))


def test_copies_per_thread_are_not_refused(oscillator, monkeypatch):
    theta, y = _states(oscillator)
    function = pytensor.function([theta], y)
    expected = {p: function([p]) for p in (0.2, 0.3)}
    shared = PerThreadFunction(function)
    first, second = _overlap(monkeypatch, lambda: shared([0.2]), lambda: shared([0.3]))
    np.testing.assert_array_equal(first, expected[0.2])
    np.testing.assert_array_equal(second, expected[0.3])


def test_a_perform_with_its_own_storage_per_call_is_not_refused(oscillator, monkeypatch):
    """What PyTensor's NUMBA fallback does (object mode, new storage at every call)."""
    theta, y = _states(oscillator)
    node = next(v.owner for v in ancestors([y]) if _is_states(v))
    inputs = [np.array([[1.0, 0.0]]), np.array([[0.2]])]

    def perform():
        storage = [[None] for _ in node.outputs]
        node.op.perform(node, inputs, storage)
        return storage[0][0]

    expected = perform()
    first, second = _overlap(monkeypatch, perform, perform)
    np.testing.assert_array_equal(first, expected)
    np.testing.assert_array_equal(second, expected)


def _is_states(variable) -> bool:
    return variable.owner is not None and isinstance(variable.owner.op, ops.OdeStatesOp)


def test_the_guard_is_released_after_an_error(oscillator):
    """A solve that raises leaves the node free for the next call (of another thread)."""
    theta, y = _states(oscillator)
    function = pytensor.function([theta], y)
    expected = function([0.2])
    with pytest.raises(NonFiniteInputError, match="params"):
        function([np.nan])
    (value,) = in_threads(function, [[0.2]], threads=1)
    np.testing.assert_array_equal(value, expected)
