"""The progress display of tempered SMC: a line per stage and run, and one per finished run."""

import io

from pymc_odesens.inference.smc_progress import SLOW_STAGE_SECONDS, StageProgress
from pymc_odesens.inference.smc_run import StageRecord

RECORD = StageRecord(
    beta=0.0123,
    ess=50.2,
    resampled=True,
    log_evidence_increment=-3.5,
    acceptance_rate=0.634,
    step_size=0.0456,
    n_leapfrog=17,
    moves=4,
    correlation=0.2,
    stopping_threshold=0.27,
    failed_evaluations=3,
    divergences=0,
    gradient_evaluations=6800,
    seconds=12.34,
)


def test_a_stage_line_names_the_stage_and_its_moves():
    stream = io.StringIO()
    progress = StageProgress(runs=4, draws=100, stream=stream)
    progress.stage(1, 7, RECORD)
    progress.finished(1, -173.25, 15, 560.0)
    lines = stream.getvalue().splitlines()
    assert lines == [
        "SMC run 2/4 stage   7: beta 0.0123  ESS 50/100 (resampled)  acceptance 0.63  "
        "step 0.0456  leapfrog 17  moves 4  failed 3  12.3 s",
        "SMC run 2/4 done: log evidence -173.2500, 15 stages, 560.0 s",
    ]


def test_disabled_progress_prints_nothing():
    stream = io.StringIO()
    progress = StageProgress(runs=1, draws=10, enabled=False, stream=stream)
    progress.stage(0, 1, RECORD)
    progress.finished(0, 0.0, 1, 1.0)
    assert stream.getvalue() == ""


def test_continued_and_stopped_runs_say_where_they_are():
    stream = io.StringIO()
    progress = StageProgress(runs=4, draws=100, stream=stream)
    progress.resumed(0, 12, 0.0345, 1800.0)
    progress.stopped(3, 0.25, 20, 3600.4)
    # stopped, and continued, between two moves of a stage
    progress.stopped(2, 0.25, 20, 3600.4, moves=4)
    progress.resumed(2, 20, 0.25, 3600.4, moves=4)
    assert stream.getvalue().splitlines() == [
        "SMC run 1/4 continues from its checkpoint: stage 12, beta 0.0345, 1800.0 s so far",
        "SMC run 4/4 stopped by the time limit at beta 0.25, 20 stages, 3600.4 s",
        "SMC run 3/4 stopped by the time limit at beta 0.25, 20 stages and 4 moves of stage 21, "
        "3600.4 s",
        "SMC run 3/4 continues from its checkpoint: stage 20, beta 0.25, 4 moves of stage 21 "
        "done, 3600.4 s so far",
    ]


def test_moves_of_a_slow_stage_have_a_line_each_and_quick_ones_none():
    stream = io.StringIO()
    progress = StageProgress(runs=4, draws=100, stream=stream)
    progress.move(0, 3, 1, 0.61, 0, SLOW_STAGE_SECONDS - 0.1)
    progress.move(0, 3, 2, 0.47, 18, SLOW_STAGE_SECONDS + 409.3)
    assert stream.getvalue().splitlines() == [
        f"SMC run 1/4 stage   3: move 2  acceptance 0.47  failed 18  "
        f"{SLOW_STAGE_SECONDS + 409.3:.1f} s"
    ]
