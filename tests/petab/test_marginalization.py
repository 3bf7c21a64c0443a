"""Marginalised observation parameters of PEtab problems: what qualifies and why not; the
marginal model's log-density equals the numerical integral, over the marginalised
parameters, of PEtab's log-likelihood (the generated kernel, an independent route) times
their conjugate priors, on every observable scale; its gradient equals central
differences; the recovered draws have the conditional posterior's moments, on the
parameters' PEtab scales; bad requests are refused by name. On Boehm, Fujita, Schwen (and
Bachmann, slow): which parameters qualify, and a finite log-density and gradient."""

import math

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import integrate
from scipy.optimize import minimize_scalar
from scipy.special import digamma

from pymc_odesens.petab import PetabProblem
from pymc_odesens.petab.likelihood_kernel import HEADER_SIZE, OUT_LLH
from pymc_odesens.petab.likelihood_op import _call as call_kernel
from pymc_odesens.petab.priors import bounds_on_scale, inside_bounds
from pymc_odesens.petab.problem import python_mode
from tests.marginal_quadrature import (
    inverse_gamma_logpdf,
    log_integral_around_mode,
    normal_logpdf,
)
from tests.petab.benchmark_collection import problem_yaml
from tests.petab.marginal_problem import write_marginal_problem
from tests.petab.test_model import value_point

PRIORS = {
    "scale_lin": {"mu": 1.0, "sigma": 1.5},
    "offset_lin": {"mu": 0.0, "sigma": 0.7},
    "sd_lin": {"alpha": 2.5, "beta": 0.05},
    "scale_log10": {"mu": 0.1, "sigma": 0.6},  # of log10 s
    "scale_log10b": {"mu": 0.3, "sigma": 0.6},
    "sd_log10": {"alpha": 2.0, "beta": 0.01},
    "scale_log": {"mu": -0.2, "sigma": 0.8},  # of ln s
    "sd_log": {"alpha": 3.0, "beta": 0.01},
    "scale_c": {"mu": 1.0, "sigma": 2.0},
}


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    yaml = write_marginal_problem(tmp_path_factory.mktemp("marginal_problem"))
    return PetabProblem.from_yaml(yaml, relative_tolerance=1e-10, absolute_tolerance=1e-12)


class JointLikelihood:
    """PEtab's log-likelihood (the generated kernel) at ``x``, with some estimated
    parameters replaced by given linear values; the simulation is done once (the replaced
    parameters are observation parameters)."""

    def __init__(self, problem: PetabProblem, x: np.ndarray) -> None:
        graph = problem.graph
        xv = pt.vector("x", dtype="float64")
        states = pytensor.function([xv], graph.states(graph.z(xv), problem.options, "none"))
        self.y = np.ascontiguousarray(states(x))
        self.kernel = problem.likelihood_kernel
        self.z = graph.values.values(problem.parameters.unscale(x))
        self.index = {pid: k for k, pid in enumerate(problem.parameters.ids)}

    def __call__(self, **linear) -> float:
        z = self.z.copy()
        for pid, value in linear.items():
            z[self.index[pid]] = value
        out = np.zeros(HEADER_SIZE)
        if call_kernel(self.kernel, self.kernel.value_kernel, self.y, z, out):
            return -math.inf
        return float(out[OUT_LLH])


def _marginal_value(problem, marginalize, x) -> float:
    """The marginal model's log-likelihood terms (observed variables and potentials) at the
    non-marginalised ``x``."""
    model = problem.build_model(
        marginalize=marginalize, marginal_priors={pid: PRIORS[pid] for pid in marginalize}
    )
    point = value_point(model, dict(zip(problem.parameters.ids, x)))
    terms = model.observed_RVs + model.potentials
    return float(model.compile_logp(vars=terms, jacobian=False, mode=python_mode())(point))


def _reference(prior) -> float:
    return prior["beta"] * math.exp(-digamma(prior["alpha"]))


def _log_prior_column(value, pid, variance=None, noise=None):
    prior = PRIORS[pid]
    sd = prior["sigma"]
    if variance is not None:
        sd = sd * np.sqrt(variance / _reference(PRIORS[noise]))
    return normal_logpdf(value, prior["mu"], sd)


def _log_prior_noise(u, pid):
    prior = PRIORS[pid]
    return inverse_gamma_logpdf(np.exp(u), prior["alpha"], prior["beta"]) + u


POINTS = [0.0, 0.15]


def _x(problem, shift):
    """The nominal values moved by ``shift * cos(k)``, kept inside the bounds."""
    parameters = problem.parameters
    x = parameters.nominal + shift * np.cos(np.arange(len(parameters)))
    for k, scale in enumerate(parameters.scales):
        lower, upper = bounds_on_scale(parameters.lower[k], parameters.upper[k], scale)
        x[k] = np.clip(x[k], *inside_bounds(lower, upper))
    return x


@pytest.mark.parametrize("shift", POINTS)
def test_scaling_and_offset_on_the_lin_scale(problem, shift):
    x = _x(problem, shift)
    joint = JointLikelihood(problem, x)
    value = _marginal_value(problem, ["scale_lin", "offset_lin"], x)

    def log_joint(s, o):
        s, o = np.broadcast_arrays(s, o)
        llh = np.vectorize(lambda a, b: joint(scale_lin=a, offset_lin=b))(s, o)
        return llh + _log_prior_column(s, "scale_lin") + _log_prior_column(o, "offset_lin")

    expected = log_integral_around_mode(log_joint, [1.5, 0.3])
    assert value == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("shift", POINTS)
@pytest.mark.parametrize(
    "pid, start",
    [
        ("sd_lin", 2 * math.log(0.1)),  # ln v
        ("sd_log10", 2 * math.log(0.05)),
        ("scale_log10", math.log10(2.0)),  # log10 s
        ("scale_c", 1.2),  # s (lin)
    ],
)
def test_one_parameter(problem, shift, pid, start):
    x = _x(problem, shift)
    joint = JointLikelihood(problem, x)
    value = _marginal_value(problem, [pid], x)
    noise = pid.startswith("sd_")

    def log_joint(t):
        if noise:
            return joint(**{pid: math.exp(0.5 * t)}) + _log_prior_noise(t, pid)
        linear = 10**t if pid == "scale_log10" else t
        return joint(**{pid: linear}) + _log_prior_column(t, pid)

    expected = log_integral_around_mode(log_joint, [start])
    assert value == pytest.approx(expected, abs=1e-6)


def test_two_scalings_through_one_placeholder(problem):
    """``observableParameter1_obs_log10`` reads ``scale_log10`` in condition c1 and
    ``scale_log10b`` in c2: two columns, one per condition's measurements."""
    x = _x(problem, 0.1)
    joint = JointLikelihood(problem, x)
    value = _marginal_value(problem, ["scale_log10", "scale_log10b"], x)

    def log_joint(t, q):
        t, q = np.broadcast_arrays(t, q)
        llh = np.vectorize(lambda a, b: joint(scale_log10=10**a, scale_log10b=10**b))(t, q)
        return llh + _log_prior_column(t, "scale_log10") + _log_prior_column(q, "scale_log10b")

    expected = log_integral_around_mode(log_joint, [math.log10(2.0), math.log10(3.0)])
    assert value == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("shift", POINTS)
def test_scaling_and_noise_on_the_log_scale_with_a_noise_weight(problem, shift):
    """``scale_log * A`` on the log scale, noise ``2 * sd_log``: normal-inverse-gamma."""
    x = _x(problem, shift)
    joint = JointLikelihood(problem, x)
    value = _marginal_value(problem, ["scale_log", "sd_log"], x)

    def log_joint(t, u):
        llh = np.vectorize(lambda a, b: joint(scale_log=math.exp(a), sd_log=math.exp(0.5 * b)))(
            t, u
        )
        prior = _log_prior_column(t, "scale_log", variance=np.exp(u), noise="sd_log")
        return llh + prior + _log_prior_noise(u, "sd_log")

    expected = log_integral_around_mode(log_joint, [math.log(0.8), 2 * math.log(0.03)])
    assert value == pytest.approx(expected, abs=1e-6)


def test_what_qualifies_and_why_not(problem):
    report = problem.marginalizable_parameters()
    qualifying = set(report.index[report.marginalizable])
    assert qualifying == {
        "scale_lin",
        "offset_lin",
        "sd_lin",
        "scale_log10",
        "scale_log10b",
        "sd_log10",
        "scale_log",
        "sd_log",
        "scale_c",
        "s_first",
    }
    kinds = report["kind"].to_dict()
    assert kinds["scale_lin"] == "scaling" and kinds["offset_lin"] == "offset"
    assert kinds["sd_lin"] == "noise_sd" and kinds["scale_log10"] == "scaling"
    assert report.loc["scale_log10", "variable"] == "log10(scale_log10)"
    assert report.loc["sd_lin", "variable"] == "sd_lin^2"
    # a normal PEtab prior on theta's scale is used exactly
    assert report.loc["scale_log10", "prior"] == "Normal(mu=0.2, sigma=0.8) (the PEtab prior)"
    assert report.loc["scale_log", "prior"] == "Normal(mu=0, sigma=1) (the PEtab prior)"
    assert report.loc["offset_lin", "prior"] == "Normal(mu=0.2, sigma=0.5) (the PEtab prior)"
    assert report.loc["sd_lin", "prior"].startswith("InverseGamma(")
    reasons = report["reason"].to_dict()
    assert "laplace noise" in reasons["offset_laplace"]
    assert "inside a logarithm" in reasons["offset_in_log"]
    assert "sd_a + sd_b" in reasons["sd_a"] and "sd_a + sd_b" in reasons["sd_b"]
    assert "dynamics" in reasons["k"]
    assert "'scale_c'" in reasons["sd_c1"] and "'sd_c2'" in reasons["sd_c1"]
    assert "multiplied by 's_first'" in reasons["o_second"]
    assert reasons["fixed_offset"] == "not estimated (estimate = 0)"
    assert "u_stim" not in report.index  # a parameter of the model only


def test_the_auto_model(problem):
    model = problem.build_model(marginalize="auto")
    free = {rv.name for rv in model.free_RVs}
    report = problem.marginalizable_parameters()
    assert free == set(problem.parameters.ids) - set(report.index[report.marginalizable])
    observed = {rv.name: len(model.rvs_to_values[rv].data) for rv in model.observed_RVs}
    # observables whose measurements are all marginalised have no observed variable
    assert "obs_lin" not in observed and "obs_couple1" not in observed
    assert observed["obs_laplace"] == 6 and observed["obs_sum_noise"] == 6
    assert "marginalized_measurements" in [p.name for p in model.potentials]
    # the model without marginalisation is unchanged
    plain = problem.build_model()
    assert {rv.name for rv in plain.free_RVs} == set(problem.parameters.ids)
    assert "marginalized_measurements" not in [p.name for p in plain.potentials]


def test_gradient_of_the_marginal_model_against_central_differences(problem):
    model = problem.build_model(marginalize="auto")
    logp = model.compile_logp(mode=python_mode())
    dlogp = model.compile_dlogp(mode=python_mode())
    point = model.initial_point()
    gradient = dlogp(point)
    h = 1e-6
    for k, name in enumerate(point):
        up, down = dict(point), dict(point)
        up[name] = point[name] + h
        down[name] = point[name] - h
        central = (logp(up) - logp(down)) / (2 * h)
        assert gradient[k] == pytest.approx(central, rel=1e-5, abs=1e-5), name


def _posterior_moments(log_density, report, start) -> tuple[float, float]:
    """Mean and variance of ``report(t)`` under the density ``exp(log_density(t))``
    (normalised), by quadrature over 14 curvature widths around its mode."""
    mode = minimize_scalar(lambda t: -log_density(t), bracket=(start - 0.5, start + 0.5)).x
    h = 1e-4
    curvature = -(log_density(mode + h) - 2 * log_density(mode) + log_density(mode - h)) / h**2
    width = 14 / math.sqrt(curvature)
    peak = log_density(mode)

    def integral(f):
        return integrate.quad(
            lambda t: f(t) * math.exp(log_density(t) - peak),
            mode - width,
            mode + width,
            points=[mode],
            epsabs=0,
            epsrel=1e-10,
            limit=200,
        )[0]

    mass = integral(lambda t: 1.0)
    mean = integral(report) / mass
    return mean, integral(lambda t: (report(t) - mean) ** 2) / mass


def test_recovered_draws_on_the_parameter_scales(problem):
    """At one point of the other parameters: the recovered ``scale_log10`` (a scaling on
    the log10 scale, with the noise sampled; parameterScale log10) and ``sd_log`` (a noise
    parameter alone; parameterScale log10) have the moments of their conditional
    posterior (quadrature of the kernel's log-likelihood)."""
    x = problem.x_nominal
    joint = JointLikelihood(problem, x)
    marginalize = ["scale_log10", "sd_log"]
    model = problem.build_model(
        marginalize=marginalize, marginal_priors={pid: PRIORS[pid] for pid in marginalize}
    )
    free = [rv.name for rv in model.free_RVs]
    draws = 3000
    values = dict(zip(problem.parameters.ids, x))
    posterior = {name: np.full((1, draws), values[name]) for name in free}
    idata = problem.recover_marginalized(az.from_dict(posterior=posterior), random_seed=3)
    # the two blocks are independent: one-dimensional posteriors
    scale_of = lambda t: joint(scale_log10=10**t) + _log_prior_column(t, "scale_log10")  # noqa: E731
    noise_of = lambda u: joint(sd_log=math.exp(0.5 * u)) + _log_prior_noise(u, "sd_log")  # noqa: E731
    for name, log_density, start, report in (
        ("scale_log10", scale_of, math.log10(2.0), lambda t: t),  # log10 s
        ("sd_log", noise_of, 2 * math.log(0.03), lambda u: 0.5 * u / math.log(10)),  # log10 sd
    ):
        mean, variance = _posterior_moments(log_density, report, start)
        drawn = idata.posterior[name].values.ravel()
        assert abs(drawn.mean() - mean) < 4 * math.sqrt(variance / draws), name
        assert drawn.var() == pytest.approx(variance, rel=0.1), name
    linear = problem.recover_marginalized(
        az.from_dict(posterior=posterior), model, random_seed=3, scale="linear"
    )
    np.testing.assert_allclose(
        linear.posterior["scale_log10"].values, 10 ** idata.posterior["scale_log10"].values
    )


def test_a_negative_draw_of_a_log_scaled_parameter_is_named(problem):
    model = problem.build_model(
        marginalize=["scale_c"], marginal_priors={"scale_c": {"mu": -50.0, "sigma": 1e-3}}
    )
    posterior = {
        rv.name: np.full((1, 4), dict(zip(problem.parameters.ids, problem.x_nominal))[rv.name])
        for rv in model.free_RVs
    }
    with pytest.raises(ValueError, match=r"4 of 4 draws of 'scale_c' are not positive.*linear"):
        problem.recover_marginalized(az.from_dict(posterior=posterior), model)
    idata = problem.recover_marginalized(az.from_dict(posterior=posterior), model, scale="linear")
    assert np.all(idata.posterior["scale_c"].values < 0)


@pytest.mark.parametrize(
    "marginalize, priors, match",
    [
        (["k"], None, "'k' cannot be marginalised: a parameter of the model's dynamics"),
        (["nope"], None, "'nope' is not an estimated parameter"),
        (["scale_c", "sd_c1"], None, "'sd_c1' cannot be marginalised: the marginalised 'scale_c'"),
        (["s_first", "o_second"], None, "'o_second' and 's_first' cannot both"),
        ("all", None, "'auto', a list of parameter ids or None"),
        (["sd_lin"], {"scale_lin": {"mu": 0, "sigma": 1}}, "'scale_lin' is not a marginalised"),
        (["sd_lin"], {"sd_lin": {"mu": 0, "sigma": 1}}, r"keys \('alpha', 'beta'\)"),
        (["scale_lin"], {"scale_lin": {"mu": 0, "sigma": -1}}, "positive finite"),
        (None, {"scale_lin": {"mu": 0, "sigma": 1}}, "marginalize is None"),
    ],
)
def test_bad_requests_are_refused(problem, marginalize, priors, match):
    with pytest.raises(ValueError, match=match):
        problem.build_model(marginalize=marginalize, marginal_priors=priors)


def test_recover_needs_a_model(tmp_path):
    fresh = PetabProblem.from_yaml(write_marginal_problem(tmp_path))
    with pytest.raises(ValueError, match="no model given"):
        fresh.recover_marginalized(az.from_dict(posterior={"k": np.zeros((1, 2))}))


# the benchmark collection ------------------------------------------------------------------
QUALIFYING = {
    "Boehm_JProteomeRes2014": {"sd_pSTAT5A_rel", "sd_pSTAT5B_rel", "sd_rSTAT5A_rel"},
    "Fujita_SciSignal2010": {"scaling_pAkt_tot", "scaling_pEGFR_tot", "scaling_pS6_tot"},
    "Schwen_PONE2014": {"scale", "IR_obs_std", "std"},
    # the offset of the lin observable pSTAT5B_rel, the scalings of observables that are a
    # product on the log10 scale, and the noise parameters alone in their noise formulas;
    # the other offsets and scalings enter log10(offset + scale * x)
    "Bachmann_MSB2011": {
        "offset_pSTAT5_conc",
        "scale1_CIS_dr90",
        "scale2_CIS_dr90",
        "scale_SHP1_shp1oe",
        "scale_pSTAT5_dr10",
        "scale_tSTAT5_actd",
        "scale_tSTAT5_long",
        "scale_tSTAT5_shp1oe",
        "sd_CIS_abs",
        "sd_CIS_au",
        "sd_JAK2EpoR_au",
        "sd_RNA_fold",
        "sd_SHP1_abs",
        "sd_SHP1_au",
        "sd_SOCS3_abs",
        "sd_SOCS3_au",
        "sd_STAT5_abs",
        "sd_pSTAT5_rel",
    },
}


def _benchmark(name: str) -> PetabProblem:
    # tight tolerances: central differences of the log-density see the solver's error
    return PetabProblem.from_yaml(
        problem_yaml(name), relative_tolerance=1e-12, absolute_tolerance=1e-16
    )


@pytest.mark.parametrize("name", sorted(QUALIFYING))
def test_benchmark_problems_what_qualifies(name):
    report = _benchmark(name).marginalizable_parameters()
    assert set(report.index[report.marginalizable]) == QUALIFYING[name]
    assert (report.reason[~report.marginalizable] != "").all()
    if name == "Bachmann_MSB2011":
        assert "inside a logarithm" in report.loc["offset_CIS_actd", "reason"]
        assert "inside a logarithm" in report.loc["scale_CIS_actd", "reason"]
        assert "sd_STAT5_au + sd_pSTAT5_socs3oe" in report.loc["sd_STAT5_au", "reason"]


def _check_model(name: str, components: int) -> None:
    """The marginal model's log-density and gradient are finite at the nominal point, and
    ``components`` components of the gradient equal central differences."""
    model = _benchmark(name).build_model(marginalize="auto")
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    point = model.initial_point()
    value, gradient = logp(point), dlogp(point)
    assert np.isfinite(value) and np.all(np.isfinite(gradient))
    names = list(point)
    h = 1e-5
    for k in np.linspace(0, len(names) - 1, components).astype(int):
        up, down = dict(point), dict(point)
        up[names[k]] = point[names[k]] + h
        down[names[k]] = point[names[k]] - h
        central = (logp(up) - logp(down)) / (2 * h)
        assert gradient[k] == pytest.approx(central, rel=1e-4, abs=1e-4), names[k]


def test_benchmark_marginal_model_boehm():
    _check_model("Boehm_JProteomeRes2014", components=3)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["Fujita_SciSignal2010", "Schwen_PONE2014", "Bachmann_MSB2011"])
def test_benchmark_marginal_models_slow(name):
    _check_model(name, components=4)


@pytest.mark.slow
def test_nutpie_samples_the_marginal_model_and_recovery_completes_it():
    """Boehm with its noise parameters marginalised: the NUMBA-mode log-density equals the
    default one, nutpie samples it, and the recovered noise parameters are near the
    unmarginalised posterior's (log10 sd_pSTAT5A_rel about 0.59)."""
    pytest.importorskip("nutpie")
    problem = PetabProblem.from_yaml(problem_yaml("Boehm_JProteomeRes2014"))
    model = problem.build_model(marginalize="auto")
    point = value_point(model, dict(zip(problem.parameters.ids, problem.x_nominal)))
    numba_logp = model.compile_logp(mode="NUMBA")(point)
    assert numba_logp == pytest.approx(model.compile_logp()(point), rel=1e-10)
    with model:
        idata = pm.sample(
            draws=60, tune=60, chains=1, nuts_sampler="nutpie", random_seed=3, progressbar=False
        )
    problem.recover_marginalized(idata, random_seed=4)
    for pid in problem.parameters.ids:
        assert np.isfinite(idata.posterior[pid].values).all(), pid
    assert abs(float(idata.posterior["sd_pSTAT5A_rel"].mean()) - 0.59) < 0.3


def test_a_non_positive_simulation_on_a_log_scale_is_a_rejection(tmp_path):
    """``obs_log10`` simulated negative (``-s A``): as in the unmarginalised model, the
    log-density is ``-inf`` (a rejection potential) with a finite gradient."""
    yaml = write_marginal_problem(tmp_path)
    table = pd.read_csv(tmp_path / "observables.tsv", sep="\t")
    row = table["observableId"] == "obs_log10"
    table.loc[row, "observableFormula"] = "-1 * observableParameter1_obs_log10 * A"
    table.to_csv(tmp_path / "observables.tsv", sep="\t", index=False)
    problem = PetabProblem.from_yaml(yaml)
    report = problem.marginalizable_parameters()
    assert report.loc["scale_log10", "marginalizable"]  # -s A = s^1 (-A)
    model = problem.build_model(marginalize=["scale_log10", "scale_log10b"])
    assert "marginalized_measurements_simulation_not_positive" in model.named_vars
    point = model.initial_point()
    assert model.compile_logp()(point) == -np.inf
    assert np.all(np.isfinite(model.compile_dlogp()(point)))


def test_parameters_read_by_model_events_are_not_marginalised(tmp_path):
    """``frac`` (a parameter of the model that an event's assignment reads) and
    ``dose_amount`` (a condition's value of one) enter the observable as offsets, but they
    are parameters of the dynamics."""
    from tests.petab.turnover_events import CUT, DOSE, write_problem

    conditions = {
        "early": {
            "u": "u_stim",
            "t_dose": "t_first",
            "dose": "dose_amount",
            "t_cut": 2.0,
            "th": 0.0,
        }
    }
    events = [{**DOSE, "id": "dose_event"}, {**CUT, "id": "cut_event"}]  # ids of their own
    yaml = write_problem(tmp_path, events, conditions, [("", "early", [0.5, 1.5, 3.0])])
    table = pd.read_csv(tmp_path / "observables.tsv", sep="\t")
    table["observableFormula"] = "A + frac + dose_amount"
    table.to_csv(tmp_path / "observables.tsv", sep="\t", index=False)
    parameters = pd.read_csv(tmp_path / "parameters.tsv", sep="\t")
    parameters = parameters[parameters["parameterId"] != "u_pre"]  # of pre-equilibrations
    parameters.to_csv(tmp_path / "parameters.tsv", sep="\t", index=False)
    report = PetabProblem.from_yaml(yaml).marginalizable_parameters()
    for pid in ("frac", "dose_amount"):
        assert not report.loc[pid, "marginalizable"], pid
        assert "dynamics" in report.loc[pid, "reason"], pid
