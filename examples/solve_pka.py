"""Solve the PKA signalling model (11 states, 35 parameters) with all four methods.

The model is the protein kinase A activation example of Eriksson, Kramer,
Milinanni and Nyquist, "Sensitivity Approximation by the Peano-Baker Series"
(arXiv:2109.00067), as transcribed in ``examples/data/pka.json`` (its
``source`` field gives the repository and commit). It is stiff: ``bdf`` is the
method of choice, ``adams`` and the explicit methods are shown for contrast.

Run:  python examples/solve_pka.py            (writes examples/output/pka_trajectory.png)
      python examples/solve_pka.py --help     (methods, tolerances, output times, plot)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


METHODS = ("bdf", "adams", "rk45", "ckrk")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=METHODS,
        default=list(METHODS),
        help="methods to run; the first is the reference of the differences (all four)",
    )
    parser.add_argument("--rtol", type=float, default=1e-6, help="relative tolerance (1e-6)")
    parser.add_argument("--atol", type=float, default=1e-8, help="absolute tolerance (1e-8)")
    parser.add_argument("--output-times", type=int, default=121, help="output times (121)")
    parser.add_argument("--no-plot", action="store_true", help="do not write the plot")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    started = time.perf_counter()
    import numpy as np

    from pymc_odesens import OdeSystem, solve

    system = OdeSystem.from_json(HERE / "data" / "pka.json")
    times = np.linspace(system.t0, system.t_end, args.output_times)
    print(f"{system.name}: {system.n_states} states, {system.n_params} parameters")

    results = {}
    for method in args.methods:
        start = time.perf_counter()
        result = solve(
            system,
            system.x0,
            times,
            system.p_nominal,
            method=method,
            relative_tolerance=args.rtol,
            absolute_tolerance=args.atol,
        )
        first = time.perf_counter() - start
        start = time.perf_counter()
        solve(
            system,
            system.x0,
            times,
            system.p_nominal,
            method=method,
            relative_tolerance=args.rtol,
            absolute_tolerance=args.atol,
        )
        warm = time.perf_counter() - start
        results[method] = result
        print(
            f"  {method:5s}: {result.stats['n_steps']:6d} steps, "
            f"{result.stats['n_rhs_evals']:7d} rhs evaluations, "
            f"first call {first:7.3f} s (includes compilation), warm call {warm * 1e3:8.3f} ms"
        )

    first_method = args.methods[0]
    reference = results[first_method].y
    for method, result in results.items():
        if method == first_method:
            continue
        diff = np.abs(result.y - reference).max()
        print(f"  max |y_{method} - y_{first_method}| = {diff:.2e}")

    print(f"\n{first_method} trajectory (every 20th output time):")
    header = "t".rjust(8) + "".join(s[:11].rjust(12) for s in system.states)
    print(header)
    for i in range(0, times.size, 20):
        row = f"{times[i]:8.1f}" + "".join(f"{v:12.4g}" for v in reference[i])
        print(row)
    if args.no_plot:
        print(f"time: in all {time.perf_counter() - started:.1f} s")
        return results
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\nmatplotlib is not installed: skipping the plot (pip install '.[examples]')")
        return results
    out_dir = HERE / "output"
    out_dir.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, name in enumerate(system.states):
        if np.abs(reference[:, i]).max() > 0:
            ax.plot(times, reference[:, i], label=name)
    units = system.spec.get("units", {})
    ax.set_xlabel(f"time [{units['time']}]" if "time" in units else "time (no unit stated)")
    ax.set_ylabel(
        f"concentration [{units['concentration']}]"
        if "concentration" in units
        else "concentration (no unit stated)"
    )
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.set_title(f"PKA activation ({first_method}, rtol {args.rtol:g}, atol {args.atol:g})")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = out_dir / "pka_trajectory.png"
    fig.savefig(path, dpi=120)
    print(f"\nplot written to {path.relative_to(HERE.parent)}")
    print(f"time: in all {time.perf_counter() - started:.1f} s")
    return results


if __name__ == "__main__":
    main()
