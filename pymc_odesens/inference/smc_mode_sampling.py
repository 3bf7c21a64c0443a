"""NUTS in each mode an SMC run found, weighted by the run's mode weights.

NUTS cannot weigh separated modes: a chain stays in the mode it starts in, and chains in
different modes give R-hat far above 1 with no way to tell how much mass each mode holds.
A tempered-SMC run (:func:`~pymc_odesens.inference.sample_smc`) does weigh them, and
:func:`~pymc_odesens.inference.smc_modes.smc_modes` turns its population into modes with
weights, chain starts and mass matrices. :func:`sample_smc_modes` samples each mode with
PyMC's NUTS (log-density in NUMBA mode, :func:`~pymc_odesens.inference.sample`):
``chains_per_mode`` chains started at distinct particles of the mode, the dense mass matrix
starting from the covariance of the mode's particles and adapted during tuning, anchored
to it (:class:`~pymc_odesens.inference.anchored_potential.AnchoredFullAdapt`). Within a
mode the usual checks hold (R-hat across its chains, bulk and tail ESS); across modes the
SMC weights combine the draws (:meth:`ModeSamples.mixture`).

What makes this valid is that the modes are separated: a chain of one mode that wanders
into another would count that mass twice. :meth:`ModeSamples.summary` reports each mode's
``leakage``, the share of its draws nearer (in the sampler's coordinates, scaled by the
population's spread) to another mode's mean than to its own; a leakage above
:data:`LEAKAGE_WARNING` is warned about: those modes are connected, and one NUTS run over
them (or the SMC population itself) is the posterior to use.

Threads: each call of :func:`sample_smc_modes` builds its own NUTS steps, so calls from
several threads share no sampler state (as concurrent ``pm.sample`` calls); a
:class:`ModeSamples` is only read after it is built.
"""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

from pymc_odesens.inference.arguments import positive_int, weight_threshold
from pymc_odesens.inference.pooled_metric import sampler_coordinates
from pymc_odesens.inference.sampling import sample
from pymc_odesens.inference.smc_modes import SmcModes, nearest

__all__ = ["LEAKAGE_WARNING", "ModeSamples", "sample_smc_modes"]

LEAKAGE_WARNING = 0.01
"""A mode whose draws lie nearer another mode's mean in more than this share is warned
about (the modes are not separated)."""


class ModeSamples:
    """Each sampled mode's NUTS draws and the SMC weights that combine them.

    Attributes
    ----------
    modes : SmcModes
    samples : dict of int to arviz.InferenceData
        By mode rank.
    weights : dict of int to float
        The sampled modes' SMC weights, renormalised to sum to 1.
    leakage : dict of int to float
        By mode rank (module docstring).
    """

    def __init__(self, modes: SmcModes, samples: dict, leakage: dict) -> None:
        self.modes = modes
        self.samples = dict(samples)
        total = sum(modes.modes[k].weight for k in samples)
        if not total > 0:
            raise ValueError("sample_smc_modes: the sampled modes have no weight")
        self.weights = {k: modes.modes[k].weight / total for k in samples}
        self.leakage = dict(leakage)

    def summary(self, var_names=None) -> pd.DataFrame:
        """One row per sampled mode: SMC weight (renormalised) and its error, chains, draws
        per chain, largest R-hat and smallest bulk and tail ESS over ``var_names``
        (default: the free variables), divergences and leakage."""
        free = [rv.name for rv in self.modes.model.free_RVs]
        names = list(var_names) if var_names is not None else free
        rows = []
        for k, idata in self.samples.items():
            mode = self.modes.modes[k]
            scale = self.weights[k] / mode.weight if mode.weight > 0 else np.nan
            posterior = idata.posterior[names]
            rhat = az.rhat(posterior).to_array().values
            bulk = az.ess(posterior, method="bulk").to_array().values
            tail = az.ess(posterior, method="tail").to_array().values
            rows.append(
                {
                    "mode": k,
                    "weight": self.weights[k],
                    "weight_se": mode.weight_se * scale,
                    "log_posterior_at_optimum": mode.log_posterior,
                    "chains": idata.posterior.sizes["chain"],
                    "draws": idata.posterior.sizes["draw"],
                    "rhat_max": float(np.nanmax(rhat)),
                    "ess_bulk_min": float(np.nanmin(bulk)),
                    "ess_tail_min": float(np.nanmin(tail)),
                    "divergences": int(idata.sample_stats["diverging"].values.sum()),
                    "leakage": self.leakage[k],
                }
            )
        return pd.DataFrame(rows).set_index("mode")

    def mixture(self, random_seed=None) -> az.InferenceData:
        """The modes' draws combined in proportion to their weights, as one chain.

        The largest total ``T`` for which every mode ``k`` has ``weights[k] * T`` draws is
        taken; each mode gives that many of its draws (all chains pooled), chosen without
        replacement and shuffled together. For summaries and plots of the whole posterior;
        the convergence checks belong to each mode (:meth:`summary`), not to this chain.
        """
        rng = np.random.default_rng(random_seed)
        pooled = {
            k: idata.posterior.stack(sample=("chain", "draw")) for k, idata in self.samples.items()
        }
        sizes = {k: p.sizes["sample"] for k, p in pooled.items()}
        total = min(sizes[k] / self.weights[k] for k in pooled if self.weights[k] > 0)
        parts = []
        for k, p in pooled.items():
            n = int(round(self.weights[k] * total))
            if n == 0:
                continue
            chosen = rng.choice(sizes[k], size=min(n, sizes[k]), replace=False)
            part = p.isel(sample=chosen).drop_vars(["chain", "draw", "sample"])
            parts.append(part.assign_coords(mode=("sample", np.full(len(chosen), k))))
        combined = xr.concat(parts, dim="sample")
        order = rng.permutation(combined.sizes["sample"])
        combined = combined.isel(sample=order)
        modes = combined["mode"].values
        combined = combined.drop_vars("mode").rename({"sample": "draw"})
        combined = combined.expand_dims(chain=[0]).transpose("chain", "draw", ...)
        combined = combined.assign_coords(draw=np.arange(combined.sizes["draw"]))
        idata = az.InferenceData(posterior=combined)
        idata.posterior.attrs["mode_of_draw"] = modes.tolist()
        return idata


def _leakage(modes: SmcModes, samples: dict) -> dict:
    model = modes.model
    value_vars = list(model.continuous_value_vars)
    centres = np.array([m.centre for m in modes.modes]) / modes.scale
    leakage = {}
    for k, idata in samples.items():
        draws = sampler_coordinates(idata.posterior, value_vars, model)
        draws = draws.reshape(-1, draws.shape[-1]) / modes.scale
        leakage[k] = float(np.mean(nearest(draws, centres) != k))
    return leakage


def sample_smc_modes(
    modes: SmcModes,
    *,
    draws: int = 1000,
    tune: int = 500,
    chains_per_mode: int = 2,
    min_weight: float = 1e-6,
    target_accept: float = 0.8,
    cores: int | None = None,
    random_seed=None,
    progressbar: bool = True,
) -> ModeSamples:
    """NUTS in each mode of :func:`~pymc_odesens.inference.smc_modes.smc_modes`.

    Parameters
    ----------
    modes : SmcModes
    draws, tune : int
        Per chain, as for ``pm.sample`` (tuning adapts the step size and the mass matrix
        from the mode's particle covariance; it can be short).
    chains_per_mode : int
        Chains per mode (2), each started at a distinct particle of the mode.
    min_weight : float
        Modes of smaller SMC weight are not sampled (their weight goes to the others).
        1e-6 by default: with the runs weighed by their evidence, the modes of a run that
        lost the heavy one weigh 1e-80 and less (Fujita), and none of their draws would
        enter a mixture of fewer than a million.
    target_accept : float
    cores : int, optional
        Processes per mode's sampling, as for ``pm.sample``.
    random_seed : int, optional
    progressbar : bool

    Returns
    -------
    ModeSamples

    Raises
    ------
    ValueError
        ``chains_per_mode`` below 1, ``min_weight`` outside [0, 1), or no mode above
        ``min_weight``.
    """
    if not isinstance(modes, SmcModes):
        raise TypeError(f"modes: expected the result of smc_modes, got {type(modes).__name__}")
    chains_per_mode = positive_int("chains_per_mode", chains_per_mode)
    min_weight = weight_threshold("min_weight", min_weight)
    chosen = [m.rank for m in modes.modes if m.weight > min_weight]
    if not chosen:
        raise ValueError(
            f"min_weight: no mode weighs more than {min_weight} (weights "
            f"{[round(m.weight, 4) for m in modes.modes]})"
        )
    seeds = np.random.SeedSequence(random_seed).spawn(len(chosen))
    samples = {}
    for k, seed in zip(chosen, seeds):
        mode = modes.modes[k]
        start_seed, sample_seed = seed.spawn(2)
        step = mode.approximation.nuts_step(target_accept=target_accept)
        samples[k] = sample(
            draws,
            model=modes.model,
            step=step,
            tune=tune,
            chains=chains_per_mode,
            cores=cores,
            init="adapt_diag",  # the particles are the starts: no jitter
            initvals=modes.start_values(k, chains_per_mode, random_seed=start_seed),
            random_seed=int(sample_seed.generate_state(1)[0]),
            progressbar=progressbar,
        )
    leakage = _leakage(modes, samples)
    leaking = {k: v for k, v in leakage.items() if v > LEAKAGE_WARNING}
    if leaking:
        warnings.warn(
            "sample_smc_modes: draws of modes "
            + ", ".join(f"{k} ({v:.1%})" for k, v in leaking.items())
            + " lie nearer another mode's mean: the modes are connected and their weighted "
            "combination counts the shared mass twice; sample them together instead",
            RuntimeWarning,
            stacklevel=2,
        )
    return ModeSamples(modes, samples, leakage)
