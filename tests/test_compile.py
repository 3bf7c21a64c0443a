"""``python -m pymc_odesens.compile``: every core compiled ahead of time, step by step."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from pymc_odesens import compile as compile_command


def test_list_names_every_step_and_group():
    done = subprocess.run(
        [sys.executable, "-m", "pymc_odesens.compile", "--list"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert len(lines) == len(compile_command.STEPS)
    assert lines[1].split(maxsplit=1) == ["solvers", "the bdf/adams solver"]
    assert {line.split()[0] for line in lines} == set(compile_command.GROUPS)


def test_an_unknown_group_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        compile_command.main(["solvers", "nonsense"])
    err = capsys.readouterr().err
    assert "unknown group(s) ['nonsense']" in err and "known: solvers, events" in err


def test_steps_of_a_group_report_their_times():
    # the Fisher information's core: compiled once, loaded from numba's cache after that
    out = io.StringIO()
    done = compile_command.compile_steps({"fisher"}, out=out)
    assert [what for what, _ in done] == ["the Fisher information"]
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/1] the Fisher information: ") and lines[0].endswith(" s")
    assert lines[-1].startswith("compiled in ")
    assert "pymc_odesens.sensitivity.fisher_accumulation" in sys.modules


def test_steps_in_two_processes_report_each_step_and_return_them_in_order():
    # loaded from numba's cache (the session compiled every step first); the steps of the
    # solvers' group come first, then the others
    out = io.StringIO()
    done = compile_command.compile_in_processes(2, {"solvers", "fisher"}, out=out)
    assert [what for what, _ in done] == [
        "the rk45/ckrk solver",
        "the bdf/adams solver",
        "the Fisher information",
    ]
    assert all(seconds >= 0.0 for _, seconds in done)
    lines = out.getvalue().splitlines()
    assert [line[:5] for line in lines[:3]] == ["[1/3]", "[2/3]", "[3/3]"]
    assert lines[2].startswith("[3/3] the Fisher information: ")
    assert {line.split("] ", 1)[1].rsplit(": ", 1)[0] for line in lines[:3]} == {
        what for what, _ in done
    }
    assert lines[-1].startswith("compiled in ") and "in 2 processes" in lines[-1]


@pytest.mark.parametrize("jobs", [0, -1, True, 1.5])
def test_jobs_must_be_a_positive_integer(jobs):
    with pytest.raises(ValueError, match=r"jobs: expected a positive integer, got"):
        compile_command.compile_in_processes(jobs)


def test_an_unknown_group_in_processes_is_refused_by_name():
    with pytest.raises(
        ValueError, match=r"groups: unknown group\(s\) \['nonsense'\]; known: solvers"
    ):
        compile_command.compile_in_processes(2, {"fisher", "nonsense"})


def test_jobs_on_the_command_line_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        compile_command.main(["--jobs", "0"])
    assert "--jobs: expected a positive integer, got 0" in capsys.readouterr().err
