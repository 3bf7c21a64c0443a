"""The marginalised parameters' posterior: a draw from their conditional posterior per draw.

A model with marginalised scalings, offsets or noise variances
(:func:`pymc_odesens.marginal_normal`, :meth:`PetabProblem.build_model(marginalize=...)
<pymc_odesens.petab.PetabProblem.build_model>`) samples the other parameters from their
marginal posterior. For each of those draws, the marginalised parameters' conditional
posterior given it is known in closed form (normal, inverse-gamma, normal-inverse-gamma:
:mod:`pymc_odesens.ops.marginal_numerics`); one draw from it per draw makes the pairs draws
from the joint posterior. :func:`recover_marginalized` evaluates the model's fixed parts,
design entries and given noise at every draw (one model evaluation each) and adds the
draws to ``idata.posterior``.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm

from pymc_odesens.ops.graph_traversal import ancestors
from pymc_odesens.ops.marginal_likelihood import MarginalNormalLogLikelihood
from pymc_odesens.ops.marginal_numerics import conditional_draw, conditional_posterior
from pymc_odesens.ops.marginal_structure import KNOWN_NOISE
from pymc_odesens.ops.unused_sensitivities import states_only_mode

__all__ = ["MarginalRecovery", "marginal_nodes", "recover_marginalized"]

_LN10 = math.log(10.0)


def marginal_nodes(model: pm.Model) -> list:
    """The marginal-likelihood nodes of the model's potentials, in the order found."""
    nodes = []
    for potential in model.potentials:
        for variable in ancestors([potential]):
            node = variable.owner
            if (
                node is not None
                and isinstance(node.op, MarginalNormalLogLikelihood)
                and node not in nodes
            ):
                nodes.append(node)
    return nodes


def _reported(theta: float, variable: str, report: str) -> float:
    """``theta`` (``s``, ``ln s`` or ``log10 s`` by ``variable``) on the scale ``report``;
    NaN where ``report`` takes the logarithm of a ``s <= 0``."""
    if variable == report:
        return theta
    if variable == "lin":
        if not theta > 0:
            return math.nan
        return math.log(theta) if report == "log" else math.log10(theta)
    natural = theta if variable == "log" else theta * _LN10  # ln s
    if report == "lin":
        return math.exp(natural)
    return natural if report == "log" else natural / _LN10


def _noise_reported(variance: float, report: str) -> float:
    if report == "lin":
        return math.sqrt(variance)
    return 0.5 * (math.log(variance) if report == "log" else math.log10(variance))


def recover_marginalized(
    idata,
    model: pm.Model | None = None,
    *,
    random_seed=None,
    linear: bool = False,
    compile_kwargs: dict | None = None,
):
    """Draw the model's marginalised parameters from their conditional posterior.

    Parameters
    ----------
    idata : arviz.InferenceData
        Draws of the model's free variables (``idata.posterior``).
    model : pymc.Model, optional
        The model that was sampled (default: the model of the current context).
    random_seed : int or numpy.random.Generator, optional
    linear : bool
        Report every recovered parameter on its linear scale (scalings and offsets as
        ``s``, noise as ``sigma``), instead of the scale each one names (a PEtab
        parameter's ``parameterScale``).
    compile_kwargs : dict, optional
        Passed to ``model.compile_fn`` (the function evaluated at every draw).

    Returns
    -------
    arviz.InferenceData
        ``idata`` with one variable per marginalised parameter added to (or replaced in)
        its posterior, dims ``(chain, draw)`` (plus ``<name>_dim_0`` for grouped ones).

    Raises
    ------
    ValueError
        The model has no marginalised parameters; a free variable is missing from the
        posterior; a recovered name is a free variable's; a draw where the model's values
        are not finite; a parameter reported on a log scale whose linear value was drawn
        not positive (named, with the count: pass ``linear=True``).
    """
    return MarginalRecovery(model, compile_kwargs=compile_kwargs)(
        idata, random_seed=random_seed, linear=linear
    )


class MarginalRecovery:
    """:func:`recover_marginalized` for one model, compiled once and applied to any number
    of stretches of draws (a sampler's trace as it grows).

    Parameters
    ----------
    model : pymc.Model, optional
        The model that is sampled (default: the model of the current context).
    compile_kwargs : dict, optional
        Passed to ``model.compile_fn`` (the function evaluated at every draw; its mode, or
        the default, with :func:`~pymc_odesens.ops.unused_sensitivities.states_only_mode`:
        the draws' ODE solves skip the sensitivities).

    Not safe to call from several threads at once (one compiled function); build one per
    thread.

    Raises
    ------
    ValueError
        The model has no marginalised parameters.
    """

    def __init__(self, model: pm.Model | None = None, compile_kwargs: dict | None = None):
        model = pm.modelcontext(model)
        nodes = marginal_nodes(model)
        if not nodes:
            raise ValueError(
                "recover_marginalized: the model has no marginalised parameters (no potential "
                "of pymc_odesens.marginal_normal or of a PEtab model built with marginalize=...)"
            )
        self.model = model
        self.nodes = nodes
        inputs = [i for node in nodes for i in node.inputs]
        kwargs = dict(compile_kwargs or {})
        # the draws need the ODE states only: solved without their sensitivities
        kwargs["mode"] = states_only_mode(kwargs.get("mode"))
        self.function = model.compile_fn(
            inputs=model.free_RVs, outs=inputs, on_unused_input="ignore", **kwargs
        )
        self.block_of_noise = []  # per node: the block of each noise variance
        for node in nodes:
            s = node.op.structure
            blocks = np.full(len(s.noises), -1, dtype=np.int64)
            noisy = np.flatnonzero(s.block_noise >= 0)
            blocks[s.block_noise[noisy]] = noisy
            self.block_of_noise.append(blocks)

    def __call__(self, idata, *, random_seed=None, linear: bool = False):
        """``idata`` with the marginalised parameters' draws added (as
        :func:`recover_marginalized`)."""
        model, nodes, function = self.model, self.nodes, self.function
        block_of_noise = self.block_of_noise
        posterior = idata.posterior
        missing = [rv.name for rv in model.free_RVs if rv.name not in posterior]
        if missing:
            raise ValueError(f"recover_marginalized: the posterior has no draws of {missing}")
        free = {rv.name for rv in model.free_RVs}
        rng = np.random.default_rng(random_seed)
        n_chains, n_draws = posterior.sizes["chain"], posterior.sizes["draw"]
        columns = {}  # variable name -> {position: array}
        noises = {}
        draws = {rv.name: np.asarray(posterior[rv.name].values) for rv in model.free_RVs}
        out_theta = [np.empty((n_chains, n_draws, len(n.op.structure.columns))) for n in nodes]
        out_variance = [np.empty((n_chains, n_draws, len(n.op.structure.noises))) for n in nodes]
        for chain in range(n_chains):
            for draw in range(n_draws):
                point = {name: values[chain, draw] for name, values in draws.items()}
                values = function(point)
                for k, node in enumerate(nodes):
                    s = node.op.structure
                    z, c, a, sigma = (
                        np.ascontiguousarray(v, dtype=float) for v in values[4 * k : 4 * k + 4]
                    )
                    ok, mean, factor, alpha_n, beta_n = conditional_posterior(
                        z, c, a, sigma, *s.numeric_arrays()
                    )
                    if not ok:
                        raise ValueError(
                            f"recover_marginalized: at chain {chain}, draw {draw} the model's "
                            "values of the marginalised measurements are not finite (or a given "
                            "noise is not positive)"
                        )
                    variance = np.full(s.n_blocks, np.nan)
                    noisy = s.block_kind != KNOWN_NOISE
                    variance[noisy] = beta_n[noisy] / rng.standard_gamma(alpha_n[noisy])
                    normals = rng.standard_normal(len(s.columns))
                    out_theta[k][chain, draw] = conditional_draw(
                        mean,
                        factor,
                        variance,
                        normals,
                        s.block_kind,
                        s.block_columns_start,
                        s.block_columns,
                    )
                    out_variance[k][chain, draw] = variance[block_of_noise[k]]
        for k, node in enumerate(nodes):
            s = node.op.structure
            for j, column in enumerate(s.columns):
                report = "lin" if linear else column.report
                values = np.vectorize(lambda t, c=column, r=report: _reported(t, c.variable, r))(
                    out_theta[k][:, :, j]
                )
                bad = int(np.count_nonzero(np.isnan(values)))
                if bad:
                    raise ValueError(
                        f"recover_marginalized: {bad} of {values.size} draws of {column.name!r} "
                        f"are not positive, and it is reported on the {report} scale; pass "
                        "linear=True for its linear values"
                    )
                columns.setdefault(column.name, {})[column.position] = values
            for q, noise in enumerate(s.noises):
                report = "lin" if linear else noise.report
                values = np.vectorize(lambda v, r=report: _noise_reported(v, r))(
                    out_variance[k][:, :, q]
                )
                noises.setdefault(noise.name, {})[noise.position] = values
        variables = {}
        for name, parts in {**columns, **noises}.items():
            if name in free:
                raise ValueError(
                    f"recover_marginalized: {name!r} is also a free variable of the model"
                )
            if list(parts) == [-1]:
                variables[name] = (("chain", "draw"), parts[-1])
            else:
                stacked = np.stack([parts[p] for p in sorted(parts)], axis=-1)
                variables[name] = (("chain", "draw", f"{name}_dim_0"), stacked)
        idata.posterior = posterior.assign(variables)
        return idata
