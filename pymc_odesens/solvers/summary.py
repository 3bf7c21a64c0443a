"""Short one-line summaries of result objects (their ``repr``), instead of whole arrays."""

from __future__ import annotations

import numpy as np

__all__ = ["times_summary", "names_summary", "tolerance_summary", "stats_summary"]


def times_summary(t: np.ndarray) -> str:
    """``"<61 times in [0, 600]>"``."""
    t = np.asarray(t)
    if t.size == 0:
        return "<no times>"
    return f"<{t.size} time{'s' if t.size != 1 else ''} in [{t[0]:g}, {t[-1]:g}]>"


def names_summary(names, limit: int = 4) -> str:
    """``"prey, predator"``, or the first ``limit`` names and how many more."""
    names = list(names)
    if len(names) <= limit:
        return ", ".join(map(str, names))
    return ", ".join(map(str, names[:limit])) + f", ... ({len(names)} in all)"


def tolerance_summary(controls) -> str:
    """``"rtol=1e-06, atol=1e-06"`` (the largest absolute tolerance when they differ)."""
    atol = np.asarray(controls.absolute_tolerance, dtype=float)
    spread = "" if atol.size <= 1 or np.all(atol == atol.flat[0]) else " (max)"
    return f"rtol={controls.relative_tolerance:g}, atol={atol.max():g}{spread}"


def stats_summary(stats: dict) -> str:
    """``"231 steps (12 rejected)"``."""
    steps = stats.get("n_steps")
    if steps is None:
        return "no steps"
    rejected = stats.get("n_rejected_steps")
    return f"{steps} steps" + (f" ({rejected} rejected)" if rejected else "")
