"""NUTS seeded by a tempered-SMC population: chain starts and a dense mass matrix.

A :func:`~pymc_odesens.inference.sample_smc` result holds, at beta = 1, particles spread
over the posterior. :func:`sample_nuts_from_smc` lets NUTS continue from them:

- the runs count with their **evidence weights** ``Z_r / sum_s Z_s``
  (:func:`~pymc_odesens.inference.smc_evidence.evidence_weights`): a run that lost the
  region holding most of the posterior mass has a far lower evidence and gives neither
  starts nor covariance;
- the **mass matrix** starts as the particles' weighted covariance in the sampler's
  coordinates (shrunk towards its diagonal as the SMC moves' dense metric), adapted during
  tuning and anchored to it, so tuning can be short;
- the **chains start** at distinct particles, drawn in proportion to their weights.

This is the bridge for a posterior whose mass is in one connected region: NUTS then gives
the draws and R-hat over chains checks them. Chains started in separated modes do not mix
(R-hat says so): weigh such modes with :func:`~pymc_odesens.inference.smc_modes` and
sample each with :func:`~pymc_odesens.inference.sample_smc_modes` instead.

**A check of the population.** If the particles are draws of the posterior, a NUTS draw
has a higher log-density than all of ``N`` distinct particles with probability
``1 / (N + 1)`` (exchangeability; any function of the parameters would do, the log-density
is the one both sides record). A larger share of such draws means that NUTS reached a
region of higher density that the SMC runs did not hold: their evidence is too low and
the optima they knew incomplete. Above ``max(5 %, 10 / (N + 1))`` a ``RuntimeWarning`` says
so (on Fujita_SciSignal2010, 59 % of the draws were above every particle of runs that had
missed an optimum 13 log-units above the one they held).

Threads: the function builds its own NUTS step; calling it from several threads at once
runs independent samplings (PyMC's ``pm.sample`` with ``cores > 1`` starts processes).
"""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np

from pymc_odesens.inference.arguments import positive_int
from pymc_odesens.inference.model_source import model_source
from pymc_odesens.inference.pooled_metric import sampler_coordinates
from pymc_odesens.inference.sampling import sample
from pymc_odesens.inference.smc_evidence import evidence_weights, run_log_evidence, warn_if_one_run
from pymc_odesens.inference.smc_modes import check_population, population_approximation

__all__ = ["sample_nuts_from_smc"]


def sample_nuts_from_smc(
    problem_or_model,
    idata: az.InferenceData,
    *,
    draws: int = 1000,
    tune: int = 300,
    chains: int = 4,
    cores: int | None = None,
    target_accept: float = 0.8,
    random_seed=None,
    progressbar: bool = True,
) -> az.InferenceData:
    """NUTS started at the particles of an SMC result, with their covariance as mass matrix.

    Parameters
    ----------
    problem_or_model : PetabProblem, pymc.Model or callable
        The model ``idata`` was sampled from (as for :func:`smc_modes`).
    idata : arviz.InferenceData
        The result of ``sample_smc`` (its final particles, ``chain`` = run, and each run's
        ``log_marginal_likelihood``).
    draws, tune : int
        Per chain, as for ``pm.sample`` (300 tuning steps: the mass matrix starts from the
        population's covariance).
    chains : int
        Chains (4), each started at a distinct particle.
    cores : int, optional
        Processes, as for ``pm.sample``.
    target_accept : float
    random_seed : int, optional
        The starts and the sampling.
    progressbar : bool

    Returns
    -------
    arviz.InferenceData
        PyMC's result; ``posterior.attrs`` gains ``smc_evidence_weights`` (per run) and
        ``smc_effective_runs``; ``smc_draws_above_particles`` (the share of draws whose
        log-density, PyMC's ``lp``, exceeds every particle's of the runs that carry the
        weight) and ``smc_draws_above_particles_expected`` (``1 / (N + 1)`` for ``N``
        distinct such particles, if they were draws of the posterior).

    Raises
    ------
    ValueError
        ``idata`` is not an SMC result, lacks a free variable of the model or a finite log
        evidence per run; ``draws``, ``chains`` or ``tune`` invalid.

    Warns
    -----
    RuntimeWarning
        Fewer than two runs carry the evidence weight: the starts and the mass matrix come
        from one run's population, and the other runs lost mass that this one holds.
        Or more than ``max(5 %, 10 / (N + 1))`` of the draws have a higher log-density than
        every particle: the population missed a region of higher density (module
        docstring).
    """
    draws = positive_int("draws", draws)
    chains = positive_int("chains", chains)
    tune = positive_int("tune", tune, 0)
    check_population(idata, None)  # before the model is built
    model, _ = model_source(problem_or_model)
    posterior = check_population(idata, model)
    names = [rv.name for rv in model.free_RVs]
    log_z = run_log_evidence(idata)
    run_weight = evidence_weights(log_z)
    effective = warn_if_one_run(
        "sample_nuts_from_smc",
        log_z,
        run_weight,
        "its population gives the starts and the mass matrix",
    )
    runs, count = posterior.sizes["chain"], posterior.sizes["draw"]
    value_vars = list(model.continuous_value_vars)
    coordinates = sampler_coordinates(posterior, value_vars, model).reshape(runs * count, -1)
    particle_weight = np.repeat(run_weight / count, count)
    approximation = population_approximation(model, value_vars, coordinates, particle_weight)

    start_seed, sample_seed = np.random.SeedSequence(random_seed).spawn(2)
    rng = np.random.default_rng(start_seed)
    probability = particle_weight / particle_weight.sum()
    distinct = int(np.count_nonzero(probability > 1e-12))
    chosen = rng.choice(runs * count, size=chains, replace=distinct < chains, p=probability)
    initvals = [
        {name: np.array(posterior[name].values[divmod(int(i), count)]) for name in names}
        for i in chosen
    ]
    fit = sample(
        draws,
        model=model,
        step=approximation.nuts_step(target_accept=target_accept),
        tune=tune,
        chains=chains,
        cores=cores,
        init="adapt_diag",  # the particles are the starts: no jitter
        initvals=initvals,
        random_seed=int(sample_seed.generate_state(1)[0]),
        progressbar=progressbar,
    )
    fit.posterior.attrs["smc_evidence_weights"] = run_weight.tolist()
    fit.posterior.attrs["smc_effective_runs"] = effective
    above, expected = _draws_above_population(idata, run_weight, fit)
    fit.posterior.attrs["smc_draws_above_particles"] = above
    fit.posterior.attrs["smc_draws_above_particles_expected"] = expected
    if above > max(0.05, 10.0 * expected):
        warnings.warn(
            f"sample_nuts_from_smc: {above:.1%} of the NUTS draws have a higher log-density "
            f"than every particle of the runs that carry the weight (expected {expected:.2%} "
            "if the particles were draws of the posterior): NUTS reached a region of higher "
            "density that the SMC runs did not hold, so their log evidences are too low and "
            "the optima they knew incomplete. Maximise from those draws (find_modes with "
            "initial_points) and give the optima to sample_smc(jump_modes=...)",
            RuntimeWarning,
            stacklevel=2,
        )
    return fit


# runs lighter than this hold no particle of the population the draws are compared with
_WEIGHTLESS_RUN = 1e-8


def _draws_above_population(
    idata: az.InferenceData, run_weight: np.ndarray, fit: az.InferenceData
) -> tuple[float, float]:
    """The share of ``fit``'s draws whose log-density (``sample_stats.lp``: the model's
    log-density of the sampler's coordinates, log-Jacobians included) exceeds every
    particle's (``particle_log_prior + particle_log_likelihood``, the same density) of the
    runs weighing ``_WEIGHTLESS_RUN`` or more, and ``1 / (N + 1)`` for their ``N`` distinct
    particles; NaN and NaN when either side does not record its log-densities (a sampler
    without ``lp``, a population not from ``sample_smc``)."""
    draws = getattr(fit, "sample_stats", None)
    population = idata.sample_stats
    if draws is None or "lp" not in draws or "particle_log_prior" not in population:
        return float("nan"), float("nan")
    particles = (population["particle_log_prior"] + population["particle_log_likelihood"]).values
    held = np.unique(particles[run_weight >= _WEIGHTLESS_RUN].ravel())
    held = held[np.isfinite(held)]
    if held.size == 0:
        return float("nan"), float("nan")
    lp = np.asarray(draws["lp"].values, dtype=float).ravel()
    return float(np.mean(lp > held.max())), 1.0 / (held.size + 1)
