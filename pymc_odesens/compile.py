"""``python -m pymc_odesens.compile``: compile the solvers once, ahead of the first run.

numba compiles each solver core when a process first needs it and caches the machine code
(beside the package's sources, or under ``NUMBA_CACHE_DIR``), so on a new installation the
first solve, the first gradient and the first PyMC model wait for compiles of a minute or
more each. This command does all of them at once, one step after another with their
times, so that a user (or a Docker image build, or CI before its tests) pays them up front::

    python -m pymc_odesens.compile              # everything (a few minutes)
    python -m pymc_odesens.compile --jobs 2     # the steps spread over 2 processes
    python -m pymc_odesens.compile --list       # the steps
    python -m pymc_odesens.compile solvers pymc # some groups only

Generated kernels belong to a model and are compiled at its first use (later from the
kernel cache); a model's PyMC log-density is compiled, and cached by PyTensor, at its
first sampling.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from importlib import import_module

__all__ = ["STEPS", "compile_in_processes", "compile_steps", "main"]


def _module(name: str) -> Callable[[], object]:
    return lambda: import_module(name)


def _entry(name: str) -> Callable[[], object]:
    return lambda: getattr(import_module("pymc_odesens.ops.compiled_entries"), name)


def _pytensor_helpers() -> None:
    """PyTensor's C helpers (its virtual machine, compiled by a C compiler at first use)."""
    import pytensor
    import pytensor.tensor as pt

    x = pt.dvector("x")
    pytensor.function([x], (x * 2.0).sum())


STEPS: list[tuple[str, str, Callable[[], object]]] = [
    # (group, what, how)
    ("solvers", "the rk45/ckrk solver", _module("pymc_odesens.solvers.runge_kutta")),
    ("solvers", "the bdf/adams solver", _module("pymc_odesens.solvers.multistep")),
    ("events", "the solver driver for events", _module("pymc_odesens.solvers.hybrid")),
    (
        "adjoint",
        "the recorded trajectories of the adjoint",
        _module("pymc_odesens.codegen.recorded_trajectory"),
    ),
    (
        "adjoint",
        "the continuous adjoint's backward pass",
        _module("pymc_odesens.sensitivity.adjoint_backward"),
    ),
    ("adjoint", "the discrete adjoint", _module("pymc_odesens.sensitivity.discrete_adjoint")),
    ("pbs", "the Peano-Baker-series march", _module("pymc_odesens.sensitivity.pbs_march")),
    (
        "fisher",
        "the Fisher information",
        _module("pymc_odesens.sensitivity.fisher_accumulation"),
    ),
    (
        "steady_state",
        "the steady-state solver",
        _module("pymc_odesens.sensitivity.steady_state_core"),
    ),
    (
        "steady_state",
        "the steady-state gradient",
        _module("pymc_odesens.sensitivity.steady_state_implicit"),
    ),
    ("pymc", "PyTensor's C helpers", _pytensor_helpers),
    ("pymc", "the Ops' entry to bdf/adams", _entry("run_multistep_entry")),
    ("pymc", "the Ops' entry to rk45/ckrk", _entry("integrate_explicit_rk_entry")),
    ("pymc", "the Ops' entry to the event driver", _entry("integrate_hybrid_entry")),
    ("pymc", "the Ops' entry to event schedules", _entry("explicit_schedule_entry")),
    ("pymc", "the Ops' entry to the adjoint", _entry("backward_pass_entry")),
    ("pymc", "the Ops' entry to the discrete adjoint", _entry("discrete_adjoint_entry")),
    ("pymc", "the Ops' entry to the PBS march", _entry("march_sensitivities_entry")),
    (
        "pymc",
        "the Ops' entries to steady states",
        _module("pymc_odesens.ops.steady_state_entries"),
    ),
]
"""Every step: its group, what it compiles, and the call that compiles it (or loads it from
numba's cache, when it is there already)."""

GROUPS = tuple(dict.fromkeys(group for group, _, _ in STEPS))

FIRST_GROUP = "solvers"
"""The steps every other step builds on: :func:`compile_in_processes` compiles them before
the others (a step that started beside them would compile them a second time)."""


def compile_steps(groups=None, out=sys.stdout) -> list[tuple[str, float]]:
    """Compile the steps of ``groups`` (default all), one line each on ``out``.

    Returns
    -------
    list of (what, seconds)

    Raises
    ------
    ValueError
        If ``groups`` names a group that is not one of :data:`GROUPS`.
    """
    from pymc_odesens.caching.compile_notice import compiling

    chosen = [STEPS[k] for k in _chosen(groups)]
    done = []
    started = time.perf_counter()
    with compiling("pymc_odesens' solvers", steps=len(chosen)) as task:
        for k, (_, what, how) in enumerate(chosen, start=1):
            task.detail = what
            began = time.perf_counter()
            how()
            seconds = time.perf_counter() - began
            done.append((what, seconds))
            _step_line(out, k, len(chosen), what, seconds)
            task.advance()
    print(
        f"compiled in {time.perf_counter() - started:.1f} s; later processes load it all "
        "from numba's cache",
        file=out,
        flush=True,
    )
    return done


def _chosen(groups) -> list[int]:
    """The indices in :data:`STEPS` of the steps of ``groups`` (None: all), checked."""
    unknown = sorted(set(groups or ()) - set(GROUPS))
    if unknown:
        raise ValueError(f"groups: unknown group(s) {unknown}; known: {', '.join(GROUPS)}")
    return [k for k, step in enumerate(STEPS) if groups is None or step[0] in groups]


def _checked_jobs(jobs, name: str = "jobs") -> int:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"{name}: expected a positive integer, got {jobs!r}")
    return jobs


def _step_line(out, k: int, n: int, what: str, seconds: float) -> None:
    print(f"[{k}/{n}] {what}: {seconds:.1f} s", file=out, flush=True)


def _quiet_worker() -> None:
    # the parent process reports for every worker; their own notices would interleave
    os.environ["PYMC_ODESENS_COMPILE_NOTICES"] = "0"


def _run_step(index: int) -> float:
    """Compile step ``index`` of :data:`STEPS` in this (worker) process; its seconds."""
    began = time.perf_counter()
    STEPS[index][2]()
    return time.perf_counter() - began


def compile_in_processes(jobs: int, groups=None, out=sys.stdout) -> list[tuple[str, float]]:
    """Compile the steps of ``groups`` (default all) in ``jobs`` new processes at once.

    The solver cores every other step builds on (the group :data:`FIRST_GROUP`) come
    first, side by side; then each process takes the next of the other steps as soon as it
    is free. numba's cache is shared through the disk, so the steps end up cached exactly
    as with :func:`compile_steps`. A step that needs a core another process is still
    compiling compiles it too (numba does not wait for it), so two processes take more
    than half the time of one. One line per step on ``out`` as it ends, in the order the
    steps end, and a heartbeat on stderr naming the steps running.

    Parameters
    ----------
    jobs : int
        The number of processes, at least 1 (1 compiles in this process, as
        :func:`compile_steps`).
    groups : collection of str, optional
        Groups of :data:`STEPS`; default all.
    out : file, optional
        Where the step lines go (default stdout).

    Returns
    -------
    list of (what, seconds)
        In the order of :data:`STEPS`; the seconds are those of the process that compiled
        the step.

    Raises
    ------
    ValueError
        If ``jobs`` is not a positive integer, or ``groups`` names a group that is not
        one of :data:`GROUPS`.
    """
    chosen = _chosen(groups)
    if _checked_jobs(jobs) == 1:
        return compile_steps(groups, out=out)
    from pymc_odesens.caching.compile_notice import compiling

    workers = min(jobs, len(chosen))
    seconds: dict[int, float] = {}
    started = time.perf_counter()
    with (
        compiling("pymc_odesens' solvers", steps=len(chosen)) as task,
        ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_quiet_worker,
        ) as pool,
    ):
        try:
            for wave in (
                [k for k in chosen if STEPS[k][0] == FIRST_GROUP],
                [k for k in chosen if STEPS[k][0] != FIRST_GROUP],
            ):
                pending = {pool.submit(_run_step, k): k for k in wave}
                while pending:
                    running = [STEPS[k][1] for f, k in pending.items() if f.running()]
                    task.detail = ", ".join(running[:workers])
                    done, _ = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                    for future in done:
                        k = pending.pop(future)
                        seconds[k] = future.result()
                        _step_line(out, len(seconds), len(chosen), STEPS[k][1], seconds[k])
                        task.advance()
        except BaseException:
            # a failed step (or Ctrl-C): the steps not started yet are dropped
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    print(
        f"compiled in {time.perf_counter() - started:.1f} s in {workers} "
        "processes; later processes load it all from numba's cache",
        file=out,
        flush=True,
    )
    return [(STEPS[k][1], seconds[k]) for k in chosen]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pymc_odesens.compile", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "groups", nargs="*", metavar="GROUP", help=f"some of {', '.join(GROUPS)} (default: all)"
    )
    parser.add_argument("--list", action="store_true", help="list the steps and stop")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="compile in N processes at once (default 1: in this process)",
    )
    args = parser.parse_args(argv)
    try:
        _chosen(args.groups)
        _checked_jobs(args.jobs, "--jobs")
    except ValueError as error:
        parser.error(str(error))
    if args.list:
        for group, what, _ in STEPS:
            print(f"{group:<13} {what}")
        return 0
    # running this module imported the package first: numba's cache guard and verification
    # are installed, and long compiles announce themselves
    # through the package's module, not ``__main__``: the worker processes import the steps
    # from it
    import_module("pymc_odesens.compile").compile_in_processes(args.jobs, set(args.groups) or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
