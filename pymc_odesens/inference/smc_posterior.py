"""The result of tempered SMC as an ArviZ InferenceData.

- ``posterior``: the final particles of each run (``chain`` = run, ``draw`` = particle, all
  equally weighted), as ``pm.sample`` gives them: every free variable on its own
  (constrained) scale and every deterministic, with the model's dims and coords;
- ``sample_stats``:

  - ``log_marginal_likelihood`` ``(chain,)``: each run's log evidence;
  - ``log_marginal_likelihood_mcse`` (scalar): the Monte Carlo standard error of the
    combined estimate, from the spread of the runs (NaN for one run);
  - per stage ``(chain, stage)``, NaN-padded where a run had fewer stages: ``beta``,
    ``ess``, ``resampled``, ``log_evidence_increment``, ``acceptance_rate``, ``step_size``,
    ``n_leapfrog`` (the mean number of leapfrog steps after the stage), ``moves``,
    ``correlation``, ``stopping_threshold``, ``failed_evaluations``, ``divergences``,
    ``gradient_evaluations``, ``stage_seconds``, ``independent`` (1: the stage's moves
    were independent Metropolis-Hastings moves, 0: HMC);
  - per particle ``(chain, draw)``: ``particle_log_prior`` (on the unconstrained scale, with
    the transforms' log-Jacobians) and ``particle_log_likelihood`` (observed variables and
    potentials);
  - ``prior_failures`` ``(chain,)``: prior draws whose log-likelihood was ``-inf`` (a failed
    solve; weight 0 from the first stage);
  - attributes: ``log_marginal_likelihood`` (the combined estimate,
    :func:`~pymc_odesens.inference.smc_evidence.combined_log_evidence`) and its ``_mcse``,
    the settings, ``sampling_time``;
- ``observed_data``: the observed variables' data.
"""

from __future__ import annotations

import dataclasses

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr
from pymc.backends.arviz import find_observations

from pymc_odesens.inference.smc_evidence import combined_log_evidence
from pymc_odesens.inference.smc_run import RunResult, SmcSettings, StageRecord
from pymc_odesens.inference.smc_target import ParticleLayout

__all__ = ["smc_inference_data", "constrained_draws"]

_STAGE_FIELDS = [f.name for f in dataclasses.fields(StageRecord)]


def constrained_draws(
    model: pm.Model, layout: ParticleLayout, positions: np.ndarray
) -> dict[str, np.ndarray]:
    """The free variables (constrained scale) and deterministics at each particle (rows).

    Returns
    -------
    dict of str to numpy.ndarray
        By name, arrays of shape ``(N, *shape)``.
    """
    names = [rv.name for rv in model.free_RVs] + [d.name for d in model.deterministics]
    outputs = [v for v in model.unobserved_value_vars if v.name in names]
    function = model.compile_fn(
        outputs, inputs=model.value_vars, on_unused_input="ignore", point_fn=False
    )
    columns: dict[str, list] = {v.name: [] for v in outputs}
    for x in positions:
        point = layout.split(x)
        values = function(*[point[name] for name in layout.names])
        for v, value in zip(outputs, values):
            columns[v.name].append(np.array(value))
    return {name: np.array(columns[name]) for name in names if name in columns}


def _dims_and_coords(model: pm.Model, names) -> tuple[dict, dict]:
    dims = {
        name: list(d)
        for name, d in model.named_vars_to_dims.items()
        if name in names and d and all(x is not None for x in d)
    }
    used = {x for d in dims.values() for x in d}
    coords = {k: list(v) for k, v in model.coords.items() if k in used and v is not None}
    return dims, coords


def _attribute(value):
    """A setting as a netCDF attribute (no None, no bool)."""
    if value is None:
        return "auto"
    return int(value) if isinstance(value, bool) else value


def _stage_table(results: list[RunResult], field: str) -> np.ndarray:
    longest = max(len(r.stages) for r in results)
    table = np.full((len(results), longest), np.nan)
    for i, r in enumerate(results):
        table[i, : len(r.stages)] = [float(getattr(s, field)) for s in r.stages]
    return table


def smc_inference_data(
    model: pm.Model,
    layout: ParticleLayout,
    results: list[RunResult],
    settings: SmcSettings,
    sampling_time: float,
) -> az.InferenceData:
    """The InferenceData of a call of :func:`~pymc_odesens.inference.sample_smc` (module
    docstring)."""
    runs = [constrained_draws(model, layout, r.states.positions) for r in results]
    posterior = {name: np.stack([run[name] for run in runs]) for name in runs[0]}
    observed = find_observations(model)
    dims, coords = _dims_and_coords(model, set(posterior) | set(observed))
    log_evidence = np.array([r.log_evidence for r in results])
    estimate, mcse = combined_log_evidence(log_evidence)
    attrs = {
        "inference_library": "pymc_odesens",
        "sampler": "tempered SMC with HMC moves",
        "sampling_time": float(sampling_time),
        "log_marginal_likelihood": estimate,
        "log_marginal_likelihood_mcse": mcse,
        **{f"smc_{k}": _attribute(v) for k, v in vars(settings).items()},
    }
    idata = az.from_dict(
        posterior=posterior,
        observed_data=observed or None,
        coords=coords,
        dims=dims,
        attrs=attrs,
    )
    chains = np.arange(len(results))
    draws = np.arange(settings.draws)
    longest = max(len(r.stages) for r in results)
    stats = {
        "log_marginal_likelihood": (("chain",), log_evidence),
        "log_marginal_likelihood_mcse": ((), mcse),
        "prior_failures": (("chain",), np.array([r.prior_failures for r in results])),
        "particle_log_prior": (
            ("chain", "draw"),
            np.stack([r.states.log_prior for r in results]),
        ),
        "particle_log_likelihood": (
            ("chain", "draw"),
            np.stack([r.states.log_likelihood for r in results]),
        ),
    }
    for field in _STAGE_FIELDS:
        name = "stage_seconds" if field == "seconds" else field
        stats[name] = (("chain", "stage"), _stage_table(results, field))
    sample_stats = xr.Dataset(
        stats,
        coords={"chain": chains, "draw": draws, "stage": np.arange(1, longest + 1)},
        attrs=attrs,
    )
    idata.add_groups(sample_stats=sample_stats)
    return idata
