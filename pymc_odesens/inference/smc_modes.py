"""The modes of a tempered-SMC population, with their weights: starts and mass matrices per mode.

A :func:`~pymc_odesens.inference.sample_smc` run ends with particles spread over every mode
the prior reaches, in proportion to each mode's posterior mass. :func:`smc_modes` names
those modes and weighs them:

1. **Which mode a particle is in**: ``particles_per_run`` particles of each run, drawn
   uniformly (the final particles are equally weighted), are starts of a local
   maximisation of the log-posterior (:func:`~pymc_odesens.inference.find_modes` with
   ``initial_points``); a particle belongs to the optimum its maximisation reaches (its
   basin of attraction), optima grouped by ``find_modes``' tolerances, and optima that no
   valley separates joined (:mod:`~pymc_odesens.inference.mode_connection`).
2. **Weights**: in each run, the share of its optimised particles that reached each mode;
   a mode's weight is the runs' shares averaged with the runs' evidence weights
   ``Z_r / sum_s Z_s`` (:func:`~pymc_odesens.inference.smc_evidence.evidence_weights`: the
   runs' populations combine so into one consistent estimate of the posterior), and its
   standard error that of this ratio estimator from the runs' spread (the delta method:
   ``sqrt(R / (R - 1) * sum_r w_r^2 (share_r - weight)^2)``, which is the shares' standard
   deviation over ``sqrt(R)`` when the weights are equal). When the runs' evidences
   disagree so far that fewer than two runs carry the weight (``1 / sum_r w_r^2 < 2``), the
   error cannot be estimated: it is NaN and a ``RuntimeWarning`` names the runs' log
   evidences. A run that lost a mode holding most of the posterior mass has a far lower
   evidence, and its population does not count; an equal-weight mean of the runs' shares
   would give its modes the weight of a whole run. A run whose evidence weight is below
   ``min_run_weight`` is not optimised at all (its maximisations could move no weight by
   more than its own evidence weight): its particles belong to no mode, and the weights
   are those of the other runs (each off by at most the skipped runs' total weight).
3. **Starts and mass matrices**: every final particle joins the mode of its nearest
   optimised particle (in the sampler's coordinates, each scaled by the population's
   standard deviation); a mode's particles are its chains' starts, and their covariance
   (shrunk towards its diagonal as the SMC moves' metric) its NUTS mass matrix, as a
   :class:`~pymc_odesens.inference.LaplaceApproximation` whose ``hessian`` is
   ``"population"``. A mode with fewer particles than coordinates plus one takes the
   Laplace approximation at its optimum instead (finite differences of the gradient).

:func:`~pymc_odesens.inference.smc_mode_sampling.sample_smc_modes` then samples each mode
with NUTS from there and weighs the modes' draws by these weights.

Threads: :func:`smc_modes` may be called from several threads (the maximisations run in
``find_modes``, whose compiled objectives are per thread); an :class:`SmcModes` is only read
after it is built, so its methods are safe to call concurrently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial

import numpy as np
import pandas as pd
import pymc as pm

from pymc_odesens.inference.arguments import positive_int, positive_number, weight_threshold
from pymc_odesens.inference.laplace_start import LaplaceApproximation
from pymc_odesens.inference.mode_metric import PosteriorMode, _split
from pymc_odesens.inference.mode_search import ModeCluster, ModeSearchResult
from pymc_odesens.inference.model_source import model_source
from pymc_odesens.inference.multistart import find_modes
from pymc_odesens.inference.pooled_metric import sampler_coordinates
from pymc_odesens.inference.smc_evidence import (
    effective_runs,
    evidence_weights,
    run_log_evidence,
    warn_if_one_run,
)
from pymc_odesens.inference.smc_mass_matrix import population_covariance

__all__ = [
    "SmcMode",
    "SmcModes",
    "check_population",
    "nearest",
    "population_approximation",
    "run_weighted_shares",
    "smc_modes",
]


def nearest(points: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """For each row of ``points``, the index of the nearest row of ``centres`` (Euclidean;
    squared distances expanded, without a points x centres x coordinates array)."""
    distances = (
        (points**2).sum(axis=1)[:, None]
        + (centres**2).sum(axis=1)[None, :]
        - 2.0 * points @ centres.T
    )
    return np.argmin(distances, axis=1)


@dataclass(frozen=True)
class SmcMode:
    """One mode of the population.

    Attributes
    ----------
    rank : int
        0 for the mode of the highest log-posterior, as ``find_modes``' clusters.
    weight : float
        The mode's share of the posterior: the runs' shares of their optimised particles
        that reached it, averaged with the runs' evidence weights (module docstring).
    weight_se : float
        Its standard error from the runs' spread (NaN for one run, or when fewer than two
        runs carry the evidence weight).
    run_weights : numpy.ndarray
        Each run's share (NaN for a run not optimised: ``SmcModes.skipped_runs``).
    optimum : ModeCluster
        The optimised particles that reached the mode, with the best of them
        (``optimum.best.parameters``, ``log_posterior``, ``log_likelihood``).
    particles : tuple of (int, int)
        ``(run, particle)`` of every final particle assigned to the mode.
    centre : numpy.ndarray
        The mean of the mode's particles in the sampler's coordinates.
    approximation : LaplaceApproximation
        Mean and covariance of the mode in the sampler's coordinates (``hessian`` is
        ``"population"``, or ``"finite-differences"`` where the mode had too few particles).
        Computed when first read: a mode with too few particles takes a maximisation and
        finite differences of the gradient (seconds to minutes on an ODE model), which only
        the modes sampled need. Two threads reading it first at once may both compute it
        (the same result).

    Raises
    ------
    ValueError
        Reading ``approximation`` of a mode with too few particles whose optimum is not a
        strict local maximum (a flat ridge): named, with the advice to leave it out.
    """

    rank: int
    weight: float
    weight_se: float
    run_weights: np.ndarray
    optimum: ModeCluster
    particles: tuple
    centre: np.ndarray
    approximate: Callable[[], LaplaceApproximation] = field(repr=False, compare=False)

    @cached_property
    def approximation(self) -> LaplaceApproximation:
        return self.approximate()

    @property
    def log_posterior(self) -> float:
        return self.optimum.log_posterior

    @property
    def log_likelihood(self) -> float:
        return self.optimum.log_likelihood


@dataclass(frozen=True, eq=False, repr=False)
class SmcModes:
    """What :func:`smc_modes` found: the modes, ranked, and the search behind them.

    Attributes
    ----------
    modes : tuple of SmcMode
        Ranked by log-posterior (as ``search.clusters``).
    search : ModeSearchResult
        The local maximisations from the particles (start ``i`` is ``optimised[i]``).
    optimised : tuple of (int, int)
        ``(run, particle)`` of each optimised particle.
    posterior : xarray.Dataset
        The SMC result's posterior (the final particles).
    failed_share : float
        The share of optimised particles whose maximisation failed (they count for no mode;
        the weights are shares of the others).
    scale : numpy.ndarray
        The particles' standard deviation in each of the sampler's coordinates (1 where
        they have none): the units in which "nearest" is measured.
    evidence_weights : numpy.ndarray
        Each run's weight ``Z_r / sum_s Z_s`` in the modes' weights (0 for a run none of
        whose maximisations succeeded, and for a skipped run).
    effective_runs : float
        ``1 / sum_r w_r^2`` of these weights: how many runs of equal weight they are worth.
    skipped_runs : tuple of int
        The runs not optimised because their evidence weight among all runs was below
        ``smc_modes``' ``min_run_weight``; their particles belong to no mode.
    """

    modes: tuple
    search: ModeSearchResult
    optimised: tuple
    posterior: object
    failed_share: float
    scale: np.ndarray
    evidence_weights: np.ndarray
    effective_runs: float
    skipped_runs: tuple = ()

    @property
    def model(self) -> pm.Model:
        """The PyMC model the modes belong to (of this process)."""
        return self.search.model

    def start_values(self, rank: int, chains: int, random_seed=None) -> list[dict]:
        """``chains`` distinct particles of mode ``rank`` as ``initvals`` of ``pm.sample``.

        Each is a dict of the free variables' values (their own scale) by name; drawn
        without replacement among the mode's particles (with replacement when it has fewer
        than ``chains``).
        """
        mode = self.modes[rank]
        rng = np.random.default_rng(random_seed)
        replace = len(mode.particles) < chains
        chosen = rng.choice(len(mode.particles), size=chains, replace=replace)
        names = [rv.name for rv in self.model.free_RVs]
        return [
            {name: np.array(self.posterior[name].values[mode.particles[i]]) for name in names}
            for i in chosen
        ]

    def to_dataframe(self) -> pd.DataFrame:
        """One row per mode: weight, its error, particles, log-posterior and log-likelihood
        at its optimum, and the optimum's parameters."""
        rows = []
        for mode in self.modes:
            row = {
                "mode": mode.rank,
                "weight": mode.weight,
                "weight_se": mode.weight_se,
                "optimised_particles": mode.optimum.size,
                "particles": len(mode.particles),
                "log_posterior": mode.log_posterior,
                "log_likelihood": mode.log_likelihood,
            }
            row.update(mode.optimum.parameters or {})
            rows.append(row)
        return pd.DataFrame(rows).set_index("mode")

    def __repr__(self) -> str:
        weights = ", ".join(f"{m.weight:.3g} +- {m.weight_se:.2g}" for m in self.modes)
        return (
            f"SmcModes({len(self.modes)} modes, weights [{weights}], "
            f"{self.effective_runs:.3g} effective runs)"
        )


@dataclass(frozen=True)
class _Built:
    """A model built here and its factory for the workers, in the shape ``model_source``
    takes a PEtab problem in (so that ``find_modes`` does not build the model again)."""

    model: pm.Model
    factory: Callable[[], pm.Model]

    def build_model(self) -> pm.Model:
        return self.model

    def model_factory(self) -> Callable[[], pm.Model]:
        return self.factory


def run_weighted_shares(
    shares: np.ndarray, log_evidence: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The modes' weights from the runs' shares, averaged with the runs' evidence weights.

    Parameters
    ----------
    shares : numpy.ndarray
        ``(runs, modes)``: each run's share of its optimised particles in each mode (rows
        sum to 1).
    log_evidence : numpy.ndarray
        ``(runs,)``: each run's log evidence.

    Returns
    -------
    weight, weight_se : numpy.ndarray
        ``(modes,)`` (module docstring); ``weight_se`` is NaN when fewer than two runs
        carry the evidence weight.
    run_weight : numpy.ndarray
        ``(runs,)``, ``Z_r / sum_s Z_s``.
    effective : float
        ``1 / sum_r run_weight_r^2``.
    """
    shares = np.asarray(shares, dtype=float)
    run_weight = evidence_weights(log_evidence)
    weight = run_weight @ shares
    # the shares' rows sum to 1, so the weights do: the run weights' rounding aside (a
    # single mode's weight 1 - 2e-16 on one machine, 1 on another)
    weight = weight / weight.sum()
    effective = effective_runs(run_weight)
    runs = len(run_weight)
    if runs < 2 or effective < 2.0:
        weight_se = np.full(shares.shape[1], np.nan)
    else:
        spread = (run_weight[:, None] * (shares - weight[None, :])) ** 2
        weight_se = np.sqrt(runs / (runs - 1.0) * spread.sum(axis=0))
    return weight, weight_se, run_weight, effective


def check_population(idata, model: pm.Model | None):
    """``idata``'s posterior, checked to be an SMC result (``chain`` = run, ``draw`` =
    particle) with draws of every free variable of ``model`` (None: the shape alone);
    errors name what is not."""
    posterior = getattr(idata, "posterior", None)
    if posterior is None or "chain" not in posterior.dims or "draw" not in posterior.dims:
        raise ValueError(
            "idata: expected the result of sample_smc (a posterior with 'chain' = run and "
            "'draw' = particle)"
        )
    names = [rv.name for rv in model.free_RVs] if model is not None else []
    missing = sorted(set(names) - set(posterior.data_vars))
    if missing:
        raise ValueError(
            f"idata: the posterior has no draws of the model's free variables {missing}; give "
            "the model the SMC run sampled"
        )
    return posterior


def population_approximation(
    model, value_vars, positions: np.ndarray, weights: np.ndarray | None = None
) -> LaplaceApproximation:
    """Mean and covariance (as the SMC moves' dense metric) of ``positions`` (rows, the
    sampler's coordinates), with ``weights`` (default: equal)."""
    n = len(positions)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    mean = (w / w.sum()) @ positions
    covariance = population_covariance(positions, w)
    mode = PosteriorMode(
        point=_split(mean, value_vars, model.initial_point()),
        vector=mean,
        value_variables=tuple(v.name for v in value_vars),
        log_density=float("nan"),
        gradient=np.zeros_like(mean),
        iterations=0,
        message=f"mean of {n} SMC particles",
    )
    return LaplaceApproximation(model, mode, covariance, "population")


def _laplace_at_optimum(search: ModeSearchResult, rank: int, size: int) -> LaplaceApproximation:
    """The Laplace approximation at mode ``rank``'s optimum (finite differences)."""
    try:
        return search.laplace(hessian="finite-differences", cluster=rank)
    except ValueError as error:
        raise ValueError(
            f"mode {rank}: its {size} particles are too few for their covariance, and the "
            f"Laplace approximation at its optimum failed ({error}); leave the mode out "
            "(sample_smc_modes' min_weight) or give the runs more particles"
        ) from error


def smc_modes(
    problem_or_model,
    idata,
    *,
    particles_per_run: int = 20,
    min_run_weight: float = 1e-8,
    barrier: float | None = 1.0,
    random_seed=None,
    method: str = "auto",
    n_workers: int | None = None,
    executor=None,
    objective_tolerance: float = 1e-3,
    parameter_tolerance: float = 1e-2,
    max_iterations: int = 2000,
    compile_kwargs: Mapping | None = None,
) -> SmcModes:
    """The modes of a :func:`~pymc_odesens.inference.sample_smc` population and their weights.

    Parameters
    ----------
    problem_or_model : PetabProblem, pymc.Model or callable
        The model ``idata`` was sampled from (as for ``find_modes``).
    idata : arviz.InferenceData
        The result of ``sample_smc`` (its final particles: ``chain`` = run).
    particles_per_run : int
        Particles of each run whose local maximisation decides the weights (20). The
        weights' error shrinks as ``1 / sqrt(runs * particles_per_run)``.
    min_run_weight : float
        Runs whose evidence weight ``Z_r / sum_s Z_s`` is below this (1e-8) are not
        optimised (``SmcModes.skipped_runs``): on a population whose runs disagree, most
        maximisations would be spent on runs that weigh nothing. Each mode's weight then
        differs from the one with every run optimised by at most the skipped runs' total
        weight. 0 optimises every run; the run of the highest evidence is always optimised.
    barrier : float or None
        Optima that no valley deeper than ``barrier`` log-units separates along the segment
        between them are one mode (:meth:`ModeSearchResult.join_connected`, the
        hill-valley test; 1): maximisations that stop at different points of one ridge
        give one mode, not several. None: the optima as ``find_modes`` groups them.
    random_seed : int, optional
        Which particles are optimised.
    method, n_workers, executor, objective_tolerance, parameter_tolerance, max_iterations,
    compile_kwargs
        As for :func:`~pymc_odesens.inference.find_modes` (the maximisations run there).

    Returns
    -------
    SmcModes

    Raises
    ------
    ValueError
        ``idata`` is not an SMC result (named), ``particles_per_run`` is not a positive
        integer, ``min_run_weight`` is not in [0, 1), ``barrier`` is not positive, the
        posterior lacks a free variable of the model, ``idata`` has no finite log evidence
        per run, or every maximisation failed.

    Warns
    -----
    RuntimeWarning
        Fewer than two runs carry the evidence weight (their log evidences disagree by
        more than about one unit): the weights rest on one run's population and their
        error is NaN.
    """
    check_population(idata, None)  # before the model is built
    model, factory = model_source(problem_or_model)
    posterior = check_population(idata, model)
    particles_per_run = positive_int("particles_per_run", particles_per_run)
    min_run_weight = weight_threshold("min_run_weight", min_run_weight)
    barrier = None if barrier is None else positive_number("barrier", barrier, " of log-units")
    names = [rv.name for rv in model.free_RVs]
    runs, count = posterior.sizes["chain"], posterior.sizes["draw"]
    log_z = run_log_evidence(idata)
    consequence = "the modes' weights rest on one run's population and their error is unknown (NaN)"
    evidence = evidence_weights(log_z)
    effective_all = warn_if_one_run("smc_modes", log_z, evidence, consequence)
    kept = evidence >= min_run_weight
    kept[np.argmax(log_z)] = True
    rng = np.random.default_rng(random_seed)
    optimised = []  # drawn for every run, so that a run's particles do not depend on kept
    size = min(particles_per_run, count)
    for run in range(runs):
        chosen = np.sort(rng.choice(count, size=size, replace=False))
        optimised.extend((run, int(particle)) for particle in chosen if kept[run])
    search: ModeSearchResult = find_modes(
        _Built(model, factory),
        0,
        random_seed=random_seed,
        method=method,
        n_workers=n_workers,
        executor=executor,
        max_iterations=max_iterations,
        objective_tolerance=objective_tolerance,
        parameter_tolerance=parameter_tolerance,
        compile_kwargs=compile_kwargs,
        initial_points=[
            {name: np.array(posterior[name].values[rc]) for name in names} for rc in optimised
        ],
    )
    if not search.clusters:
        raise ValueError(
            f"smc_modes: every local maximisation from the {len(optimised)} particles failed "
            f"(first: {search.starts[0].message})"
        )
    if barrier is not None:
        search = search.join_connected(barrier)
    cluster_of = {i: k for k, c in enumerate(search.clusters) for i in c.members}
    label = np.array([cluster_of.get(i, -1) for i in range(len(optimised))])

    # weights: each optimised run's shares among its particles whose maximisation succeeded
    run_of = np.array([run for run, _ in optimised])
    shares = np.full((runs, len(search.clusters)), np.nan)
    valid = np.zeros(runs, dtype=bool)
    for run in np.flatnonzero(kept):
        mine = label[(run_of == run) & (label >= 0)]
        shares[run] = 0.0
        if mine.size:
            shares[run] = np.bincount(mine, minlength=len(search.clusters)) / mine.size
            valid[run] = True
    weight, weight_se, run_weight, effective = run_weighted_shares(shares[valid], log_z[valid])
    all_run_weights = np.zeros(runs)
    all_run_weights[valid] = run_weight
    if effective_all >= 2.0:  # runs whose maximisations all failed no longer count
        warn_if_one_run("smc_modes", log_z[valid], run_weight, consequence)

    # every particle to the mode of its nearest optimised particle
    # (the optimised runs' particles only: a skipped run's may lie far from every optimum)
    value_vars = list(model.continuous_value_vars)
    coordinates = sampler_coordinates(posterior, value_vars, model)  # (runs, count, d)
    flat = coordinates.reshape(runs * count, -1)
    in_kept = np.repeat(kept, count)
    scale = flat[in_kept].std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    ok = np.flatnonzero(label >= 0)
    anchors = np.array([coordinates[optimised[i]] for i in ok])
    assigned = np.full(runs * count, -1)
    assigned[in_kept] = label[ok][nearest(flat[in_kept] / scale, anchors / scale)]

    modes = []
    d = flat.shape[1]
    for k, cluster in enumerate(search.clusters):
        members = np.flatnonzero(assigned == k)
        particles = tuple((int(m // count), int(m % count)) for m in members)
        if len(members) > d:
            approximate = partial(population_approximation, model, value_vars, flat[members])
        else:
            approximate = partial(_laplace_at_optimum, search, k, len(members))
        modes.append(
            SmcMode(
                rank=k,
                weight=float(weight[k]),
                weight_se=float(weight_se[k]),
                run_weights=shares[:, k].copy(),
                optimum=cluster,
                particles=particles,
                centre=flat[members].mean(axis=0),
                approximate=approximate,
            )
        )
    return SmcModes(
        modes=tuple(modes),
        search=search,
        optimised=tuple(optimised),
        posterior=posterior,
        failed_share=float(np.mean(label < 0)),
        scale=scale,
        evidence_weights=all_run_weights,
        effective_runs=float(effective),
        skipped_runs=tuple(int(r) for r in np.flatnonzero(~kept)),
    )
