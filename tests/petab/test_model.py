"""The PyMC model of a PEtab problem: its log-density is the log-likelihood plus the
log-prior (computed independently with petab's priors), posterior predictive draws are
measurements, and the sampler's gradient is that of the log-density."""

import numpy as np
import pymc as pm
import pytest
from petab.v1.priors import Prior

from pymc_odesens.petab import PetabProblem
from tests.petab.turnover import (
    edited_turnover_problem,
    non_positive_simulation,
    write_turnover_problem,
)


@pytest.fixture(scope="module")
def turnover(tmp_path_factory):
    yaml = write_turnover_problem(tmp_path_factory.mktemp("turnover_model"))
    return PetabProblem.from_yaml(yaml, relative_tolerance=1e-10, absolute_tolerance=1e-12)


def value_point(model: pm.Model, x: dict) -> dict:
    """The model's value variables (transformed) at the parameters ``x`` (on their scales)."""
    point = {}
    for rv in model.free_RVs:
        transform = model.rvs_to_transforms[rv]
        value = np.asarray(x[rv.name], dtype=float)
        if transform is not None:
            value = transform.forward(value, *rv.owner.inputs).eval()
        point[model.rvs_to_values[rv].name] = value
    return point


def log_prior(problem: PetabProblem, x) -> float:
    """Sum of the priors' log-densities on the parameter scales, by petab's Prior."""
    total = 0.0
    for pid, value in zip(problem.parameters.ids, x):
        row = problem.parameters.table.loc[pid].to_dict()
        prior = Prior.from_par_dict(row, type_="objective")
        total += np.log(prior.pdf(value, x_scaled=True, rescale=True))
    return total


def check_log_density(problem: PetabProblem, x, abs_tol: float) -> None:
    model = problem.build_model()
    point = value_point(model, dict(zip(problem.parameters.ids, x)))
    logp = model.compile_logp(jacobian=False)(point)
    expected = problem.log_likelihood(x) + log_prior(problem, x)
    assert logp == pytest.approx(expected, abs=abs_tol)


@pytest.mark.parametrize("shift", [0.0, 0.1])
def test_log_density_is_likelihood_plus_prior(turnover, shift):
    x = turnover.x_nominal + shift * np.cos(np.arange(len(turnover.parameters)))
    check_log_density(turnover, x, 1e-6)


def test_model_variables(turnover):
    model = turnover.build_model()
    assert [rv.name for rv in model.free_RVs] == list(turnover.parameters.ids)
    observed = {rv.name: len(model.rvs_to_values[rv].data) for rv in model.observed_RVs}
    assert observed == {"obs_log10": 6, "obs_laplace": 3, "obs_log_laplace": 3, "obs_log_b": 3}
    # the initial point is the nominal one (moved inside the bounds)
    initial = model.initial_point()
    nominal = value_point(model, dict(zip(turnover.parameters.ids, turnover.x_nominal)))
    for name, value in nominal.items():
        assert initial[name] == pytest.approx(value), name


def test_gradient_of_the_model_against_central_differences(turnover):
    model = turnover.build_model()
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    point = model.initial_point()
    names = list(point)
    gradient = dlogp(point)
    h = 1e-6
    for k, name in enumerate(names):
        up, down = dict(point), dict(point)
        up[name] = point[name] + h
        down[name] = point[name] - h
        central = (logp(up) - logp(down)) / (2 * h)
        assert gradient[k] == pytest.approx(central, rel=1e-5, abs=1e-5), name


def test_posterior_predictive_draws_are_measurements(turnover):
    model = turnover.build_model()
    with model:
        prior = pm.sample_prior_predictive(draws=50, random_seed=1)
    draws = prior.prior_predictive["obs_laplace"].values
    assert draws.shape == (1, 50, 3) and np.all(np.isfinite(draws))
    assert np.all(prior.prior_predictive["obs_log10"].values > 0)  # log-normal measurements
    bounds = turnover.parameters
    k = prior.prior["k"].values
    assert np.all((k >= np.log10(bounds.lower[0])) & (k <= np.log10(bounds.upper[0])))


@pytest.mark.parametrize("mode", ["FAST_RUN", pytest.param("NUMBA", marks=pytest.mark.slow)])
def test_non_positive_simulation_on_a_log_scale_is_a_rejection(tmp_path, mode):
    # log10 observable simulated as 0: the log-density is -inf, its gradient finite (the
    # adjoint refused the infinite cotangent before, ending the sampler)
    edit = non_positive_simulation("obs_log10", "0")
    problem = PetabProblem.from_yaml(
        edited_turnover_problem(tmp_path, "observables.tsv", edit),
        relative_tolerance=1e-10,
        absolute_tolerance=1e-12,
    )
    model = problem.build_model()
    assert "obs_log10_simulation_not_positive" in model.named_vars
    point = model.initial_point()
    assert model.compile_logp(mode=mode)(point) == -np.inf
    assert np.all(np.isfinite(model.compile_dlogp(mode=mode)(point)))
