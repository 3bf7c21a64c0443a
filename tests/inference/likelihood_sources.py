"""Likelihood sources for the tests of the distributed log-likelihood and executors.

Workers import this module (the tests' package is on their path): everything here is
picklable and rebuilt on the worker. :class:`QuadraticSource` has a closed form (each
experiment ``e`` contributes ``-0.5 * sum((x - c_e)**2 * w_e)``), optional costs (a sleep
per experiment), optional markers (a file per evaluation start, holding the worker's pid,
so that a test can kill the worker while it evaluates), an optional solver failure and an
optional lost worker (every evaluation raises ``WorkerLostError``).
:class:`OdeBatchSource` is a log-likelihood built from ``ode_solution`` for a batch of
experiments that differ in their inputs (initial states), as a user's own source would be.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


def quadratic_centres(n_experiments: int, n_parameters: int) -> tuple[np.ndarray, np.ndarray]:
    """Each experiment's centre ``c_e`` and weight ``w_e``."""
    rng = np.random.default_rng(20261127)
    return rng.normal(size=(n_experiments, n_parameters)), rng.uniform(0.5, 2.0, size=n_experiments)


def quadratic_truth(x: np.ndarray, n_experiments: int) -> tuple[float, np.ndarray]:
    """The log-likelihood and gradient of :class:`QuadraticSource` in closed form."""
    centres, weights = quadratic_centres(n_experiments, len(x))
    diff = x[None, :] - centres
    value = -0.5 * float(np.sum(weights[:, None] * diff**2))
    return value, -np.sum(weights[:, None] * diff, axis=0)


@dataclass(frozen=True)
class QuadraticSource:
    n_experiments: int
    n_parameters: int
    seconds_per_experiment: tuple = ()
    marker_dir: str | None = None
    fail_above: float | None = None
    lost: bool = False
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)
    name: str = "quadratic"

    @property
    def key(self) -> str:
        return hashlib.sha256(repr(self).encode()).hexdigest()[:24]

    def experiment_labels(self) -> list[str]:
        return [f"condition_{e}" for e in range(self.n_experiments)]

    def build(self) -> QuadraticResident:
        return QuadraticResident(self)


class QuadraticResident:
    def __init__(self, source: QuadraticSource) -> None:
        self.source = source
        self.centres, self.weights = quadratic_centres(source.n_experiments, source.n_parameters)

    def part(self, experiments: tuple[int, ...], gradient: bool):
        source = self.source
        index = np.array(experiments)

        def evaluate(x):
            if source.marker_dir is not None:
                marker = Path(source.marker_dir) / f"{uuid.uuid4().hex}.started"
                marker.write_text(str(os.getpid()))
            for e in experiments:
                if source.seconds_per_experiment:
                    time.sleep(source.seconds_per_experiment[e])
            if source.lost:
                from pymc_odesens.inference import WorkerLostError

                raise WorkerLostError("worker tcp://10.1.2.3:8786 was lost (a test)")
            if source.fail_above is not None and x[0] > source.fail_above:
                from pymc_odesens.solvers.errors import MaxNumStepsError

                raise MaxNumStepsError(f"x[0] = {x[0]} > {source.fail_above} (a test failure)")
            diff = x[None, :] - self.centres[index]
            w = self.weights[index][:, None]
            value = -0.5 * float(np.sum(w * diff**2))
            return value, (-np.sum(w * diff, axis=0) if gradient else None)

        return evaluate


@dataclass(frozen=True)
class OdeBatchSource:
    """Decay ``y' = -k y`` from the initial states ``y0_e = 1 + e / 2`` (one experiment
    each), observed at ``t = 1, 2, 3`` with normal noise of sd 0.1; ``x = [log k]``."""

    n_experiments: int
    name: str = "decay_batch"
    n_parameters: int = 1

    @property
    def key(self) -> str:
        return f"decay-batch-{self.n_experiments}"

    def experiment_labels(self) -> list[str]:
        return [f"y0_{1 + e / 2:g}" for e in range(self.n_experiments)]

    def data(self) -> tuple[np.ndarray, np.ndarray]:
        y0 = 1.0 + np.arange(self.n_experiments) / 2.0
        times = np.array([1.0, 2.0, 3.0])
        rng = np.random.default_rng(3)
        truth = y0[:, None] * np.exp(-0.7 * times)[None, :]
        return y0, truth + 0.1 * rng.normal(size=truth.shape)

    def build(self) -> OdeBatchResident:
        return OdeBatchResident(self)


def decay_system():
    from pymc_odesens import OdeSystem

    return OdeSystem(lambda t, y, p: [-p[0] * y[0]], n_states=1, n_params=1, name="decay")


def decay_log_likelihood(x, experiments, y0, data):
    """The log-likelihood of ``experiments`` as a PyTensor scalar of ``x``."""
    import pytensor.tensor as pt

    from pymc_odesens import ode_solution

    system = decay_system()
    index = np.asarray(experiments)
    k = pt.exp(x[0])
    params = pt.broadcast_to(pt.stack([k]), (len(index), 1))
    y = ode_solution(
        system,
        pt.as_tensor_variable(y0[index][:, None]),
        np.array([1.0, 2.0, 3.0]),
        params,
        method="rk45",
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
        sensitivity="forward",
        on_failure="raise",
    )
    residual = (y[:, :, 0] - data[index]) / 0.1
    return -0.5 * pt.sum(residual**2) - residual.size * np.log(0.1 * np.sqrt(2 * np.pi))


class OdeBatchResident:
    def __init__(self, source: OdeBatchSource) -> None:
        self.y0, self.data = source.data()

    def part(self, experiments: tuple[int, ...], gradient: bool):
        import pytensor
        import pytensor.tensor as pt

        x = pt.dvector("x")
        llh = decay_log_likelihood(x, experiments, self.y0, self.data)
        outputs = [llh, pytensor.grad(llh, x)] if gradient else [llh]
        function = pytensor.function([x], outputs)

        def evaluate(x_value):
            out = function(x_value)
            return float(out[0]), (np.asarray(out[1]) if gradient else None)

        return evaluate
