"""libRoadRunner as a benchmark peer, run in its own virtualenv through ``roadrunner_runner.py``.

libroadrunner is never imported here: its interpreter is ``$PYMC_ODESENS_ROADRUNNER_PYTHON``
(default: the AMICI venv's, :func:`benchmarks.peers.amici.amici_python`, where it is installed
on the benchmark machine).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from peers.amici import amici_python

__all__ = ["roadrunner_python", "run_roadrunner"]

RUNNER = Path(__file__).resolve().parent / "roadrunner_runner.py"


def roadrunner_python() -> Path | None:
    """The interpreter with libroadrunner, or None."""
    env = os.environ.get("PYMC_ODESENS_ROADRUNNER_PYTHON")
    if env:
        return Path(env) if Path(env).exists() else None
    return amici_python()


def run_roadrunner(
    files: list[str | Path],
    *,
    t_end: float = 10.0,
    points: int = 51,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    timeout: float = 1800.0,
) -> dict | None:
    """libRoadRunner's load and simulate times per file (the runner's JSON), or None."""
    python = roadrunner_python()
    if python is None:
        print("libroadrunner not installed, skipped (set PYMC_ODESENS_ROADRUNNER_PYTHON)")
        return None
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [str(python), str(RUNNER), *map(str, files), "--t-end", repr(t_end)]
    cmd += ["--points", str(points), "--rtol", repr(rtol), "--atol", repr(atol)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        print(f"libroadrunner runner exceeded {timeout:.0f} s")
        return None
    if done.returncode != 0:
        print("libroadrunner runner failed:", done.stderr.strip().splitlines()[-3:])
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])
