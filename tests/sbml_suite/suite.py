"""Running cases of the SBML Test Suite (semantic, time course) through from_sbml + solve.

A case directory ``NNNNN/`` holds the model (``NNNNN-sbml-l3v2.xml`` or the highest level it
has), ``NNNNN-settings.txt`` (start, duration, steps, the variables reported, the absolute
and relative tolerance, which variables are compared as amounts or concentrations),
``NNNNN-results.csv`` (the expected values) and ``NNNNN-model.m`` (its tags and test type).

:func:`run_case` reads the model with :meth:`OdeSystem.from_sbml`, solves it with ``bdf``
at tolerances far tighter than the case's, reads every reported variable off the solution
(``solution.amount``, ``solution.concentration`` or ``solution[id]``, as the settings say;
all through one compiled kernel) and applies the suite's criterion,
``|ours - expected| <= absolute + relative * |expected|`` at every output time. Its outcome
is ``"pass"``, ``"fail"`` (wrong numbers or a solver failure), ``"refused"`` (the importer
refused a feature by name: :class:`~pymc_odesens.model.sbml.SbmlUnsupportedError`),
``"error"`` (anything else) or ``"skipped"`` (not a time course).

Cases tagged ``RandomEventExecution`` check the statistics of the random order of tied
events, and a correct simulator fails some of them by chance: 00966's chi-square exceeds
its threshold 50 with probability 0.59 % under a fair coin (2 000 000 Monte Carlo runs of
its 6240 tests; its description says 0.00002, the chi-square approximation, which its
expected counts of 0.095 break). :func:`run_case` therefore seeds the tie-breaking
generator with the case's number (:func:`pymc_odesens.solvers.seed_event_order`), so that a
case's outcome is the same in every run; tests/solvers/test_trigger_events.py checks that
the draws are fair.

The module imports no test framework: worker processes and the full-run script
(:mod:`tests.sbml_suite.run_suite`) use it as well as the tests.
"""

from __future__ import annotations

import csv
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = [
    "EXCLUDED_TAGS",
    "CaseInfo",
    "CaseResult",
    "case_info",
    "goal_cases",
    "run_case",
    "suite_directory",
]

EXCLUDED_TAGS = frozenset({"AlgebraicRule", "FastReaction", "CSymbolDelay", "EventWithDelay"})
"""Tags of the features the importer refuses: a case with any of them must be refused."""

RELATIVE_TOLERANCE = 1e-10
"""The solver's relative tolerance (every case asks for 1e-4 or looser, one for 1e-9)."""

ABSOLUTE_TOLERANCE_FACTOR = 1e-6
"""The solver's absolute tolerance is this times the case's (and at most 1e-12)."""


def suite_directory() -> Path:
    """The suite's ``cases/semantic`` folder.

    ``$PYMC_ODESENS_SBML_SUITE_DIR`` if set, else ``sbml-test-suite/cases/semantic`` in the
    shared reference folder (``$PYMC_ODESENS_SHARED_DIR``, default ``shared`` beside the
    repository; see tests/conftest.py).
    """
    configured = os.environ.get("PYMC_ODESENS_SBML_SUITE_DIR")
    if configured:
        return Path(configured)
    default = Path(__file__).resolve().parents[3] / "shared"
    shared = Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", default))
    return shared / "sbml-test-suite" / "cases" / "semantic"


@dataclass(frozen=True)
class CaseInfo:
    """What a case's description and settings say."""

    case: str
    test_type: str
    tags: tuple
    start: float
    duration: float
    steps: int
    variables: tuple
    absolute: float
    relative: float
    amounts: tuple
    concentrations: tuple

    @property
    def excluded(self) -> bool:
        """True when the case uses a feature the importer refuses."""
        return bool(EXCLUDED_TAGS & set(self.tags))

    @property
    def in_goal(self) -> bool:
        """A time course without refused features: it must pass."""
        return self.test_type == "TimeCourse" and not self.excluded


def _tag_list(text: str, key: str) -> list[str]:
    match = re.search(rf"^{key}:[ \t]*(.*)$", text, re.MULTILINE)
    if not match:
        return []
    return [t.strip() for t in match.group(1).split(",") if t.strip()]


def _settings(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            values[key.strip()] = value.strip()
    return values


def _names(text: str) -> tuple:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def case_info(case: str, directory: Path | None = None) -> CaseInfo:
    """The description and settings of case ``case`` (e.g. ``"00001"``)."""
    folder = (directory or suite_directory()) / case
    description = (folder / f"{case}-model.m").read_text()
    settings = _settings(folder / f"{case}-settings.txt")
    types = _tag_list(description, "testType")
    return CaseInfo(
        case=case,
        test_type=types[0] if types else "",
        tags=tuple(_tag_list(description, "componentTags") + _tag_list(description, "testTags")),
        start=float(settings.get("start") or 0.0),
        duration=float(settings.get("duration") or 0.0),
        steps=int(float(settings.get("steps") or 0)),
        variables=_names(settings.get("variables", "")),
        absolute=float(settings.get("absolute") or 0.0),
        relative=float(settings.get("relative") or 0.0),
        amounts=_names(settings.get("amount", "")),
        concentrations=_names(settings.get("concentration", "")),
    )


def goal_cases(directory: Path | None = None) -> list[str]:
    """Every time-course case without a refused feature (the suite's goal set)."""
    directory = directory or suite_directory()
    cases = sorted(p.name for p in directory.iterdir() if p.name.isdigit())
    return [c for c in cases if case_info(c, directory).in_goal]


@dataclass
class CaseResult:
    """The outcome of one case (see the module's docstring)."""

    case: str
    outcome: str
    message: str = ""
    seconds: float = 0.0
    worst: float | None = None  # largest |ours - expected| / (absolute + relative |expected|)
    tags: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _expected(path: Path) -> tuple[list[float], dict[str, list[float]]]:
    with path.open() as handle:
        rows = list(csv.reader(handle))
    header = [h.strip() for h in rows[0]]
    data = [[float(v) for v in row] for row in rows[1:] if row]
    times = [row[0] for row in data]
    # by position: a variable may be called "time" too
    columns = {h: [row[j] for row in data] for j, h in enumerate(header) if j > 0}
    return times, columns


def _model_file(folder: Path, case: str) -> Path:
    candidates = sorted(folder.glob(f"{case}-sbml-*.xml"))
    if not candidates:
        raise FileNotFoundError(f"case {case}: no SBML file in {folder}")
    return candidates[-1]


def _variable_expressions(system, info: CaseInfo) -> list:
    sbml = system.sbml
    expressions = []
    for name in info.variables:
        if name in info.amounts and name in sbml.amounts:
            expressions.append(sbml.amounts[name])
        elif name in info.concentrations and name in sbml.concentrations:
            expressions.append(sbml.concentrations[name])
        else:
            expressions.append(system.outputs[name])
    return expressions


def _compare(ours, expected: dict, info: CaseInfo) -> tuple[float, str]:
    worst, where = 0.0, ""
    for m, name in enumerate(info.variables):
        column = expected[name]
        for i, want in enumerate(column):
            got = float(ours[i, m])
            if math.isnan(want) or math.isinf(want):
                ok = (math.isnan(want) and math.isnan(got)) or got == want
                ratio = 0.0 if ok else math.inf
            else:
                ratio = abs(got - want) / (info.absolute + info.relative * abs(want))
                if math.isnan(ratio):
                    ratio = math.inf
            if ratio > worst:
                worst, where = ratio, f"{name} at t[{i}]: {got!r}, expected {want!r}"
    return worst, where


def run_case(case: str, directory: Path | None = None) -> CaseResult:
    """Run case ``case`` and judge it by the suite's criterion (see the module's docstring)."""
    import numpy as np

    from pymc_odesens import OdeSolverError, OdeSystem, solve
    from pymc_odesens.model.sbml import SbmlUnsupportedError
    from pymc_odesens.solvers import seed_event_order

    directory = directory or suite_directory()
    info = case_info(case, directory)
    result = CaseResult(case=case, outcome="skipped", tags=list(info.tags))
    if info.test_type != "TimeCourse":
        result.message = f"test type {info.test_type}"
        return result
    folder = directory / case
    started = time.perf_counter()
    try:
        system = OdeSystem.from_sbml(_model_file(folder, case))
        times = info.start + np.arange(info.steps + 1) * (info.duration / info.steps)
        expected_times, expected = _expected(folder / f"{case}-results.csv")
        if not np.allclose(times, expected_times, rtol=1e-6, atol=1e-9):  # files round them
            raise ValueError("output times disagree with the results file")
        absolute = min(1e-12, info.absolute * ABSOLUTE_TOLERANCE_FACTOR)
        seed_event_order(int(case))  # reproducible draws of tied random-order events
        solution = solve(
            system,
            system.x0,
            times,
            system.p_nominal,
            t0=0.0,
            method="bdf",
            relative_tolerance=RELATIVE_TOLERANCE,
            absolute_tolerance=absolute,
        )
        ours = solution.evaluate(_variable_expressions(system, info))
        result.worst, where = _compare(ours, expected, info)
        result.outcome = "pass" if result.worst <= 1.0 else "fail"
        if result.outcome == "fail":
            result.message = f"{result.worst:.3g} x the tolerance: {where}"
    except SbmlUnsupportedError as err:
        result.outcome, result.message = "refused", str(err)
    except OdeSolverError as err:
        result.outcome, result.message = "fail", f"{type(err).__name__}: {err}"
    except Exception as err:  # noqa: BLE001 - every other failure is recorded, not raised
        result.outcome, result.message = "error", f"{type(err).__name__}: {err}"
    result.seconds = time.perf_counter() - started
    return result
