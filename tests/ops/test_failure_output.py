"""What a solver failure prints outside a model: the one clear error, nothing else.

PyTensor used to constant-fold an ODE Op with constant inputs while compiling, and a
failing solve then logged its traceback once per folding attempt (four times) before the
evaluation raised. The Ops are never constant-folded now: the failure belongs to the
evaluation, and it is raised once.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_odesens import MaxNumStepsError, OdeSystem


@pytest.fixture(scope="module")
def lotka_volterra():
    def rhs(t, y, p):
        return [p.a * y[0] - p.b * y[0] * y[1], p.b * y[0] * y[1] - p.c * y[1]]

    return OdeSystem(rhs, states=["prey", "predator"], params=["a", "b", "c"], name="lv_fail")


def test_failed_eval_raises_once_and_prints_nothing(lotka_volterra, capfd):
    from pymc_odesens import ode_solution

    y = ode_solution(
        lotka_volterra,
        [1.0, 1.0],
        np.linspace(1.0, 10.0, 10),
        [1.5, 1.0, 3.0],
        method="rk45",
        max_num_steps=3,
    )
    capfd.readouterr()
    with pytest.raises(MaxNumStepsError, match="more than max_num_steps = 3 steps") as info:
        y.eval()
    printed = capfd.readouterr()
    assert "Traceback" not in printed.err + printed.out
    assert "constant" not in printed.err.lower()
    # the exception itself is the solver's, once (PyTensor appends the node to its message)
    assert str(info.value).count("more than max_num_steps") == 1


def test_failures_while_sampling_are_announced_as_expected_once(lotka_volterra):
    import pymc as pm

    import pymc_odesens
    from pymc_odesens import ode_solution

    pymc_odesens.reset_failure_counts()
    with pm.Model() as model:
        rates = pm.LogNormal("rates", 0.0, 1.0, shape=3)
        y = ode_solution(
            lotka_volterra,
            [1.0, 1.0],
            np.linspace(1.0, 10.0, 10),
            rates,
            method="rk45",
            max_num_steps=20,
        )
        pm.Normal("obs", y, 0.1, observed=np.ones((10, 2)))
    logp = model.compile_logp()
    with pytest.warns(pymc_odesens.OdeSolverFailureWarning) as record:
        assert logp({"rates_log__": np.full(3, 4.0)}) == -np.inf
        assert logp({"rates_log__": np.full(3, 5.0)}) == -np.inf
    assert len(record) == 1  # the first failure only
    assert "expected and harmless while a sampler tunes" in str(record[0].message)
    assert pymc_odesens.failure_counts() == {"MaxNumStepsError": 2}
    summary = pymc_odesens.failure_summary()
    assert summary.startswith("pymc_odesens: 2 ODE solver failure(s) rejected proposals")
    assert "expected and harmless" in summary
    pymc_odesens.reset_failure_counts()
