"""Convergence report of a saved trace (a NetCDF file from ``examples/petab_fit.py --save-trace``).

Prints what the closing notes quote about a long run: R-hat (rank-normalised split R-hat,
ArviZ) and bulk/tail ESS over all variables of the posterior, the divergences, step sizes,
leapfrog steps and log-density of every chain, and, for a trace continued with ``--resume``
(``sample_stats.attrs["resumed_draws"]``), the same summary line for the draws before and
after the continuation and for all of them.

``--split NAME THRESHOLD`` adds, per chain, the fraction of draws with ``NAME`` below the
threshold and how often a chain crossed it: how slowly the chains move between the arms of
a posterior shaped like an L (Bachmann_MSB2011's ``SOCS3RNATurn`` below -1.5 in docs/petab.md).

R-hat and the effective sample size are related: chains whose means differ only by their
Monte Carlo error (a posterior sd over the square root of each chain's ESS) have a
between-chain variance of about 1 / ESS of the within-chain one, so split R-hat - 1 is of
the order of 1 / (ESS per chain) (Bachmann's pooled run: 1.0866 at a bulk ESS of 21 in two
chains, 1 / 10.5 = 0.095). R-hat at most 1.01 thus asks for an ESS of the order of 100 per
chain in the slowest direction. The report prints the smallest bulk ESS per 1000 draws per
chain and the draws per chain that an ESS of 100 per chain would take at that rate (an
extrapolation, printed as one).

Nothing here is timed.

Run:  python benchmarks/trace_report.py bachmann.nc --split SOCS3RNATurn -1.5
"""

from __future__ import annotations

import argparse
from pathlib import Path

import arviz as az
import numpy as np


def convergence_line(idata: az.InferenceData, label: str) -> tuple[str, float, float]:
    """One line: R-hat max (and where), parameters above 1.01, smallest bulk and tail ESS."""
    summary = az.summary(idata, kind="diagnostics", round_to="none")
    rhat, bulk, tail = summary["r_hat"], summary["ess_bulk"], summary["ess_tail"]
    chains, draws = idata.posterior.sizes["chain"], idata.posterior.sizes["draw"]
    line = (
        f"{label}: {chains} chains x {draws} draws; R-hat max {rhat.max():.4f} "
        f"({rhat.idxmax()}), {(rhat > 1.01).sum()} of {len(rhat)} above 1.01; "
        f"bulk ESS min {bulk.min():.0f} ({bulk.idxmin()}), tail ESS min {tail.min():.0f}"
    )
    return line, float(rhat.max()), float(bulk.min())


def segment(idata: az.InferenceData, start: int | None, stop: int | None) -> az.InferenceData:
    """The posterior and sampler statistics of draws ``start:stop``."""
    draws = slice(start, stop)
    groups = {"posterior": idata.posterior.isel(draw=draws)}
    if "sample_stats" in idata.groups():
        groups["sample_stats"] = idata.sample_stats.isel(draw=draws)
    return az.InferenceData(**groups)


def _chain_values(stats, name: str, chain: int) -> np.ndarray:
    """A sampler statistic of one chain as floats, without the NaN a continuation gives the
    draws of a run that did not record it (``[nan]`` if nothing is left)."""
    if name not in stats:
        return np.array([np.nan])
    values = stats[name].values[chain].astype(float)
    values = values[np.isfinite(values)]
    return values if values.size else np.array([np.nan])


def chain_table(idata: az.InferenceData) -> list[str]:
    """Per chain: divergences, last step size, mean leapfrog steps, log-density mean and sd."""
    if "sample_stats" not in idata.groups():
        return ["(no sampler statistics)"]
    stats = idata.sample_stats
    rows = [
        "chain | divergences | step size (last) | leapfrog steps (mean) | log-density mean (sd)"
    ]
    for c in range(idata.posterior.sizes["chain"]):
        divergences = _chain_values(stats, "diverging", c)
        lp = _chain_values(stats, "lp", c)
        rows.append(
            f"{c} | {int(divergences.sum()) if 'diverging' in stats else 'n/a'} | "
            f"{_chain_values(stats, 'step_size', c)[-1]:.4g} | "
            f"{_chain_values(stats, 'n_steps', c).mean():.1f} | "
            f"{lp.mean():.1f} ({lp.std():.1f})"
        )
    return rows


def split_table(idata: az.InferenceData, name: str, threshold: float) -> list[str]:
    """Per chain: the fraction of draws with ``name`` below ``threshold`` and the crossings."""
    if name not in idata.posterior:
        raise SystemExit(f"--split: no variable {name!r} in the posterior")
    values = idata.posterior[name].values
    if values.ndim != 2:
        raise SystemExit(
            f"--split: expected a scalar variable, {name!r} has shape {values.shape[2:]}"
        )
    rows = [f"{name} < {threshold}: chain | fraction of draws | crossings"]
    for c, chain in enumerate(values):
        below = chain < threshold
        rows.append(f"{c} | {below.mean():.3f} | {int(np.abs(np.diff(below.astype(int))).sum())}")
    return rows


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path, help="NetCDF trace")
    parser.add_argument(
        "--split",
        nargs=2,
        metavar=("NAME", "THRESHOLD"),
        help="per chain: fraction of draws with NAME below THRESHOLD and crossings",
    )
    args = parser.parse_args(argv)
    idata = az.from_netcdf(args.trace)
    draws = idata.posterior.sizes["draw"]
    resumed = (
        int(idata.sample_stats.attrs.get("resumed_draws", 0))
        if "sample_stats" in idata.groups()
        else 0
    )
    lines, result = [], {}
    if 0 < resumed < draws:
        for label, start, stop in (
            (f"draws 0-{resumed - 1} (before the continuation)", None, resumed),
            (f"draws {resumed}-{draws - 1} (the continuation)", resumed, None),
        ):
            lines.append(convergence_line(segment(idata, start, stop), label)[0])
    line, rhat, ess = convergence_line(idata, "all draws")
    lines.append(line)
    per_chain = ess / idata.posterior.sizes["chain"]
    lines.append(
        f"smallest bulk ESS per chain: {per_chain:.1f}, i.e. {1000 * per_chain / draws:.1f} per "
        f"1000 draws per chain; at that rate an ESS of 100 per chain would take about "
        f"{100 * draws / per_chain:.0f} draws per chain (an extrapolation)"
    )
    lines += chain_table(idata)
    if args.split:
        lines += split_table(idata, args.split[0], float(args.split[1]))
    print("\n".join(lines))
    result.update(rhat_max=rhat, ess_bulk_min=ess, lines=lines)
    return result


if __name__ == "__main__":
    main()
