"""The waterfall plot of a multistart search (pyPESTO's ``visualize.waterfall``).

Each start's final objective (minus its log-posterior), sorted from the best, against its
rank. The y axis is the difference to the best objective on a log scale; starts within
the search's ``objective_tolerance`` of the best (which a log scale cannot show at 0) are
drawn on a floor line just below the smallest difference above it. A plateau of points on
the floor is the number of starts that found the best optimum; steps are other local
optima. Colours follow the clusters; failed starts are counted in the title.
"""

from __future__ import annotations

import numpy as np

__all__ = ["plot_waterfall"]


def plot_waterfall(result, ax=None, path=None):
    """Draw ``result``'s waterfall plot (see the module docstring).

    Parameters
    ----------
    result : ModeSearchResult
    ax : matplotlib.axes.Axes, optional
    path : str or path-like, optional
        Write the figure there too.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib

    if ax is None:
        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6.4, 4.0))
    ok = [r for r in result.starts if not r.failed]
    n_failed = len(result.starts) - len(ok)
    title = (
        f"{len(result.starts)} starts ({result.method}), {n_failed} failed; "
        f"{len(result.clusters)} optima"
    )
    if not ok:
        ax.set_title(title)
        ax.text(0.5, 0.5, "every start failed", ha="center", transform=ax.transAxes)
    else:
        objective = np.array([-r.log_posterior for r in ok])
        difference = objective - objective[0]
        above = difference[difference > result.objective_tolerance]
        floor = min(result.objective_tolerance, above.min() / 10 if above.size else 1.0)
        shown = np.where(difference > result.objective_tolerance, difference, floor)
        cluster_of = {i: k for k, c in enumerate(result.clusters) for i in c.members}
        colours = [cluster_of[r.index] for r in ok]
        ranks = np.arange(1, len(ok) + 1)
        ax.plot(ranks, shown, color="0.7", linewidth=1, zorder=1)
        ax.scatter(ranks, shown, c=colours, cmap="tab10", vmin=0, vmax=9, s=25, zorder=2)
        ax.axhline(floor, color="0.5", linestyle=":", linewidth=1)
        ax.set_yscale("log")
        n_best = int(np.sum(difference <= result.objective_tolerance))
        ax.set_title(f"{title}; {n_best} at the best (log-posterior {-objective[0]:.6g})")
        ax.set_ylabel("objective - best objective (floor: at the best)")
    ax.set_xlabel("start, sorted by final objective")
    if path is not None:
        ax.figure.savefig(path, dpi=120, bbox_inches="tight")
    return ax
