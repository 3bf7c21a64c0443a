"""PyMC's choice of step methods with one gradient of the log-density instead of one per variable.

``pm.sample`` first decides which step method samples each free variable
(``pymc.sampling.mcmc.assign_step_methods``). To know whether a variable has a gradient it
calls ``pytensor.grad(model.logp(), var)`` once per value variable, even when an external
sampler (nutpie) is asked for. Each call differentiates the whole log-density graph; a PEtab
model with one random variable per parameter has a large one. On Bachmann_MSB2011 (113
parameters) this probe took 216 of the 298.5 s before nutpie's first draw (under
cProfile); one draw after one tuning step took 169.4 s through ``pm.sample`` and 73.2 s
with this module (docs/pymc.md).

:func:`one_gradient_step_assignment` replaces the probe while ``pm.sample`` runs: when no
step is given and every value variable is continuous, one gradient with respect to all of
them proves that each has one (``pytensor.grad`` raises if any has none), and each variable
gets the method of highest competence given a gradient, as PyMC would choose. In every other
case (steps given, discrete variables, a gradient that cannot be taken) PyMC's own function
decides.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pymc as pm
import pymc.sampling.mcmc as pymc_mcmc
import pytensor.gradient as tg
from pymc.vartypes import discrete_types

__all__ = ["assign_with_one_gradient", "one_gradient_step_assignment"]


def assign_with_one_gradient(model: pm.Model, step=None, methods=None, *, fallback=None):
    """``assign_step_methods(model, step, methods)`` of PyMC, with one gradient.

    Parameters
    ----------
    model : pymc.Model
    step, methods
        As for :func:`pymc.sampling.mcmc.assign_step_methods`.
    fallback : callable, optional
        The function used where one gradient does not decide (default: PyMC's).

    Returns
    -------
    (provided_steps, selected_steps)
        As PyMC's function returns them.
    """
    fallback = fallback or pymc_mcmc.assign_step_methods
    value_vars = list(model.value_vars)
    if step is not None or not value_vars or any(v.dtype in discrete_types for v in value_vars):
        return fallback(model, step, methods=methods)
    try:
        tg.grad(model.logp(), value_vars)
    except (NotImplementedError, tg.NullTypeGradError):
        return fallback(model, step, methods=methods)
    candidates = list(methods or pm.STEP_METHODS)
    selected: dict = {}
    for var in value_vars:
        rv = model.values_to_rvs[var]
        best = max(candidates, key=lambda method, rv=rv: method._competence(rv, True))
        selected.setdefault(best, []).append(var)
    return [], selected


@contextmanager
def one_gradient_step_assignment() -> Iterator[None]:
    """While inside, ``pm.sample`` chooses step methods with :func:`assign_with_one_gradient`."""
    original = pymc_mcmc.assign_step_methods

    def assign(model, step=None, methods=None):
        return assign_with_one_gradient(model, step, methods, fallback=original)

    pymc_mcmc.assign_step_methods = assign
    try:
        yield
    finally:
        pymc_mcmc.assign_step_methods = original
