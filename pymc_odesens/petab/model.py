"""A PEtab problem as a PyMC model (:meth:`PetabProblem.build_model`)."""

from __future__ import annotations

import pymc as pm
import pytensor.tensor as pt

from pymc_odesens.petab.marginalization import MARGINAL_NAME
from pymc_odesens.petab.noise import observed_measurements
from pymc_odesens.petab.priors import prior_variable
from pymc_odesens.petab.solver_options import SolverOptions

__all__ = ["build_pymc_model"]


def build_pymc_model(problem, options: SolverOptions, plan=None, log_likelihood=None) -> pm.Model:
    """Priors of the estimated parameters, the simulations, the observed measurements.

    With a :class:`~pymc_odesens.petab.marginalization.MarginalizationPlan`, its parameters
    get no random variable (their entries of ``x`` are constants that nothing reads), the
    measurements of its blocks no observed variable, and one potential
    (``"marginalized_measurements"``) holds their marginal likelihood. With
    ``log_likelihood`` (a distributed log-likelihood), one potential of it in place of the
    simulations and measurements.
    """
    parameters = problem.parameters
    graph = problem.graph
    marginal = set(plan.ids) if plan is not None else set()
    # measured (for sensitivity="auto") outside the model: the measurement's own graphs
    # would otherwise add their failure potentials to it
    route = problem.route_for(options) if log_likelihood is None else None
    with pm.Model(name="") as model:
        variables = [
            pt.constant(initval, dtype="float64")
            if pid in marginal
            else prior_variable(pid, parameters.table.loc[pid], scale, initval)
            for pid, scale, initval in zip(parameters.ids, parameters.scales, parameters.nominal)
        ]
        x = pt.stack(variables) if variables else pt.zeros((0,))
        if log_likelihood is not None:
            pm.Potential("log_likelihood", log_likelihood.tensor(x))
            return model
        z = graph.z(x)
        y = graph.states(z, options, route)
        for o in graph.observables(z, y, plan.free_rows if plan is not None else None):
            observable = o.group.observable
            observed_measurements(
                observable.id,
                observable.distribution,
                observable.transformation,
                o.h,
                o.sigma,
                o.data,
            )
        if plan is not None:
            pm.Potential(MARGINAL_NAME, plan.log_likelihood(graph, z, y))
    return model
