"""PyMC's step-method choice with one gradient: the same choice, one gradient, fallbacks."""

import numpy as np
import pymc as pm
import pymc.sampling.mcmc as pymc_mcmc
import pytensor.gradient as tg
import pytensor.tensor as pt
import pytest
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

import pymc_odesens
from pymc_odesens.inference.step_assignment import (
    assign_with_one_gradient,
    one_gradient_step_assignment,
)


def _continuous_model():
    with pm.Model() as model:
        a = pm.Normal("a")
        b = pm.HalfNormal("b")
        c = pm.Uniform("c", -1.0, 2.0, shape=3)
        pm.Normal("y", a + c.sum(), b, observed=np.array([0.3, -0.2]))
    return model


def _by_name(selected: dict) -> dict:
    return {method: sorted(v.name for v in vars_) for method, vars_ in selected.items()}


@pytest.fixture
def counted_gradients(monkeypatch):
    calls = []
    grad = tg.grad

    def counting(cost, wrt, *args, **kwargs):
        calls.append(wrt)
        return grad(cost, wrt, *args, **kwargs)

    monkeypatch.setattr(tg, "grad", counting)
    return calls


def test_same_choice_as_pymc_with_one_gradient(counted_gradients):
    model = _continuous_model()
    provided, theirs = pymc_mcmc.assign_step_methods(model)
    assert provided == [] and len(counted_gradients) == 3  # PyMC: one per value variable
    counted_gradients.clear()
    provided, ours = assign_with_one_gradient(model)
    assert provided == []
    assert _by_name(ours) == _by_name(theirs) == {pm.NUTS: ["a", "b_log__", "c_interval__"]}
    assert len(counted_gradients) == 1 and len(counted_gradients[0]) == 3


def test_discrete_variables_and_given_steps_fall_back_to_pymc():
    with pm.Model() as model:
        pm.Normal("a")
        pm.Poisson("k", 2.0)
    provided, selected = assign_with_one_gradient(model)
    assert _by_name(selected) == {pm.NUTS: ["a"], pm.Metropolis: ["k"]}
    with model:
        step = pm.Metropolis([model["a"]])
    provided, selected = assign_with_one_gradient(model, step)
    assert provided == [step] and _by_name(selected) == {pm.Metropolis: ["k"]}


def test_context_restores_pymcs_function():
    original = pymc_mcmc.assign_step_methods
    with pytest.raises(RuntimeError, match="inside"):
        with one_gradient_step_assignment():
            assert pymc_mcmc.assign_step_methods is not original
            raise RuntimeError("inside")
    assert pymc_mcmc.assign_step_methods is original


def test_sample_takes_one_gradient_to_choose(counted_gradients):
    model = _continuous_model()
    with model:
        idata = pymc_odesens.sample(
            draws=20,
            tune=20,
            chains=1,
            cores=1,
            progressbar=False,
            random_seed=1,
            compute_convergence_checks=False,
            compile_kwargs={},
        )
    assert idata.posterior["c"].shape == (1, 20, 3)
    # one to choose the step methods, then NUTS's own gradient of the log-density
    assert [len(w) for w in counted_gradients[:1]] == [3]
    # PyMC's probe would have differentiated with respect to each value variable alone
    assert not any(w is v for w in counted_gradients for v in model.value_vars)


class _NoGradient(Op):
    """An Op without grad: ``pytensor.grad`` raises NotImplementedError at it."""

    def make_node(self, x):
        return Apply(self, [x], [pt.dscalar()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = np.asarray(-0.5 * inputs[0] ** 2)


class _UndefinedGradient(_NoGradient):
    """An Op whose gradient is declared undefined: ``pytensor.grad`` raises NullTypeGradError."""

    def grad(self, inputs, output_gradients):
        return [tg.grad_undefined(self, 0, inputs[0])]


@pytest.mark.parametrize(
    ("op", "error", "message"),
    [
        (_NoGradient(), NotImplementedError, "grad not implemented for Op _NoGradient"),
        (_UndefinedGradient(), tg.NullTypeGradError, "undefined"),
    ],
)
def test_a_log_density_without_gradient_falls_back_to_pymc(op, error, message):
    # the two ways pytensor.grad fails at an Op (both caught by the one-gradient probe)
    with pm.Model() as model:
        pm.Normal("a")
        b = pm.Normal("b")
        pm.Potential("p", op(b))
    with pytest.raises(error, match=message):
        tg.grad(model.logp(), model.value_vars)
    seen = []

    def fallback(model, step=None, methods=None):
        seen.append(step)
        return pymc_mcmc.assign_step_methods(model, step, methods=methods)

    provided, selected = assign_with_one_gradient(model, fallback=fallback)
    assert seen == [None]
    assert _by_name(selected) == {pm.NUTS: ["a"], pm.Slice: ["b"]}
