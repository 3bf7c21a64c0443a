"""Where a PEtab problem is: its problem file (YAML), given itself or by its folder, and its
format version.

A problem file is the YAML file that lists a problem's model and tables and says its
``format_version``. :func:`problem_file` takes such a file, or a folder that holds exactly
one (the benchmark collection names most after their folder, ``Boehm_JProteomeRes2014/
Boehm_JProteomeRes2014.yaml``, some not: ``Bertozzi_PNAS2020/problem.yaml``); other YAML
files beside it (a PEtab Select problem, say) do not count, and subfolders are not
searched. :func:`read_problem` reads a PEtab v1 problem with ``petab.v1.Problem`` and a
PEtab v2 problem with ``petab.v2.Problem`` (:mod:`pymc_odesens.petab.v2_reader`, which
gives it to the rest of the layer in the v1 form).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import petab.v1 as petab
import yaml
from petab.versions import parse_version

from pymc_odesens.petab.errors import PetabError, PetabUnsupportedError

__all__ = ["ProblemSource", "format_version", "problem_file", "problem_name", "read_problem"]

_SUFFIXES = (".yaml", ".yml")
FORMAT_VERSION = "format_version"


def _load(path: Path):
    try:
        with open(path, encoding="utf-8") as stream:
            return yaml.safe_load(stream)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise PetabError(f"{path}: not a readable YAML file ({error})") from error


def _is_problem_file(path: Path) -> bool:
    """A YAML file that says its PEtab ``format_version``."""
    try:
        content = _load(path)
    except PetabError:
        return False
    return isinstance(content, dict) and FORMAT_VERSION in content


def problem_file(path: str | os.PathLike) -> Path:
    """The problem file ``path`` names: the file itself, or the only problem file in the
    folder ``path``.

    Parameters
    ----------
    path : str or path-like
        A problem's YAML file, or a folder holding exactly one (directly, not in a
        subfolder).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist, or is a folder without a problem file (the YAML files it
        holds are named).
    PetabError
        ``path`` is a folder with several problem files (each named: pass one of them).
    """
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"no PEtab problem file or folder {str(path)!r}")
    candidates = sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES and p.is_file())
    problems = [p for p in candidates if _is_problem_file(p)]
    if len(problems) == 1:
        return problems[0]
    if not problems:
        others = ", ".join(repr(p.name) for p in candidates)
        seen = f"its YAML files ({others}) do not" if others else "it holds no YAML file that"
        raise FileNotFoundError(
            f"no PEtab problem file in the folder {str(path)!r}: {seen} say a "
            f"{FORMAT_VERSION} (pass the problem's YAML file)"
        )
    names = ", ".join(repr(p.name) for p in problems)
    raise PetabError(
        f"the folder {str(path)!r} holds {len(problems)} PEtab problem files ({names}): "
        "pass the one to read"
    )


def problem_name(path: Path) -> str:
    """A problem's name: the file's stem, or its folder's name when the file has the
    generic name ``problem.yaml`` (``Bertozzi_PNAS2020/problem.yaml`` is
    ``'Bertozzi_PNAS2020'``, whether the file or the folder is given)."""
    if path.stem != "problem":
        return path.stem
    return path.resolve().parent.name or path.stem


def format_version(path: Path) -> int:
    """The major ``format_version`` of the problem file ``path`` (1 or 2).

    Raises
    ------
    PetabError
        The file is not YAML, or gives no ``format_version``.
    PetabUnsupportedError
        A major version other than 1 or 2.
    """
    content = _load(path)
    if not isinstance(content, dict) or FORMAT_VERSION not in content:
        raise PetabError(f"{path}: not a PEtab problem file (it gives no {FORMAT_VERSION})")
    version = content[FORMAT_VERSION]
    try:
        major = parse_version(str(version))[0]
    except (ValueError, TypeError, IndexError) as error:
        raise PetabError(f"{path}: {FORMAT_VERSION} {version!r} is not a version") from error
    if major not in (1, 2):
        raise PetabUnsupportedError(
            f"{path}: {FORMAT_VERSION} {version!r}: only PEtab 1 and 2 problems are supported"
        )
    return major


@dataclass(frozen=True)
class ProblemSource:
    """A problem as read from its file: the tables in the form the layer reads (PEtab v1).

    Attributes
    ----------
    path : pathlib.Path
        The problem file.
    name : str
    format_version : int
        1 or 2.
    petab_problem : petab.v1.Problem
        The problem's tables (for a v2 problem: their v1 form,
        :func:`pymc_odesens.petab.v2_reader.v1_form`).
    petab_v2_problem : petab.v2.Problem or None
        A v2 problem as the petab library read it.
    """

    path: Path
    name: str
    format_version: int
    petab_problem: petab.Problem
    petab_v2_problem: object = None

    def explained(self, error: PetabError) -> PetabError:
        """``error`` as it reads to the author of the problem: for a v2 problem, with a note
        on the v1 form the layer read (its condition pairs are the experiments)."""
        if self.format_version == 1:
            return error
        return type(error)(
            f"{error} [PEtab v2 problem {self.path.name}, read in its PEtab v1 form: each "
            "experiment is a simulation condition of its id, its pre-equilibration period "
            "a preequilibrationConditionId; docs/petab.md, 'PEtab v2']"
        )


def read_problem(path: str | os.PathLike) -> ProblemSource:
    """Read the problem at ``path`` (:func:`problem_file`) with the petab library.

    Raises
    ------
    FileNotFoundError, PetabError, PetabUnsupportedError
        See :func:`problem_file`, :func:`format_version` and, for v2 problems,
        :func:`pymc_odesens.petab.v2_reader.read_v2_problem`.
    """
    path = problem_file(path)
    major = format_version(path)
    name = problem_name(path)
    if major == 2:
        from pymc_odesens.petab.v2_reader import read_v2_problem

        v2_problem, v1_problem = read_v2_problem(path)
        if v2_problem.config is not None and v2_problem.config.id:
            name = v2_problem.config.id
        return ProblemSource(path, name, 2, v1_problem, v2_problem)
    with warnings.catch_warnings():
        # pandas' deprecations of what petab calls, not the user's to act on
        warnings.filterwarnings("ignore", module=r"petab\.")
        v1_problem = petab.Problem.from_yaml(str(path))
    return ProblemSource(path, name, 1, v1_problem)
