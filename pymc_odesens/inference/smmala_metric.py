"""The Riemannian metric of SMMALA, built from a PyMC model's graph.

In the sampler's unconstrained space ``x`` (the value variables after their
transforms, raveled into one vector) the metric is

    G(x) = F_lik(x) - Hess_x log p_prior(x),

- ``F_lik``: the expected Fisher information of the likelihood. For every
  observed ``Normal(mu, sigma)`` or ``LogNormal(mu, sigma)`` (``log`` of the data
  normal) with ``mu``, ``sigma`` functions of ``x``,
  ``J_mu^T diag(1/sigma^2) J_mu + 2 J_sigma^T diag(1/sigma^2) J_sigma``
  (the Fisher information of a normal in its location and scale, pulled back
  through ``J = d(mu, sigma)/dx``). ``J_mu`` is computed by PyTensor as
  Jacobian-vector products with the unit vectors (forward mode through the
  model graph); through an ODE solution they contract its sensitivities ``S``
  with the observables' exact Jacobian, so no second derivative of the ODE is
  needed.
- the negative Hessian of everything else: the priors with their transforms'
  log-Jacobians, and potentials (PyTensor's Hessian; these terms must not
  depend on an ODE solution).

The sum is symmetric but may be indefinite (a prior that is not log-concave in
the unconstrained space); the sampler regularises it (SoftAbs, see
:mod:`pymc_odesens.inference.smmala`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.pytensorf import join_nonshared_inputs
from pytensor.gradient import Rop
from pytensor.graph.replace import vectorize_graph
from pytensor.tensor.basic import Alloc
from pytensor.tensor.random.basic import LogNormalRV, NormalRV

from pymc_odesens.inference.smmala_sensitivities import ode_nodes, with_sensitivity_route
from pymc_odesens.ops.graph_traversal import ancestors
from pymc_odesens.ops.rejection import FailurePenalty

__all__ = [
    "LIKELIHOODS",
    "LikelihoodTerm",
    "SmmalaGraph",
    "likelihood_terms",
    "smmala_graph",
    "total_log_density",
]

LIKELIHOODS = {NormalRV: "Normal", LogNormalRV: "LogNormal"}
"""Observed distributions whose Fisher information the metric knows."""


@dataclass
class LikelihoodTerm:
    """One observed variable: its distribution and the graphs of its parameters.

    Attributes
    ----------
    name : str
    distribution : {"Normal", "LogNormal"}
    mu, sigma : TensorVariable
        Location and scale (of the log for LogNormal) as functions of the
        model's value variables, broadcast to the observed shape.
    """

    name: str
    distribution: str
    mu: pt.TensorVariable
    sigma: pt.TensorVariable


def _distribution_name(rv) -> str:
    op = rv.owner.op
    printed = getattr(op, "_print_name", None)
    return printed[0] if printed else type(op).__name__


def _without_forward_derivatives(model) -> list[str]:
    """The Ops above the observed variables that say they have no forward derivatives
    (``forward_derivatives = False``: their ``R_op`` would need a second derivative)."""
    graphs = [value for rv in model.observed_RVs for value in rv.owner.inputs]
    found = []
    for var in ancestors(model.replace_rvs_by_values(graphs)):
        op = getattr(var.owner, "op", None)
        if op is not None and not getattr(op, "forward_derivatives", True):
            name = str(op)
            if name not in found:
                found.append(name)
    return found


def likelihood_terms(model) -> list[LikelihoodTerm]:
    """The observed Normal and LogNormal variables of ``model`` with their parameters.

    Raises
    ------
    ValueError
        An observed variable has another distribution (its Fisher information
        is not known to the metric); the observed variables depend on an Op without
        forward derivatives (a steady state, :class:`~pymc_odesens.ops.steady_state_ops.
        SteadyStateOp`).
    """
    terms = []
    without = _without_forward_derivatives(model)
    if without:
        raise ValueError(
            f"SMMALA: the observed variables depend on {', '.join(without)}, which give "
            "gradients (vector-Jacobian products) but no forward derivatives "
            "(Jacobian-vector products), so the Fisher information's Jacobian cannot be formed"
        )
    for rv in model.observed_RVs:
        kind = next(
            (k for op_type, k in LIKELIHOODS.items() if isinstance(rv.owner.op, op_type)), None
        )
        if kind is None:
            raise ValueError(
                f"SMMALA: the observed variable {rv.name!r} has distribution "
                f"{_distribution_name(rv)!r}; the metric knows the Fisher information of "
                f"{' and '.join(LIKELIHOODS.values())} likelihoods only"
            )
        mu, sigma = rv.owner.op.dist_params(rv.owner)
        mu, sigma = model.replace_rvs_by_values([mu, sigma])
        shape = model.rvs_to_values[rv].shape  # the data's shape (rv.shape would hold the rv)
        terms.append(
            LikelihoodTerm(
                name=rv.name,
                distribution=kind,
                mu=pt.broadcast_to(mu, shape),
                sigma=pt.broadcast_to(sigma, shape),
            )
        )
    return terms


@dataclass
class SmmalaGraph:
    """Graphs of one SMMALA evaluation, in the raveled unconstrained vector ``x``.

    Attributes
    ----------
    x : TensorVariable
        The joined input (D,).
    logp, dlogp : TensorVariable
        The model's log-density (with transforms' log-Jacobians) and its gradient (D,).
    metric : TensorVariable
        ``F_lik - Hess log p_prior`` (D, D), symmetric, not regularised.
    failed : TensorVariable
        True when an ODE solve failed (the log-density is then ``-inf``).
    terms : list of LikelihoodTerm
    log_likelihood : TensorVariable
        The observed variables' log-density (the part of ``logp`` the metric's Fisher
        information belongs to).
    """

    x: pt.TensorVariable
    logp: pt.TensorVariable
    dlogp: pt.TensorVariable
    metric: pt.TensorVariable
    failed: pt.TensorVariable
    terms: list
    log_likelihood: pt.TensorVariable


def _jacobian_columns(f: pt.TensorVariable, x: pt.TensorVariable, size: int):
    """``df/dx`` as (M, D) from D Jacobian-vector products (one vectorised forward pass).

    The products come from the Ops' own ``R_op`` (the ODE Ops contract their sensitivities
    with the direction) where every Op on the way has one, else from PyTensor's double
    ``L_op``: the same numbers, and the first graph is smaller after rewriting (Boehm's
    Fisher information compiles in 5-6 s instead of 13-15 s; benchmarks/README.md, "The
    Fisher information's graph"). A broadcast of static shape (``Alloc``: a distribution's
    parameter broadcast to its observed shape) is differentiated at its core and the
    columns broadcast: vectorising the ``Alloc`` of a product costs about 0.2 s each in
    PyTensor's static-shape inference.
    """
    node = f.owner
    if (
        node is not None
        and isinstance(node.op, Alloc)
        and None not in f.type.shape
        and None not in node.inputs[0].type.shape
    ):
        core = node.inputs[0]
        if not _depends_on(core, x):
            return pt.zeros((int(np.prod(f.type.shape)), size), dtype=x.dtype)
        columns = _jacobian_columns(core, x, size).reshape((*core.type.shape, size))
        columns = pt.shape_padleft(columns, f.ndim - core.ndim)
        return pt.broadcast_to(columns, (*f.type.shape, size)).reshape((-1, size))
    flat = f.ravel()
    direction = pt.vector("direction", dtype=x.dtype, shape=(size,))
    try:
        jvp = Rop(flat, x, direction, use_op_rop_implementation=True)
    except Exception:  # noqa: BLE001
        # PyTensor's R_op route is restricted: an Op without R_op (a steady state, a user's
        # Op) raises NotImplementedError, one that gives None for an output on the way
        # DisconnectedInputError, and a direction whose static shape is more precise than
        # its input's (a length-1 slice of the joined vector, as for a scalar parameter)
        # fails its type assertion. The double L_op serves all of them.
        jvp = Rop(flat, x, direction)
    columns = vectorize_graph(jvp, replace={direction: pt.eye(size, dtype=x.dtype)})
    return columns.T


def _depends_on(var, x) -> bool:
    return any(a is x for a in ancestors([var]))


def smmala_graph(
    model, value_vars, point, shared, sensitivity: str, pbs_options=None, jacobian: bool = True
) -> SmmalaGraph:
    """Build the log-density, gradient and metric graphs for ``value_vars``.

    Parameters
    ----------
    model : pymc.Model
    value_vars : list of value variables
        What the sampler moves (continuous, in the unconstrained space).
    point : dict
        A point of the model (gives the shapes of ``vars``).
    shared : dict
        Shared variables standing in for the model's other value variables
        (``pymc.make_shared_replacements``).
    sensitivity : str
        Route of the ODE sensitivities (:func:`pymc_odesens.solve_sensitivity`).
    pbs_options : PbsOptions, optional
        Options of the Peano-Baker routes.
    jacobian : bool
        Whether the log-density and the prior's Hessian include the transforms'
        log-Jacobians (True: the sampler's density; False: the density of the values on
        their own scale, whose maximum is the MAP, as for mode finding).

    Raises
    ------
    ValueError
        Unsupported likelihoods, or prior / potential terms that depend on an
        ODE solution (their curvature would need second-order sensitivities).
    """
    terms = likelihood_terms(model)
    others = list(model.free_RVs) + list(model.potentials)
    observed = list(model.observed_RVs)
    # one derivation of every term (PyMC's sum of these is model.logp): a derivation per
    # term would cost about 0.2 s each on a PEtab model
    factors = model.logp(vars=others + observed, jacobian=jacobian, sum=False)
    for rv, factor in zip(others, factors):
        if rv.owner is not None and isinstance(rv.owner.op, FailurePenalty):
            continue  # a rejection: disconnected from its flags, whatever they are read from
        if _carries_solution(factor):
            raise ValueError(
                f"SMMALA: the log-density term of {rv.name!r} depends on an ODE solution; its "
                "curvature would need second-order sensitivities. Put the data in an observed "
                "Normal or LogNormal whose location comes from the solution instead"
            )
    prior_logp = total_log_density(factors[: len(others)])
    log_likelihood = total_log_density(factors[len(others) :])
    logp = prior_logp + log_likelihood
    graphs = [logp, prior_logp, log_likelihood]
    for term in terms:
        graphs += [term.mu, term.sigma]
    graphs, failed = with_sensitivity_route(graphs, sensitivity, pbs_options)
    failed_any = pt.any(pt.stack([pt.any(f) for f in failed])) if failed else pt.constant(False)
    joined, x = join_nonshared_inputs(point, graphs + [failed_any], value_vars, shared)
    logp, prior_logp, log_likelihood, *params, failed_any = joined
    size = int(sum(np.prod(point[v.name].shape, dtype=int) for v in value_vars))
    dlogp = pytensor.grad(logp, x)
    metric = pt.zeros((size, size))
    for i in range(len(terms)):
        mu, sigma = params[2 * i], params[2 * i + 1]
        weight = 1.0 / pt.sqr(sigma).ravel()
        if _depends_on(mu, x):
            j_mu = _jacobian_columns(mu, x, size)
            metric = metric + pt.dot(j_mu.T, weight[:, None] * j_mu)
        if _depends_on(sigma, x):
            j_sigma = _jacobian_columns(sigma, x, size)
            metric = metric + 2.0 * pt.dot(j_sigma.T, weight[:, None] * j_sigma)
    if _depends_on(prior_logp, x):
        hessian = pytensor.gradient.jacobian(
            pytensor.grad(prior_logp, x), x, vectorize=True, disconnected_inputs="ignore"
        )
        metric = metric - hessian
    metric = 0.5 * (metric + metric.T)
    return SmmalaGraph(
        x=x,
        logp=logp,
        dlogp=dlogp,
        metric=metric,
        failed=failed_any,
        terms=terms,
        log_likelihood=log_likelihood,
    )


def total_log_density(factors) -> pt.TensorVariable:
    """The sum of log-density terms (PyMC's ``model.logp(..., sum=False)``; 0 for none)."""
    if not factors:
        return pt.constant(0.0)
    return pt.add(*(pt.sum(f) for f in factors)) if len(factors) > 1 else pt.sum(factors[0])


def _carries_solution(term) -> bool:
    """True when ``term`` depends on a differentiable output of an ODE solution.

    The failure potentials of :func:`pymc_odesens.ode_solution` read only the
    integer ``failed`` flag; their curvature is zero.
    """
    for node in ode_nodes([term]):
        solution_outputs = node.outputs[:-1]
        for var in ancestors([term]):
            if any(var is out for out in solution_outputs):
                return True
    return False
