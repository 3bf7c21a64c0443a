"""benchmarks/trace_report.py: the convergence report of a saved trace."""

import importlib.util
from pathlib import Path

import arviz as az
import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "trace_report.py"


def _report():
    spec = importlib.util.spec_from_file_location("trace_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trace(path, x, resumed=None):
    chains, draws = x.shape
    idata = az.from_dict(
        posterior={"x": x, "y": np.random.default_rng(1).normal(size=(chains, draws))},
        sample_stats={
            "diverging": np.zeros((chains, draws), dtype=bool),
            "step_size": np.full((chains, draws), 0.25),
            "n_steps": np.full((chains, draws), 7.0),
            "lp": -0.5 * x**2,
        },
    )
    if resumed is not None:
        idata.sample_stats.attrs["resumed_draws"] = resumed
    idata.to_netcdf(path)
    return path


def test_chains_that_disagree_have_a_large_r_hat_and_a_small_ess(tmp_path):
    rng = np.random.default_rng(0)
    mixed = _trace(tmp_path / "mixed.nc", rng.normal(size=(2, 2000)))
    apart = _trace(tmp_path / "apart.nc", rng.normal(size=(2, 2000)) + [[0.0], [1.0]])
    good = _report().main([str(mixed)])
    bad = _report().main([str(apart)])
    assert good["rhat_max"] < 1.01 and good["ess_bulk_min"] > 1000
    assert bad["rhat_max"] > 1.1 and bad["ess_bulk_min"] < 100
    assert "1 of 2 above 1.01" in bad["lines"][0] and "(x)" in bad["lines"][0]


def test_a_continued_trace_is_reported_before_after_and_in_all(tmp_path, capsys):
    x = np.random.default_rng(2).normal(size=(2, 300))
    result = _report().main([str(_trace(tmp_path / "t.nc", x, resumed=100))])
    assert result["lines"][0].startswith("draws 0-99 (before the continuation): 2 chains x 100")
    assert result["lines"][1].startswith("draws 100-299 (the continuation): 2 chains x 200")
    assert result["lines"][2].startswith("all draws: 2 chains x 300")
    assert "0 | 0 | 0.25 | 7.0 |" in capsys.readouterr().out


def test_split_counts_the_fraction_below_and_the_crossings(tmp_path):
    x = np.array([[-2.0, -2.0, 1.0, -2.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0, -2.0]])
    x = np.repeat(x, 10, axis=1)  # ArviZ's diagnostics want a few draws
    result = _report().main([str(_trace(tmp_path / "s.nc", x)), "--split", "x", "-1.5"])
    assert result["lines"][-2:] == ["0 | 0.500 | 3", "1 | 0.167 | 1"]
    with pytest.raises(SystemExit, match="--split: no variable 'z'"):
        _report().main([str(tmp_path / "s.nc"), "--split", "z", "0"])
