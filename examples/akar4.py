"""Bayesian fit of the AKAR4 phosphorylation model to its real data, with NUTS.

AKAR4 (a FRET reporter of PKA activity) is phosphorylated by the catalytic
subunit C of protein kinase A::

    C + AKAR4 <=> AKAR4_C   (kf_C_AKAR4, kb_C_AKAR4)
    AKAR4_C  -> AKAR4p + C  (kcat_AKARp)

The data are the three time courses of Figure 3-figure supplement 1 of
doi:10.7554/eLife.68164 (initial C = 400, 100 and 25 nM), as shipped with the
uqsa package (github.com/icpm-kth/uqsa, ``inst/extdata/AKAR4/``) and copied in
``examples/data/akar4.json`` (its ``source`` field gives the commit). The
observable is the output ``AKAR4pOUT = 108 + 380 AKAR4p`` of that file, read
from its ``outputs`` block; each data point has its own standard deviation.

The three rate constants are sampled as log10 values and shared by the three
experiments, which are solved together: ``y0`` has shape (3, 4), so
``ode_solution`` returns (3, T, 4) and solves the experiments in parallel
threads, with exact forward sensitivities for the gradient.

Prior (``--prior``). The uqsa AKAR4 article puts a log10-uniform prior on
``log10(value) +- 2`` around the Parameter table's values (the JSON's
``prior`` block). The data pin down the specificity constant
``k_eff = kf kcat / (kb + kcat)`` sharply, but only bound ``kb_C_AKAR4``
from above and ``kcat_AKARp`` from below (any fast enough catalysis fits
equally well), so the posterior of those two reaches the prior's edges. The
default, ``normal``, is a normal on log10 with the same centre and standard
deviation 1 (the box ``+- 2`` is its central 95 % interval): its smooth tails
give NUTS a smooth target. ``uniform`` uses the article's box (PyMC samples
it through a logit transform).

Parameterisation (``--parameterisation``). Sampled directly, ``log10 kf``
bends with ``kb`` and ``kcat`` along a curved ridge (``kf`` must grow when
``kcat`` is small): NUTS crosses it without divergences only at
``target_accept`` 0.99, with about 40 gradient evaluations per draw; at
PyMC's default of 0.8 it diverged 35 times in 500 draws and missed the
ridge's tail. The default samples ``log10 k_eff`` instead, which the data fix
whatever ``kb`` and ``kcat`` are; the posterior is then close to Gaussian,
with a soft wall where ``kcat`` becomes too slow. ``target_accept`` 0.99 (the
default here) takes about 13 evaluations per draw and gave no divergences in
4 x 1000 draws; 0.95 takes about 8 and left 9. The prior is the same (see
:func:`build_model`). With the uniform prior the bounds of ``log10 k_eff``
move with ``kb / kcat`` and can cut through its sharp peak; in short runs
that parameterisation diverged where the rates did not, so ``--prior
uniform`` samples the rates directly. That run is slower: 4 x 1000 draws
took about 11 minutes here (no divergences, R-hat 1.009, ESS >= 490).

Run:  python examples/akar4.py            (writes examples/output/akar4_fit.png)
      python examples/akar4.py --help     (draws, tune, chains, cores, prior, tolerances)
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()  # the run's clock: the heavy imports below are part of it

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:  # the heavy imports happen inside the functions (``--help`` stays fast)
    import numpy as np
    import pymc as pm

    from pymc_odesens import OdeSystem

HERE = Path(__file__).resolve().parent
MODEL_PATH = HERE / "data" / "akar4.json"
OUTPUT = "AKAR4pOUT"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=1000, help="draws per chain (1000)")
    parser.add_argument("--tune", type=int, default=1000, help="tuning steps per chain (1000)")
    parser.add_argument("--chains", type=int, default=4, help="number of chains (4)")
    parser.add_argument("--cores", type=int, default=2, help="chains run in parallel (2)")
    parser.add_argument("--seed", type=int, default=20240611, help="random seed")
    parser.add_argument("--target-accept", type=float, default=0.99, help="NUTS (0.99)")
    parser.add_argument(
        "--prior",
        choices=("normal", "uniform"),
        default="normal",
        help="normal on log10 with sd 1 (default) or the uqsa article's log10-uniform +-2",
    )
    parser.add_argument(
        "--parameterisation",
        choices=("specificity", "rates"),
        default=None,
        help="sample log10 of (k_eff, kb, kcat) (default with --prior normal) "
        "or of (kf, kb, kcat) (default with --prior uniform)",
    )
    parser.add_argument("--rtol", type=float, default=1e-8, help="bdf relative tolerance")
    parser.add_argument("--atol", type=float, default=1e-10, help="bdf absolute tolerance")
    parser.add_argument(
        "--trajectories", type=int, default=100, help="posterior draws drawn in the plot (100)"
    )
    parser.add_argument("--plot", type=Path, default=HERE / "output" / "akar4_fit.png")
    parser.add_argument("--no-plot", action="store_true", help="skip the plot")
    parser.add_argument("--no-progressbar", action="store_true")
    args = parser.parse_args(argv)
    if args.parameterisation is None:
        args.parameterisation = "specificity" if args.prior == "normal" else "rates"
    return args


def output_function(system: OdeSystem, name: str, module):
    """``f(y)`` evaluating the JSON output ``name`` on states ``y[..., N]``.

    ``module`` is ``numpy`` or ``pytensor.tensor``: the functions an output may
    use (exp, log, ...) are taken from it.
    """
    import sympy as sp

    functions = {f: getattr(module, f) for f in ("exp", "log", "sqrt", "tanh", "abs")}
    function = sp.lambdify(system.state_symbols, system.outputs[name], modules=[functions])
    return lambda y: function(*[y[..., i] for i in range(system.n_states)])


def load_experiments(system: OdeSystem) -> dict:
    """Initial states (E, N), times, data and standard deviations (E, T) of the experiments."""
    import numpy as np

    experiments = system.experiments
    t0 = {float(e.get("t0", system.t0)) for e in experiments}
    if len(t0) != 1:
        raise ValueError(f"the experiments start at different times {sorted(t0)}")
    y0 = np.array(
        [
            [e["x0_overrides"].get(s, x) for s, x in zip(system.states, system.x0)]
            for e in experiments
        ]
    )
    return {
        "ids": [e["id"] for e in experiments],
        "t0": t0.pop(),
        "y0": y0,
        "times": np.array([e["times"] for e in experiments]),
        "data": np.array([e["data"][OUTPUT] for e in experiments]),
        "stdv": np.array([e["stdv"][OUTPUT] for e in experiments]),
    }


def log10_prior(name: str, prior: str, centre, lower, upper, shift=0.0):
    """Prior of ``log10(k) - shift``: normal (sd 1) or uniform (the article's box)."""
    import pymc as pm

    if prior == "normal":
        return pm.Normal(name, mu=centre - shift, sigma=1.0)
    return pm.Uniform(name, lower=lower - shift, upper=upper - shift)


def build_model(
    system: OdeSystem,
    exp: dict,
    prior: str = "normal",
    parameterisation: str = "specificity",
    rtol: float = 1e-8,
    atol: float = 1e-10,
    sensitivity: str = "auto",
    pbs_options: dict | None = None,
) -> pm.Model:
    """The PyMC model: log10 rate constants, three experiments, Normal likelihood.

    ``sensitivity`` (and ``pbs_options``) choose the gradient route of
    :func:`pymc_odesens.ode_solution` (``"auto"`` picks forward sensitivities here;
    ``benchmarks/bench_pbs_pymc.py`` compares them with ``"pbsr"`` and ``"exp"``).

    ``parameterisation="rates"`` samples ``log10`` of ``kf, kb, kcat``.
    ``"specificity"`` samples ``log10 kb``, ``log10 kcat`` and ``log10`` of the
    specificity constant ``k_eff = kf kcat / (kb + kcat)`` (``kcat / K_M``)
    instead of ``log10 kf``. The data determine ``k_eff`` sharply whatever
    ``kb`` and ``kcat`` are, whereas ``kf`` alone bends with them when
    ``kcat`` is small, a curved ridge NUTS crosses with divergences. The map
    ``log10 kf = log10 k_eff + log10(1 + kb / kcat)`` is a shift given
    ``kb, kcat`` (unit Jacobian), so the prior on ``log10 kf`` is kept exactly
    by shifting its centre or bounds.
    """
    import numpy as np
    import pymc as pm
    import pytensor.tensor as pt

    from pymc_odesens import ode_solution

    names = system.params
    centre = dict(zip(names, np.log10(system.p_nominal)))
    box = system.spec["prior"]
    lower = dict(zip(names, box["log10_lower"]))
    upper = dict(zip(names, box["log10_upper"]))
    coords = {
        "parameter": names,
        "experiment": exp["ids"],
        "time_index": np.arange(exp["times"].shape[1]),
    }
    observable = output_function(system, OUTPUT, pt)
    with pm.Model(coords=coords) as model:
        if parameterisation == "rates":
            log10_k = pt.stack(
                [log10_prior(f"log10_{n}", prior, centre[n], lower[n], upper[n]) for n in names]
            )
        else:
            kf, kb, kcat = names
            log10_kb = log10_prior(f"log10_{kb}", prior, centre[kb], lower[kb], upper[kb])
            log10_kcat = log10_prior(f"log10_{kcat}", prior, centre[kcat], lower[kcat], upper[kcat])
            shift = pt.log10(1.0 + 10.0 ** (log10_kb - log10_kcat))
            log10_keff = log10_prior("log10_k_eff", prior, centre[kf], lower[kf], upper[kf], shift)
            log10_k = pt.stack([log10_keff + shift, log10_kb, log10_kcat])
        log10_k = pm.Deterministic("log10_k", log10_k, dims="parameter")
        k = pm.Deterministic("k", 10.0**log10_k, dims="parameter")
        y = ode_solution(
            system,
            exp["y0"],  # (E, N): one row per experiment, so y is (E, T, N)
            exp["times"],
            k,  # (P,): shared by the experiments
            t0=exp["t0"],
            method="bdf",
            sensitivity=sensitivity,
            pbs_options=pbs_options,
            relative_tolerance=rtol,
            absolute_tolerance=atol,
        )
        pm.Normal(
            OUTPUT,
            mu=observable(y),
            sigma=exp["stdv"],
            observed=exp["data"],
            dims=("experiment", "time_index"),
        )
    return model


def predictive_trajectories(system, exp, k_draws, times, rtol, atol) -> np.ndarray:
    """Output ``AKAR4pOUT`` (draws, E, T) for parameter draws (draws, P)."""
    import numpy as np

    from pymc_odesens import solve

    observable = output_function(system, OUTPUT, np)
    out = np.empty((len(k_draws), len(exp["ids"]), times.size))
    for d, k in enumerate(k_draws):
        for e, y0 in enumerate(exp["y0"]):
            y = solve(
                system,
                y0,
                times,
                k,
                t0=exp["t0"],
                method="bdf",
                relative_tolerance=rtol,
                absolute_tolerance=atol,
            ).y
            out[d, e] = observable(y)
    return out


def plot_fit(system, exp, idata, args) -> Path:
    """Per experiment: the data with their stated sd, posterior trajectories of the output,
    the 90 % posterior predictive band at the data times, and the parameter table's fit."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = idata.posterior["k"].values.reshape(-1, system.n_params)
    rng = np.random.default_rng(args.seed)
    chosen = rng.choice(len(k), size=min(args.trajectories, len(k)), replace=False)
    times = np.linspace(exp["t0"], exp["times"].max(), 400)
    draws = predictive_trajectories(system, exp, k[chosen], times, args.rtol, args.atol)
    nominal = predictive_trajectories(system, exp, [system.p_nominal], times, args.rtol, args.atol)
    # posterior predictive at the data times: the output of each draw plus the stated noise
    # (several noise draws per trajectory, so that the band's quantiles are smooth)
    at_data = np.stack(
        [
            np.stack(
                [np.interp(exp["times"][e], times, draws[d, e]) for e in range(len(exp["ids"]))]
            )
            for d in range(len(draws))
        ]
    )
    noise_draws = max(1, 4000 // len(draws))
    predictive = at_data[:, None] + exp["stdv"] * rng.standard_normal(
        (len(draws), noise_draws, *at_data.shape[1:])
    )
    band = np.quantile(predictive.reshape(-1, *at_data.shape[1:]), [0.05, 0.95], axis=0)

    units = system.spec.get("units", {})
    time_unit = units.get("time")
    concentration = units.get("concentration", "")
    n_e = len(exp["ids"])
    fig, axes = plt.subplots(1, n_e, figsize=(4.2 * n_e, 4), sharey=True)
    for e, ax in enumerate(np.atleast_1d(axes)):
        t, data, sd = exp["times"][e], exp["data"][e], exp["stdv"][e]
        ax.fill_between(
            t,
            band[0, e],
            band[1, e],
            color="C0",
            alpha=0.2,
            lw=0,
            label="posterior predictive 90 %",
        )
        for d in range(len(draws)):
            ax.plot(times, draws[d, e], color="C0", alpha=0.08, lw=1)
        ax.plot([], [], color="C0", label=f"output of {len(draws)} posterior draws")
        ax.plot(t, data, ".", color="0.25", ms=2.5, label="data")
        every = max(1, len(t) // 20)  # error bars on some points: all would hide the data
        ax.errorbar(
            t[::every],
            data[::every],
            yerr=sd[::every],
            fmt="none",
            ecolor="0.25",
            elinewidth=0.8,
            capsize=2,
            label="stated sd of the data" + (f" (every {every}th point)" if every > 1 else ""),
        )
        ax.plot(times, nominal[0, e], "--", color="C3", lw=1, label="parameter table values")
        c0 = exp["y0"][e][system.states.index("C")]
        ax.set_title(f"experiment {exp['ids'][e]} (C(t0) = {c0:g} {concentration})".strip())
        ax.set_xlabel(f"time [{time_unit}]" if time_unit else "time (no unit stated)")
    axes[0].set_ylabel(f"{OUTPUT} = {system.spec['outputs'][OUTPUT]}\n(no unit stated)")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle("AKAR4 phosphorylation: data and posterior (NUTS)")
    fig.tight_layout()
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.plot, dpi=120)
    plt.close(fig)
    return args.plot


def note_missing_blas() -> None:
    """Say once, plainly, what PyTensor's "could not link to a BLAS" warning means here.

    PyTensor looks for a BLAS library to link its C code against when it first needs one,
    and warns when there is none (the usual case after ``pip install``). Reading the setting
    here, with that warning silenced, runs the search once; the note replaces the warning.
    """
    import warnings

    import pytensor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        linked = pytensor.config.blas__ldflags
    if not linked:
        print(
            "note: PyTensor found no BLAS library to link its C code against (usual after a "
            "pip install). That slows only the matrix products PyTensor compiles to C in its "
            "default mode, which are small here; the ODE solves run in pymc_odesens' compiled "
            "solvers, so the warning is harmless for this example."
        )


def main(argv=None) -> dict:
    args = parse_args(argv)
    started = STARTED if __name__ == "__main__" else time.perf_counter()
    import arviz as az

    import pymc_odesens
    from pymc_odesens import OdeSystem

    note_missing_blas()
    system = OdeSystem.from_json(MODEL_PATH)
    exp = load_experiments(system)
    print(
        f"{system.name}: {system.n_states} states, {system.n_params} parameters, "
        f"{len(exp['ids'])} experiments x {exp['times'].shape[1]} data points"
    )
    model = build_model(system, exp, args.prior, args.parameterisation, args.rtol, args.atol)
    with model:
        # pm.sample with the log-density compiled in NUMBA mode (docs/pymc.md)
        idata = pymc_odesens.sample(
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            cores=args.cores,
            target_accept=args.target_accept,
            random_seed=args.seed,
            progressbar=not args.no_progressbar,
        )
    setup_time, sample_time = pymc_odesens.inference.sampling_times(idata)

    summary = az.summary(idata, var_names=["log10_k", "k"], round_to=4)
    print(summary.to_string())
    checks = pymc_odesens.convergence_report(idata, var_names=["log10_k", "k"])
    posterior_mean = idata.posterior["k"].mean(("chain", "draw")).values
    print(
        f"\nprior: {args.prior}, parameterisation: {args.parameterisation}; "
        f"bdf rtol {args.rtol:g}, atol {args.atol:g}; "
        f"{args.chains} chains x {args.draws} draws ({args.tune} tuning), "
        f"target_accept {args.target_accept}"
    )
    print(checks)
    print(f"\n{'parameter':<12}{'p_nominal':>12}{'post. mean':>12}{'post. median':>14}")
    median = idata.posterior["k"].median(("chain", "draw")).values
    for name, nom, mean, med in zip(system.params, system.p_nominal, posterior_mean, median):
        print(f"{name:<12}{nom:>12.4g}{mean:>12.4g}{med:>14.4g}")

    plot = None
    if not args.no_plot:
        try:
            plot = plot_fit(system, exp, idata, args)
            print(f"\nplot written to {plot}")
        except ImportError:
            print("\nmatplotlib is not installed: skipping the plot (pip install '.[examples]')")
    print(pymc_odesens.inference.times_line(idata, started))
    return {
        "idata": idata,
        "summary": summary,
        "checks": checks,
        "divergences": checks.divergences,
        "rhat_max": checks.rhat_max,
        "ess_bulk_min": checks.ess_bulk_min,
        "posterior_mean": posterior_mean,
        "p_nominal": system.p_nominal,
        "setup_time": setup_time,
        "sample_time": sample_time,
        "total_time": time.perf_counter() - started,
        "plot": plot,
    }


if __name__ == "__main__":
    main()
