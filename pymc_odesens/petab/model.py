"""A PEtab problem as a PyMC model (:meth:`PetabProblem.build_model`)."""

from __future__ import annotations

import pymc as pm
import pytensor.tensor as pt

from pymc_odesens.petab.noise import observed_measurements
from pymc_odesens.petab.priors import prior_variable
from pymc_odesens.petab.solver_options import SolverOptions

__all__ = ["build_pymc_model"]


def build_pymc_model(problem, options: SolverOptions, log_likelihood=None) -> pm.Model:
    """Priors of the estimated parameters, the simulations, the observed measurements (or,
    with ``log_likelihood``, a potential of the distributed log-likelihood in their
    place)."""
    parameters = problem.parameters
    graph = problem.graph
    with pm.Model(name="") as model:
        variables = [
            prior_variable(pid, parameters.table.loc[pid], scale, initval)
            for pid, scale, initval in zip(parameters.ids, parameters.scales, parameters.nominal)
        ]
        x = pt.stack(variables) if variables else pt.zeros((0,))
        if log_likelihood is not None:
            pm.Potential("log_likelihood", log_likelihood.tensor(x))
            return model
        z = graph.z(x)
        y = graph.states(z, options, problem.route_for(options))
        for o in graph.observables(z, y):
            observable = o.group.observable
            observed_measurements(
                observable.id,
                observable.distribution,
                observable.transformation,
                o.h,
                o.sigma,
                o.group.data,
            )
    return model
