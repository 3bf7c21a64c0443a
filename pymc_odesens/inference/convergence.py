"""The usual convergence checks of a posterior sample, with the ones that fail said so.

A summary line such as ``R-hat max 1.0155`` means little to a reader who does not know the
thresholds. :func:`convergence_report` gives the four numbers every fit should be judged by
and flags each that fails its usual threshold (Vehtari et al. 2021, *Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC*, Bayesian
Analysis 16(2), doi:10.1214/20-BA1221; the Stan and ArviZ defaults):

- the largest rank-normalised split R-hat above :data:`RHAT_MAX` (1.01): the chains do not
  agree yet;
- the smallest bulk or tail effective sample size below :data:`ESS_MIN` (400): too few
  independent draws for reliable means or quantiles;
- any divergent transition: NUTS could not follow the posterior somewhere, and the draws
  may be biased there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ESS_MIN", "RHAT_MAX", "ConvergenceReport", "convergence_report"]

RHAT_MAX = 1.01
"""Largest acceptable R-hat."""

ESS_MIN = 400
"""Smallest acceptable bulk and tail effective sample size (of all chains together)."""


@dataclass
class ConvergenceReport:
    """The convergence checks of one posterior sample.

    Attributes
    ----------
    rhat_max : float
        The largest R-hat over the variables checked (NaN if none could be computed).
    ess_bulk_min, ess_tail_min : float
        The smallest bulk and tail effective sample sizes.
    divergences : int
        Divergent transitions after tuning (0 when the sampler reports none).
    rhat_variable, ess_bulk_variable, ess_tail_variable : str
        Where the extremes are (ArviZ's row labels, e.g. ``"k[kf]"``).
    problems : list of str
        One sentence per failed check; empty when all pass.
    """

    rhat_max: float
    ess_bulk_min: float
    ess_tail_min: float
    divergences: int
    rhat_variable: str = ""
    ess_bulk_variable: str = ""
    ess_tail_variable: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return not self.problems

    def lines(self) -> list[str]:
        """The numbers, then one line per failed check (``WARNING: ...``) or that none did."""
        numbers = (
            f"R-hat max {self.rhat_max:.4f}   ESS bulk min {self.ess_bulk_min:.0f}   "
            f"ESS tail min {self.ess_tail_min:.0f}   divergences {self.divergences}"
        )
        if self.passed:
            return [
                numbers,
                f"convergence checks passed (R-hat <= {RHAT_MAX}, bulk and tail ESS >= "
                f"{ESS_MIN}, no divergences)",
            ]
        return [numbers, *(f"WARNING: {problem}" for problem in self.problems)]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def convergence_report(idata, var_names=None) -> ConvergenceReport:
    """R-hat, bulk and tail ESS and divergences of ``idata``, each failed check flagged.

    Parameters
    ----------
    idata : arviz.InferenceData
        With a ``posterior`` group (and ``sample_stats`` for the divergences).
    var_names : list of str, optional
        Variables to check (default: every variable of the posterior).

    Returns
    -------
    ConvergenceReport
    """
    import arviz as az
    import numpy as np

    # unrounded: ArviZ's summary rounds R-hat to two decimals unless told otherwise
    summary = az.summary(idata, var_names=var_names, kind="diagnostics", round_to="none")
    rhat = summary["r_hat"].astype(float)
    bulk = summary["ess_bulk"].astype(float)
    tail = summary["ess_tail"].astype(float)
    stats = getattr(idata, "sample_stats", None)
    divergences = int(stats["diverging"].sum()) if stats is not None and "diverging" in stats else 0

    def extreme(values, largest: bool) -> tuple[float, str]:
        finite = values[np.isfinite(values)]
        if finite.empty:
            return float("nan"), ""
        label = finite.idxmax() if largest else finite.idxmin()
        return float(finite[label]), str(label)

    rhat_max, rhat_at = extreme(rhat, largest=True)
    bulk_min, bulk_at = extreme(bulk, largest=False)
    tail_min, tail_at = extreme(tail, largest=False)
    problems = []
    above = int((rhat > RHAT_MAX).sum())
    if above:
        problems.append(
            f"R-hat {rhat_max:.4f} of {rhat_at} is above {RHAT_MAX} ({above} of {len(rhat)} "
            "above): the chains do not agree yet; sample longer or look at the traces"
        )
    if not np.isfinite(rhat_max):
        problems.append("R-hat could not be computed (one chain, or too few draws)")
    for kind, value, at, column in (
        ("bulk", bulk_min, bulk_at, bulk),
        ("tail", tail_min, tail_at, tail),
    ):
        below = int((column < ESS_MIN).sum())
        if below:
            problems.append(
                f"{kind} ESS {value:.0f} of {at} is below {ESS_MIN} ({below} of {len(column)} "
                f"below): too few independent draws for reliable "
                f"{'means' if kind == 'bulk' else 'quantiles and intervals'}"
            )
    if divergences:
        problems.append(
            f"{divergences} divergent transition(s): NUTS could not follow the posterior "
            "somewhere, so the draws may be biased there (raise target_accept, or "
            "reparameterise)"
        )
    return ConvergenceReport(
        rhat_max=rhat_max,
        ess_bulk_min=bulk_min,
        ess_tail_min=tail_min,
        divergences=divergences,
        rhat_variable=rhat_at,
        ess_bulk_variable=bulk_at,
        ess_tail_variable=tail_at,
        problems=problems,
    )
