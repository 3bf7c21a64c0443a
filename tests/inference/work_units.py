"""Work units for the executor tests: module-level functions a worker process imports."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

_SYSTEM = {}


def seeded_solve(seed: int) -> np.ndarray:
    """A stiff solve whose parameters and initial state are drawn with ``seed``: the same
    bits wherever it runs."""
    from pymc_odesens import OdeSystem, solve

    system = _SYSTEM.get("robertson")
    if system is None:
        system = _SYSTEM["robertson"] = OdeSystem(
            lambda t, y, p: [
                -p[0] * y[0] + p[1] * y[1] * y[2],
                p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] ** 2,
                p[2] * y[1] ** 2,
            ],
            n_states=3,
            n_params=3,
            name="robertson",
        )
    rng = np.random.default_rng(seed)
    k = np.array([0.04, 1e4, 3e7]) * rng.uniform(0.5, 2.0, size=3)
    y0 = [rng.uniform(0.5, 1.5), 0.0, 0.0]
    return solve(system, y0, np.geomspace(1e-3, 1e3, 7), k, method="bdf").y


def die_once(marker_dir: str, seed: int, target: int) -> np.ndarray:
    """:func:`seeded_solve`, except that the process running unit ``target`` dies the first
    time (a worker lost in the middle of the run)."""
    marker = Path(marker_dir) / f"died_{target}"
    if seed == target and not marker.exists():
        marker.write_text(str(os.getpid()))
        os._exit(1)
    return seeded_solve(seed)


def always_die(seed: int) -> None:
    """Kills every process that runs it."""
    os._exit(1)


def fails(seed: int) -> None:
    raise ValueError(f"unit {seed} fails by design")


def line_model_dying_once(marker_dir: str, parent_pid: int):
    """A PyMC model of a line through noisy points (a model factory for ``find_modes``);
    the first worker process other than ``parent_pid`` that builds it dies (a worker lost
    in the middle of a multistart)."""
    import pymc as pm

    marker = Path(marker_dir) / "died_building"
    if os.getpid() != parent_pid and not marker.exists():
        marker.write_text(str(os.getpid()))
        os._exit(1)
    t = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5])
    y = np.array([0.9, 2.2, 2.8, 4.1, 5.2, 5.8])
    with pm.Model() as model:
        a = pm.Uniform("a", -10.0, 10.0)
        b = pm.Normal("b", 0.0, 10.0)
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", a * t + b, s, observed=y)
    return model
