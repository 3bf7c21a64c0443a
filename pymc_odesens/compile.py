"""``python -m pymc_odesens.compile``: compile the solvers once, ahead of the first run.

numba compiles each solver core when a process first needs it and caches the machine code
(beside the package's sources, or under ``NUMBA_CACHE_DIR``), so on a new installation the
first solve, the first gradient and the first PyMC model wait for compiles of a minute or
more each. This command does all of them at once, one step after another with their
times, so that a user (or a Docker image build, or CI before its tests) pays them up front::

    python -m pymc_odesens.compile              # everything (a few minutes)
    python -m pymc_odesens.compile --list       # the steps
    python -m pymc_odesens.compile solvers pymc # some groups only

Generated kernels belong to a model and are compiled at its first use (later from the
kernel cache); a model's PyMC log-density is compiled, and cached by PyTensor, at its
first sampling.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from importlib import import_module

__all__ = ["STEPS", "compile_steps", "main"]


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


def compile_steps(groups=None, out=sys.stdout) -> list[tuple[str, float]]:
    """Compile the steps of ``groups`` (default all), one line each on ``out``.

    Returns
    -------
    list of (what, seconds)
    """
    from pymc_odesens.caching.compile_notice import compiling

    chosen = [step for step in STEPS if groups is None or step[0] in groups]
    done = []
    started = time.perf_counter()
    with compiling("pymc_odesens' solvers", steps=len(chosen)) as task:
        for k, (_, what, how) in enumerate(chosen, start=1):
            task.detail = what
            began = time.perf_counter()
            how()
            seconds = time.perf_counter() - began
            done.append((what, seconds))
            print(f"[{k}/{len(chosen)}] {what}: {seconds:.1f} s", file=out, flush=True)
            task.advance()
    print(
        f"compiled in {time.perf_counter() - started:.1f} s; later processes load it all "
        "from numba's cache",
        file=out,
        flush=True,
    )
    return done


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pymc_odesens.compile", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "groups", nargs="*", metavar="GROUP", help=f"some of {', '.join(GROUPS)} (default: all)"
    )
    parser.add_argument("--list", action="store_true", help="list the steps and stop")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.groups) - set(GROUPS))
    if unknown:
        parser.error(f"unknown group(s) {unknown}; known: {', '.join(GROUPS)}")
    if args.list:
        for group, what, _ in STEPS:
            print(f"{group:<13} {what}")
        return 0
    # running this module imported the package first: numba's cache guard and verification
    # are installed, and long compiles announce themselves
    compile_steps(set(args.groups) or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
