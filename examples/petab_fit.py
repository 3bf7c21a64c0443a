"""Bayesian fit of a PEtab problem with NUTS: the benchmark collection's Boehm model by default.

A PEtab problem (an SBML model plus tables of conditions, measurements, observables with
their noise models, and parameters with scales, bounds and priors) becomes a PyMC model in
one call, ``PetabProblem.from_yaml(path).build_model()``: one random variable per estimated
parameter on its ``parameterScale`` (uniform on the bounds where the table gives no prior),
all simulation conditions solved as one batch with exact gradients (the discrete adjoint of
the ``bdf`` steps, or forward sensitivities for very few parameters), and the measurements
as observed random variables with PEtab's noise models.

The default problem is Boehm_JProteomeRes2014 of the PEtab benchmark collection, read in
place from ``../shared/petab`` (``$PYMC_ODESENS_SHARED_DIR/petab``; a path argument or
``$PYMC_ODESENS_PETAB_PROBLEM`` points elsewhere): STAT5 dimerisation after Epo
stimulation, 8 states, 9 estimated parameters (6 rate constants, 3 noise levels, all
log10), 48 measurements of 3 observables. Model and data: Boehm et al., *Identification
of isoform-specific dynamics in phosphorylation-dependent STAT5 dimerization by
quantitative mass spectrometry and mathematical modeling*, J. Proteome Res. 13 (2014)
5685-5694, doi:10.1021/pr5006923 (the publication of any problem is read from its SBML
annotation and printed).

By default the script runs the whole recipe in one call,
``pymc_odesens.petab.sample_posterior`` (docs/petab.md, "One call to a posterior"): the
observation parameters that qualify are marginalised (``--marginalize none``: not), the
modes found by ``--n-starts`` multistart optimisations, the chains started from the Laplace
approximation at the best one, sampled with nutpie (``--sampler pymc``: PyMC's NUTS with a
dense mass matrix) and continued until R-hat <= 1.01 and bulk and tail ESS >= 400 for every
parameter or ``--time-limit``; the marginalised parameters are drawn from their
conditional posterior.

``--recipe manual`` samples the problem's model as the script did before the recipe (the
options below; any of them implies it). Each chain starts at its own random point within 0.1
of the nominal values on each parameter's scale (``--start-spread``; ``--start jitter`` for
PyMC's default, which moves a parameter with wide bounds by decades: docs/petab.md,
"Sampling"). For problems with many correlated parameters, ``--mode-mass-matrix`` starts a
dense mass matrix from the Hessian at the posterior mode, and ``--pooled-metric N`` then
gives all chains one metric, pooled from N draws of each after their own tuning;
``--save-trace T`` and a later ``--resume T`` continue those chains (a metric pooled from
all their draws) and add ``--draws`` more, so a long run can be split over sessions. With
``--save-trace``, PyMC's NUTS writes the draws so far to the trace file every
``--checkpoint-every`` draws per chain (nutpie only at the end), so a run stopped from
outside keeps them and can be resumed; ``--time-limit MINUTES`` stops such a run itself and
keeps its draws.

The script prints the ArviZ summary, the largest R-hat, the divergences and the wall time,
and plots every observable per condition: the data with their noise (one noise standard
deviation at the posterior mean, on the observable's transformation scale), the posterior
predictive 90 % band of the measurements and the median simulated observable.

Run:  python examples/petab_fit.py          (writes examples/output/petab_fit_<problem>.png)
      python examples/petab_fit.py path/to/problem.yaml --marginalize none --sampler pymc
      python examples/petab_fit.py --recipe manual --draws 500 --sampler nutpie
      python examples/petab_fit.py --help
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()  # the run's clock: the heavy imports below are part of it

import argparse  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:  # the heavy imports happen inside the functions (``--help`` stays fast)
    import arviz as az

    from pymc_odesens.petab import PetabProblem

HERE = Path(__file__).resolve().parent
DEFAULT_PROBLEM = "Boehm_JProteomeRes2014"


def default_problem() -> Path:
    """``$PYMC_ODESENS_PETAB_PROBLEM``, else Boehm in the shared folder beside the repository."""
    env = os.environ.get("PYMC_ODESENS_PETAB_PROBLEM")
    if env:
        return Path(env)
    shared = Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", HERE.parents[1] / "shared"))
    return shared / "petab" / DEFAULT_PROBLEM / f"{DEFAULT_PROBLEM}.yaml"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", nargs="?", type=Path, default=None, help="PEtab YAML file")
    parser.add_argument(
        "--recipe",
        choices=("posterior", "manual"),
        default=None,
        help="posterior: sample_posterior's recipe (default); manual: sample the model with "
        "the options below (implied by any of them)",
    )
    parser.add_argument(
        "--marginalize",
        choices=("auto", "none"),
        default="auto",
        help="recipe: marginalise the observation parameters that qualify (auto)",
    )
    parser.add_argument(
        "--n-starts", type=int, default=10, help="recipe: multistart starts for the modes (10)"
    )
    parser.add_argument(
        "--draws",
        type=int,
        default=None,
        help="draws per chain (manual: 1000); recipe: between two convergence checks "
        "(100 with nutpie, 500 with pymc)",
    )
    parser.add_argument(
        "--tune", type=int, default=None, help="tuning steps per chain (manual 1000, recipe 500)"
    )
    parser.add_argument("--chains", type=int, default=4, help="number of chains (4)")
    parser.add_argument("--cores", type=int, default=2, help="chains run in parallel (2)")
    parser.add_argument("--seed", type=int, default=20240611, help="random seed")
    parser.add_argument(
        "--target-accept", type=float, default=None, help="NUTS (manual 0.9, recipe 0.8)"
    )
    parser.add_argument(
        "--sampler",
        choices=("pymc", "nutpie"),
        default=None,
        help="NUTS of PyMC or nutpie (manual: pymc, recipe: nutpie)",
    )
    parser.add_argument(
        "--low-rank-mass-matrix",
        action="store_true",
        help="nutpie: adapt a low-rank modified mass matrix (for posteriors with strongly "
        "correlated directions, such as products of a scaling factor and an initial amount)",
    )
    parser.add_argument(
        "--mode-mass-matrix",
        action="store_true",
        help="PyMC's NUTS: start a dense mass matrix from the Hessian at the posterior mode "
        "(found first by L-BFGS-B), adapted to the draws during tuning",
    )
    parser.add_argument(
        "--pooled-metric",
        type=int,
        default=0,
        metavar="N",
        help="with --mode-mass-matrix: after tuning, N draws per chain give one dense metric "
        "from all chains, with which every chain continues (--step-size-tune steps for the "
        "step size, then --draws); 0: each chain keeps its own metric (0)",
    )
    parser.add_argument(
        "--step-size-tune",
        type=int,
        default=150,
        help="with --pooled-metric: tuning steps of the step size under the pooled metric (150)",
    )
    parser.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="TRACE",
        help="with --mode-mass-matrix: continue the chains of a trace written by "
        "--save-trace, with one dense metric pooled from all its draws (--step-size-tune "
        "steps for the step size, then --draws); the result holds its draws and the new ones",
    )
    parser.add_argument(
        "--sensitivity",
        default="auto",
        choices=("auto", "forward", "adjoint", "discrete_adjoint"),
        help="gradient route (auto)",
    )
    parser.add_argument(
        "--start",
        choices=("near-nominal", "jitter"),
        default=None,
        help="each chain starts uniformly within --start-spread of the nominal values on "
        "each parameter's scale (default), or at them plus PyMC's uniform(-1, 1) jitter on "
        "the transformed scale (up to 3.7 decades for bounds 16 decades apart)",
    )
    parser.add_argument(
        "--start-spread", type=float, default=None, help="near-nominal starts: half-width (0.1)"
    )
    parser.add_argument("--save-trace", type=Path, default=None, help="write the trace (NetCDF)")
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=None,
        metavar="N",
        help="with --save-trace and PyMC's NUTS: write the draws so far (after tuning) to "
        "the trace file every N draws per chain, so that a stopped run keeps them; 0: only "
        "at the end; nutpie writes only at the end (100)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="MINUTES",
        help="recipe: stop continuing the chains after this many minutes from the call "
        "(never during tuning) and keep the draws; manual, PyMC's NUTS (plain or with "
        "--resume): stop sampling after this many minutes from the start (model, mode "
        "search and tuning included; never during tuning) and keep the draws so far, as "
        "after Ctrl-C; size --draws generously",
    )
    parser.add_argument("--predictive-draws", type=int, default=200, help="for the bands (200)")
    parser.add_argument("--plot", type=Path, default=None, help="output PNG")
    parser.add_argument("--no-plot", action="store_true", help="no figure")
    parser.add_argument("--no-progressbar", action="store_true")
    args = parser.parse_args(argv)
    manual_only = {
        "--low-rank-mass-matrix": args.low_rank_mass_matrix,
        "--mode-mass-matrix": args.mode_mass_matrix,
        "--pooled-metric": args.pooled_metric,
        "--resume": args.resume,
        "--start": args.start,
        "--start-spread": args.start_spread,
        "--checkpoint-every": args.checkpoint_every,
    }
    given = [flag for flag, value in manual_only.items() if value]
    if args.recipe is None:
        args.recipe = "manual" if given else "posterior"
    elif args.recipe == "posterior" and given:
        parser.error(f"--recipe posterior: {given[0]} belongs to --recipe manual")
    defaults = {
        "manual": {"draws": 1000, "tune": 1000, "target_accept": 0.9, "sampler": "pymc"},
        "posterior": {"draws": None, "tune": 500, "target_accept": 0.8, "sampler": "nutpie"},
    }[args.recipe]
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.start = args.start or "near-nominal"
    args.start_spread = 0.1 if args.start_spread is None else args.start_spread
    args.checkpoint_every = 100 if args.checkpoint_every is None else args.checkpoint_every
    if args.n_starts < 1:
        parser.error(f"--n-starts: expected a positive count, got {args.n_starts}")
    if args.time_limit is not None and args.recipe == "posterior":
        if not args.time_limit > 0:
            parser.error(
                f"--time-limit: expected a positive number of minutes, got {args.time_limit}"
            )
    elif args.time_limit is not None:
        if not args.time_limit > 0:
            parser.error(
                f"--time-limit: expected a positive number of minutes, got {args.time_limit}"
            )
        for flag, used in (
            ("--pooled-metric", args.pooled_metric),
            ("--sampler nutpie", args.sampler == "nutpie"),
        ):
            if used:
                parser.error(
                    f"--time-limit: not with {flag} (PyMC's NUTS, plain or with --resume, only)"
                )
    if args.checkpoint_every < 0:
        parser.error(
            f"--checkpoint-every: expected 0 or a positive count, got {args.checkpoint_every}"
        )
    args.problem = args.problem or default_problem()
    return args


def _sampler_kwargs(args) -> dict:
    """nutpie's own options (``nuts_sampler_kwargs``)."""
    if not args.low_rank_mass_matrix:
        return {}
    if args.sampler != "nutpie":
        raise SystemExit("--low-rank-mass-matrix needs --sampler nutpie")
    return {"nuts_sampler_kwargs": {"low_rank_modified_mass_matrix": True}}


def _mode_step(model, args) -> dict:
    """``step``: NUTS with a dense mass matrix from the mode's Hessian (``--mode-mass-matrix``)."""
    if not args.mode_mass_matrix:
        return {}
    if args.sampler != "pymc":
        raise SystemExit("--mode-mass-matrix needs --sampler pymc")
    import pymc_odesens

    began = time.perf_counter()
    print("finding the posterior mode (L-BFGS-B) for the mass matrix ...", flush=True)
    step, mode = pymc_odesens.mode_metric_nuts(model, target_accept=args.target_accept)
    print(
        f"mass matrix from the Hessian at the mode: log-density {mode.log_density:.4f}, "
        f"gradient norm {mode.gradient_norm:.2e} ({mode.iterations} L-BFGS-B iterations), "
        f"{time.perf_counter() - began:.1f} s with the compiles"
    )
    return {"step": step}


def _start(problem: PetabProblem, args) -> dict:
    """``initvals`` and ``init`` for where the chains start."""
    if args.start == "jitter":
        return {"init": "jitter+adapt_diag"}  # build_model's initvals: the nominal values
    return {"init": "adapt_diag", "initvals": problem.start_values(args.start_spread)}


def sample(problem: PetabProblem, args) -> tuple[az.InferenceData, float]:
    import arviz as az
    import numpy as np

    import pymc_odesens
    from pymc_odesens.inference.checkpoint import TraceCheckpoint
    from pymc_odesens.inference.time_limit import TimeLimit

    # the limit counts from here: model, mode search and tuning included
    limit = {"callback": TimeLimit(60 * args.time_limit)} if args.time_limit else {}
    model = problem.build_model(sensitivity=args.sensitivity)
    # the NUTS step with the mode's mass matrix carries target_accept itself
    nuts = _mode_step(model, args) or {"target_accept": args.target_accept}
    for flag, used in (("--pooled-metric", args.pooled_metric), ("--resume", args.resume)):
        if used and "step" not in nuts:
            raise SystemExit(f"{flag} needs --mode-mass-matrix")
    checkpoint = (
        {"checkpoint": args.save_trace, "checkpoint_every": args.checkpoint_every}
        if args.save_trace and args.checkpoint_every > 0
        else {}
    )
    common = {
        "draws": args.draws,
        "tune": args.tune,
        "chains": args.chains,
        "cores": args.cores,
        "random_seed": args.seed,
        "progressbar": not args.no_progressbar,
        "compute_convergence_checks": False,
    }
    start = time.perf_counter()
    with model:
        # PyMC's NUTS with the log-density compiled in NUMBA mode (nutpie compiles its own)
        if args.resume:
            idata = pymc_odesens.resume_pooled_metric(
                az.from_netcdf(args.resume),
                step=nuts["step"],
                step_size_tune=args.step_size_tune,
                **checkpoint,
                **limit,
                **{k: v for k, v in common.items() if k not in ("tune", "chains")},
            )
            print(
                f"continued {args.resume} ({idata.sample_stats.attrs['resumed_draws']} draws "
                f"per chain); step sizes under the metric of all its draws: "
                f"{np.round(idata.sample_stats['step_size'].values[:, -1], 4).tolist()}"
            )
        elif args.pooled_metric:
            idata = pymc_odesens.sample_pooled_metric(
                step=nuts["step"],
                pooling_draws=args.pooled_metric,
                step_size_tune=args.step_size_tune,
                initvals=_start(problem, args).get("initvals"),
                **checkpoint,
                **common,
            )
            attrs = idata.sample_stats.attrs
            print(
                f"first stage: {attrs['first_stage_time']:.1f} s, step sizes after each "
                f"chain's own tuning {np.round(attrs['first_stage_step_sizes'], 4).tolist()}; "
                f"after the pooled metric's: "
                f"{np.round(idata.sample_stats['step_size'].values[:, -1], 4).tolist()}"
            )
        else:
            if checkpoint and args.sampler == "pymc":  # nutpie takes no callback
                nuts["callback"] = TraceCheckpoint(
                    args.save_trace,
                    args.checkpoint_every,
                    tune=args.tune,
                    chains=args.chains,
                    then=limit.get("callback"),
                )
            else:
                nuts.update(limit)
            idata = pymc_odesens.sample(
                **common,
                **_start(problem, args),
                nuts_sampler=args.sampler,
                **_sampler_kwargs(args),
                **nuts,
            )
    wall = time.perf_counter() - start
    idata.extend(_predictive(model, idata, args))
    return idata, wall


def _predictive(model, idata, args):
    """Posterior predictive draws of the measurements (``--predictive-draws`` of them)."""
    import pymc_odesens

    thinned = idata.sel(
        draw=slice(
            None,
            None,
            max(
                1,
                idata.posterior.sizes["draw"]
                * idata.posterior.sizes["chain"]
                // args.predictive_draws,
            ),
        )
    )
    with model:
        # PyMC's warning about potentials is silenced for the solver-failure rejection only
        return pymc_odesens.sample_posterior_predictive(
            thinned, random_seed=args.seed, progressbar=not args.no_progressbar
        )


def fit_posterior(problem: PetabProblem, args) -> tuple[az.InferenceData, float]:
    """``sample_posterior``'s recipe; the predictive draws from the problem's full model
    (every parameter is in the posterior, the marginalised ones recovered)."""
    from pymc_odesens.petab import sample_posterior

    start = time.perf_counter()
    idata = sample_posterior(
        problem,
        marginalize=None if args.marginalize == "none" else "auto",
        n_starts=args.n_starts,
        chains=args.chains,
        cores=args.cores,
        sampler=args.sampler,
        draws=args.draws,
        tune=args.tune,
        time_limit=None if args.time_limit is None else 60 * args.time_limit,
        target_accept=args.target_accept,
        random_seed=args.seed,
        progressbar=not args.no_progressbar,
    )
    wall = time.perf_counter() - start
    posterior = idata.posterior[list(problem.parameters.ids)]
    import arviz as az

    full = problem.build_model()
    idata.extend(_predictive(full, az.InferenceData(posterior=posterior), args))
    return idata, wall


def _scale(values, transformation: str, inverse: bool = False):
    import numpy as np

    if transformation == "lin":
        return values
    if transformation == "log":
        return np.exp(values) if inverse else np.log(values)
    return 10.0**values if inverse else np.log10(values)


def sbml_time_unit(sbml_model) -> str | None:
    """The time unit an SBML model states ("min", "s", "h", or libsbml's text of it).

    SBML Level 3 names it in the model's ``timeUnits`` (None when absent); in Level 2 the
    unit definition ``time`` redefines the built-in time unit, which is the second.
    """
    import libsbml

    unit_id = sbml_model.getTimeUnits() if sbml_model.getLevel() >= 3 else "time"
    if not unit_id:
        return None
    definition = sbml_model.getUnitDefinition(unit_id)
    if definition is None:
        base = unit_id if sbml_model.getLevel() >= 3 else "second"
        return {"second": "s"}.get(base, base)
    units = list(definition.getListOfUnits())
    if (
        len(units) == 1
        and units[0].getKind() == libsbml.UNIT_KIND_SECOND
        and units[0].getExponent() == 1
    ):
        factor = units[0].getMultiplier() * 10.0 ** units[0].getScale()
        names = {1.0: "s", 60.0: "min", 3600.0: "h", 86400.0: "d"}
        return names.get(factor, f"{factor:g} s")
    return libsbml.UnitDefinition.printUnits(definition, True)


def plot_fit(problem: PetabProblem, idata: az.InferenceData, path: Path, max_panels: int = 48):
    """Every observable per condition: data, noise, posterior predictive band, median fit."""
    import matplotlib
    import numpy as np

    from pymc_odesens.petab.experiments import condition_label
    from pymc_odesens.petab.measurements import measurement_conditions

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    time_unit = sbml_time_unit(problem.petab_problem.model.sbml_model)
    posterior = idata.posterior
    ids = list(problem.parameters.ids)
    draws = np.stack([posterior[pid].values.reshape(-1) for pid in ids], axis=1)
    mean = draws.mean(axis=0)
    picked = draws[np.linspace(0, len(draws) - 1, min(30, len(draws))).astype(int)]
    simulated = np.stack([problem.simulate(x)["simulation"].to_numpy() for x in picked])
    at_mean = problem.simulate(mean)
    condition = np.array(
        [
            condition_label(*pair)
            for pair in measurement_conditions(problem.petab_problem.measurement_df)
        ]
    )
    panels = []
    for group in problem.graph.groups:
        predictive = idata.posterior_predictive[group.observable.id].values
        predictive = predictive.reshape(-1, predictive.shape[-1])
        labels = condition[group.rows]  # one panel per condition, not per simulation
        for label in dict.fromkeys(labels):
            mask = labels == label
            panels.append((group, label, mask, predictive[:, mask]))
    shown = panels[:max_panels]
    columns = min(4, len(shown))
    rows = math.ceil(len(shown) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False)
    for ax, (group, label, mask, predictive) in zip(axes.flat, shown):
        observable = group.observable
        rows_e = group.rows[mask]
        t = group.time[mask]
        finite = np.isfinite(t)
        right = (t[finite].max() if finite.any() else 1.0) * 1.15 + 1e-9
        t_plot = np.where(finite, t, right)
        order = np.argsort(t_plot, kind="stable")
        data = group.data[mask]
        sigma = at_mean["noise"].to_numpy()[rows_e]
        scaled = _scale(data, observable.transformation)
        low = _scale(scaled - sigma, observable.transformation, inverse=True)
        high = _scale(scaled + sigma, observable.transformation, inverse=True)
        band = np.quantile(predictive, [0.05, 0.95], axis=0)
        fit = np.median(simulated[:, rows_e], axis=0)
        ax.fill_between(
            t_plot[order],
            band[0][order],
            band[1][order],
            color="C0",
            alpha=0.25,
            label="posterior predictive 90 %",
        )
        ax.plot(t_plot[order], fit[order], color="C0", label="simulated (median)")
        ax.errorbar(
            t_plot,
            data,
            yerr=[data - low, high - data],
            fmt="o",
            color="k",
            ms=3,
            lw=0.8,
            label="data \u00b1 noise sd (at the posterior mean)",
        )
        if not finite.all():
            ax.axvline(right, color="0.7", lw=0.5)
            ax.annotate("t = inf", (right, ax.get_ylim()[1]), fontsize=7, ha="center", va="top")
        if observable.transformation != "lin":
            ax.set_yscale("log")
        ax.set_title(f"{observable.id}\n{label}", fontsize=8)
        ax.set_xlabel(f"time [{time_unit}]" if time_unit else "time (no unit stated)", fontsize=8)
        ax.set_ylabel(f"{observable.id} (no unit stated)", fontsize=7)
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"{problem.name} ({problem.publication})", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    if len(panels) > max_panels:
        print(f"plotted the first {max_panels} of {len(panels)} observable/condition panels")
    return path


def sampling_line(
    idata: az.InferenceData,
    args: argparse.Namespace,
    rhat_max: float,
    divergences: int,
    wall: float,
) -> str:
    """What was sampled (which after an interrupt, Ctrl-C: PyMC keeps the draws so far, of
    the chains it can keep at one length, is less than asked for), with the wall time of the
    fit (``wall``: building the model, the compiles, a mode search, sampling and the
    predictive draws)."""
    chains, draws = idata.posterior.sizes["chain"], idata.posterior.sizes["draw"]
    resumed = int(idata.sample_stats.attrs.get("resumed_draws", 0))
    expected = (chains if resumed else args.chains, resumed + args.draws)
    asked = (
        ""
        if (chains, draws) == expected
        else f"; interrupted: {expected[0]} x {expected[1]} asked for"
    )
    if resumed:
        tuning = (
            f"{resumed} draws of {args.resume} + {args.step_size_tune} step-size tuning "
            f"steps under their pooled metric + {args.draws} new"
        )
    elif args.pooled_metric:
        tuning = (
            f"{args.tune} tuning steps + {args.pooled_metric} draws pooled into one metric + "
            f"{args.step_size_tune} step-size tuning steps"
        )
    else:
        tuning = f"{args.tune} tuning steps"
    return (
        f"R-hat max {rhat_max:.4f}, divergences {divergences}, "
        f"wall time of the fit{' in this run' if resumed else ''} {wall:.1f} s "
        f"({chains} chains x {draws} draws, "
        f"{tuning}, {args.sampler}{asked})"
    )


def recipe_line(idata: az.InferenceData, wall: float) -> str:
    """What ``sample_posterior`` reported: converged or not, modes, phases' wall times."""
    import numpy as np

    a = idata.sample_stats.attrs
    verdict = "converged" if int(a["converged"]) else f"NOT converged ({a['stopped_by']})"
    marginalized = list(np.atleast_1d(a["marginalized"])) if len(a["marginalized"]) else []
    return (
        f"{verdict}: R-hat max {a['rhat_max']:.4f}, ESS bulk/tail min {a['ess_bulk_min']:.0f}/"
        f"{a['ess_tail_min']:.0f} ({a['ess_per_second']:.2f} per second), "
        f"{idata.posterior.sizes['chain']} chains x {a['draws_per_chain']} draws, "
        f"{a['sampler']}; marginalised: {', '.join(map(str, marginalized)) or 'none'}; "
        f"{a['optima_found']} distinct optima of {a['n_starts']} starts, "
        f"{a['modes_found']} modes"
        + (" (MULTIMODAL)" if int(a["multimodal"]) else "")
        + f"; times: model {a['time_model']:.1f} s, modes {a['time_modes']:.1f} s, Laplace "
        f"{a['time_initialise']:.1f} s, sampling {a['time_sampling']:.1f} s, recovery "
        f"{a['time_recovery']:.1f} s; wall time of the fit {wall:.1f} s (with the "
        "predictive draws)"
    )


def main(argv=None) -> dict:
    args = parse_args(argv)
    started = STARTED if __name__ == "__main__" else time.perf_counter()
    import arviz as az

    import pymc_odesens
    from pymc_odesens.inference.checkpoint import write_trace
    from pymc_odesens.petab import PetabProblem

    problem = PetabProblem.from_yaml(args.problem)
    print(problem)
    print(f"model and data: {problem.publication or '(no publication in the SBML annotation)'}")
    options = problem.options.updated(sensitivity=args.sensitivity)
    if args.recipe == "posterior":
        problem.options = options
    print(f"gradient route: {problem.route_for(options)}")
    if args.recipe == "posterior":
        print(
            f"sample_posterior: marginalize={args.marginalize}, {args.n_starts} starts, chains "
            "from the Laplace approximation at the best mode"
        )
        idata, wall = fit_posterior(problem, args)
    else:
        if args.start == "jitter":
            print("chains start at the nominal values plus PyMC's jitter")
        else:
            print(f"chains start within {args.start_spread} of the nominal values")
        idata, wall = sample(problem, args)
    if args.save_trace:
        # through a file beside it: a stop while writing keeps the last checkpoint
        write_trace(idata, args.save_trace)
        print(f"wrote {args.save_trace}")
    summary = az.summary(idata, var_names=list(problem.parameters.ids), round_to=4)
    print(summary.to_string())
    checks = pymc_odesens.convergence_report(idata, var_names=list(problem.parameters.ids))
    if "n_steps" in idata.sample_stats:
        steps = idata.sample_stats["n_steps"].values
        print(f"leapfrog steps per draw: mean {steps.mean():.0f}, max {steps.max():.0f}")
    if args.recipe == "posterior":
        print(recipe_line(idata, wall))
    else:
        print(sampling_line(idata, args, checks.rhat_max, checks.divergences, wall))
    print(checks)
    plot = None
    if not args.no_plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("matplotlib is not installed: no plot")
        else:
            target = args.plot or HERE / "output" / f"petab_fit_{problem.name}.png"
            plot = plot_fit(problem, idata, target)
            print(f"wrote {plot}")
    print(pymc_odesens.inference.times_line(idata, started))
    return {
        "problem": problem,
        "idata": idata,
        "summary": summary,
        "checks": checks,
        "rhat_max": checks.rhat_max,
        "divergences": checks.divergences,
        "wall_time": wall,
        "plot": plot,
    }


if __name__ == "__main__":
    main()
