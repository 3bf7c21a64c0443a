"""benchmarks/common.py: the helper that runs a benchmark's child process."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def common():
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))
    return importlib.import_module("common")


def test_a_child_returns_the_json_of_its_last_line(common):
    code = "import json, sys; print('noise'); print(json.dumps({'args': sys.argv[1:]}))"
    assert common.run_code_child(code, ["a", "b"], "echo") == {"args": ["a", "b"]}


def test_a_failing_child_raises_with_its_label_and_stderr(common):
    code = "raise SystemExit('the child gave up')"
    with pytest.raises(RuntimeError, match="doomed: the child gave up"):
        common.run_code_child(code, [], "doomed")
