"""A compile that runs long says so (once, with a heartbeat and its end); a short one is silent."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pymc_odesens.caching import compile_notice

REPO = Path(__file__).resolve().parents[2]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Captured:
    def __init__(self, capsys) -> None:
        self.capsys = capsys

    def getvalue(self) -> str:
        return self.capsys.readouterr().err


@pytest.fixture
def quick_notices(monkeypatch, capsys):
    """Notices after 0.05 s and a heartbeat every 0.2 s; ``.getvalue()`` is stderr."""
    monkeypatch.setattr(compile_notice, "NOTICE_AFTER_S", 0.05)
    monkeypatch.setattr(compile_notice, "HEARTBEAT_S", 0.2)
    monkeypatch.setattr(compile_notice, "_POLL_S", 0.01)
    monkeypatch.delenv("PYMC_ODESENS_COMPILE_NOTICES", raising=False)
    return Captured(capsys)


def test_a_long_compile_is_announced_with_heartbeats_and_its_end(quick_notices):
    with compile_notice.compiling("a fake solver"):
        time.sleep(0.7)
    lines = quick_notices.getvalue().splitlines()
    assert lines[0] == (
        "pymc_odesens: compiling a fake solver (once per installation: later runs load it "
        "from the cache) ..."
    )
    heartbeats = [line for line in lines if line.startswith("pymc_odesens:   ... ")]
    assert len(heartbeats) >= 2  # one at the notice, then every 0.2 s
    assert lines[-1].startswith("pymc_odesens: compiled a fake solver in ")
    assert lines[-1].endswith(" s")
    assert sum("compiling" in line for line in lines) == 1  # said once


def test_a_short_compile_prints_nothing(quick_notices, monkeypatch):
    monkeypatch.setattr(compile_notice, "NOTICE_AFTER_S", 5.0)
    with compile_notice.compiling("a quick one"):
        time.sleep(0.1)
    time.sleep(0.05)
    assert quick_notices.getvalue() == ""


def test_steps_known_in_advance_are_counted(quick_notices):
    with compile_notice.compiling("three parts", steps=3) as task:
        for name in ("first", "second", "third"):
            time.sleep(0.15)
            task.advance(name)
    text = quick_notices.getvalue()
    assert "step 2 of 3" in text or "step 3 of 3" in text
    assert "compiled three parts in" in text


def test_an_uncached_compile_says_it_happens_in_every_process(quick_notices):
    with compile_notice.compiling("a wrapper", cached=False):
        time.sleep(0.2)
    assert "a wrapper (not cached: again in every process)" in quick_notices.getvalue()


def test_a_nested_compile_is_the_detail_of_the_outer_one(quick_notices):
    with compile_notice.compiling("the outer module"):
        with compile_notice.compiling("an inner function"):
            time.sleep(0.4)
    text = quick_notices.getvalue()
    assert text.count("compiling") == 1
    assert "the outer module" in text.splitlines()[0]
    assert "an inner function" in text  # named by the heartbeat


def test_a_terminal_gets_one_line_rewritten_in_place(monkeypatch, quick_notices):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with compile_notice.compiling("a fake solver"):
        time.sleep(0.5)
    text = terminal.getvalue()
    assert "\r\x1b[K" in text  # the heartbeat rewrites its line
    assert text.endswith(" s\n")
    assert text.count("\n") == 2  # the notice and the final line


def test_silenced_by_the_environment(quick_notices, monkeypatch):
    monkeypatch.setenv("PYMC_ODESENS_COMPILE_NOTICES", "0")
    with compile_notice.compiling("anything"):
        time.sleep(0.2)
    assert quick_notices.getvalue() == ""


def test_numba_compiles_are_announced_by_name(quick_notices):
    import numba

    compile_notice.install_compile_notices()

    @numba.njit
    def slow_to_compile(x):  # a fresh function: numba compiles it (no cache)
        total = 0.0
        for i in range(x.size):
            total += x[i] ** 2
        return total

    import numpy as np

    original = compile_notice.NOTICE_AFTER_S
    compile_notice.NOTICE_AFTER_S = 0.0  # any compile is long enough
    try:
        slow_to_compile(np.ones(3))
        time.sleep(0.05)
    finally:
        compile_notice.NOTICE_AFTER_S = original
    text = quick_notices.getvalue()
    assert "test_compile_notice.test_numba_compiles_are_announced_by_name" in text
    assert "slow_to_compile" in text
    assert "(not cached: again in every process)" in text


def test_a_warm_run_prints_nothing_extra(tmp_path):
    # a solve in a fresh process twice on the same caches: the second compiles nothing
    script = textwrap.dedent(
        """
        import numpy as np
        from pymc_odesens import OdeSystem, solve

        system = OdeSystem(lambda t, y, p: [-p[0] * y[0]], states=["x"], params=["k"])
        solve(system, [1.0], np.linspace(0.1, 1.0, 5), [0.5], method="rk45")
        print("solved")
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), PYMC_ODESENS_CACHE_DIR=str(tmp_path / "k"))
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
    assert done.stdout == "solved\n"
    assert done.stderr == ""
