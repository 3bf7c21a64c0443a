"""Shared fixtures: where the reference material lives, and the reference models.

The tests read the project's reference material in place, from the folder ``shared``
beside the repository (``$PYMC_ODESENS_SHARED_DIR`` points elsewhere): ``models/`` (the
reference ODE models with ground truth), ``sbml-test-suite/`` and ``petab/``;
``$PYMC_ODESENS_MODELS_DIR`` may point to the models alone. README.md says where the
folder comes from. When it is missing the session stops at once with one message naming
the variable, rather than failing test by test.

Kernels are compiled into the usual on-disk cache (``$PYMC_ODESENS_CACHE_DIR``, default
``~/.cache/pymc_odesens``), so a second run of the suite reuses them.

The tests run in the order of :data:`PHASES`, not in pytest's alphabetical one: the quick
unit tests of the layers first, the long runs (sampling, the documentation's examples, the
examples end to end) last. In one process (``-n 0``) each phase announces itself when it
starts, and the summary lists the wall time of every phase. The default run spreads the
test files over two worker processes (pytest-xdist, ``-n 2 --dist loadfile`` in
pyproject.toml), whose files interleave; the summary then lists the time of each phase's
tests (setup, call and teardown) summed over the workers.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

SHARED_DIR = Path(
    os.environ.get("PYMC_ODESENS_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared")
)
MODELS_DIR = Path(os.environ.get("PYMC_ODESENS_MODELS_DIR", SHARED_DIR / "models"))
SBML_SUITE_DIR = SHARED_DIR / "sbml-test-suite"
PETAB_DIR = SHARED_DIR / "petab"


PRECOMPILE_JOBS = 2
"""The processes that compile the solvers before the first test (CI has two cores)."""


def pytest_sessionstart(session) -> None:
    if not MODELS_DIR.is_dir():
        pytest.exit(
            f"the reference material is missing: no folder {MODELS_DIR}. Set "
            "PYMC_ODESENS_SHARED_DIR to the folder that holds models/, sbml-test-suite/ and "
            "petab/ (README.md, 'Reference material'), or PYMC_ODESENS_MODELS_DIR to the "
            "models alone.",
            returncode=4,
        )
    if _distributed_controller(session.config):
        _compile_the_solvers(session.config)


def _compile_the_solvers(config) -> None:
    """Compile every solver into numba's cache once, in :data:`PRECOMPILE_JOBS` processes,
    before pytest-xdist starts its workers.

    Otherwise each worker compiles what its tests need when it first needs it, and the two
    workers compile the same cores at the same time (on empty caches, 392 s of compiles in
    one process, 245 s in two; 2026-11-29). With warm caches each process loads them (about
    15 s). With ``-n 0`` the tests compile what they need as they go, as before."""
    from pymc_odesens.compile import compile_in_processes

    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(
            f"\ncompiling the solvers into numba's cache in {PRECOMPILE_JOBS} processes "
            "(seconds when the cache is warm):",
            flush=True,
        )
        compile_in_processes(PRECOMPILE_JOBS)


PHASES: list[tuple[str, tuple[str, ...]]] = [
    # (what the phase is, the test paths it holds), in the order they run
    (
        "the package and its layers",
        ("test_layers.py", "test_package.py", "test_compile.py", "caching/"),
    ),
    ("model, code generation, solvers", ("model/", "codegen/", "solvers/")),
    ("sensitivities", ("sensitivity/",)),
    ("PyTensor Ops", ("ops/", "test_stan.py", "test_deprecated_paths.py")),
    ("PEtab problems", ("petab/",)),
    ("the SBML Test Suite sample", ("sbml_suite/",)),
    ("benchmark helpers", ("benchmarks/",)),
    ("inference: samplers, modes, metrics (long: they sample)", ("inference/",)),
    ("the documentation's code blocks (long: some sample)", ("test_docs.py",)),
    ("the examples end to end (the longest phase)", ("examples/",)),
]
_TESTS_DIR = Path(__file__).resolve().parent


def _phase_of_path(path: str) -> int:
    """The index of the phase of a test file, ``path`` relative to ``tests/`` (unknown paths
    go with the first one)."""
    for index, (_, prefixes) in enumerate(PHASES):
        if any(path == p or path.startswith(p) for p in prefixes):
            return index
    return 0


def _phase(item) -> int:
    """The index of the phase of a collected test."""
    try:
        path = Path(item.path).resolve().relative_to(_TESTS_DIR).as_posix()
    except ValueError:
        return 0
    return _phase_of_path(path)


def _phase_of_nodeid(nodeid: str) -> int:
    """The index of the phase of a test by its node id (``tests/<path>::<name>``)."""
    path = nodeid.split("::", 1)[0]
    return _phase_of_path(path.removeprefix("tests/"))


def _distributed_controller(config) -> bool:
    """True in the process that hands the tests to pytest-xdist's workers."""
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def pytest_collection_modifyitems(session, config, items) -> None:
    # a stable sort: pytest's order within a phase, the phases in the order of PHASES
    items.sort(key=_phase)
    config._pymc_odesens_phases = {"first": {}, "times": {}, "current": None}
    for item in items:
        config._pymc_odesens_phases["first"].setdefault(_phase(item), item.nodeid)


@pytest.hookimpl(tryfirst=True)  # before the terminal reporter names the test's file
def pytest_runtest_logstart(nodeid, location) -> None:
    state = getattr(_CONFIG.get("config"), "_pymc_odesens_phases", None)
    if state is None:
        return
    index = next((i for i, first in state["first"].items() if first == nodeid), None)
    if index is None:
        return
    now = time.perf_counter()
    if state["current"] is not None:
        started, previous = state["current"]
        state["times"][previous] = now - started
    state["current"] = (now, index)
    reporter = _CONFIG["config"].pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        if reporter._tw.width_of_current_line:  # after the progress dots of -q
            reporter._tw.line()
        reporter.currentfspath = None  # the next test's file is named again
        reporter.write_line(f"-- phase {index + 1} of {len(PHASES)}: {PHASES[index][0]}")


def pytest_runtest_logreport(report) -> None:
    """With workers: the time of each phase's tests (setup, call, teardown), summed."""
    config = _CONFIG.get("config")
    if config is None or not _distributed_controller(config):
        return
    totals = _CONFIG.setdefault("totals", {})
    index = _phase_of_nodeid(report.nodeid)
    totals[index] = totals.get(index, 0.0) + float(report.duration)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if _distributed_controller(config):
        totals = _CONFIG.get("totals", {})
        if totals:
            terminalreporter.write_sep("-", "time in each phase's tests, summed over the workers")
            for index, seconds in sorted(totals.items()):
                terminalreporter.write_line(f"{seconds:8.1f} s  {PHASES[index][0]}")
        return
    state = getattr(config, "_pymc_odesens_phases", None)
    if not state or state["current"] is None:
        return
    started, last = state["current"]
    state["times"][last] = time.perf_counter() - started
    terminalreporter.write_sep("-", "wall time per phase")
    for index, seconds in sorted(state["times"].items()):
        terminalreporter.write_line(f"{seconds:8.1f} s  {PHASES[index][0]}")


_CONFIG: dict = {}


def pytest_configure(config) -> None:
    _CONFIG["config"] = config


def model_path(name: str) -> Path:
    """Path of a reference model JSON; fails with the path when the model is missing."""
    path = MODELS_DIR / f"{name}.json"
    if not path.exists():
        pytest.fail(f"reference model {path} not found; set PYMC_ODESENS_MODELS_DIR")
    return path


def load_truth(name: str) -> dict[str, np.ndarray]:
    """Ground truth of a reference model (t, y, S, ...)."""
    with np.load(MODELS_DIR / f"{name}_truth.npz") as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="session")
def reference_system():
    """Factory: load (once per session) the OdeSystem of a reference model."""
    from pymc_odesens import OdeSystem

    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = OdeSystem.from_json(model_path(name))
        return cache[name]

    return get


def oscillator_model(system, route: str, seed: int, **controls):
    """The oscillator fit of the sampling tests: 10 noisy observations (sd 0.1) of the
    solution from y0 = (1, 0), theta = 0.15; theta, y0 and the noise scale unknown."""
    import pymc as pm

    from pymc_odesens import ode_solution, solve

    times = np.arange(1.0, 11.0)
    truth = solve(
        system,
        [1.0, 0.0],
        times,
        [0.15],
        method="rk45",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-10,
    ).y
    data = truth + 0.1 * np.random.default_rng(seed).normal(size=truth.shape)
    with pm.Model() as model:
        theta = pm.HalfNormal("theta", 1.0)
        y0 = pm.Normal("y0", 0.0, 1.0, shape=2)
        sigma = pm.HalfNormal("sigma", 1.0)
        mu = ode_solution(system, y0, times, [theta], sensitivity=route, **controls)
        pm.Normal("obs", mu, sigma, observed=data)
    return model


@pytest.fixture(scope="session")
def oscillator():
    """Stan's damped harmonic oscillator y1' = y2, y2' = -y1 - theta y2."""
    from pymc_odesens import OdeSystem

    return OdeSystem(
        lambda t, y, p: [y[1], -y[0] - p[0] * y[1]],
        states=["x", "v"],
        params=["theta"],
        name="damped_oscillator",
    )


@pytest.fixture(scope="session")
def dask_client():
    """A loopback Dask cluster for the tests of distributed work (the ``distributed`` extra):
    2 worker processes with 1 thread each, restarted by their nannies when killed; a task
    may be on 2 workers that die (``allowed-failures`` 1) before Dask gives up on it. Made
    once per session, on first use (its workers import the package: seconds)."""
    distributed = pytest.importorskip("distributed")
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
    client = distributed.Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()
