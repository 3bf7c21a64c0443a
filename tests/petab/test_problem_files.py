"""Where a problem is: a problem file, or a folder holding exactly one (Bertozzi_PNAS2020's
``problem.yaml``); the names and errors when a folder holds several or none."""

from __future__ import annotations

import shutil

import pytest

from pymc_odesens.petab import PetabError, PetabProblem, PetabUnsupportedError
from pymc_odesens.petab.problem_files import format_version, problem_file, problem_name
from tests.conftest import PETAB_DIR
from tests.petab.turnover import write_turnover_problem

# petab.calculate_llh of the collection's simulations.tsv (../shared/petab/README.md)
BERTOZZI_LLH = -158.86426740801508


@pytest.fixture(scope="module")
def bertozzi_folder():
    folder = PETAB_DIR / "Bertozzi_PNAS2020"
    if not (folder / "problem.yaml").is_file():
        pytest.fail(f"PEtab problem {folder} not found; set PYMC_ODESENS_SHARED_DIR")
    return folder


@pytest.mark.parametrize("given", ["folder", "file"])
def test_bertozzi_from_its_folder_and_its_file(bertozzi_folder, given):
    path = bertozzi_folder if given == "folder" else bertozzi_folder / "problem.yaml"
    problem = PetabProblem.from_yaml(path)
    assert problem.name == "Bertozzi_PNAS2020"
    assert problem.format_version == 1
    assert problem.log_likelihood() == pytest.approx(BERTOZZI_LLH, abs=1e-3)


def test_a_folder_is_its_only_problem_file(tmp_path):
    yaml = write_turnover_problem(tmp_path / "turnover")
    # other YAML files (a PEtab Select problem, say) and subfolders do not count
    (yaml.parent / "select.yaml").write_text("version: 1\ncriterion: AIC\n")
    write_turnover_problem(yaml.parent / "variant")
    assert problem_file(yaml.parent) == yaml
    assert problem_file(yaml) == yaml
    assert problem_name(yaml) == "turnover"


def test_a_folder_with_several_problem_files_names_them(tmp_path):
    yaml = write_turnover_problem(tmp_path)
    shutil.copy(yaml, tmp_path / "second.yaml")
    with pytest.raises(
        PetabError, match=r"2 PEtab problem files \('second.yaml', 'turnover.yaml'\)"
    ):
        PetabProblem.from_yaml(tmp_path)


def test_a_folder_without_a_problem_file_names_what_it_holds(tmp_path):
    (tmp_path / "select.yaml").write_text("version: 1\n")
    with pytest.raises(FileNotFoundError, match=r"its YAML files \('select.yaml'\) do not say"):
        PetabProblem.from_yaml(tmp_path)
    (tmp_path / "select.yaml").unlink()
    with pytest.raises(FileNotFoundError, match="holds no YAML file"):
        problem_file(tmp_path)
    with pytest.raises(FileNotFoundError, match="no PEtab problem file or folder"):
        problem_file(tmp_path / "missing.yaml")


def test_the_format_version_is_read(tmp_path):
    yaml = write_turnover_problem(tmp_path)
    assert format_version(yaml) == 1
    yaml.write_text(yaml.read_text().replace("format_version: 1", "format_version: 3.0.0"))
    with pytest.raises(PetabUnsupportedError, match="format_version '3.0.0'"):
        PetabProblem.from_yaml(yaml)
    yaml.write_text("parameter_file: parameters.tsv\n")
    with pytest.raises(PetabError, match="gives no format_version"):
        format_version(yaml)


def test_a_generic_file_name_takes_the_folders(tmp_path):
    yaml = write_turnover_problem(tmp_path / "my_study")
    generic = yaml.rename(yaml.parent / "problem.yaml")
    assert problem_name(generic) == "my_study"
