"""Shared helpers of the benchmark scripts: timing, tables, reference models, results files.

Nothing here imports pymc_odesens, so the helpers can be used before (and for timing) its import.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"

__all__ = [
    "BENCH_DIR",
    "REPO_DIR",
    "RESULTS_DIR",
    "add_executor_arguments",
    "batch_executor",
    "dask_client",
    "fit_power_law",
    "fmt_ms",
    "fmt_ratio",
    "load_reference",
    "load_truth",
    "model_path",
    "models_dir",
    "print_table",
    "progress",
    "relative_error",
    "report_load",
    "run_staged_child",
    "scaled_error",
    "time_call",
    "write_results",
]


def progress(message: str) -> None:
    """One progress line, flushed at once (the benchmarks run for minutes)."""
    print(message, flush=True)


# ----------------------------------------------------------------------------- models


def petab_yaml(name: str) -> Path:
    """The YAML file of the shared PEtab problem ``name`` (``$PYMC_ODESENS_SHARED_DIR/petab``,
    by default ``../shared/petab`` beside the repository)."""
    shared = Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", REPO_DIR.parent / "shared"))
    return shared / "petab" / name / f"{name}.yaml"


def models_dir() -> Path:
    """The shared reference models: ``$PYMC_ODESENS_MODELS_DIR`` or ``<repo>/../shared/models``."""
    env = os.environ.get("PYMC_ODESENS_MODELS_DIR")
    path = Path(env) if env else REPO_DIR.parent / "shared" / "models"
    if not (path / "load_model.py").exists():
        raise FileNotFoundError(
            f"no reference models (load_model.py) in {path}; set PYMC_ODESENS_MODELS_DIR"
        )
    return path


def model_path(name: str) -> Path:
    """Path of ``<name>.json`` among the shared models."""
    return models_dir() / f"{name}.json"


_LOADER = None


def _load_model_module():
    """``shared/models/load_model.py`` imported by path (it is not a package)."""
    global _LOADER
    if _LOADER is None:
        path = models_dir() / "load_model.py"
        spec = importlib.util.spec_from_file_location("shared_load_model", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _LOADER = module
    return _LOADER


def load_reference(name: str):
    """The model as numpy callables (``rhs``, ``jac_y``, ``jac_p``) lambdified from sympy."""
    return _load_model_module().load(str(model_path(name)))


def load_truth(name: str) -> dict | None:
    """``<name>_truth.npz`` as a dict (``t``, ``y``, ``S``, ...), or None if there is none."""
    path = models_dir() / f"{name}_truth.npz"
    if not path.exists():
        return None
    return _load_model_module().load_truth(str(path))


# ----------------------------------------------------------------------------- numbers


def scaled_error(value, truth, axis) -> float:
    """Largest error of any component relative to that component's largest magnitude.

    ``axis`` are the axes a component runs over (0 for y of shape (T, N): one component per
    state; (0, 1) for S of shape (T, N, P): one per parameter column). Components whose truth
    is identically zero are scaled by 1 (absolute error).
    """
    value = np.asarray(value, float)
    truth = np.asarray(truth, float)
    scale = np.abs(truth).max(axis=axis, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    return float((np.abs(value - truth) / scale).max())


def relative_error(value, truth) -> float:
    """``max|value - truth| / max|truth|`` over all entries."""
    value = np.asarray(value, float)
    truth = np.asarray(truth, float)
    return float(np.abs(value - truth).max() / max(np.abs(truth).max(), 1e-300))


def time_call(fn, *, repeats: int = 20, warmup: int = 1, max_seconds: float = 3.0) -> dict:
    """Median wall time of ``fn()`` after ``warmup`` calls.

    At most ``repeats`` timed calls, fewer once ``max_seconds`` are spent (at least one).
    Returns ``{"median_ms", "min_ms", "n", "result"}`` with the last result.
    """
    result = None
    for _ in range(warmup):
        result = fn()
    samples = []
    spent = 0.0
    while len(samples) < max(repeats, 1):
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        samples.append(elapsed * 1e3)
        spent += elapsed
        if spent > max_seconds:
            break
    return {
        "median_ms": statistics.median(samples),
        "min_ms": min(samples),
        "n": len(samples),
        "result": result,
    }


def fit_power_law(x, y) -> float | None:
    """Exponent b of the least-squares fit ``log y = a + b log x`` (None for < 2 points)."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2:
        return None
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def fmt_ms(value) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def fmt_ratio(value) -> str:
    if value is None or not np.isfinite(value):
        return "-"
    return f"{value:.1f}x" if value >= 10 else f"{value:.2f}x"


def fmt_err(value) -> str:
    return "-" if value is None else f"{value:.1e}"


# ----------------------------------------------------------------------------- output


def print_table(headers: list[str], rows: list[list], title: str | None = None) -> str:
    """Print (and return) an aligned text table; numbers are right-aligned."""
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row):
        parts = []
        for i, cell in enumerate(row):
            first = i == 0 or not any(ch.isdigit() for ch in cell)
            parts.append(cell.ljust(widths[i]) if first else cell.rjust(widths[i]))
        return "  ".join(parts).rstrip()

    out = []
    if title:
        out.append(title)
    out.append(line(cells[0]))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in cells[1:])
    text = "\n".join(out)
    print(text, flush=True)
    return text


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        value = float(value)
        return value if np.isfinite(value) else None
    return value


def load_average() -> float | None:
    """1-minute load average (None where the OS has none)."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def report_load(when: str) -> float | None:
    """Print the load average; timings on a busy machine are noisy (medians and ratios
    within one run are still comparable, absolute numbers less so)."""
    load = load_average()
    if load is not None:
        busy = load > 0.5 * (os.cpu_count() or 1)
        note = " - machine busy, timings are noisy" if busy else ""
        progress(f"[load average {when}: {load:.2f} on {os.cpu_count()} CPUs{note}]")
    return load


def machine_info() -> dict:
    info = {
        "python": sys.version.split()[0],
        "load_average_1min": load_average(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    for name in ("numpy", "scipy", "numba", "sympy"):
        try:
            info[name] = __import__(name).__version__
        except ImportError:
            pass
    info.update(code_version())
    return info


def code_version() -> dict:
    """Which pymc_odesens was measured.

    ``pymc_odesens_path`` is where the package is imported from. From the checkout:
    ``git_commit`` (its HEAD) and ``pymc_odesens_dirty`` (uncommitted files under
    ``pymc_odesens/``). From elsewhere (a ``git archive`` of a commit on ``PYTHONPATH``, see
    README.md): ``pymc_odesens_commit``, read from a file ``COMMIT`` beside the package, if any.
    """
    out: dict = {}
    spec = importlib.util.find_spec("pymc_odesens")
    if spec is None or not spec.origin:
        return out
    package = Path(spec.origin).resolve().parent
    out["pymc_odesens_path"] = str(package)
    if package.parent != REPO_DIR.resolve():
        marker = package.parent / "COMMIT"
        if marker.exists():
            out["pymc_odesens_commit"] = marker.read_text().strip()
        return out
    try:
        out["git_commit"] = subprocess.run(
            ["git", "-C", str(REPO_DIR), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(REPO_DIR), "status", "--porcelain", "--", "pymc_odesens"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        out["pymc_odesens_dirty"] = [line[3:] for line in status]
    except (OSError, subprocess.CalledProcessError):
        pass
    return out


def write_results(name: str, data: dict) -> Path:
    """Write ``benchmarks/results/<name>.json`` (with machine info) and return its path."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {"benchmark": name, "machine": machine_info(), **data}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_jsonable(payload), indent=2) + "\n")
    tmp.replace(path)
    return path


# ----------------------------------------------------------------------------- subprocesses


def _forward_lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def run_code_child(
    code: str, args: list[str], label: str, env: dict | None = None, timeout: float = 1800
) -> dict:
    """Run ``python -c code *args`` in the repository and return the JSON object its last
    line of stdout prints; a failing child raises ``RuntimeError`` naming ``label`` with the
    end of its stderr."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=dict(os.environ) if env is None else env,
        capture_output=True,
        text=True,
        cwd=REPO_DIR,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{label}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_staged_child(
    argv: list[str],
    stages: list[str],
    *,
    stage_timeout: float,
    label: str = "",
    env: dict[str, str] | None = None,
) -> dict:
    """Run ``python <argv>`` whose stdout has one JSON line ``{"stage": name, ...}`` per stage.

    Every stage (in the order of ``stages``) gets ``stage_timeout`` seconds from the end of
    the previous one; a stage that takes longer has the child stopped (by its handle) and is
    reported as ``{"timeout_s": stage_timeout}``, one the child dies in as
    ``{"error": <last lines of its stderr>}``; later stages are then missing. Returns
    ``{stage: fields}`` without the ``stage`` key. The child runs in the temporary directory
    (so that the checkout's own files are not importable by accident), with the
    environment ``env`` (default: this process's).
    """
    # stderr goes to a file: a chatty child must not block on a full pipe
    errors = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(
        [sys.executable, *argv],
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        cwd=tempfile.gettempdir(),
        env=env,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_forward_lines, args=(proc.stdout, lines), daemon=True).start()
    results: dict = {}
    pending = list(stages)
    deadline = time.perf_counter() + stage_timeout
    while pending:
        try:
            line = lines.get(timeout=max(deadline - time.perf_counter(), 0.01))
        except queue.Empty:
            proc.kill()
            proc.wait()
            results[pending[0]] = {"timeout_s": stage_timeout}
            progress(f"    {label} {pending[0]}: exceeded {stage_timeout:.0f} s, stopped")
            break
        if line is None:  # the child ended early
            proc.wait()
            errors.seek(0)
            err = errors.read().strip().splitlines()[-3:]
            results[pending[0]] = {"error": "\n".join(err)}
            progress(f"    {label} {pending[0]}: failed: {' | '.join(err)}")
            break
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        stage = data.pop("stage", None)
        if stage not in pending:
            continue
        results[stage] = data
        pending.remove(stage)
        deadline = time.perf_counter() + stage_timeout
    if proc.poll() is None:
        proc.wait()
    errors.close()
    return results


def time_reference_solve(function, system, truth, method, rtol, atol, repeats, max_seconds):
    """Time ``function(system, x0, truth["t"], p_nominal, ...)`` (``solve`` or
    ``solve_sensitivity``) on a reference model; returns ``(row, result)``.

    ``row`` holds the timings and step counts every benchmark table reports; the caller
    adds its own error columns from ``result``.
    """

    def call():
        return function(
            system,
            system.x0,
            truth["t"],
            system.p_nominal,
            t0=system.t0,
            method=method,
            relative_tolerance=rtol,
            absolute_tolerance=atol,
        )

    timing = time_call(call, repeats=repeats, max_seconds=max_seconds)
    result = timing["result"]
    row = {
        "solver": f"ours {method}",
        "median_ms": timing["median_ms"],
        "min_ms": timing["min_ms"],
        "n_timed": timing["n"],
        "n_steps": result.stats["n_steps"],
        "n_rhs_evals": result.stats["n_rhs_evals"],
        "stats": result.stats,
    }
    return row, result


def print_goals(items: list[dict], title: str = "Goals") -> None:
    """The goal table: goal, what was measured, and whether it is met (yes / NO / -)."""
    rows = [
        [g["goal"], g["measured"], {True: "yes", False: "NO"}.get(g.get("met"), "-")] for g in items
    ]
    print()
    print_table(["goal", "measured", "met"], rows, title=title)


def finish_run(
    name: str, data: dict, goal_items: list[dict], load_start, started: float, title: str = "Goals"
) -> Path:
    """Print the goals, the final load, and write ``data`` with goals, runtime and load."""
    print_goals(goal_items, title)
    load_end = report_load("at end")
    path = write_results(
        name,
        {
            **data,
            "goals": goal_items,
            "runtime_s": time.perf_counter() - started,
            "load_average": {"start": load_start, "end": load_end},
        },
    )
    progress(f"\nresults written to {path} ({time.perf_counter() - started:.0f} s)")
    return path


# ----------------------------------------------------------------------------- executors


def add_executor_arguments(parser) -> None:
    """``--scheduler ADDRESS`` and ``--dask-workers N`` (one or neither): where the batch's
    work units run (see :func:`dask_client`)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--scheduler", default=None, metavar="ADDRESS", help="run the batch on this Dask scheduler"
    )
    group.add_argument(
        "--dask-workers",
        type=int,
        default=None,
        metavar="N",
        help="run the batch on a Dask LocalCluster of N worker processes (1 thread each)",
    )


@contextlib.contextmanager
def dask_client(scheduler: str | None, n_workers: int | None):
    """None (neither given: the batch runs here), a Client of the Dask scheduler at
    ``scheduler``, or of a LocalCluster of ``n_workers`` worker processes with one thread
    each (closed on exit)."""
    if scheduler is None and n_workers is None:
        yield None
        return
    from dask.distributed import Client, LocalCluster

    if scheduler is not None:
        with Client(scheduler) as client:
            yield client
        return
    with (
        LocalCluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        yield client


def _path_plugin(folder: str):
    """A Dask worker plugin that puts ``folder`` on the worker's ``sys.path``; set up on
    every worker of the cluster, also on one that joins or is restarted later. (Its class
    is made here, so that it is pickled by value: the workers cannot import this module.)"""
    from distributed.diagnostics.plugin import WorkerPlugin

    class BenchmarksOnPath(WorkerPlugin):
        name = "pymc-odesens-benchmarks-path"
        idempotent = True

        def setup(self, worker) -> None:
            if folder not in sys.path:
                sys.path.insert(0, folder)

    return BenchmarksOnPath()


def batch_executor(executor):
    """:func:`pymc_odesens.inference.work_executor` of ``executor`` for a benchmark's batch
    (None: the units run in this process, one after the other).

    The benchmark scripts are not a package a worker can import: for a Dask client, every
    worker gets this folder on its ``sys.path`` (a worker plugin, which also reaches
    workers that join later), so that a work unit (a function of a script and its
    arguments: a file's path and options) runs on any worker that has the package, this
    checkout and the files at the same paths. (A unit a worker cannot unpickle kills the
    worker: Dask does not report it as the unit's error.)
    """
    from pymc_odesens.inference import work_executor

    runner = work_executor(executor, n_workers=1 if executor is None else None)
    if type(runner).__name__ == "DaskExecutor":
        executor.register_plugin(_path_plugin(str(BENCH_DIR)))
    return runner
