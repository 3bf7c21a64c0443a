"""A PEtab problem as the workers of a distributed log-likelihood rebuild it.

:class:`PetabLikelihoodSource` is what :meth:`PetabProblem.likelihood_source` gives
:class:`~pymc_odesens.inference.DistributedLogLikelihood`: the YAML file's path, the
solver options, a SHA-256 digest of every file the YAML names, and the simulated system's
kernel cache key. It is sent to each worker once; the worker reads the problem from the
files (which must be there at the same path: a shared file system, or copies), checks the
digests and the kernel key (the same problem, and the same generated code, as where the
likelihood was made: a worker with other files or another version of the package would
compute other numbers, so it refuses, naming the file or the keys), and keeps it resident
(:class:`PetabResidentLikelihood`): its kernels come from the worker's own disk cache
(``PYMC_ODESENS_CACHE_DIR``), the functions of its chunks of experiments
(:meth:`PetabProblem.experiments_log_likelihood`) are compiled on first use.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import socket
from collections.abc import Callable
from pathlib import Path

import numpy as np
import petab.v1 as petab

from pymc_odesens.codegen.kernels import kernel_cache_key

__all__ = ["PetabLikelihoodSource", "PetabResidentLikelihood", "problem_files"]


def problem_files(yaml_path: Path) -> list[Path]:
    """The YAML file and every file it names (relative to its folder), sorted."""
    yaml_path = Path(yaml_path)
    named: set[Path] = {yaml_path}

    def walk(entry) -> None:
        if isinstance(entry, dict):
            for value in entry.values():
                walk(value)
        elif isinstance(entry, list):
            for value in entry:
                walk(value)
        elif isinstance(entry, str):
            candidate = yaml_path.parent / entry
            if candidate.is_file():
                named.add(candidate)

    walk(petab.yaml.load_yaml(str(yaml_path)))
    return sorted(named)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclasses.dataclass(frozen=True)
class PetabLikelihoodSource:
    """A PEtab problem's log-likelihood as a worker rebuilds it (see the module's docstring).

    Attributes
    ----------
    yaml_path : str
        Absolute.
    options : tuple of (str, value)
        The :class:`~pymc_odesens.petab.solver_options.SolverOptions` fields.
    files : tuple of (str, str)
        Each file's path relative to the YAML's folder and its SHA-256 digest.
    kernel_key : str
        The simulated system's kernel cache key.
    name : str
    n_experiments, n_parameters : int
    labels : tuple of str
        Each experiment's conditions.
    reader : callable
        Reads the problem on a worker: ``PetabProblem.from_yaml`` with the path and
        options (picklable: the class by reference).
    """

    yaml_path: str
    options: tuple
    files: tuple
    kernel_key: str
    name: str
    n_experiments: int
    n_parameters: int
    labels: tuple
    reader: Callable = dataclasses.field(compare=False, repr=False)

    @classmethod
    def of(cls, problem) -> PetabLikelihoodSource:
        """The source of a :class:`~pymc_odesens.petab.PetabProblem` read by ``from_yaml``.

        Raises
        ------
        ValueError
            The problem was not read from a file.
        """
        if problem.yaml_path is None:
            raise ValueError(
                f"{problem.name}: a distributed log-likelihood needs the problem's YAML file "
                "(the workers read it); read the problem with PetabProblem.from_yaml"
            )
        yaml_path = Path(problem.yaml_path)
        # the route and gradient tolerances measured here: every worker takes the same ones
        # (and none measures)
        options = problem.gradient_options()
        fields = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
        files = tuple(
            (p.relative_to(yaml_path.parent).as_posix(), _digest(p))
            for p in problem_files(yaml_path)
        )
        return cls(
            yaml_path=str(yaml_path),
            options=tuple(sorted(fields.items())),
            files=files,
            kernel_key=kernel_cache_key(problem.system),
            name=problem.name,
            n_experiments=len(problem.experiments),
            n_parameters=len(problem.parameters),
            labels=tuple(e.label for e in problem.experiments),
            reader=functools.partial(type(problem).from_yaml, str(yaml_path), **fields),
        )

    @property
    def key(self) -> str:
        text = repr((self.yaml_path, self.options, self.files, self.kernel_key))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def experiment_labels(self) -> list[str]:
        return list(self.labels)

    def _check_files(self) -> None:
        folder = Path(self.yaml_path).parent
        host = socket.gethostname()
        for relative, digest in self.files:
            path = folder / relative
            if not path.is_file():
                raise FileNotFoundError(
                    f"{self.name}: the worker on {host} has no file {str(path)!r}; the workers "
                    "read the problem's files at the same path (a shared file system, or "
                    "copies)"
                )
            found = _digest(path)
            if found != digest:
                raise ValueError(
                    f"{self.name}: the worker on {host} reads {str(path)!r} with other content "
                    f"(sha256 {found[:16]}...) than where the likelihood was made "
                    f"({digest[:16]}...); the workers need the same files"
                )

    def build(self) -> PetabResidentLikelihood:
        """Read, check and keep the problem (on a worker).

        Raises
        ------
        FileNotFoundError, ValueError
            A file is missing or differs (named), the kernel key or the numbers of
            experiments and parameters differ (another version of the package).
        """
        self._check_files()
        problem = self.reader()
        key = kernel_cache_key(problem.system)
        found = (key, len(problem.experiments), len(problem.parameters))
        expected = (self.kernel_key, self.n_experiments, self.n_parameters)
        if found != expected:
            raise ValueError(
                f"{self.name}: the worker on {socket.gethostname()} builds another problem "
                f"from the same files (kernel key, experiments, parameters: {found}, "
                f"expected {expected}); the workers need the same version of pymc_odesens"
            )
        return PetabResidentLikelihood(problem)


class PetabResidentLikelihood:
    """A problem kept on a worker: the log-likelihood of chunks of its experiments."""

    def __init__(self, problem) -> None:
        self.problem = problem

    def part(self, experiments: tuple[int, ...], gradient: bool):
        """``f(x) -> (value, gradient or None)`` of ``experiments`` alone."""
        function = self.problem.experiments_log_likelihood(experiments, gradient)
        if gradient:

            def value_and_gradient(x):
                value, grad = function(x)
                return float(value), np.asarray(grad, dtype=np.float64)

            return value_and_gradient

        def value_only(x):
            return float(function(x)), None

        return value_only
