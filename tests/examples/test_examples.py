"""The NUTS examples in ``examples/`` run end to end (short chains) and recover their parameters."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import arviz as az
import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str):
    """Import ``examples/<name>.py`` (the folder is not a package)."""
    module_name = f"pymc_odesens_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def short_run(draws: int, tune: int, chains: int, cores: int) -> list[str]:
    return [
        "--draws",
        str(draws),
        "--tune",
        str(tune),
        "--chains",
        str(chains),
        "--cores",
        str(cores),
        "--no-progressbar",
    ]


def within_posterior_sd(idata, var: str, truth, k: float = 3.0) -> np.ndarray:
    """Whether each component's posterior mean lies within ``k`` posterior sds of ``truth``."""
    draws = idata.posterior[var]
    mean = draws.mean(("chain", "draw")).values
    sd = draws.std(("chain", "draw")).values
    return np.abs(mean - np.asarray(truth)) <= k * sd


@pytest.mark.slow
def test_oscillator_recovers_the_truth():
    example = load_example("oscillator")
    result = example.main(short_run(draws=300, tune=300, chains=2, cores=1))
    idata = result["idata"]
    assert idata.posterior.sizes["chain"] == 2 and idata.posterior.sizes["draw"] == 300
    assert result["rhat_max"] < 1.05
    assert result["divergences"] <= 5
    theta = float(idata.posterior["theta"].mean())
    assert abs(theta - example.THETA) < 0.05  # posterior sd is about 0.02
    assert within_posterior_sd(idata, "theta", example.THETA).all()
    assert within_posterior_sd(idata, "y0", example.Y0).all()
    assert within_posterior_sd(idata, "sigma", [example.SIGMA] * 2).all()
    assert len(result["hdi_rows"]) == 5


@pytest.mark.slow
def test_lotka_volterra_recovers_the_rates():
    example = load_example("lotka_volterra")
    result = example.main(short_run(draws=200, tune=500, chains=2, cores=2))
    assert result["rhat_max"] < 1.05
    assert result["divergences"] <= 5
    idata = result["idata"]
    assert within_posterior_sd(idata, "rates", result["p_nominal"]).all()
    assert within_posterior_sd(idata, "y0", [1.0, 1.0]).all()
    rates = idata.posterior["rates"].mean(("chain", "draw")).values
    np.testing.assert_allclose(rates, result["p_nominal"], rtol=0.2)


@pytest.mark.slow
def test_akar4_fits_the_real_data_and_writes_the_plot(tmp_path, capsys):
    example = load_example("akar4")
    plot = tmp_path / "akar4_fit.png"
    # two processes: the chains are forked after the experiments ran in threads
    argv = short_run(draws=100, tune=200, chains=2, cores=2)
    result = example.main(argv + ["--trajectories", "10", "--plot", str(plot)])
    idata = result["idata"]
    assert idata.posterior.sizes["chain"] == 2 and idata.posterior.sizes["draw"] == 100
    k = idata.posterior["k"].values.reshape(-1, 3)
    assert np.isfinite(k).all() and (k > 0).all()
    # the data fix kf (through the specificity constant) near the article's value 0.018
    kf_median = float(np.median(k[:, 0]))
    assert 0.012 < kf_median < 0.03
    assert result["rhat_max"] < 1.1
    out = capsys.readouterr().out
    # 2 x 100 draws: fewer than 400 effective draws, which the report says
    assert "WARNING: bulk ESS" in out and "is below 400" in out
    times = next(line for line in out.splitlines() if line.startswith("time: "))
    assert "compiling and initialising" in times and "sampling (tuning and draws)" in times
    setup, sampling = result["setup_time"], result["sample_time"]
    assert 0 < setup and 0 < sampling and setup + sampling < result["total_time"]
    if importlib.util.find_spec("matplotlib") is None:
        assert result["plot"] is None
    else:
        assert result["plot"] == plot
        assert plot.exists() and plot.stat().st_size > 10_000


@pytest.mark.slow
def test_pk_dosing_recovers_the_lag_and_the_clearance():
    example = load_example("pk_dosing")
    result = example.main(short_run(draws=200, tune=300, chains=2, cores=1) + ["--no-plot"])
    idata = result["idata"]
    assert idata.posterior.sizes["chain"] == 2 and idata.posterior.sizes["draw"] == 200
    assert result["rhat_max"] < 1.05
    assert result["divergences"] <= 10
    for name in ("ka", "CL", "V", "t_lag"):
        assert within_posterior_sd(idata, name, example.TRUTH[name]), name
    # t_lag moves every dose: its gradient comes through the event-time sensitivities
    t_lag = float(idata.posterior["t_lag"].mean())
    assert abs(t_lag - example.TRUTH["t_lag"]) < 0.25


def test_solve_pka_help_and_run(capsys):
    example = load_example("solve_pka")
    with pytest.raises(SystemExit) as exit_info:
        example.main(["--help"])
    assert exit_info.value.code == 0
    assert "--methods" in capsys.readouterr().out
    results = example.main(["--methods", "bdf", "rk45", "--output-times", "13", "--no-plot"])
    assert set(results) == {"bdf", "rk45"}
    assert results["bdf"].y.shape == (13, 11)
    # both methods solve the same trajectory to about their tolerances
    np.testing.assert_allclose(results["rk45"].y, results["bdf"].y, rtol=1e-3, atol=1e-6)


@pytest.mark.slow
def test_petab_fit_runs_and_writes_the_plot(tmp_path, capsys):
    example = load_example("petab_fit")
    plot = tmp_path / "petab_fit.png"
    # the manual recipe (the script's default is sample_posterior's: below)
    argv = short_run(draws=30, tune=30, chains=1, cores=1) + ["--recipe", "manual"]
    trace = tmp_path / "trace.nc"
    result = example.main(
        argv + ["--predictive-draws", "20", "--plot", str(plot), "--save-trace", str(trace)]
    )
    out = capsys.readouterr().out
    assert "doi:10.1021/pr5006923" in out  # the publication, from the SBML annotation
    assert "chains start within 0.1 of the nominal values" in out
    saved = az.from_netcdf(trace)
    np.testing.assert_array_equal(
        saved.posterior["k_exp_hetero"], result["idata"].posterior["k_exp_hetero"]
    )
    assert "R-hat max" in out and "divergences" in out
    assert "(1 chains x 30 draws, 30 tuning steps, pymc)" in out
    idata = result["idata"]
    # after an interrupt the line reports the draws kept, not those asked for
    cut = idata.isel(draw=slice(0, 12))
    line = example.sampling_line(cut, example.parse_args(argv), 1.0, 0, 1.0)
    assert line.endswith(
        "(1 chains x 12 draws, 30 tuning steps, pymc; interrupted: 1 x 30 asked for)"
    )
    assert idata.posterior.sizes["draw"] == 30
    assert set(idata.posterior_predictive.data_vars) == {
        "pSTAT5A_rel",
        "pSTAT5B_rel",
        "rSTAT5A_rel",
    }
    if importlib.util.find_spec("matplotlib") is not None:
        assert plot.exists() and plot.stat().st_size > 10_000


@pytest.mark.slow  # sampling run / worker processes: python -m pytest -m slow
def test_petab_fit_with_the_mass_matrix_from_the_mode(tmp_path, capsys):
    example = load_example("petab_fit")
    argv = short_run(draws=20, tune=20, chains=1, cores=1) + ["--no-plot", "--mode-mass-matrix"]
    result = example.main(argv)
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if s.startswith("mass matrix from the Hessian"))
    mode_log_density = float(line.split("log-density ")[1].split(",")[0])
    gradient_norm = float(line.split("gradient norm ")[1].split(" ")[0])
    model = result["problem"].build_model()
    # the mode is above the nominal point (the model's initial point) and a stationary point
    assert mode_log_density > float(model.compile_logp()(model.initial_point()))
    assert gradient_norm < 1e-2
    assert result["idata"].posterior.sizes["draw"] == 20
    with pytest.raises(SystemExit, match="--mode-mass-matrix needs --sampler pymc"):
        example.main(argv + ["--sampler", "nutpie"])


@pytest.mark.slow  # sampling run / worker processes: python -m pytest -m slow
def test_petab_fit_with_one_metric_pooled_from_all_chains(capsys):
    example = load_example("petab_fit")
    argv = short_run(draws=15, tune=20, chains=2, cores=1) + ["--no-plot"]
    pooled = ["--pooled-metric", "10", "--step-size-tune", "10"]
    result = example.main(argv + ["--mode-mass-matrix"] + pooled)
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if s.startswith("first stage:"))
    assert "step sizes after each chain's own tuning" in line
    assert (
        "(2 chains x 15 draws, 20 tuning steps + 10 draws pooled into one metric + 10 "
        "step-size tuning steps, pymc)" in out
    )
    idata = result["idata"]
    assert idata.posterior.sizes["chain"] == 2 and idata.posterior.sizes["draw"] == 15
    assert idata.sample_stats.attrs["pooled_metric_draws"] == 10
    assert idata.sample_stats.attrs["tuning_steps"] == 10  # the second stage's
    with pytest.raises(SystemExit, match="--pooled-metric needs --mode-mass-matrix"):
        example.main(argv + pooled)


@pytest.mark.slow  # sampling run / worker processes: python -m pytest -m slow
def test_petab_fit_resumes_a_saved_trace(capsys, tmp_path):
    example = load_example("petab_fit")
    options = ["--no-plot", "--mode-mass-matrix"]
    trace = tmp_path / "trace.nc"
    # PyMC's NUTS with a checkpoint every 5 draws, then the whole trace
    save = ["--save-trace", str(trace), "--checkpoint-every", "5"]
    first = example.main(short_run(draws=12, tune=20, chains=2, cores=1) + options + save)
    capsys.readouterr()
    resume = ["--resume", str(trace), "--step-size-tune", "10"]
    # checkpoints at 4 and 8 new draws (the trace's 12 in front), then the whole result
    saved = tmp_path / "resumed.nc"
    checkpoints = ["--save-trace", str(saved), "--checkpoint-every", "4"]
    resumed = example.main(
        short_run(draws=10, tune=20, chains=2, cores=1) + options + resume + checkpoints
    )
    out = capsys.readouterr().out
    assert f"continued {trace} (12 draws per chain)" in out
    assert "wall time of the fit in this run " in out
    assert (
        f"(2 chains x 22 draws, 12 draws of {trace} + 10 step-size tuning steps under their "
        "pooled metric + 10 new, pymc)" in out
    )
    before = first["idata"].posterior
    joined = resumed["idata"].posterior
    assert joined.sizes["draw"] == 22
    for name in ("Epo_degradation_BaF3", "sd_pSTAT5A_rel"):
        np.testing.assert_array_equal(joined[name].values[:, :12], before[name].values)
    written = az.from_netcdf(saved)
    assert (
        written.posterior.sizes["draw"] == 22
        and "checkpoint_draws" not in written.sample_stats.attrs
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["resumed.nc", "trace.nc"]  # no partial
    with pytest.raises(SystemExit):
        example.main(short_run(draws=10, tune=10, chains=2, cores=1) + ["--checkpoint-every", "-1"])
    assert "--checkpoint-every: expected 0 or a positive count, got -1" in capsys.readouterr().err
    # a limit that has passed when tuning ends: the first chain stops at its first draw,
    # the second (one after another) at its first step, and the run keeps what it has
    stopped = example.main(
        short_run(draws=10**5, tune=20, chains=2, cores=1)
        + ["--recipe", "manual", "--no-plot", "--time-limit", "0.01"]
    )
    assert stopped["idata"].posterior.sizes["draw"] == 1
    assert "(1 chains x 1 draws, 20 tuning steps, pymc; interrupted: 2 x 100000 asked for)" in (
        capsys.readouterr().out
    )
    for extra, message in (
        (["--time-limit", "0"], "--time-limit: expected a positive number of minutes, got 0.0"),
        (
            ["--time-limit", "5", "--mode-mass-matrix", "--pooled-metric", "10"],
            "--time-limit: not with --pooled-metric (PyMC's NUTS, plain or with --resume, only)",
        ),
        (
            ["--recipe", "manual", "--time-limit", "5", "--sampler", "nutpie"],
            "--time-limit: not with --sampler nutpie",
        ),
    ):
        with pytest.raises(SystemExit):
            example.main(short_run(draws=10, tune=10, chains=2, cores=1) + extra)
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--resume needs --mode-mass-matrix"):
        example.main(
            short_run(draws=10, tune=10, chains=2, cores=1) + ["--no-plot", "--resume", str(trace)]
        )


def test_petab_fit_runs_sample_posterior_unless_a_manual_option_is_given(capsys):
    example = load_example("petab_fit")
    args = example.parse_args([])
    # draws None: sample_posterior's own default (a check every 100 draws with nutpie)
    assert (args.recipe, args.sampler, args.draws, args.tune) == ("posterior", "nutpie", None, 500)
    assert args.marginalize == "auto" and args.n_starts == 10
    for manual in (["--mode-mass-matrix"], ["--start-spread", "0.2"], ["--recipe", "manual"]):
        args = example.parse_args(manual)
        assert (args.recipe, args.sampler, args.draws, args.target_accept) == (
            "manual",
            "pymc",
            1000,
            0.9,
        )
    with pytest.raises(SystemExit):
        example.parse_args(["--recipe", "posterior", "--pooled-metric", "10"])
    assert "--recipe posterior: --pooled-metric belongs to --recipe manual" in (
        capsys.readouterr().err
    )


@pytest.mark.slow  # sampling run / worker processes: python -m pytest -m slow
def test_petab_fit_with_sample_posterior_writes_every_parameter(tmp_path, capsys):
    example = load_example("petab_fit")
    plot = tmp_path / "petab_fit.png"
    argv = short_run(draws=20, tune=20, chains=2, cores=1) + ["--n-starts", "1"]
    result = example.main(argv + ["--predictive-draws", "10", "--plot", str(plot)])
    out = capsys.readouterr().out
    assert "sample_posterior: marginalize=auto, 1 starts" in out
    assert "marginalised: sd_pSTAT5A_rel, sd_pSTAT5B_rel, sd_rSTAT5A_rel" in out
    idata = result["idata"]
    for pid in result["problem"].parameters.ids:
        assert pid in idata.posterior
    assert set(idata.posterior_predictive.data_vars) == {
        "pSTAT5A_rel",
        "pSTAT5B_rel",
        "rSTAT5A_rel",
    }


def test_sbml_model_example_solves_the_boehm_model(capsys):
    example = load_example("sbml_model")
    result = example.main(["--points", "5"])
    out = capsys.readouterr().out
    assert "doi:10.1021/pr5006923" in out
    system, solution = result["system"], result["solution"]
    assert system.states[:2] == ["STAT5A", "STAT5B"]
    assert solution.y.shape == (5, 8)
    # STAT5A and STAT5B start from their initial assignments (207.6 * ratio and the rest)
    ratio = system.p_nominal[system.params.index("ratio")]
    np.testing.assert_allclose(solution["STAT5A"][0], 207.6 * ratio, rtol=1e-12)
    np.testing.assert_allclose(solution["STAT5A"][0] + solution["STAT5B"][0], 207.6, rtol=1e-12)
    # the amount of pApA is its concentration times the cytoplasm's volume 1.4
    np.testing.assert_allclose(solution.amount("pApA"), 1.4 * solution["pApA"], rtol=1e-14)
    # the cytoplasmic STAT5A total (a conservation law of the stoichiometry) is kept
    a, b = (system.states.index(s) for s in ("STAT5A", "pApB"))
    total = (
        solution.y[:, a]
        + solution.y[:, b]
        + 2 * solution["pApA"]
        + 9 / 14 * solution["nucpApA"]
        + 9 / 28 * solution["nucpApB"]
    )
    np.testing.assert_allclose(total, total[0], rtol=1e-7)


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.py")))
def test_every_example_honours_help(name, capsys):
    example = load_example(name)
    with pytest.raises(SystemExit) as exit_info:
        example.main(["--help"])
    assert exit_info.value.code == 0
    printed = capsys.readouterr()
    assert printed.out.startswith("usage: ")
    assert "Sampling" not in printed.out + printed.err  # nothing ran


def test_akar4_explains_a_missing_blas_once_instead_of_warning(capsys, recwarn):
    import pytensor

    example = load_example("akar4")
    example.note_missing_blas()
    printed = capsys.readouterr().out
    assert not [w for w in recwarn if "BLAS" in str(w.message)]
    if pytensor.config.blas__ldflags:
        assert printed == ""
    else:
        assert printed.startswith("note: PyTensor found no BLAS library")
        assert "harmless for this example" in printed


HELP_PROBE = """
import runpy, sys, time
sys.argv = [{path!r}, "--help"]
try:
    runpy.run_path({path!r}, run_name="__main__")
except SystemExit as stop:
    code = stop.code
heavy = sorted(m for m in ("pymc", "pytensor", "numba", "pymc_odesens") if m in sys.modules)
print("EXIT", code, "HEAVY", ",".join(heavy) or "none")
"""


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.py")))
def test_help_imports_nothing_heavy(name):
    # --help answers before the heavy imports (pymc, pytensor, numba, the package)
    path = str(EXAMPLES / f"{name}.py")
    done = subprocess.run(
        [sys.executable, "-c", HELP_PROBE.format(path=path)],
        capture_output=True,
        text=True,
        cwd=EXAMPLES.parent,
    )
    assert done.returncode == 0, done.stderr
    assert "usage: " in done.stdout
    assert done.stdout.strip().endswith("EXIT 0 HEAVY none"), done.stdout[-300:]


@pytest.mark.parametrize(
    ("problem", "unit"),
    [("Boehm_JProteomeRes2014", "min"), ("Lang_PLOSComputBiol2024", "s")],
)
def test_petab_plot_reads_the_time_unit_of_the_sbml_model(problem, unit):
    # Level 2: the unit definition "time" redefines the second (Boehm: 60 s); Level 3:
    # the model's timeUnits (Lang: second)
    import libsbml

    from tests.conftest import PETAB_DIR

    example = load_example("petab_fit")
    (path,) = (PETAB_DIR / problem).glob("model_*.xml")
    document = libsbml.readSBMLFromFile(str(path))
    assert example.sbml_time_unit(document.getModel()) == unit
