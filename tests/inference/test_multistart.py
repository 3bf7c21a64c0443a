"""Multistart mode finding on small PyMC models: the MAP against an independent optimum, the
ranking and clusters, failed starts, worker-count independence, the waterfall plot."""

from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pymc as pm
import pytest
from scipy.optimize import minimize
from scipy.stats import halfnorm, norm

import pymc_odesens
import pymc_odesens.inference.multistart as multistart
from pymc_odesens import OdeSystem, ode_solution, steady_state_solution
from pymc_odesens.inference import ModeSearchResult, find_modes
from pymc_odesens.inference.mode_objective import ModeObjective
from tests.inference import work_units
from tests.ops.test_steady_state_solution import PATHWAY_NAMES, pathway_rhs

T = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5])
Y = np.array([0.9, 2.2, 2.8, 4.1, 5.2, 5.8])


def line_model() -> pm.Model:
    """y ~ Normal(a t + b, s): a uniform (bounded coordinate), b normal (no transform),
    s half-normal (log coordinate)."""
    with pm.Model() as model:
        a = pm.Uniform("a", -10.0, 10.0)
        b = pm.Normal("b", 0.0, 10.0)
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", a * T + b, s, observed=Y)
    return model


def _line_log_posterior(v):
    a, b, s = v
    if not (-10 < a < 10 and s > 0):
        return -np.inf
    return (
        math.log(1 / 20)
        + norm.logpdf(b, 0, 10)
        + halfnorm.logpdf(s, scale=1.0)
        + norm.logpdf(Y, a * T + b, s).sum()
    )


def test_the_map_is_the_independent_optimum_on_the_variables_own_scale():
    reference = minimize(
        lambda v: -_line_log_posterior(v),
        [1.0, 0.0, 0.5],
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000},
    )
    result = find_modes(line_model(), 4, random_seed=3, n_workers=1, method="L-BFGS-B")
    best = result.best
    assert best.status == "converged"
    np.testing.assert_allclose(
        [best.parameters["a"], best.parameters["b"], best.parameters["s"]],
        reference.x,
        rtol=1e-5,
        atol=1e-6,
    )
    assert best.log_posterior == pytest.approx(-reference.fun, abs=1e-6)
    assert best.log_likelihood == pytest.approx(
        norm.logpdf(Y, reference.x[0] * T + reference.x[1], reference.x[2]).sum(), abs=1e-6
    )
    # one optimum: every start reaches it and they form one cluster, ranked by log-posterior
    assert len(result.clusters) == 1 and result.clusters[0].size == 4
    values = [r.log_posterior for r in result.starts]
    assert values == sorted(values, reverse=True)
    # the optimisation coordinates: a itself in its bounds, b as is, s on the log scale
    bounded = {c.name: c.bounded for c in result.objective.coordinates}
    assert bounded == {"a": True, "b": False, "s": False}
    np.testing.assert_array_equal(result.objective.lower, [-10.0, -np.inf, -np.inf])


@pytest.mark.parametrize("method", ["L-BFGS-B", "trust-region-fisher"])
def test_both_methods_find_both_modes_of_a_symmetric_posterior(method):
    # y ~ Normal(a^2, 0.1): modes at a = +-sqrt(2) of equal height, 2 clusters
    with pm.Model() as model:
        a = pm.Uniform("a", -3.0, 3.0)
        pm.Normal("y", a**2, 0.1, observed=[2.0])
    result = find_modes(model, 6, random_seed=0, n_workers=1, method=method)
    assert not result.failed
    assert len(result.clusters) == 2
    found = sorted(c.parameters["a"] for c in result.clusters)
    np.testing.assert_allclose(found, [-math.sqrt(2), math.sqrt(2)], atol=1e-6)
    assert sum(c.size for c in result.clusters) == 6


def test_the_fisher_trust_region_compiles_one_function_that_gives_the_same_values():
    # the Fisher information's function also gives the log-posterior, gradient and
    # log-likelihood: the trust region's starts compile nothing else (about 2 s on Boehm)
    result = find_modes(line_model(), 3, random_seed=4, n_workers=1, method="trust-region-fisher")
    objective = result.objective
    assert objective._function is None and objective._fisher_function is not None
    x = result.best.x
    from_fisher = objective.evaluate(x)
    own = ModeObjective(objective.model)
    assert own._function is None  # compiled on first use
    from_own = own.evaluate(x)
    assert own._fisher_function is None
    assert from_fisher[0] == pytest.approx(from_own[0], rel=1e-13)
    np.testing.assert_allclose(from_fisher[1], from_own[1], rtol=1e-12, atol=1e-12)
    assert from_fisher[2] == pytest.approx(from_own[2], rel=1e-13)
    # the model's own route on request, compiled then (where forward sensitivities fail)
    by_own_route = objective.log_posterior_and_gradient(x, own_route=True)
    assert objective._function is not None
    assert by_own_route[0] == pytest.approx(from_own[0], rel=1e-13)
    np.testing.assert_allclose(by_own_route[1], from_own[1], rtol=1e-12, atol=1e-12)
    a, b, s = (result.best.parameters[k] for k in ("a", "b", "s"))
    # PyMC's own log-density without the transforms' Jacobians (its normal and uniform
    # constants differ from scipy's by about 3e-8)
    pymc_value = objective.model.compile_logp(jacobian=False)(objective.sampler_point(x, 0.0))
    assert from_own[0] == pytest.approx(pymc_value, rel=1e-12)
    assert from_own[0] == pytest.approx(_line_log_posterior([a, b, s]), rel=1e-7)
    assert from_own[2] == pytest.approx(norm.logpdf(Y, a * T + b, s).sum(), rel=1e-12)


def blow_up_model() -> pm.Model:
    """x' = a x from x(0) = 1: for a above about 18 the solve to t = 40 overflows (a
    solver failure, the log-posterior -inf there)."""
    system = OdeSystem(lambda t, y, p: [p.a * y.x], states=["x"], params=["a"], name="blow_up")
    with pm.Model() as model:
        a = pm.Uniform("a", -1.0, 30.0)
        x = ode_solution(system, [1.0], [1.0, 2.0, 40.0], [a], method="rk45")
        pm.Normal("y", x[:2, 0], 0.05, observed=[1.35, 1.82])
    return model


def test_a_start_whose_solve_fails_is_reported_and_the_others_go_on():
    pymc_odesens.reset_failure_counts()
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning):
        result = find_modes(blow_up_model(), 6, random_seed=5, n_workers=1, method="L-BFGS-B")
    failed = result.failed
    assert 0 < len(failed) < 6
    for r in failed:
        assert r.status == "failed" and r.x is None and r.log_posterior == -np.inf
        assert "not finite at the start" in r.message
        assert r.start[0] > 15  # drawn where the solve overflows
    assert result.starts[-len(failed) :] == failed  # ranked last
    assert result.best.parameters["a"] == pytest.approx(0.3, abs=0.02)
    table = result.to_dataframe()
    assert (table.loc[[r.index for r in failed], "status"] == "failed").all()


def test_cheap_starts_run_in_this_process_and_give_the_same_bits():
    # by default the first start runs here; 3 more starts of well under a second each end
    # sooner here than after starting worker processes
    model = line_model()
    chosen = find_modes(model, 4, random_seed=11, method="L-BFGS-B")
    here = find_modes(model, 4, random_seed=11, n_workers=1, method="L-BFGS-B")
    assert chosen.workers == 1 and here.workers == 1
    _assert_same_starts(here, chosen)


@pytest.mark.parametrize(
    ("first", "remaining", "workers", "expected"),
    [
        (1.0, 10, 2, 1),  # 10 s here against 20 + 5 s in workers
        (20.0, 10, 2, 2),  # 200 s here against 20 + 100 s
        (20.0, 10, 8, 8),
        (100.0, 1, 2, 1),  # one start left: a worker cannot be faster
        (1.0, 0, 2, 1),
    ],
)
def test_workers_only_when_they_pay_for_their_start(first, remaining, workers, expected):
    assert multistart._workers_worth_it(first, remaining, workers) == expected
    assert multistart.WORKER_START_SECONDS == 20.0


def test_results_do_not_depend_on_threads():
    model = line_model()
    one = find_modes(model, 4, random_seed=11, n_workers=1, method="L-BFGS-B")
    with ThreadPoolExecutor(2) as pool:
        threads = find_modes(model, 4, random_seed=11, executor=pool, method="L-BFGS-B")
    _assert_same_starts(one, threads)


@pytest.mark.slow  # worker processes; lighter sibling: test_executors.py (pytest -m slow)
def test_results_do_not_depend_on_the_number_of_worker_processes():
    model = line_model()
    one = find_modes(model, 4, random_seed=11, n_workers=1, method="L-BFGS-B")
    two = find_modes(model, 4, random_seed=11, n_workers=2, method="L-BFGS-B")
    _assert_same_starts(one, two)


def _assert_same_starts(one: ModeSearchResult, other: ModeSearchResult) -> None:
    assert [r.index for r in other.starts] == [r.index for r in one.starts]
    for a, b in zip(one.starts, other.starts):
        assert a.status == b.status
        np.testing.assert_array_equal(a.start, b.start)
        np.testing.assert_array_equal(a.x, b.x)
        assert a.log_posterior == b.log_posterior


@pytest.mark.slow  # worker processes; lighter sibling: test_executors.py (pytest -m slow)
def test_a_dask_cluster_gives_the_same_bits(dask_client):
    model = line_model()
    one = find_modes(model, 4, random_seed=11, n_workers=1, method="L-BFGS-B")
    dask = find_modes(model, 4, random_seed=11, executor=dask_client, method="L-BFGS-B")
    _assert_same_starts(one, dask)
    assert all(r.status == "converged" for r in dask.starts)


@pytest.mark.slow  # worker processes; lighter sibling: test_executors.py (pytest -m slow)
def test_a_worker_killed_during_a_multistart_changes_nothing(dask_client, tmp_path):
    factory = functools.partial(work_units.line_model_dying_once, str(tmp_path), os.getpid())
    one = find_modes(factory, 4, random_seed=7, n_workers=1, method="L-BFGS-B")
    dask = find_modes(factory, 4, random_seed=7, executor=dask_client, method="L-BFGS-B")
    assert (tmp_path / "died_building").exists()  # a worker died building the model
    _assert_same_starts(one, dask)


def test_the_waterfall_plot_is_written(tmp_path):
    with pm.Model() as model:
        a = pm.Uniform("a", -3.0, 3.0)
        pm.Normal("y", a**3 - 2 * a, 0.1, observed=[0.5])
    result = find_modes(model, 8, random_seed=2, n_workers=1, method="L-BFGS-B")
    path = tmp_path / "waterfall.png"
    ax = result.plot_waterfall(path=path)
    assert path.stat().st_size > 5000
    assert ax.get_yscale() == "log"
    assert f"{len(result.starts)} starts" in ax.get_title()
    assert isinstance(result, ModeSearchResult) and "starts" in repr(result)


def test_invalid_arguments_are_named():
    model = line_model()
    with pytest.raises(ValueError, match="n_starts"):
        find_modes(model, 0)
    with pytest.raises(ValueError, match="method"):
        find_modes(model, 2, method="newton")
    assert find_modes(model, 1, n_workers=1).method == "trust-region-fisher"
    with pytest.raises(ValueError, match="n_workers"):
        find_modes(model, 2, n_workers=0)
    with pytest.raises(TypeError, match="executor"):
        find_modes(model, 2, executor="processes")
    with pytest.raises(TypeError, match="problem_or_model"):
        find_modes(42, 2)
    with pm.Model() as discrete:
        pm.Poisson("k", 3.0)
    with pytest.raises(ValueError, match=r"discrete free variables \['k'\]"):
        find_modes(discrete, 2)


def test_auto_takes_lbfgsb_above_the_fisher_size_limit():
    """The Fisher trust region up to FISHER_SIZE_LIMIT coordinates, L-BFGS-B above (its
    Fisher graph would take too long to compile in every worker); both reach the MAP."""
    from pymc_odesens.inference.multistart import FISHER_SIZE_LIMIT

    data = np.linspace(-1.0, 1.0, FISHER_SIZE_LIMIT + 1)
    for size, expected in (
        (FISHER_SIZE_LIMIT, "trust-region-fisher"),
        (FISHER_SIZE_LIMIT + 1, "L-BFGS-B"),
    ):
        with pm.Model() as model:
            mu = pm.Normal("mu", 0.0, 1.0, shape=size)
            pm.Normal("y", mu, 1.0, observed=data[:size])
        result = find_modes(model, 1, random_seed=3, n_workers=1)
        assert result.method == expected
        # the MAP of a normal mean with a N(0, 1) prior and one N(mu, 1) datum: data / 2
        np.testing.assert_allclose(result.best.parameters["mu"], data[:size] / 2, atol=1e-4)


def test_the_fisher_trust_region_refuses_an_unsupported_likelihood_by_name():
    with pm.Model() as model:
        a = pm.Uniform("a", -3.0, 3.0)
        pm.StudentT("obs", nu=3, mu=a, sigma=1.0, observed=[0.5])
    with pytest.raises(ValueError, match="'obs' has distribution 'StudentT'"):
        find_modes(model, 2, method="trust-region-fisher", n_workers=1)
    # "auto" takes L-BFGS-B there
    assert find_modes(model, 1, n_workers=1).method == "L-BFGS-B"


def test_given_starts_run_after_the_drawn_ones_which_do_not_change():
    # y ~ Normal(a^2, 0.1): modes at a = +-sqrt(2); a start at a = -1 climbs to -sqrt(2)
    with pm.Model() as model:
        a = pm.Uniform("a", -3.0, 3.0)
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", a**2, 0.1 * s, observed=[2.0])
    drawn = find_modes(model, 3, random_seed=4, n_workers=1, method="L-BFGS-B")
    both = find_modes(
        model,
        3,
        random_seed=4,
        n_workers=1,
        method="L-BFGS-B",
        initial_points=[{"a": -1.0, "s": 0.5}, {"a": 1.2}],
    )
    assert sorted(r.index for r in both.starts) == [0, 1, 2, 3, 4]
    by_index = {r.index: r for r in both.starts}
    for r in drawn.starts:  # the drawn starts' draws and optima are the same bits
        np.testing.assert_array_equal(by_index[r.index].start, r.start)
        np.testing.assert_array_equal(by_index[r.index].x, r.x)
    # a bounded coordinate starts at the value itself, s (log coordinate) at log(0.5); a
    # variable left out starts at the model's initial value
    np.testing.assert_allclose(by_index[3].start, [-1.0, math.log(0.5)])
    default_s = model.initial_point()["s_log__"]
    np.testing.assert_allclose(by_index[4].start, [1.2, default_s])
    assert by_index[3].parameters["a"] == pytest.approx(-math.sqrt(2), abs=1e-5)
    assert by_index[4].parameters["a"] == pytest.approx(math.sqrt(2), abs=1e-5)
    only = find_modes(model, 0, n_workers=1, method="L-BFGS-B", initial_points=[{"a": -1.0}])
    assert [r.index for r in only.starts] == [0]
    assert only.best.parameters["a"] == pytest.approx(-math.sqrt(2), abs=1e-5)


def test_given_starts_are_checked_by_name():
    model = line_model()
    with pytest.raises(ValueError, match=r"initial_points: \['c'\] are not free variables"):
        find_modes(model, 1, n_workers=1, initial_points=[{"c": 1.0}])
    with pytest.raises(ValueError, match=r"initial_points: \['a'\] lie outside their bounds"):
        find_modes(model, 1, n_workers=1, initial_points=[{"a": 11.0}])
    with pytest.raises(ValueError, match="initial_points: 'b' is not finite"):
        find_modes(model, 1, n_workers=1, initial_points=[{"b": np.nan}])
    with pytest.raises(ValueError, match=r"initial_points: 'a' has shape \(2,\), expected \(\)"):
        find_modes(model, 1, n_workers=1, initial_points=[{"a": [1.0, 2.0]}])
    with pytest.raises(ValueError, match="initial_points: expected a sequence of dicts"):
        find_modes(model, 1, n_workers=1, initial_points=[[1.0, 0.0, 0.5]])
    with pytest.raises(ValueError, match=r"n_starts: expected an integer >= 1 \(0 only with"):
        find_modes(model, 0, n_workers=1)


def test_a_start_stops_at_its_time_limit_at_the_best_point_it_evaluated():
    result = find_modes(
        line_model(), 2, random_seed=3, n_workers=1, method="L-BFGS-B", start_time_limit=1e-9
    )
    for r in result.starts:  # only the start itself was evaluated before the limit
        assert r.status == "not converged"
        assert "stopped by the start's time limit (1e-09 s)" in r.message
        np.testing.assert_array_equal(r.x, r.start)
        assert r.evaluations == 1
    with pytest.raises(ValueError, match="start_time_limit: expected a positive number"):
        find_modes(line_model(), 1, start_time_limit=0)


def test_a_steady_state_likelihood_has_no_fisher_information_and_auto_takes_lbfgsb():
    """A steady state has gradients but no forward derivatives, so no Fisher information:
    the trust region refuses it by name, "auto" takes L-BFGS-B, which reaches the MAP."""
    # the ops tests' receptor system (its kernels compiled once per test session): without
    # the stimulus its active fraction settles at Rp* = kb / (kb + koff)
    system = OdeSystem(pathway_rhs, name="pathway", **PATHWAY_NAMES)
    data = np.array([0.30, 0.32, 0.29])
    with pm.Model() as model:
        kb = pm.LogNormal("kb", 0.0, 1.0)
        params = pm.math.stack([kb, 2.0, 0.0, 1.0, 3.0, 0.5])
        y = steady_state_solution(system, [1.0, 0.0, 2.0, 0.0], params)
        pm.Normal("obs", y[1], 0.05, observed=data)
    with pytest.raises(ValueError, match=r"depend on SteadyStateOp\{pathway\}.*no forward"):
        find_modes(model, 1, method="trust-region-fisher", n_workers=1)
    result = find_modes(model, 2, random_seed=1, n_workers=1)
    assert result.method == "L-BFGS-B"
    # the MAP of kb on its own scale: LogNormal(0, 1) prior, sigma 0.05
    kb = np.linspace(0.2, 0.8, 60001)
    rp = kb / (kb + 1.0)
    log_post = -0.5 * np.log(kb) ** 2 - np.log(kb) - ((rp[:, None] - data) ** 2).sum(1) / 0.005
    assert result.best.parameters["kb"] == pytest.approx(kb[np.argmax(log_post)], rel=1e-4)
