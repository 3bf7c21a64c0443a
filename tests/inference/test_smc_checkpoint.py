"""sample_smc's checkpoints and time limit: a run continued from its checkpoint ends with the
same particles and evidence, bit for bit, as one that never stopped; another call's or a
damaged checkpoint is refused by name; the time limit stops the runs between stages or
between two moves of a stage."""

import numpy as np
import pymc as pm
import pytest

from pymc_odesens.inference import SmcTimeLimitReached, log_evidence, sample_smc, smc_run
from pymc_odesens.inference.smc_checkpoint import SmcCheckpoint
from pymc_odesens.inference.smc_target import TemperedTarget
from tests.inference.smc_models import SMC_OPTIONS, X, Y, exact_log_evidence, linear_model

OPTIONS = {**SMC_OPTIONS, "runs": 2, "draws": 100}


@pytest.fixture(scope="module")
def straight():
    """The reference: the same call without a checkpoint, never stopped."""
    return sample_smc(linear_model(), random_seed=21, **OPTIONS)


def _assert_same(one, other):
    for name in ("a", "b"):
        np.testing.assert_array_equal(one.posterior[name].values, other.posterior[name].values)
    np.testing.assert_array_equal(
        one.sample_stats["log_marginal_likelihood"].values,
        other.sample_stats["log_marginal_likelihood"].values,
    )
    for name in ("beta", "moves", "step_size", "gradient_evaluations"):
        np.testing.assert_array_equal(
            one.sample_stats[name].values, other.sample_stats[name].values
        )


def test_a_run_continued_from_its_checkpoint_ends_as_one_that_never_stopped(straight, tmp_path):
    # stopped after two stages (max_stages, a limit, is not part of the call's signature)
    with pytest.raises(RuntimeError, match="max_stages=2"):
        sample_smc(linear_model(), random_seed=21, checkpoint=tmp_path, max_stages=2, **OPTIONS)
    stored = SmcCheckpoint(tmp_path).load(0)
    assert stored.stage == 2 and 0.0 < stored.beta < 1.0
    assert stored.beta == straight.sample_stats["beta"].values[0, 1]
    # continued with the stored seeds (random_seed=None) to the posterior
    continued = sample_smc(linear_model(), random_seed=None, checkpoint=tmp_path, **OPTIONS)
    _assert_same(continued, straight)
    # a finished checkpoint gives the result again without sampling
    again = sample_smc(linear_model(), random_seed=21, checkpoint=tmp_path, **OPTIONS)
    _assert_same(again, straight)
    assert SmcCheckpoint(tmp_path).load(1).beta == 1.0


def test_the_time_limit_stops_between_stages_and_the_checkpoint_continues(straight, tmp_path):
    with pytest.raises(SmcTimeLimitReached, match="continues them from") as stopped:
        sample_smc(linear_model(), random_seed=21, checkpoint=tmp_path, time_limit=1e-6, **OPTIONS)
    # the limit had passed before the first stage: every run stopped at the prior
    assert stopped.value.betas == [0.0, 0.0] and stopped.value.stages == [0, 0]
    assert SmcCheckpoint(tmp_path).load(0).stage == 0
    continued = sample_smc(linear_model(), random_seed=21, checkpoint=tmp_path, **OPTIONS)
    _assert_same(continued, straight)


def _stop_after_two_moves(monkeypatch, tmp_path, seed, options):
    """Run with a clock that passes the deadline at its third reading: before stage 1 of run
    0, after its first move, after its second move (the other runs then stop before their
    first stage)."""
    readings = []

    def clock():
        readings.append(None)
        return 0.0 if len(readings) < 3 else np.inf

    monkeypatch.setattr(smc_run, "_now", clock)
    with pytest.raises(SmcTimeLimitReached, match="run 0: beta 0 after 0 stages and 2 moves"):
        sample_smc(linear_model(), random_seed=seed, checkpoint=tmp_path, time_limit=1e9, **options)
    monkeypatch.undo()


def _spy_on_moves(monkeypatch, check=None):
    """The moves made, as ``(run, stage, index, metric kind, n_leapfrog)``; ``check`` is
    called with each move's arguments first."""
    made = []
    move = smc_run.SmcRun._move

    def spy(self, states, beta, metric, step_size, n_leapfrog, stage, index, proposal=None):
        made.append((self.run, stage, index, metric.kind, n_leapfrog))
        if check is not None:
            check(self.run, stage, index, states)
        return move(self, states, beta, metric, step_size, n_leapfrog, stage, index, proposal)

    monkeypatch.setattr(smc_run.SmcRun, "_move", spy)
    return made


def test_the_time_limit_stops_between_two_moves_and_the_stage_goes_on_from_there(
    tmp_path, monkeypatch
):
    # three moves per stage (the correlation's stop ends this model's stages after one)
    options = {**OPTIONS, "moves": 3}
    straight = sample_smc(linear_model(), random_seed=21, **options)
    _stop_after_two_moves(monkeypatch, tmp_path, 21, options)
    stored = SmcCheckpoint(tmp_path).load(0)
    assert stored.stage == 0 and stored.partial is not None
    assert stored.partial.moves == 2 and len(stored.partial.acceptances) == 2
    # the particles moved (and are not the prior draws the state keeps for the stage's start)
    assert not np.array_equal(stored.partial.states.positions, stored.states.positions)
    assert stored.partial.gradients > 0
    assert SmcCheckpoint(tmp_path).load(1).partial is None
    # the continued stage redoes its temperature, resampling and mass matrix and goes on
    # with its third move (the first two are not made again): the same result, bit for
    # bit, with the same stage statistics
    spied = _spy_on_moves(monkeypatch)
    continued = sample_smc(linear_model(), random_seed=None, checkpoint=tmp_path, **options)
    made = [m[:3] for m in spied]
    assert made[0] == (0, 1, 2) and (0, 1, 0) not in made and (1, 1, 0) in made
    _assert_same(continued, straight)
    np.testing.assert_array_equal(
        continued.sample_stats["acceptance_rate"].values,
        straight.sample_stats["acceptance_rate"].values,
    )


def test_without_a_checkpoint_the_time_limit_says_the_progress_is_lost():
    with pytest.raises(SmcTimeLimitReached, match="progress is lost: pass checkpoint="):
        sample_smc(linear_model(), random_seed=21, time_limit=1e-6, **OPTIONS)


def test_another_calls_checkpoint_is_refused_by_what_differs(tmp_path):
    with pytest.raises(RuntimeError, match="max_stages=1"):
        sample_smc(linear_model(), random_seed=21, checkpoint=tmp_path, max_stages=1, **OPTIONS)
    with pytest.raises(ValueError, match=r"another call's runs \(entropy: stored '21'"):
        sample_smc(linear_model(), random_seed=22, checkpoint=tmp_path, **OPTIONS)
    with pytest.raises(ValueError, match=r"settings: stored .*'draws': 100"):
        sample_smc(linear_model(), random_seed=21, checkpoint=tmp_path, **{**OPTIONS, "draws": 50})
    # a model with the same variables but another likelihood: its log-density at the stored
    # particles differs
    with pytest.raises(ValueError, match="another model's runs: run 0's stored particles"):
        sample_smc(_other_likelihood(), random_seed=21, checkpoint=tmp_path, **OPTIONS)


def test_a_checkpoint_continues_only_with_its_own_trajectory_model(tmp_path):
    """The moves' gradients are part of a run: a checkpoint written without a trajectory
    model is not continued with one, nor one written with a trajectory model by another."""
    with pytest.raises(RuntimeError, match="max_stages=1"):
        sample_smc(linear_model(), random_seed=21, checkpoint=tmp_path, max_stages=1, **OPTIONS)
    with pytest.raises(ValueError, match=r"trajectory_model: stored None, this call True"):
        sample_smc(
            linear_model(),
            trajectory_model=linear_model(noise=1.0),
            random_seed=21,
            checkpoint=tmp_path,
            **OPTIONS,
        )
    with_one = tmp_path / "with"
    with pytest.raises(RuntimeError, match="max_stages=1"):
        sample_smc(
            linear_model(),
            trajectory_model=linear_model(noise=1.0),
            random_seed=21,
            checkpoint=with_one,
            max_stages=1,
            **OPTIONS,
        )
    with pytest.raises(ValueError, match="moves followed other gradients: run 0's stored"):
        sample_smc(
            linear_model(),
            trajectory_model=linear_model(noise=2.0),
            random_seed=21,
            checkpoint=with_one,
            **OPTIONS,
        )
    # the same trajectory model continues it, to what a call that never stopped gives
    continued, straight = (
        sample_smc(
            linear_model(),
            trajectory_model=linear_model(noise=1.0),
            random_seed=21,
            checkpoint=where,
            **OPTIONS,
        )
        for where in (with_one, None)
    )
    _assert_same(continued, straight)


@pytest.mark.slow  # three sampling runs; the next test checks the argument by default
def test_change_moves_continues_a_checkpoint_with_other_moves(tmp_path, monkeypatch):
    """A run stopped inside a stage with the diagonal metric and its own gradient goes on
    with the dense metric, other leapfrog steps and a trajectory model: the gradients are
    evaluated again (the trajectory model's), the checkpoint keeps the new settings, and
    the evidence and posterior are still the model's."""
    first = {**SMC_OPTIONS, "draws": 200, "kernel": "hmc", "moves": 3}
    _stop_after_two_moves(monkeypatch, tmp_path, 5, first)
    stored = SmcCheckpoint(tmp_path).load(0)
    assert stored.partial is not None
    new = {**first, "mass_matrix": "dense", "n_leapfrog": 7, "moves": None}
    trajectory = linear_model(noise=1.0)
    with pytest.raises(ValueError, match="only the moves differ: change_moves=True continues"):
        sample_smc(
            linear_model(), random_seed=5, checkpoint=tmp_path, trajectory_model=trajectory, **new
        )

    def check(run, stage, index, states):
        if (run, stage, index) == (0, 1, 2):
            # the stopped stage's moved particles carry the trajectory model's gradients
            guide = TemperedTarget(linear_model(noise=1.0))
            for row in range(3):
                np.testing.assert_array_equal(
                    states.grad_log_likelihood[row],
                    guide.evaluate(states.positions[row]).grad_log_likelihood,
                )

    made = _spy_on_moves(monkeypatch, check)
    fit = sample_smc(
        linear_model(),
        random_seed=5,
        checkpoint=tmp_path,
        trajectory_model=trajectory,
        change_moves=True,
        **new,
    )
    monkeypatch.undo()
    assert made[0] == (0, 1, 2, "dense", 7)  # the stopped stage goes on, with the new moves
    estimate, mcse = log_evidence(fit)
    assert abs(estimate - exact_log_evidence()) < 3.0 * mcse, (estimate, mcse)
    # the checkpoint now holds the new moves: the same call continues without change_moves
    again = sample_smc(
        linear_model(), random_seed=5, checkpoint=tmp_path, trajectory_model=trajectory, **new
    )
    _assert_same(again, fit)


def test_change_moves_needs_a_checkpoint():
    with pytest.raises(ValueError, match="change_moves must be False without a checkpoint"):
        sample_smc(linear_model(), change_moves=True, **OPTIONS)


def _other_likelihood():
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 1.0)
        b = pm.Normal("b", 0.0, 2.0)
        pm.Normal("y", a + b * X, 0.6, observed=Y)
    return model


def test_a_damaged_checkpoint_is_refused_by_name(tmp_path):
    with pytest.raises(RuntimeError, match="max_stages=1"):
        sample_smc(linear_model(), random_seed=21, checkpoint=tmp_path, max_stages=1, **OPTIONS)
    path = tmp_path / "run_0"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"run_0 is damaged \(the content's SHA-256 digest"):
        sample_smc(linear_model(), random_seed=21, checkpoint=tmp_path, **OPTIONS)


def test_invalid_time_limit_and_checkpoint_are_named(tmp_path):
    with pytest.raises(ValueError, match="time_limit must be None or a positive number"):
        sample_smc(linear_model(), time_limit=0, **OPTIONS)
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    with pytest.raises(ValueError, match="exists and is not a directory"):
        sample_smc(linear_model(), checkpoint=not_a_directory, **OPTIONS)
