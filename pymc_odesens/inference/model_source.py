"""What a worker needs to build the model whose modes are searched: a picklable factory.

A work unit of :func:`~pymc_odesens.inference.find_modes` carries a *model factory*, a
picklable object whose call returns the PyMC model, never compiled code: a worker (a local
process, or a machine of a distributed executor) builds the model and compiles its
log-posterior once, and its kernels load from the disk cache. :func:`model_source` gives
the model for this process and the factory for the workers:

- a PEtab problem (anything with ``build_model()`` and ``model_factory()``, as
  :class:`pymc_odesens.petab.PetabProblem`): ``problem.build_model()`` here, the problem's
  factory (its YAML file and solver options) there;
- a ``pymc.Model``: the model here; there, the model's graph pickled by cloudpickle
  (:class:`PickledModel`: symbolic, with :class:`~pymc_odesens.OdeSystem`'s expressions;
  the kernels are loaded again from the cache);
- a callable without arguments that returns a ``pymc.Model`` (a function of a module the
  workers can import): called here and there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import cloudpickle
import pymc as pm

__all__ = ["PickledModel", "model_source", "factory_key"]


@dataclass(frozen=True)
class PickledModel:
    """A model factory holding a ``pymc.Model`` pickled by cloudpickle."""

    data: bytes

    def __call__(self) -> pm.Model:
        return cloudpickle.loads(self.data)


def factory_key(factory: Callable[[], pm.Model]) -> str:
    """A digest that names ``factory``'s model in a worker's cache of compiled objectives."""
    return hashlib.sha256(cloudpickle.dumps(factory)).hexdigest()


def model_source(problem_or_model) -> tuple[pm.Model, Callable[[], pm.Model]]:
    """``(model, factory)``: the model for this process, a picklable factory for workers.

    Raises
    ------
    TypeError
        ``problem_or_model`` is none of a PEtab problem, a ``pymc.Model`` or a callable
        returning one.
    """
    if isinstance(problem_or_model, pm.Model):
        return problem_or_model, PickledModel(cloudpickle.dumps(problem_or_model))
    if hasattr(problem_or_model, "build_model") and hasattr(problem_or_model, "model_factory"):
        return problem_or_model.build_model(), problem_or_model.model_factory()
    if callable(problem_or_model):
        model = problem_or_model()
        if not isinstance(model, pm.Model):
            raise TypeError(
                "problem_or_model: the callable returned "
                f"{type(model).__name__}, expected a pymc.Model"
            )
        return model, problem_or_model
    raise TypeError(
        "problem_or_model: expected a PetabProblem (build_model and model_factory), a "
        f"pymc.Model or a callable returning one; got {type(problem_or_model).__name__}"
    )
