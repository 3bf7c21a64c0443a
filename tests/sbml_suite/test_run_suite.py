"""tests/sbml_suite/run_suite.py: the suite's batch runner on an executor (a Dask cluster)
gives the outcomes, messages and errors of a local run."""

from __future__ import annotations

import pytest

from tests.sbml_suite.run_suite import main, run_cases
from tests.sbml_suite.suite import suite_directory

CASES = ["00001", "00002", "00003", "00039"]
"""Three passing cases and one refused (an algebraic rule): a value and a message each."""


@pytest.fixture(scope="module")
def local_results():
    if not suite_directory().is_dir():
        pytest.fail(
            f"SBML Test Suite not found at {suite_directory()}; set PYMC_ODESENS_SBML_SUITE_DIR"
        )
    return run_cases(CASES, workers=1)


def _values(results):
    return [(r.case, r.outcome, r.message, r.worst, r.tags) for r in results]


def test_a_dask_cluster_gives_the_local_outcomes(local_results, dask_client):
    assert [r.outcome for r in local_results] == ["pass", "pass", "pass", "refused"]
    assert "algebraic rule" in local_results[-1].message
    on_cluster = run_cases(CASES, executor=dask_client)
    assert _values(on_cluster) == _values(local_results)  # worst: the same float, bit for bit


def test_a_case_timeout_is_refused_with_an_executor(dask_client):
    with pytest.raises(ValueError, match="case_timeout"):
        run_cases(CASES, case_timeout=10.0, executor=dask_client)


def test_the_command_line_refuses_a_case_timeout_on_a_cluster(capsys):
    with pytest.raises(SystemExit):
        main(["--cases", "1", "--dask-workers", "1", "--case-timeout", "5"])
    assert "--case-timeout" in capsys.readouterr().err
