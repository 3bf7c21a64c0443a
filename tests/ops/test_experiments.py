"""The thread pool that solves a batch's experiments (ops/experiments.py)."""

from __future__ import annotations

import threading

import pytest

from pymc_odesens.ops import experiments
from pymc_odesens.ops.experiments import experiment_threads, set_experiment_threads


@pytest.fixture
def restore_threads():
    yield
    set_experiment_threads(None)


def _threads_used(count: int) -> set[str]:
    names = experiments._map(lambda i: threading.current_thread().name, count)
    assert len(names) == count
    return set(names)


def test_one_thread_solves_the_batch_in_the_calling_thread(restore_threads, monkeypatch):
    monkeypatch.delenv(experiments.THREADS_VARIABLE, raising=False)
    set_experiment_threads(1)
    assert experiment_threads() == 1
    assert _threads_used(6) == {threading.current_thread().name}
    set_experiment_threads(3)
    used = _threads_used(30)
    assert experiment_threads() == 3 and len(used) <= 3
    assert all(name.startswith("pymc_odesens") for name in used)


def test_the_default_is_the_variable_else_the_cores(restore_threads, monkeypatch):
    set_experiment_threads(None)
    monkeypatch.setenv(experiments.THREADS_VARIABLE, "2")
    assert experiment_threads() == 2
    set_experiment_threads(5)  # an explicit value wins
    assert experiment_threads() == 5
    set_experiment_threads(None)
    monkeypatch.delenv(experiments.THREADS_VARIABLE)
    assert experiment_threads() >= 1


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2"])
def test_threads_must_be_a_positive_integer(value):
    with pytest.raises(ValueError, match=r"threads: expected a positive integer or None"):
        set_experiment_threads(value)


@pytest.mark.parametrize("text", ["0", "two", "-3"])
def test_a_bad_variable_is_named(restore_threads, monkeypatch, text):
    set_experiment_threads(None)
    monkeypatch.setenv(experiments.THREADS_VARIABLE, text)
    with pytest.raises(ValueError, match=r"PYMC_ODESENS_EXPERIMENT_THREADS: expected a positive"):
        experiment_threads()
