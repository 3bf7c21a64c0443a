"""The models the SMC tests share: linear-Gaussian ones with a closed-form evidence."""

import numpy as np
import pymc as pm
from scipy import stats

# y_i = a + b x_i + N(0, 0.5^2), a ~ N(0, 1), b ~ N(0, 2^2): y ~ N(0, X diag(1, 4) X' + 0.25 I)
X = np.linspace(-1.0, 1.0, 8)
Y = 0.3 + 1.2 * X + 0.5 * np.random.default_rng(0).normal(size=8)


def linear_model(slope: bool = True, noise: float = 0.5) -> pm.Model:
    """The model of ``exact_log_evidence`` (``noise=0.5``); another ``noise`` gives a model
    with the same variables and another likelihood (a trajectory model, say)."""
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 1.0)
        mu = a + pm.Normal("b", 0.0, 2.0) * X if slope else a + 0.0 * X
        pm.Normal("y", mu, noise, observed=Y)
    return model


def exact_log_evidence(slope: bool = True) -> float:
    design = np.column_stack([np.ones_like(X), X]) if slope else np.ones((8, 1))
    prior = np.diag([1.0, 4.0][: design.shape[1]])
    covariance = design @ prior @ design.T + 0.25 * np.eye(8)
    return float(stats.multivariate_normal(np.zeros(8), covariance).logpdf(Y))


SMC_OPTIONS = dict(draws=200, runs=6, n_leapfrog=5, cores=1, progressbar=False)
