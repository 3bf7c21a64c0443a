"""``pymc_odesens.sample`` tells its phases and times, and reports solver failures once, in
the parent process, with honest per-draw counts (also from the chains' worker processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]

# exponential growth y' = k y with k = exp(z): early tuning proposals reach large k, where
# rk45 needs more than max_num_steps steps between output times (a MaxNumStepsError); the
# posterior (k near 0.1, data of noise 0.1) solves easily
GROWTH = """
import numpy as np
import pymc as pm

import pymc_odesens
from pymc_odesens import OdeSystem, ode_solution

system = OdeSystem(lambda t, y, p: [p[0] * y[0]], states=["x"], params=["k"], name="growth")
times = np.arange(1.0, 11.0)
data = np.exp(0.1 * times) + 0.1 * np.random.default_rng(0).normal(size=times.size)
with pm.Model() as model:
    z = pm.Normal("z", {prior_mean}, {prior_sd})
    y = ode_solution(
        system, [1.0], times, [pm.math.exp(z)], method="rk45", max_num_steps={max_num_steps}
    )
    pm.Normal("obs", y[:, 0], {noise}, observed=data)
"""


COUNTS = """
attrs = idata.sample_stats.attrs
print("COUNTS", attrs["ode_failures_initialising"], attrs["ode_failures_tuning"],
      attrs["ode_failures_after_tuning"], int(idata.sample_stats["ode_failures"].sum()),
      f"{attrs['setup_time']:.3f}", f"{attrs['sampling_time']:.3f}")
"""


def run_growth(tmp_path, sample_call: str, **model) -> subprocess.CompletedProcess:
    model = {"prior_mean": -2.0, "prior_sd": 2.0, "max_num_steps": 50, "noise": 0.1, **model}
    script = GROWTH.format(**model) + textwrap.dedent(sample_call) + COUNTS
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.parametrize(
    "cores", [pytest.param(2, marks=pytest.mark.slow), 1]
)  # two worker processes: -m slow
def test_failures_in_tuning_are_reported_once_in_the_parent(tmp_path, cores):
    done = run_growth(
        tmp_path,
        f"""
        with model:
            idata = pymc_odesens.sample(
                draws=50, tune=150, chains=2, cores={cores}, random_seed=2, progressbar=False
            )
        """,
    )
    counts = next(line for line in done.stdout.splitlines() if line.startswith("COUNTS"))
    initialising, tuning, after, in_stats, setup, sampling = counts.split()[1:]
    assert int(tuning) > 0  # the test's premise: tuning reached failing parameters
    assert int(after) == int(in_stats)  # the kept draws' statistic sums to the count
    assert float(setup) > 0 and float(sampling) > 0
    err = done.stderr
    lines = [line for line in err.splitlines() if "the ODE solve failed for" in line]
    assert len(lines) == 1, err  # once, in the parent: not once per worker process
    total = int(initialising) + int(tuning) + int(after)
    assert lines[0].startswith(f"pymc_odesens.sample: the ODE solve failed for {total} ")
    assert f"{tuning} while tuning" in lines[0]
    if int(after) == 0:
        assert "OdeSolverFailureWarning" not in err  # nothing in full: all were expected
        assert "expected while a sampler initialises and tunes" in lines[0]
    assert "rejected proposals in this process" not in err  # no summary per process
    # the phases
    assert "pymc_odesens.sample: compiling the model's log-density and gradient" in err
    assert "chains initialised in" in err
    assert err.count(" tuned (") == 2  # each chain's end of tuning


def test_a_failure_after_tuning_is_warned_about_in_full(tmp_path):
    # data that say nothing (noise 1e6): the posterior is the prior, z ~ normal(0, 3), and
    # its draws reach the k where the solve fails
    done = run_growth(
        tmp_path,
        """
        with model:
            idata = pymc_odesens.sample(
                draws=60, tune=20, chains=1, cores=1, random_seed=3, progressbar=False
            )
        """,
        prior_mean=0.0,
        prior_sd=3.0,
        max_num_steps=20,
        noise=1e6,
    )
    counts = next(line for line in done.stdout.splitlines() if line.startswith("COUNTS"))
    _, tuning, after, in_stats, _, _ = counts.split()[1:]
    assert int(after) > 1 and int(after) == int(in_stats)
    err = done.stderr
    assert err.count("OdeSolverFailureWarning") == 1  # the first one after tuning, in full
    assert "after tuning (MaxNumStepsError: rk45: more than max_num_steps = 20" in err
    assert f"{after} after tuning (chain 0 draw " in err
    assert "not expected, see the warning" in err
    assert "rejected proposals in this process" not in err


def test_the_statistic_is_added_once_and_counts_per_draw():
    import pymc as pm

    from pymc_odesens.inference.sampling_report import (
        FAILURE_STAT,
        count_failures_per_draw,
    )
    from pymc_odesens.ops import failures

    with pm.Model():
        pm.Normal("a")
        pm.Poisson("n", 3.0)
        step = pm.CompoundStep([pm.NUTS(), pm.Metropolis()])
    count_failures_per_draw(step)
    count_failures_per_draw(step)  # idempotent
    assert step.stats_dtypes[0][FAILURE_STAT] is np.int64
    assert FAILURE_STAT not in step.stats_dtypes[1]
    assert step.stats_dtypes_shapes[f"sampler_0__{FAILURE_STAT}"] == (np.int64, [])
    point = {"a": np.array(0.0), "n": np.array(3)}
    _, stats = step.step(point)
    assert stats[0][FAILURE_STAT] == 0
    failures.reset_failure_counts()
    with pytest.warns(failures.OdeSolverFailureWarning):  # outside a sampler: announced
        failures.record_failure(ValueError("x"), "a test")  # and not the next draw's
    _, stats = step.step(point)
    assert stats[0][FAILURE_STAT] == 0
    failures.reset_failure_counts()
