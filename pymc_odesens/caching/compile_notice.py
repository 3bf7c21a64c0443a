"""Say so when a compile takes long: one notice, a heartbeat, and the time it took.

A new installation compiles the solvers with numba (minutes on a loaded machine), a new
model its kernels, and PyMC's log-density is compiled in PyTensor's NUMBA mode; later
processes load all of it from the caches. Without a word a user takes minutes of silence
for a hang. So every compile that is still running after :data:`NOTICE_AFTER_S` seconds is
announced once on stderr, with what it compiles and whether that happens once (a cached
compile) or in every process; while it runs, a heartbeat follows at least every
:data:`HEARTBEAT_S` seconds (one line rewritten in place on a terminal, short lines
otherwise), and its end is reported with its duration. A compile that ends sooner prints
nothing, so a warm run prints nothing extra.

Two sources feed it:

- numba's compile events (``numba:compile``, :mod:`numba.core.event`), which numba sends only
  when it really compiles (not when it loads a function from its cache): installed by
  :func:`install_compile_notices` at ``import pymc_odesens``, for every function numba
  compiles in the process (the package's solvers, PyTensor's NUMBA-mode graphs, ...);
- :func:`compiling`, a context manager for other long compiles (the kernels of a model) and
  for steps that are known in advance (``python -m pymc_odesens.compile``).

Compiles nested in another one on the same thread are part of it: they name what is being
compiled now in the heartbeat. ``PYMC_ODESENS_COMPILE_NOTICES=0`` silences everything.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from numba.core import event as numba_event

__all__ = [
    "HEARTBEAT_S",
    "NOTICE_AFTER_S",
    "CompileTask",
    "compiling",
    "install_compile_notices",
]

NOTICE_AFTER_S = 2.0
"""A compile still running after this many seconds is announced."""

HEARTBEAT_S = 8.0
"""While an announced compile runs, stderr hears from it at least this often."""

_POLL_S = 0.25
_PREFIX = "pymc_odesens: "

_LABELS = (
    # module prefix of the function numba compiles -> what a user is told it is
    ("pymc_odesens.solvers.runge_kutta", "the rk45/ckrk solver"),
    ("pymc_odesens.solvers.multistep", "the bdf/adams solver"),
    ("pymc_odesens.solvers.hybrid", "the solver driver for events and adjoints"),
    ("pymc_odesens.solvers", "the ODE solvers"),
    ("pymc_odesens.sensitivity.pbs", "the Peano-Baker-series sensitivities"),
    ("pymc_odesens.sensitivity.steady_state", "the steady-state solver"),
    ("pymc_odesens.sensitivity", "the sensitivity solvers"),
    ("pymc_odesens.codegen", "the solvers' access to recorded trajectories"),
    ("pymc_odesens.ops.steady_state", "the steady-state entry points of the PyMC Ops"),
    ("pymc_odesens.ops", "the solver entry points of the PyMC Ops (NUMBA mode)"),
    ("pymc_odesens", "pymc_odesens' compiled functions"),
    ("pytensor", "a PyTensor graph in NUMBA mode (a model's log-density or gradient)"),
    ("nutpie", "nutpie's wrapper of the model's log-density"),
)


def _is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _enabled() -> bool:
    return os.environ.get("PYMC_ODESENS_COMPILE_NOTICES", "1").strip() not in ("0", "")


@dataclass(eq=False)
class CompileTask:
    """One compile being watched: what, since when, and (if known) its steps.

    Parameters
    ----------
    what : str
        What is compiled, in the user's words ("the bdf/adams solver").
    cached : bool
        Whether its result is cached on disk (the notice then says it happens once).
    steps : int, optional
        Number of steps, when known in advance (a progress count is shown).
    """

    what: str
    cached: bool = True
    steps: int | None = None
    name: str = ""  # short, for the heartbeat of an outer compile
    internal: bool = False  # numba's own helpers: not named in a heartbeat
    started: float = field(default_factory=time.monotonic)
    done_steps: int = 0
    detail: str = ""
    announced: bool = False
    last_output: float = 0.0
    thread: int = field(default_factory=threading.get_ident)

    def advance(self, detail: str = "") -> None:
        """Count one step as done; ``detail`` names the next one."""
        self.done_steps += 1
        self.detail = detail

    def progress(self) -> str:
        elapsed = time.monotonic() - self.started
        count = ""
        if self.steps:
            count = f"step {min(self.done_steps + 1, self.steps)} of {self.steps}, "
        detail = f": {self.detail}" if self.detail else ""
        return f"{count}{elapsed:.0f} s{detail}"


class _Watcher:
    """The tasks of every thread and one daemon thread that speaks for the long ones."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stacks: dict[int, list[CompileTask]] = {}
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()
        self.open_line = False  # an in-place line on the terminal that is not finished

    # --------------------------------------------------------------------- tasks

    def push(self, task: CompileTask) -> None:
        with self.lock:
            stack = self.stacks.setdefault(task.thread, [])
            stack.append(task)
            if len(stack) > 1 and not task.internal:
                stack[0].detail = task.name or task.what
            self._start_thread()

    def pop(self, task: CompileTask) -> None:
        with self.lock:
            stack = self.stacks.get(task.thread, [])
            if task in stack:
                stack.remove(task)
            if stack:
                named = [t for t in stack[1:] if not t.internal]
                stack[0].detail = (named[-1].name or named[-1].what) if named else ""
                return
            self.stacks.pop(task.thread, None)
            if task.announced:
                elapsed = time.monotonic() - task.started
                self._write(f"compiled {task.what} in {elapsed:.0f} s", final=True)

    # --------------------------------------------------------------------- output

    def _write(self, text: str, *, final: bool = False, in_place: bool = False) -> None:
        """One line on stderr (caller holds the lock); on a terminal, heartbeats rewrite
        the notice's line and the final line ends it."""
        stream = sys.stderr
        if stream is None:
            return
        try:
            if in_place and _is_terminal():
                width = shutil.get_terminal_size().columns - 1
                stream.write(f"\r\x1b[K{(_PREFIX + text)[:width]}")
                self.open_line = True
            else:
                if self.open_line:
                    stream.write("\r\x1b[K" if final else "\n")
                stream.write(f"{_PREFIX}{text}\n")
                self.open_line = False
            stream.flush()
        except (OSError, ValueError):  # a closed stream at shutdown
            pass

    def _check(self) -> None:
        now = time.monotonic()
        with self.lock:
            terminal = _is_terminal()
            interval = min(1.0, HEARTBEAT_S) if terminal else HEARTBEAT_S
            for stack in self.stacks.values():
                task = stack[0]
                if not task.announced:
                    if now - task.started < NOTICE_AFTER_S:
                        continue
                    task.announced = True
                    task.last_output = now
                    once = (
                        "once per installation: later runs load it from the cache"
                        if task.cached
                        else "not cached: again in every process"
                    )
                    self._write(f"compiling {task.what} ({once}) ...")
                    if terminal:  # the progress line at once, rewritten in place
                        self._write(f"  ... {task.progress()}", in_place=True)
                elif now - task.last_output >= interval:
                    task.last_output = now
                    self._write(f"  ... {task.progress()}", in_place=True)

    def _run(self) -> None:
        while True:
            self.wake.wait(_POLL_S)
            with self.lock:
                if not self.stacks:
                    self.thread = None
                    return
            self._check()

    def _start_thread(self) -> None:
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(
                target=self._run, name="pymc_odesens-compile-notice", daemon=True
            )
            self.thread.start()

    def after_fork(self) -> None:
        self.lock = threading.Lock()
        self.stacks = {}
        self.thread = None
        self.open_line = False


_WATCHER = _Watcher()
os.register_at_fork(after_in_child=_WATCHER.after_fork)


@contextmanager
def compiling(what: str, *, cached: bool = True, steps: int | None = None) -> Iterator[CompileTask]:
    """Announce a compile of ``what`` if it is still running after :data:`NOTICE_AFTER_S`.

    Parameters
    ----------
    what : str
        What is compiled, in the user's words.
    cached : bool
        Whether the result is cached (the notice says "once per installation").
    steps : int, optional
        The number of steps, if known; call ``task.advance(detail)`` after each.

    Yields
    ------
    CompileTask
    """
    task = CompileTask(what, cached=cached, steps=steps)
    if not _enabled():
        yield task
        return
    _WATCHER.push(task)
    try:
        yield task
    finally:
        _WATCHER.pop(task)


def describe(dispatcher) -> tuple[str, str, bool]:
    """What a numba dispatcher compiles: in the user's words, as a short name (its function
    and module), and whether numba caches it."""
    function = getattr(dispatcher, "py_func", None)
    module = getattr(function, "__module__", None) or ""
    name = getattr(function, "__qualname__", None) or type(dispatcher).__name__
    label = next((text for prefix, text in _LABELS if module.startswith(prefix)), None)
    full = f"{module}.{name}".lstrip(".")
    what = f"{label} ({full})" if label else full
    short = f"{name.split('.<locals>.')[-1]} ({module.removeprefix('pymc_odesens.')})"
    cache = getattr(dispatcher, "_cache", None)
    cached = cache is not None and type(cache).__name__ != "NullCache"
    return what, short, cached


class _NumbaCompiles(numba_event.Listener):
    """numba's ``numba:compile`` events as :class:`CompileTask` s (one per compile)."""

    def __init__(self) -> None:
        self.tasks = threading.local()

    def on_start(self, event) -> None:
        what, short, cached = describe(event.data.get("dispatcher"))
        task = CompileTask(what, cached=cached, name=short, internal=what.startswith("numba."))
        stack = getattr(self.tasks, "stack", None)
        if stack is None:
            stack = self.tasks.stack = []
        stack.append(task)
        _WATCHER.push(task)

    def on_end(self, event) -> None:
        stack = getattr(self.tasks, "stack", None)
        if stack:
            _WATCHER.pop(stack.pop())

    def notify(self, event) -> None:
        if _enabled():
            super().notify(event)


_LISTENER: _NumbaCompiles | None = None


def install_compile_notices() -> None:
    """Watch numba's compiles in this process (idempotent; called by ``import pymc_odesens``)."""
    global _LISTENER
    if _LISTENER is not None:
        return
    _LISTENER = _NumbaCompiles()
    numba_event.register("numba:compile", _LISTENER)
