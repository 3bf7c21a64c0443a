"""Which move would carry an SMC stage further: measured at a run's checkpointed state.

Run:  python benchmarks/smc_kernel_probe.py Fujita_SciSignal2010 \\
          --checkpoint /path/to/checkpoint/Fujita_SciSignal2010 --run 0 --particles 30

A run of ``sample_smc`` stopped by its time limit leaves its particles at the inverse
temperature ``beta`` it reached (``smc_checkpoint``). This probe loads them and, without
changing the run, measures at that ``beta`` for moves the library has or might have:

- independent Metropolis-Hastings from one Gaussian fitted to the particles (what
  ``kernel="auto"`` does at the hot stages) and from a mixture of ``K`` Gaussians, one per
  cluster of particles (weighted k-means in the population's whitened coordinates, each
  cluster's covariance shrunk towards its diagonal), inflated by 1 or 2: the mean
  acceptance probability of one proposal per particle drawn by weight;
- one HMC move of ``--n-leapfrog`` steps (``hmc_move``, the library's) at each step size,
  with the population's diagonal metric (``mass_matrix="diag"``, the default), its dense
  metric, and per cluster (the metric of the cluster ``c`` drawn from the particle's
  responsibilities, the end point accepted by HMC's test and then with probability
  ``min(1, p(c | x') / p(c | x))``, which keeps the target invariant): the mean
  acceptance and the mean jump in the population's standard deviations (dense whitening).

With ``--trajectory-tolerances RTOL ATOL``, the HMC moves with the diagonal and the dense
metric are also made with a trajectory model (``sample_smc``'s ``trajectory_model``: the
leapfrog steps follow the gradient of the problem solved at these tolerances, the end
point is accepted by the problem's own density), with the time per move; ``--kinds``
chooses the rows (``independent``, ``diag``, ``dense``, ``cluster``, ``diag-trajectory``,
``dense-trajectory``).

Every number is one draw per particle: a probe, not an estimate with an error.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import petab_yaml
from scipy.special import logsumexp


def weighted_kmeans(z: np.ndarray, w: np.ndarray, k: int, rng, iterations: int = 50):
    """Labels of ``z`` (rows) in ``k`` clusters, k-means++ seeded by the weights."""
    n = len(z)
    centres = [z[rng.choice(n, p=w / w.sum())]]
    for _ in range(1, k):
        d2 = np.min([((z - c) ** 2).sum(1) for c in centres], axis=0)
        p = w * d2
        centres.append(z[rng.choice(n, p=p / p.sum())])
    centres = np.array(centres)
    for _ in range(iterations):
        labels = np.argmin(((z[:, None] - centres[None]) ** 2).sum(2), 1)
        new = np.array(
            [
                np.average(z[labels == j], 0, w[labels == j]) if np.any(labels == j) else centres[j]
                for j in range(k)
            ]
        )
        if np.allclose(new, centres):
            break
        centres = new
    return labels


class GaussianMixture:
    """Per-cluster Gaussians of a weighted population (module docstring)."""

    def __init__(self, x, w, k, rng, covariance, inflate=1.0):
        whitening = np.linalg.cholesky(covariance)
        z = np.linalg.solve(whitening, (x - np.average(x, 0, w)).T).T
        labels = weighted_kmeans(z, w, k, rng)
        d = x.shape[1]
        self.means, self.choleskys, log_weights = [], [], []
        for j in range(k):
            members = labels == j
            if members.sum() < 2:
                continue
            wj, nj = w[members], int(members.sum())
            sj = np.cov(x[members].T, aweights=wj)
            floor = np.diag(np.maximum(np.diag(sj), 0.01 * np.diag(covariance)))
            s = (nj * sj + d * floor) / (nj + d) * inflate
            self.means.append(np.average(x[members], 0, wj))
            self.choleskys.append(np.linalg.cholesky(s))
            log_weights.append(np.log(wj.sum()))
        self.log_weights = np.array(log_weights) - logsumexp(log_weights)

    def components(self, x) -> np.ndarray:
        """``log pi_c + log N(x; m_c, S_c)`` per component."""
        out = []
        for m, chol, lw in zip(self.means, self.choleskys, self.log_weights):
            r = np.linalg.solve(chol, x - m)
            out.append(lw - 0.5 * r @ r - np.log(np.diag(chol)).sum())
        return np.array(out)

    def responsibilities(self, x) -> np.ndarray:
        c = self.components(x)
        return c - logsumexp(c)

    def log_density(self, x) -> float:
        """``log q(x)`` (the acceptance ratio of ``independent_move`` reads it)."""
        return float(logsumexp(self.components(x)))

    def draw(self, rng) -> np.ndarray:
        j = rng.choice(len(self.means), p=np.exp(self.log_weights))
        return self.means[j] + self.choleskys[j] @ rng.standard_normal(len(self.means[j]))


def independent_acceptance(target, state, proposal, indices, rng) -> tuple[float, int]:
    """Mean acceptance probability of one independent move (the library's
    ``independent_move``) of each particle of ``indices``, and the failed solves."""
    from pymc_odesens.inference.smc_independent import independent_move

    outcomes = [
        independent_move(
            target.evaluate,
            state.states.positions[i],
            state.states.evaluation(int(i)),
            state.beta,
            proposal,
            rng,
        )
        for i in indices
    ]
    return float(np.mean([o.acceptance for o in outcomes])), sum(o.failed for o in outcomes)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem")
    parser.add_argument("--checkpoint", required=True, help="the problem's checkpoint directory")
    parser.add_argument("--run", type=int, default=0)
    parser.add_argument("--particles", type=int, default=30)
    parser.add_argument("--clusters", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--step-sizes", type=float, nargs="+", default=[0.008, 0.015, 0.025, 0.04])
    parser.add_argument("--n-leapfrog", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--trajectory-tolerances", type=float, nargs=2, metavar=("RTOL", "ATOL"), default=None
    )
    parser.add_argument(
        "--kinds",
        nargs="+",
        default=["independent", "diag", "dense", "cluster", "diag-trajectory", "dense-trajectory"],
    )
    args = parser.parse_args(argv)

    from pymc_odesens.inference.smc_checkpoint import SmcCheckpoint
    from pymc_odesens.inference.smc_hmc import hmc_move
    from pymc_odesens.inference.smc_independent import PopulationGaussian
    from pymc_odesens.inference.smc_mass_matrix import (
        PopulationMetric,
        population_covariance,
        population_metric,
    )
    from pymc_odesens.inference.smc_target import TemperedTarget
    from pymc_odesens.petab import PetabProblem

    state = SmcCheckpoint(args.checkpoint).load(args.run)
    if state is None:
        raise SystemExit(f"--checkpoint: {args.checkpoint} holds no state of run {args.run}")
    problem = PetabProblem.from_yaml(petab_yaml(args.problem))
    target = TemperedTarget(problem.build_model(), {"mode": "NUMBA"})
    x, beta = state.states.positions, state.beta
    w = np.exp(state.log_weights)
    covariance = population_covariance(x, w)
    dense = PopulationMetric("dense", cholesky=np.linalg.cholesky(covariance))
    diag = population_metric(x, w, "diag")
    rng = np.random.default_rng(args.seed)
    indices = rng.choice(len(x), size=min(args.particles, len(x)), replace=False)
    print(
        f"{args.problem} run {args.run}: beta {beta:.4g} after {state.stage} stages, "
        f"{len(x)} particles ({len(indices)} probed), last step size {state.step_size:.4g}",
        flush=True,
    )

    traced = None
    if args.trajectory_tolerances is not None:
        rtol, atol = args.trajectory_tolerances
        loose = PetabProblem.from_yaml(
            petab_yaml(args.problem),
            relative_tolerance=rtol,
            absolute_tolerance=atol,
            gradient_check=False,
        )
        traced = TemperedTarget(problem.build_model(), trajectory_model=loose.build_model())
    kinds = [k for k in args.kinds if traced is not None or not k.endswith("-trajectory")]

    print("independent Metropolis-Hastings: proposal, mean acceptance, failed solves")
    proposals = {"one Gaussian": PopulationGaussian.of(x, w)}
    for k in args.clusters if "independent" in kinds else ():
        for inflate in (1.0, 2.0):
            mixture = GaussianMixture(
                x, w, k, np.random.default_rng(args.seed), covariance, inflate
            )
            proposals[f"{len(mixture.means)} clusters, x{inflate:g}"] = mixture
    for name, proposal in proposals.items() if "independent" in kinds else ():
        t0 = time.perf_counter()
        acceptance, failed = independent_acceptance(
            target, state, proposal, indices, np.random.default_rng(args.seed)
        )
        print(f"  {name:22s} {acceptance:.3f}  {failed}  ({time.perf_counter() - t0:.0f} s)")

    mixture = GaussianMixture(
        x, w, max(args.clusters), np.random.default_rng(args.seed), covariance
    )
    print(
        f"HMC, {args.n_leapfrog} leapfrog steps: step size, metric, mean acceptance, "
        "mean jump per move (population sds)"
    )
    metrics = {"diag": diag, "dense": dense, "diag-trajectory": diag, "dense-trajectory": dense}
    for step_size in args.step_sizes:
        for kind in [k for k in kinds if k != "independent"]:
            t0 = time.perf_counter()
            acceptances, jumps = [], []
            for i in indices:
                r = np.random.default_rng(1000 + int(i))
                metric, chosen, before = metrics.get(kind), None, None
                if metric is None:
                    before = mixture.responsibilities(x[i])
                    chosen = r.choice(len(before), p=np.exp(before))
                    metric = PopulationMetric("dense", cholesky=mixture.choleskys[chosen])
                moving, start, inner = target, state.states.evaluation(int(i)), None
                if kind.endswith("-trajectory"):
                    # the particle's gradient is the trajectory model's, as in sample_smc
                    moving, start, inner = traced, traced.evaluate(x[i]), traced.trajectory
                out = hmc_move(
                    moving.evaluate,
                    x[i],
                    start,
                    beta,
                    metric,
                    step_size,
                    args.n_leapfrog,
                    r,
                    trajectory=inner,
                )
                acceptance, moved = out.acceptance, out.accepted
                if chosen is not None and moved:
                    factor = np.exp(mixture.responsibilities(out.position)[chosen] - before[chosen])
                    acceptance = min(1.0, acceptance * factor)
                    moved = r.uniform() < min(1.0, factor)
                acceptances.append(acceptance)
                jumps.append(dense.squared_distance(out.position - x[i]) ** 0.5 if moved else 0.0)
            print(
                f"  {step_size:<6g} {kind:16s} {np.mean(acceptances):.3f}  {np.mean(jumps):.3f}  "
                f"({time.perf_counter() - t0:.1f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
