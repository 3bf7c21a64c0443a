"""AMICI as a benchmark peer, run in its own virtualenv through ``amici_runner.py``.

AMICI is never imported here: its interpreter is ``$PYMC_ODESENS_AMICI_PYTHON`` (default
``/work/amici_env/bin/python`` when that exists). The runner builds each model once into
``~/.cache/pymc_odesens_bench/amici`` (or ``$PYMC_ODESENS_BENCH_CACHE_DIR/amici``) and prints
JSON; see ``amici_runner.py`` for what is timed and how.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["SKIP_MESSAGE", "amici_python", "run_amici", "run_amici_petab"]

RUNNER = Path(__file__).resolve().parent / "amici_runner.py"
PETAB_RUNNER = Path(__file__).resolve().parent / "amici_petab_runner.py"
PYPESTO_SAMPLING_RUNNER = Path(__file__).resolve().parent / "pypesto_sampling_runner.py"
DEFAULT_PYTHON = Path("/work/amici_env/bin/python")
SKIP_MESSAGE = (
    "AMICI not installed, skipped (pip install amici swig antimony into a separate venv "
    "and set PYMC_ODESENS_AMICI_PYTHON)"
)


def amici_python() -> Path | None:
    """The AMICI virtualenv's interpreter, or None if there is none."""
    env = os.environ.get("PYMC_ODESENS_AMICI_PYTHON")
    if env:
        path = Path(env)
        return path if path.exists() else None
    return DEFAULT_PYTHON if DEFAULT_PYTHON.exists() else None


def run_amici(
    model: str,
    *,
    modes=("plain",),
    tolerances=((1e-6, 1e-8),),
    repeats: int = 20,
    lmm: str = "bdf",
    models_dir: str | Path | None = None,
    timeout: float = 1800.0,
) -> dict | None:
    """Run the AMICI peer on ``model``; the runner's JSON as a dict, or None (reason printed).

    ``tolerances`` is a sequence of ``(rtol, atol)``; the result's ``"results"`` holds one
    entry per pair with one sub-dict per mode. The first call for a model builds it (minutes).
    """
    python = amici_python()
    if python is None:
        print(SKIP_MESSAGE, flush=True)
        return None
    cmd = [
        str(python),
        str(RUNNER),
        "--model",
        model,
        "--modes",
        ",".join(modes),
        "--tolerances",
        ",".join(f"{r!r}/{a!r}" for r, a in tolerances),
        "--repeats",
        str(repeats),
        "--lmm",
        lmm,
    ]
    if models_dir is not None:
        cmd += ["--models-dir", str(models_dir)]
    return _run(python, cmd, model, timeout)


def _run(python: Path, cmd: list[str], label: str, timeout: float) -> dict | None:
    """Run a runner in the AMICI venv; its last JSON line as a dict, or None (reason printed)."""
    model = label
    env = dict(os.environ)
    # cmake has to find swig (installed in the AMICI venv) when a model is built
    env["PATH"] = str(python.parent) + os.pathsep + env.get("PATH", "")
    # the main environment's python path is irrelevant there
    env.pop("PYTHONPATH", None)
    # AMICI is built with OpenMP and links OpenBLAS; ours is single-threaded, so is AMICI
    # here (unless the caller says otherwise). On a busy machine idle threads otherwise
    # inflate and scatter AMICI's wall times.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        proc = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=None,  # the runner's progress lines go straight to our terminal
            text=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        print(f"AMICI runner timed out after {timeout:.0f} s on {model}, skipped", flush=True)
        return None
    except OSError as err:
        print(f"AMICI runner could not start ({err}), skipped", flush=True)
        return None
    if proc.returncode != 0:
        print(f"AMICI runner failed on {model} (exit {proc.returncode}), skipped", flush=True)
        return None
    for line in reversed(proc.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    print(f"AMICI runner printed no JSON for {model}, skipped", flush=True)
    return None


def run_amici_petab(
    yaml: str | Path,
    *,
    modes=("llh", "forward", "adjoint"),
    rtol: float = 1e-8,
    atol: float = 1e-16,
    steady_state_tolerances: tuple[float, float] | None = None,
    max_steps: int | None = None,
    repeats: int = 10,
    rebuild: bool = False,
    timeout: float = 7200.0,
) -> dict | None:
    """Run AMICI on a PEtab problem (``amici_petab_runner.py``); its JSON, or None.

    The first call for a problem builds its AMICI model (minutes) and records the build time.
    ``max_steps``: integration steps allowed between output times, forward and backward
    (AMICI's default is 10 000; None keeps it).
    """
    python = amici_python()
    if python is None:
        print(SKIP_MESSAGE, flush=True)
        return None
    cmd = [
        str(python),
        str(PETAB_RUNNER),
        "--yaml",
        str(yaml),
        "--modes",
        ",".join(modes),
        "--rtol",
        repr(rtol),
        "--atol",
        repr(atol),
        "--repeats",
        str(repeats),
    ]
    if steady_state_tolerances is not None:
        cmd += [
            "--steady-state-rtol",
            repr(steady_state_tolerances[0]),
            "--steady-state-atol",
            repr(steady_state_tolerances[1]),
        ]
    if max_steps is not None:
        cmd += ["--max-steps", str(int(max_steps))]
    if rebuild:
        cmd.append("--rebuild")
    return _run(python, cmd, Path(yaml).stem, timeout)


def run_pypesto_sampling(
    yaml: str | Path,
    out: str | Path,
    *,
    n_starts: int = 10,
    samplers=("am", "apt"),
    n_samples: int = 100_000,
    rtol: float = 1e-8,
    atol: float = 1e-16,
    seed: int = 1,
    timeout: float = 7200.0,
    nominal_start: bool = False,
    pt_chains: int = 20,
) -> dict | None:
    """Sample a PEtab problem with pyPESTO (``pypesto_sampling_runner.py``); its JSON, or None.

    The chains at inverse temperature 1 are written to ``out/<sampler>.npy``.
    """
    python = amici_python()
    if python is None:
        print(SKIP_MESSAGE, flush=True)
        return None
    cmd = [
        str(python),
        str(PYPESTO_SAMPLING_RUNNER),
        "--yaml",
        str(yaml),
        "--out",
        str(out),
        "--n-starts",
        str(n_starts),
        "--samplers",
        ",".join(samplers),
        "--n-samples",
        str(n_samples),
        "--rtol",
        repr(rtol),
        "--atol",
        repr(atol),
        "--seed",
        str(seed),
        "--pt-chains",
        str(pt_chains),
    ] + (["--nominal-start"] if nominal_start else [])
    return _run(python, cmd, Path(yaml).stem, timeout)


if __name__ == "__main__":  # python benchmarks/peers/amici.py pka
    print(json.dumps(run_amici(sys.argv[1] if len(sys.argv) > 1 else "linear2"), indent=2))
