"""What a worker process needs to build a PEtab problem's PyMC model: its YAML file and
solver options (:meth:`PetabProblem.model_factory`).

Multistart mode finding (:func:`pymc_odesens.inference.find_modes`) ships a work unit to
each worker: never compiled code, only what rebuilds the model there (the kernels come
from the disk cache). :class:`PetabModelFactory` is that for a PEtab problem: a small
picklable object whose call reads the problem and builds the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import pymc as pm

__all__ = ["PetabModelFactory"]


@dataclass(frozen=True)
class PetabModelFactory:
    """Builds ``PetabProblem.from_yaml(yaml_path, **options).build_model()``.

    Attributes
    ----------
    yaml_path : str
        The problem's YAML file (absolute).
    options : tuple of (str, value)
        The solver options (:class:`~pymc_odesens.petab.solver_options.SolverOptions`
        fields) as sorted pairs.
    """

    yaml_path: str
    options: tuple

    def __call__(self) -> pm.Model:
        from pymc_odesens.petab.problem import PetabProblem

        return PetabProblem.from_yaml(self.yaml_path, **dict(self.options)).build_model()
