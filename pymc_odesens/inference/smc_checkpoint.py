"""Checkpoints of tempered SMC: every run's state after each stage, in a directory.

A run of hours (Fujita_SciSignal2010's prior spans ten decades per parameter: solves near
the prior are slow and often fail) must survive its time limit and the end of a session.
With ``sample_smc(..., checkpoint=directory)``:

- ``call`` holds what identifies the call: the model's variables and shapes, the compile
  options, the settings that shape the runs (every one but ``max_stages``, a limit), the
  number of runs and the seeds' root entropy, and whether a trajectory model guides the
  moves; the model itself is checked when a run continues, by its log-prior and
  log-likelihood at the run's first stored particles, and the trajectory model (or the
  model's own gradient) by the gradients there;
- ``run_<r>`` holds run ``r``'s :class:`~pymc_odesens.inference.smc_run.RunState` after its
  last stage (stage 0: the prior draws, evaluated): particles with their log-densities and
  gradients, weights, ``beta``, log evidence, step size, leapfrog mean, the stages'
  records, the run's wall time so far; and when the time limit stopped the run between two
  moves of a stage, that stage's progress (:class:`~pymc_odesens.inference.smc_run.
  StagePartial`: the moved particles, the moves done, the step size and statistics so far).

Each file is written beside its name and renamed when whole, so a process stopped while
writing leaves the previous state; each carries the SHA-256 digest of its content and its
name (:mod:`pymc_odesens.caching.verified_file`), and is read only when both check out.
A call given a directory that holds another call's checkpoint, or a damaged file, raises a
ValueError that names the file and what differs: a checkpoint is never silently replaced.
A call with ``random_seed=None`` continues with the checkpoint's seeds; a run continued from
its state ends with the same particles and evidence, bit for bit, as one that never stopped
(the stages' random streams depend on the stage's number only).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from pathlib import Path

import numpy as np

from pymc_odesens.caching.disk_cache import write_atomically
from pymc_odesens.caching.verified_file import frame, unframe
from pymc_odesens.inference.smc_run import RunState, SmcSettings, StagePartial, StageRecord
from pymc_odesens.inference.smc_target import ParticleLayout
from pymc_odesens.inference.smc_work import ParticleStates

__all__ = [
    "SmcCheckpoint",
    "call_signature",
    "check_model",
    "with_new_moves",
    "CHECKED_PARTICLES",
    "MOVE_SETTINGS",
]

FORMAT = 1
"""Version of the checkpoint's layout (part of the call's signature)."""

_STATE_ARRAYS = (
    "positions",
    "log_prior",
    "log_likelihood",
    "grad_log_prior",
    "grad_log_likelihood",
)
_RECORD_FIELDS = [f.name for f in dataclasses.fields(StageRecord)]
_PARTIAL_SCALARS = [f.name for f in dataclasses.fields(StagePartial) if f.name != "states"]
_PARTIAL_PREFIX = "partial_"


def call_signature(
    layout: ParticleLayout,
    compile_kwargs: tuple,
    settings: SmcSettings,
    runs: int,
    entropy: int,
    trajectory_model: bool = False,
    jumps: str | None = None,
) -> dict:
    """What a checkpoint must match to be continued (module docstring); the model itself is
    checked by its log-density and gradient at stored particles (:func:`check_model`), the
    trajectory model by the gradient; ``jumps``: the digest of the jump moves' optima
    (:func:`~pymc_odesens.inference.smc_jumps.jump_digest`)."""
    shaping = {k: v for k, v in vars(settings).items() if k != "max_stages"}
    if not settings.jump_moves:
        # only with jumps: a checkpoint written before jump moves existed still matches
        del shaping["jump_moves"]
    signature = {
        "format": FORMAT,
        "variables": [[name, list(shape)] for name, shape in zip(layout.names, layout.shapes)],
        "compile_kwargs": repr(compile_kwargs),
        "settings": shaping,
        "runs": int(runs),
        "entropy": str(entropy),
    }
    if trajectory_model:
        # only then: a checkpoint written before trajectory models existed still matches
        signature["trajectory_model"] = True
    if jumps is not None:
        signature["jumps"] = jumps
    return signature


MOVE_SETTINGS = (
    "n_leapfrog",
    "adapt_n_leapfrog",
    "max_leapfrog",
    "mass_matrix",
    "target_acceptance",
    "moves",
    "max_moves",
    "correlation_threshold",
    "kernel",
    "independent_acceptance",
    "jump_moves",
)
"""The settings of the moves alone: a checkpoint continued with ``change_moves=True`` may
change them (and the trajectory model). Any move that leaves each stage's tempered target
invariant keeps the runs exact; the temperature steps, resampling and population size
(the other settings) may not change."""


def _without_moves(signature: dict) -> dict:
    out = {k: v for k, v in signature.items() if k not in ("trajectory_model", "jumps")}
    out["settings"] = {
        k: v for k, v in signature.get("settings", {}).items() if k not in MOVE_SETTINGS
    }
    return out


def with_new_moves(state: RunState, evaluate, settings: SmcSettings, directory, run: int):
    """``state`` (a checkpoint's) ready for other moves: every particle's gradient (and
    those of a stopped stage's moved particles) evaluated again by this call's target, so
    that the moves' leapfrog steps use one function (the trajectory model's, or the
    model's); the number of leapfrog steps this call's ``n_leapfrog`` unless it adapts.

    Raises
    ------
    ValueError
        The model's log-prior or log-likelihood at a stored particle differs from the
        stored one beyond 1e-6 relative: the directory holds another model's runs.
    """

    def again(states):
        fresh = evaluate(states.positions)
        # to the solver's tolerance, not to the last bit: the model's log-density may now
        # come from another compiled graph (a solve without sensitivities, when a
        # trajectory model gives the gradients), whose steps differ (Fujita_SciSignal2010
        # at rtol 1e-8: up to 1.1e-9 relative); the fresh values are the ones kept
        check_model(directory, run, states, fresh, gradients=False, rtol=1e-6)
        return fresh

    n_leapfrog = state.n_leapfrog if settings.adapt_n_leapfrog else settings.n_leapfrog
    partial = state.partial
    if partial is not None:
        partial = dataclasses.replace(partial, states=again(partial.states), n_leapfrog=n_leapfrog)
    return dataclasses.replace(
        state, states=again(state.states), n_leapfrog=n_leapfrog, partial=partial
    )


CHECKED_PARTICLES = 2
"""Stored particles at which a continued run evaluates the model before going on."""


def check_model(
    directory,
    run: int,
    stored: ParticleStates,
    evaluated: ParticleStates,
    gradients: bool = True,
    rtol: float = 1e-9,
) -> None:
    """Compare the model's log-prior and log-likelihood, and the gradients the moves follow,
    at the first stored particles with the stored values (the model of a PyMC model has no
    stable digest: its random generators differ between builds).

    Raises
    ------
    ValueError
        They differ (the terms beyond ``rtol``, the gradients beyond 1e-7): the
        directory holds another model's runs, or runs moved by another trajectory model.
    """
    k = len(evaluated)
    for name in ("log_prior", "log_likelihood"):
        was, now = getattr(stored, name)[:k], getattr(evaluated, name)
        same = (was == now) | np.isclose(was, now, rtol=rtol, atol=0.0)
        if not np.all(same):
            raise ValueError(
                f"checkpoint: {directory} holds another model's runs: run {run}'s stored "
                f"particles have {name} {was.tolist()}, this call's model gives "
                f"{now.tolist()}; give the same model, or another directory"
            )
    for name in ("grad_log_prior", "grad_log_likelihood") if gradients else ():
        was, now = getattr(stored, name)[:k], getattr(evaluated, name)
        finite = np.isfinite(was) & np.isfinite(now)
        scale = np.max(np.abs(np.where(finite, was, 0.0)), axis=-1, keepdims=True)
        close = np.isclose(was, now, rtol=1e-7, atol=0.0) | (np.abs(was - now) <= 1e-9 * scale)
        if not np.all((was == now) | close):
            raise ValueError(
                f"checkpoint: {directory} holds runs whose moves followed other gradients: "
                f"run {run}'s stored particles have {name} differing from this call's (a "
                "different trajectory_model, or a different model with the same "
                "log-density there); give the same model and trajectory_model, or another "
                "directory"
            )


def _read(path: Path) -> bytes:
    try:
        return unframe(path.read_bytes(), path.name)
    except ValueError as error:
        raise ValueError(
            f"checkpoint: {path} is damaged ({error}); remove the directory's files to start afresh"
        ) from error


def _write(path: Path, content: bytes) -> None:
    write_atomically(path, frame(content, path.name))


class SmcCheckpoint:
    """The checkpoint directory of one call of ``sample_smc`` (module docstring).

    Parameters
    ----------
    directory : str or os.PathLike
        Created when missing.

    Not safe to share between two processes writing the same runs; each run's file is
    written only by the thread that runs it.
    """

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise ValueError(f"checkpoint: {self.directory} exists and is not a directory")
        self.directory.mkdir(parents=True, exist_ok=True)

    @property
    def _call_path(self) -> Path:
        return self.directory / "call"

    def _run_path(self, run: int) -> Path:
        return self.directory / f"run_{run}"

    def stored_entropy(self) -> int | None:
        """The root entropy of the call the directory holds (None: an empty directory)."""
        if not self._call_path.exists():
            return None
        return int(json.loads(_read(self._call_path))["entropy"])

    def bind(self, signature: dict, change_moves: bool = False) -> None:
        """Write the call's signature, or check it against the one stored.

        With ``change_moves``, the settings of the moves (:data:`MOVE_SETTINGS`, and
        whether a trajectory model guides them) may differ from the stored ones: the
        stored signature is then replaced by the call's (later calls continue with the
        new moves).

        Raises
        ------
        ValueError
            The directory holds another call's checkpoint (naming what differs, and
            whether ``change_moves=True`` would accept it), or a damaged file.
        """
        if not self._call_path.exists():
            stale = sorted(p.name for p in self.directory.glob("run_*"))
            if stale:
                raise ValueError(
                    f"checkpoint: {self.directory} holds run files {stale} without the call's "
                    "file; remove them to start afresh"
                )
            _write(self._call_path, json.dumps(signature, sort_keys=True).encode())
            return
        stored = json.loads(_read(self._call_path))
        wanted = json.loads(json.dumps(signature))  # the same types as read back
        differ = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
        if not differ:
            return
        if _without_moves(stored) == _without_moves(wanted):
            if change_moves:
                _write(self._call_path, json.dumps(signature, sort_keys=True).encode())
                return
            hint = "; only the moves differ: change_moves=True continues the runs with them"
        else:
            hint = ""
        details = "; ".join(
            f"{k}: stored {stored.get(k)!r}, this call {wanted.get(k)!r}" for k in differ
        )
        raise ValueError(
            f"checkpoint: {self.directory} holds another call's runs ({details}{hint}); "
            "give the same model and options (and random_seed, or None to take the stored "
            "one), or another directory"
        )

    def load(self, run: int) -> RunState | None:
        """Run ``run``'s state after its last stage (None: not started).

        Raises
        ------
        ValueError
            A damaged file.
        """
        path = self._run_path(run)
        if not path.exists():
            return None
        with np.load(io.BytesIO(_read(path)), allow_pickle=False) as data:
            scalars = json.loads(str(data["scalars"]))
            records = [
                StageRecord(**dict(zip(_RECORD_FIELDS, row)))
                for row in json.loads(str(data["records"]))
            ]
            states = ParticleStates(*(np.array(data[name]) for name in _STATE_ARRAYS))
            log_weights = np.array(data["log_weights"])
            partial = None
            if scalars.get("partial") is not None:
                partial = StagePartial(
                    states=ParticleStates(
                        *(np.array(data[_PARTIAL_PREFIX + name]) for name in _STATE_ARRAYS)
                    ),
                    **scalars["partial"],
                )
        return RunState(
            stage=int(scalars["stage"]),
            beta=float(scalars["beta"]),
            log_evidence=float(scalars["log_evidence"]),
            log_weights=log_weights,
            states=states,
            step_size=float(scalars["step_size"]),
            n_leapfrog=int(scalars["n_leapfrog"]),
            records=records,
            prior_failures=int(scalars["prior_failures"]),
            seconds=float(scalars["seconds"]),
            partial=partial,
        )

    def save(self, run: int, state: RunState) -> None:
        """Write run ``run``'s state (replacing the previous one when whole)."""
        scalars = {
            "stage": state.stage,
            "beta": state.beta,
            "log_evidence": state.log_evidence,
            "step_size": state.step_size,
            "n_leapfrog": state.n_leapfrog,
            "prior_failures": state.prior_failures,
            "seconds": state.seconds,
            "partial": None,
        }
        arrays = {name: getattr(state.states, name) for name in _STATE_ARRAYS}
        if state.partial is not None:
            scalars["partial"] = {
                name: _plain_any(getattr(state.partial, name)) for name in _PARTIAL_SCALARS
            }
            for name in _STATE_ARRAYS:
                arrays[_PARTIAL_PREFIX + name] = getattr(state.partial.states, name)
        records = [[_plain(getattr(r, f)) for f in _RECORD_FIELDS] for r in state.records]
        buffer = io.BytesIO()
        np.savez(
            buffer,
            scalars=np.array(json.dumps(scalars)),
            records=np.array(json.dumps(records)),
            log_weights=state.log_weights,
            **arrays,
        )
        _write(self._run_path(run), buffer.getvalue())


def _plain_any(value):
    """A partial stage's scalar or list of floats, as JSON keeps it exactly."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return _plain(value)


def _plain(value):
    """A record's field as JSON keeps it exactly (floats round-trip by repr)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    return float(value)
