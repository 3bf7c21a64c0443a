"""How a failed solve enters a PyMC model: the failure mode and the ``-inf`` potential.

``on_failure="reject"`` (the default inside a model) adds a potential that is ``-inf`` when
any solve of the model failed, so the sampler rejects the proposal
(:mod:`pymc_odesens.ops.rejection`); ``on_failure="raise"`` (the default outside a model)
raises the solver's error.
"""

from __future__ import annotations

import pymc as pm

from pymc_odesens.ops.rejection import FailurePenalty

__all__ = ["in_model", "resolve_on_failure", "failure_potential"]


def in_model() -> pm.Model | None:
    try:
        return pm.modelcontext(None)
    except TypeError:
        return None


def resolve_on_failure(on_failure: str | None) -> tuple[pm.Model | None, str]:
    """``(model, on_failure)``: the model context and the failure mode (checked; default
    ``"reject"`` inside a model, ``"raise"`` outside)."""
    model = in_model()
    if on_failure is None:
        on_failure = "reject" if model is not None else "raise"
    if on_failure not in ("reject", "raise"):
        raise ValueError(f"on_failure must be 'reject' or 'raise'; got {on_failure!r}")
    if on_failure == "reject" and model is None:
        raise ValueError(
            "on_failure='reject' needs a PyMC model context (the rejection is a potential); "
            "call ode_solution inside `with pm.Model():` or use on_failure='raise'"
        )
    return model, on_failure


def failure_potential(model: pm.Model, name: str, failed: list) -> None:
    """A potential ``-inf`` when any of the ``failed`` flags is set (a fresh name if taken)."""
    potential_name, base, k = name, name, 1
    while potential_name in model.named_vars:
        k += 1
        potential_name = f"{base}_{k}"
    # a marker the compile-time rewrites extend with the flags of failed gradient passes
    # (pymc_odesens.ops.rejection)
    pm.Potential(potential_name, FailurePenalty()(*failed))
