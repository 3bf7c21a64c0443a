"""maximise_from: L-BFGS-B and the Fisher trust region, and the trust region's hand-over to
L-BFGS-B where the Fisher information fails, on a quadratic log-posterior."""

import numpy as np
import pytest

from pymc_odesens.inference.local_optimisers import maximise_from
from pymc_odesens.ops.failures import record_failure

pytestmark = pytest.mark.filterwarnings("ignore::pymc_odesens.ops.failures.OdeSolverFailureWarning")

OPTIMUM = np.array([2.0, 1.0])
PRECISION = np.array([[3.0, 1.0], [1.0, 2.0]])


class Quadratic:
    """log p(x) = -(x - OPTIMUM)' PRECISION (x - OPTIMUM) / 2 in the box [-10, 10]^2; the
    Fisher information (PRECISION) fails where ``x[0] > fisher_below``, its value and
    gradient too, as a failed forward-sensitivity solve; the log-posterior by the model's
    own route (``own_route=True``) stays finite there."""

    lower = np.full(2, -10.0)
    upper = np.full(2, 10.0)

    def __init__(self, fisher_below: float = np.inf) -> None:
        self.fisher_below = fisher_below

    def log_posterior_and_gradient(self, x, own_route=False):
        if not own_route and x[0] > self.fisher_below:
            # as ModeObjective's: the Fisher information's function serves this call too
            return -np.inf, np.full(2, np.nan)
        r = np.asarray(x) - OPTIMUM
        return float(-0.5 * r @ PRECISION @ r), -PRECISION @ r

    def fisher_information(self, x):
        if x[0] > self.fisher_below:  # the forward-sensitivity solve failed, value and all
            record_failure(RuntimeError("forward sensitivities: too many steps"), "Quadratic")
            return -np.inf, np.full(2, np.nan), np.full((2, 2), np.nan)
        value, gradient = self.log_posterior_and_gradient(x)
        return value, gradient, PRECISION


@pytest.mark.parametrize("method", ["L-BFGS-B", "trust-region-fisher"])
def test_both_methods_reach_the_optimum(method):
    run = maximise_from(Quadratic(), np.array([-4.0, 6.0]), method=method)
    assert run.converged, run.message
    np.testing.assert_allclose(run.x, OPTIMUM, atol=1e-6)
    assert "L-BFGS-B from there" not in run.message


def test_a_start_without_fisher_information_goes_on_with_lbfgsb():
    run = maximise_from(
        Quadratic(fisher_below=-1.0), np.array([3.0, -5.0]), method="trust-region-fisher"
    )
    assert run.message.startswith("the Fisher information failed at the start; L-BFGS-B from there")
    assert run.converged
    np.testing.assert_allclose(run.x, OPTIMUM, atol=1e-6)


def test_a_trust_region_stuck_where_the_fisher_information_fails_goes_on_with_lbfgsb():
    """Every trial step beyond x[0] = 0.5 fails: the trust region's accepted steps become
    tiny at the edge of that region (it took that for convergence, at x = (0.5, 0.244),
    before the hand-over), the gradient there is not small, L-BFGS-B finishes."""
    run = maximise_from(
        Quadratic(fisher_below=0.5), np.array([-3.0, -3.0]), method="trust-region-fisher"
    )
    assert run.message.startswith("the trust region stalled (relative decrease below 1e-12)")
    assert "L-BFGS-B from there" in run.message
    assert run.converged
    np.testing.assert_allclose(run.x, OPTIMUM, atol=1e-6)


def test_a_trust_region_that_shrinks_to_nothing_goes_on_with_lbfgsb():
    """The Fisher information only at the start (elsewhere NaN, its value finite): no
    trial step is accepted."""
    start = np.array([-3.0, -3.0])

    class OnlyAtTheStart(Quadratic):
        def fisher_information(self, x):
            value, gradient, metric = super().fisher_information(x)
            return value, gradient, metric if np.array_equal(x, start) else metric * np.nan

    run = maximise_from(OnlyAtTheStart(), start, method="trust-region-fisher")
    assert run.message.startswith("the trust region shrank to nothing after ")
    assert run.converged
    np.testing.assert_allclose(run.x, OPTIMUM, atol=1e-6)


def test_a_start_where_the_log_posterior_fails_is_an_error():
    class Failing(Quadratic):
        def log_posterior_and_gradient(self, x, own_route=False):
            return -np.inf, np.full(2, np.nan)

    with pytest.raises(ValueError, match="the log-posterior is not finite at the start"):
        maximise_from(Failing(), np.zeros(2), method="trust-region-fisher")
    with pytest.raises(ValueError, match=r"method: expected one of \('L-BFGS-B'"):
        maximise_from(Quadratic(), np.zeros(2), method="newton")
