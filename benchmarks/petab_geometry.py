"""The shape of a PEtab posterior where NUTS samples it: at the mode, along its flattest directions.

NUTS samples the PyMC model's value variables (each parameter on the interval transform of
its bounds). This script looks for the posterior mode in those coordinates
(``pymc_odesens.find_posterior_mode``: L-BFGS-B on the model's log-density and exact
gradient, from the nominal values; on a ridge it stops where its line search fails, and the
gradient norm there is printed), takes the Hessian there (central differences of the exact
gradient, ``--fd-step``; the smallest eigenvalues depend on the step, the shape below does
not), and walks along the eigenvectors of the smallest
eigenvalues. For a posterior close to a Gaussian, one Laplace standard deviation
along an eigenvector lowers the log-density by 0.5 and three by 4.5; much larger drops mean
the posterior's flat directions are curved ridges, which a constant mass matrix cannot
straighten: NUTS then needs a step size set by the ridges' narrowest width and long
trajectories along them. The eigenvalues' ratio is the condition number a perfect constant
mass matrix would remove at the mode. The stiffest direction is walked as well: its drops
show whether the Hessian is right there. Caveat: at condition numbers of about 1e6 and more
the eigenvectors of the smallest eigenvalues from a finite-difference Hessian are not
accurate enough for the walk (an error of 1 % towards a direction of eigenvalue 5e6 lowers
the log-density by thousands over two standard deviations of a flat one), so large drops
there do not prove curved ridges.

Nothing here is timed.

Run:  python benchmarks/petab_geometry.py \
          ../shared/petab/Fujita_SciSignal2010/Fujita_SciSignal2010.yaml
"""

from __future__ import annotations

import argparse
from pathlib import Path

import common
import numpy as np

from pymc_odesens.inference.mode_metric import find_posterior_mode, negative_hessian
from pymc_odesens.petab import PetabProblem


def model_functions(model):
    """Negative log-density and its gradient of the PyMC model over the value variables."""
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    names = [v.name for v in model.value_vars]

    def point(z):
        return {n: np.asarray(value) for n, value in zip(names, z)}

    def negative(z):
        return -float(logp(point(z)))

    def negative_gradient(z):
        return -np.asarray(dlogp(point(z)), dtype=float)

    return names, negative, negative_gradient


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", type=Path, help="PEtab YAML file")
    parser.add_argument("--directions", type=int, default=5, help="flattest directions (5)")
    parser.add_argument("--fd-step", type=float, default=1e-3, help="Hessian's step (1e-3)")
    parser.add_argument(
        "--output", default=None, help="results name: writes benchmarks/results/NAME.json"
    )
    args = parser.parse_args(argv)
    problem = PetabProblem.from_yaml(args.problem)
    model = problem.build_model()
    names, negative, negative_gradient = model_functions(model)
    found = find_posterior_mode(model, compile_kwargs={})
    assert list(found.value_variables) == names
    mode, mode_value = found.vector, -found.log_density
    print(
        f"{problem.name}: {len(names)} value variables; log-density at the mode "
        f"{found.log_density:.4f}, gradient norm there {found.gradient_norm:.2e} "
        f"({found.iterations} iterations: {found.message})"
    )
    values, vectors = np.linalg.eigh(
        negative_hessian(lambda z: -negative_gradient(z), mode, args.fd_step)
    )
    print("eigenvalues of the negative Hessian:", np.array2string(values, precision=3))
    print(f"condition number at the mode: {values[-1] / values[0]:.3g}")
    steps = (-3, -2, -1, 1, 2, 3)
    print(f"\nlog-density drop at k = {steps} Laplace standard deviations along eigenvectors")
    print(f"(a Gaussian: {[0.5 * k * k for k in steps]}), and the three variables that make")
    print("up most of the direction; the stiffest direction first, for comparison")
    flattest = list(range(min(args.directions, len(values))))
    directions = []
    for j in [len(values) - 1, *flattest]:
        sd = 1.0 / np.sqrt(values[j]) if values[j] > 0 else float("inf")
        drops = []
        for k in steps:
            try:
                drops.append(negative(mode + k * sd * vectors[:, j]) - mode_value)
            except Exception:  # a failed solve far along the direction
                drops.append(float("nan"))
        top = [names[t] for t in np.argsort(-np.abs(vectors[:, j]))[:3]]
        print(f"  eigenvalue {values[j]:.3g}, sd {sd:.3g}: {np.round(drops, 2)}  {top}")
        directions.append({"eigenvalue": values[j], "sd": sd, "drops": drops, "variables": top})
    output = {
        "problem": problem.name,
        "mode_logp": found.log_density,
        "eigenvalues": values.tolist(),
        "steps_sd": list(steps),
        "stiffest": directions[0],
        "flattest": directions[1:],
    }
    if args.output:
        print(f"wrote {common.write_results(args.output, output)}")
    return output


if __name__ == "__main__":
    main()
