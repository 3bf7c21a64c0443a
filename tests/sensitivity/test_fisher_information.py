"""Expected Fisher information: closed forms (linear2), the score's covariance, arguments.

linear2 (``y0' = -p0 y0 + p1 y1``, ``y1' = -p1 y1``) has closed-form states and
sensitivities (the ``exact`` block of its JSON) and the state-transition matrix
``expm(A t)``; F built from them by numpy is compared with
:func:`pymc_odesens.fisher_information`, which computes ``S`` by forward
sensitivities and ``dh/dtheta`` with generated observable kernels. The score test
checks F against the Monte Carlo covariance of the log-likelihood's gradient,
obtained by finite differences of plain solves (no sensitivities involved).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.linalg
import sympy as sp

from pymc_odesens import fisher_information, solve
from pymc_odesens.codegen.observable_kernels import (
    compile_observable_kernels,
    evaluate_observable_kernel,
)
from pymc_odesens.sensitivity.observables import resolve_observables
from tests.conftest import load_truth, model_path

TIMES = np.linspace(0.5, 5.0, 10)
TIGHT = {"relative_tolerance": 1e-10, "absolute_tolerance": 1e-12}


@pytest.fixture(scope="module")
def linear2(reference_system):
    return reference_system("linear2")


@pytest.fixture(scope="module")
def exact(linear2):
    """Closed-form y (T, 2), S (T, 2, 2) and Phi = expm(A t) (T, 2, 2) of linear2 at TIMES."""
    spec = json.loads(model_path("linear2").read_text())["exact"]
    t = sp.Symbol("t")
    names = {str(s): s for s in (*linear2.state_symbols, *linear2.param_symbols)}
    names["t"] = t
    p = linear2.p_nominal
    args = [t, *linear2.param_symbols]

    def values(text):
        f = sp.lambdify(args, sp.sympify(text, locals=names))
        return np.broadcast_to(f(TIMES, *p), TIMES.shape).astype(float)

    y = np.stack([values(spec["y"][s]) for s in linear2.states], axis=1)
    s_mat = np.empty((TIMES.size, 2, 2))
    for i, state in enumerate(linear2.states):
        for k, par in enumerate(linear2.params):
            s_mat[:, i, k] = values(spec["S"][f"d{state}/d{par}"])
    a = np.array([[-p[0], p[1]], [0.0, -p[1]]])
    phi = np.stack([scipy.linalg.expm(a * tk) for tk in TIMES])
    return {"y": y, "S": s_mat, "Phi": phi}


def _fisher(dh, weights):
    return np.einsum("tmk,tm,tml->kl", dh, weights, dh)


def _relative(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def test_states_scalar_sigma_closed_form(linear2, exact):
    result = fisher_information(linear2, linear2.x0, TIMES, linear2.p_nominal, 0.1, **TIGHT)
    expected = _fisher(exact["S"], np.full((TIMES.size, 2), 100.0))
    assert _relative(result.matrix, expected) < 1e-8
    assert result.columns == list(linear2.params)
    assert result.observables == list(linear2.states)
    np.testing.assert_allclose(result.h, exact["y"], rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(result.matrix, result.matrix.T, rtol=0, atol=0)


@pytest.mark.parametrize("shape", ["per_observable", "per_point"])
def test_sigma_per_observable_and_per_point(linear2, exact, shape):
    rng = np.random.default_rng(3)
    sigma = np.array([0.1, 0.3]) if shape == "per_observable" else rng.uniform(0.05, 0.5, (10, 2))
    result = fisher_information(linear2, linear2.x0, TIMES, linear2.p_nominal, sigma, **TIGHT)
    weights = np.broadcast_to(1.0 / np.asarray(sigma) ** 2, (TIMES.size, 2))
    assert _relative(result.matrix, _fisher(exact["S"], weights)) < 1e-8


@pytest.mark.parametrize("wrt", ["y0", "both"])
def test_initial_state_columns_closed_form(linear2, exact, wrt):
    """wrt y0: dh/dy0 is the state-transition matrix expm(A t); both: [S, Phi]."""
    result = fisher_information(
        linear2, linear2.x0, TIMES, linear2.p_nominal, 0.2, wrt=wrt, **TIGHT
    )
    jac = exact["Phi"] if wrt == "y0" else np.concatenate([exact["S"], exact["Phi"]], axis=2)
    assert _relative(result.matrix, _fisher(jac, np.full((TIMES.size, 2), 25.0))) < 1e-8
    y0_names = ["y0[y0]", "y0[y1]"]
    assert result.columns == (y0_names if wrt == "y0" else [*linear2.params, *y0_names])


def test_observable_with_parameter_dependence(linear2, exact):
    """h = (p0 y0 + 2 y1, y1): dh/dp = h_y S + h_p with h_p = (y0, 0) for p0."""
    observables = {"flux": "p0*y0 + 2*y1", "y1": "y1"}
    result = fisher_information(
        linear2, linear2.x0, TIMES, linear2.p_nominal, [0.1, 0.2], observables=observables, **TIGHT
    )
    p0 = linear2.p_nominal[0]
    s = exact["S"]
    dh = np.empty((TIMES.size, 2, 2))
    dh[:, 0, :] = p0 * s[:, 0, :] + 2.0 * s[:, 1, :]
    dh[:, 0, 0] += exact["y"][:, 0]
    dh[:, 1, :] = s[:, 1, :]
    weights = np.broadcast_to([100.0, 25.0], (TIMES.size, 2))
    assert _relative(result.matrix, _fisher(dh, weights)) < 1e-8
    assert result.observables == ["flux", "y1"]
    assert np.abs(result.dh - dh).max() < 1e-8 * np.abs(dh).max()


def test_multiplicative_noise_is_gaussian_on_log_h(linear2, exact):
    result = fisher_information(
        linear2,
        linear2.x0,
        TIMES,
        linear2.p_nominal,
        0.05,
        noise="multiplicative",
        **TIGHT,
    )
    dlog = exact["S"] / exact["y"][:, :, None]
    assert _relative(result.matrix, _fisher(dlog, np.full((TIMES.size, 2), 400.0))) < 1e-8


def test_observable_forms_resolve_to_the_same_expressions(linear2):
    y0, y1 = linear2.state_symbols
    p0, _ = linear2.param_symbols
    forms = [
        ["y1", 0],
        [1, "y0"],
        {"a": y1, "b": "y0"},
        lambda t, y, p: [y.y1, y[0]],
    ]
    expected = [(y1, y0), (y1, y0), (y1, y0), (y1, y0)]
    for form, exprs in zip(forms, expected):
        assert resolve_observables(linear2, form).expressions == exprs
    assert resolve_observables(linear2, None).names == ("y0", "y1")
    assert resolve_observables(linear2, ["p0*y0 + t"]).expressions == (p0 * y0 + linear2.t,)


def test_json_outputs_are_observables(reference_system):
    akar4 = reference_system("akar4")
    obs = resolve_observables(akar4, ["AKAR4pOUT"])
    assert obs.names == ("AKAR4pOUT",)
    assert obs.expressions[0] == 108 + 380 * akar4.state_symbols[2]


def test_observable_kernels_match_sympy(linear2):
    y0, y1 = linear2.state_symbols
    p0, p1 = linear2.param_symbols
    exprs = [p0 * y0**2 + sp.exp(p1 * y1), y1 * linear2.t]
    kernels = compile_observable_kernels(linear2, exprs)
    y, p, t = np.array([0.7, 1.3]), np.array([1.1, 0.4]), 2.5
    subs = {y0: y[0], y1: y[1], p0: p[0], p1: p[1], linear2.t: t}
    values = evaluate_observable_kernel(kernels.value, t, y, p, 2)
    jac_y = evaluate_observable_kernel(kernels.jac_y, t, y, p, 4).reshape(2, 2)
    jac_p = evaluate_observable_kernel(kernels.jac_p, t, y, p, 4).reshape(2, 2)
    for m, e in enumerate(exprs):
        assert values[m] == pytest.approx(float(e.subs(subs)), rel=1e-14)
        for i, s in enumerate((y0, y1)):
            assert jac_y[m, i] == pytest.approx(float(sp.diff(e, s).subs(subs)), rel=1e-14)
        for k, s in enumerate((p0, p1)):
            assert jac_p[m, k] == pytest.approx(float(sp.diff(e, s).subs(subs)), rel=1e-14)


def _score_covariance_case(system, noise, n_draws, seed):
    """F and the sample covariance of the score, its entries from central differences of
    the log-likelihood over plain solves (no sensitivities)."""
    p = system.p_nominal
    times = np.linspace(0.5, 10.0, 20)
    sigma = np.array([0.08, 0.12])
    result = fisher_information(
        system, system.x0, times, p, sigma, noise=noise, method="rk45", **TIGHT
    )
    rng = np.random.default_rng(seed)

    def h(params):
        return solve(system, system.x0, times, params, method="rk45", **TIGHT).y

    location = (lambda v: v) if noise == "additive" else np.log
    mean = location(h(p))
    data = mean + sigma * rng.standard_normal((n_draws, *mean.shape))
    scores = np.empty((n_draws, p.size))
    for k in range(p.size):
        step = 1e-5 * max(abs(p[k]), 1.0)
        up, down = p.copy(), p.copy()
        up[k] += step
        down[k] -= step
        lu, ld = location(h(up)), location(h(down))
        ll_up = -0.5 * (((data - lu) / sigma) ** 2).sum(axis=(1, 2))
        ll_down = -0.5 * (((data - ld) / sigma) ** 2).sum(axis=(1, 2))
        scores[:, k] = (ll_up - ll_down) / (2 * step)
    return result.matrix, np.cov(scores, rowvar=False)


@pytest.mark.parametrize("noise", ["additive", "multiplicative"])
def test_fisher_equals_covariance_of_the_score(reference_system, noise):
    """Lotka-Volterra (4 parameters), 20 000 simulated data sets: whitened by F, the score's
    covariance is the identity to Monte Carlo accuracy (entries ~ sqrt(2/n) = 0.01)."""
    system = reference_system("lotka_volterra")
    fisher, cov = _score_covariance_case(system, noise, 20_000, seed=11)
    w = np.linalg.inv(scipy.linalg.sqrtm(fisher).real)
    whitened = w @ cov @ w
    assert np.abs(whitened - np.eye(4)).max() < 0.05
    # and not by accident: a Fisher information off by 10 % fails the same check
    w_bad = np.linalg.inv(scipy.linalg.sqrtm(1.1 * fisher).real)
    assert np.abs(w_bad @ cov @ w_bad - np.eye(4)).max() > 0.07


def _scaled_errors(approximate, reference):
    """``|A_kl - F_kl| / sqrt(F_kk F_ll)`` over the identifiable parameters (F_kk > 0)."""
    scale = np.sqrt(np.diag(reference))
    keep = scale > 0
    outer = np.outer(scale[keep], scale[keep])
    sub = np.ix_(keep, keep)
    return np.abs(approximate[sub] - reference[sub]) / outer


def test_pbsr_and_exp_fisher_close_to_forward_on_pka(reference_system):
    """PKA (11 states, 35 parameters) at the paper's tolerances (rtol 1e-5, atol 1e-6): F from
    PBSR sensitivities is within 1 % of the forward F (at rtol 1e-10), entry by entry relative
    to sqrt(F_kk F_ll); Exp (first order in the step) within 25 %, 5 % in the median
    diagonal entry. Parameters the states do not depend on give zero rows in every route."""
    system = reference_system("pka")
    times = load_truth("pka")["t"][1:]  # after t0 = 0, where S = 0
    args = (system, system.x0, times, system.p_nominal, 0.05)
    forward = fisher_information(*args, method="bdf", **TIGHT).matrix
    paper = {"relative_tolerance": 1e-5, "absolute_tolerance": 1e-6}
    pbsr = fisher_information(*args, sensitivity="pbsr", method="bdf", **paper).matrix
    exp = fisher_information(*args, sensitivity="exp", method="bdf", **paper).matrix
    err_pbsr = _scaled_errors(pbsr, forward)
    err_exp = _scaled_errors(exp, forward)
    assert err_pbsr.max() < 0.01, err_pbsr.max()
    assert err_exp.max() < 0.25, err_exp.max()
    assert np.median(np.diag(err_exp)) < 0.05
    assert err_pbsr.max() > 0.0 and err_exp.max() > 0.0  # really other sensitivities
    unidentified = np.diag(forward) == 0.0
    assert 0 < unidentified.sum() < system.n_params
    for approximate in (pbsr, exp):
        assert np.all(approximate[unidentified] == 0.0)
        np.testing.assert_array_equal(approximate, approximate.T)


def test_sigma_shape_and_value_errors(linear2):
    args = (linear2, linear2.x0, TIMES, linear2.p_nominal)
    with pytest.raises(ValueError, match=r"sigma must be a scalar, one value per observable"):
        fisher_information(*args, np.ones(3))
    with pytest.raises(ValueError, match=r"shape \(10, 2\)\); got shape \(2, 10\)"):
        fisher_information(*args, np.ones((2, 10)))
    with pytest.raises(ValueError, match="sigma must be finite and > 0 everywhere; got -0.1"):
        fisher_information(*args, [0.1, -0.1])
    with pytest.raises(ValueError, match="sigma must be finite and > 0 everywhere; got nan"):
        fisher_information(*args, np.nan)


def test_argument_errors(linear2):
    args = (linear2, linear2.x0, TIMES, linear2.p_nominal, 0.1)
    with pytest.raises(ValueError, match=r"noise must be one of \('additive', 'multiplicative'\)"):
        fisher_information(*args, noise="poisson")
    with pytest.raises(ValueError, match="wrt must be one of"):
        fisher_information(*args, wrt="state")
    with pytest.raises(ValueError, match="sensitivity must be one of"):
        fisher_information(*args, sensitivity="adjoint")
    with pytest.raises(TypeError, match=r"unknown control\(s\) \['rtol'\]; accepted: "):
        fisher_information(*args, rtol=1e-6)
    with pytest.raises(ValueError, match="'AKAR4p' is neither a state nor an output"):
        fisher_information(*args, observables=["AKAR4p"])
    with pytest.raises(
        ValueError,
        match=r"observables\[0\]: the name .k. is not defined \(known names: p0, p1, t, y0, y1\)",
    ):
        fisher_information(*args, observables=["k*y0"])
    with pytest.raises(ValueError, match="state index 2 is out of range"):
        fisher_information(*args, observables=[2])
    with pytest.raises(TypeError, match=r"got the string 'y0' \(use \['y0'\]\)"):
        fisher_information(*args, observables="y0")
    with pytest.raises(ValueError, match=r"duplicate names \['y1'\]"):
        fisher_information(*args, observables=["y1", "y1"])
    with pytest.raises(ValueError, match="at least one observable"):
        fisher_information(*args, observables=[])


def test_multiplicative_noise_needs_positive_observables(linear2):
    with pytest.raises(ValueError, match=r"needs positive observables; 'h0' is -1.\d+ at t = 0.5"):
        fisher_information(
            linear2,
            linear2.x0,
            TIMES,
            linear2.p_nominal,
            0.1,
            observables=["y0 - 2"],
            noise="multiplicative",
        )
