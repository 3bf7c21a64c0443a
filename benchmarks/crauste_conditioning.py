"""Why Crauste_CellSystems2017's gradient needs tight tolerances (docs/petab.md,
"Ill-conditioned gradients"; nothing timed).

The problem is not in ../shared/petab: pass its folder of the benchmark collection::

    python benchmarks/crauste_conditioning.py --folder .../Benchmark-Models/Crauste_CellSystems2017

Sections (``--sections``, default all):

reference  the exact log-likelihood and gradient: scipy's DOP853 and Radau on the states and
           forward sensitivities (Jacobian by hand, df/dp by complex step) at rtol 1e-13;
structure  the weighted sensitivity matrix's singular values, how far the gradient's
           measurement terms cancel, the Gauss-Newton curvature along the gradient, the
           Jacobian's eigenvalues along the trajectory, the amplification of a relative
           perturbation of the initial state;
windows    the gradient's error when one time window alone is integrated at rtol 1e-8 (DOP853,
           1e-13 elsewhere): where the error comes from;
blowup     the distance (log10 units) from the nominal values to a finite-time blow-up along
           rho_E, rho_P and delta_EL (bisection on whether DOP853 reaches t = 28);
sweep      our gradient at rtol 1e-8 ... 1e-15 (atol 1e-16) by each route, its error, the
           difference to the next looser one, and what ``gradient_check`` chooses; scipy's
           BDF, LSODA, RK45 and DOP853 at rtol = atol = 1e-8 and 1e-10.

AMICI at several tolerances (its forward and adjoint gradients) comes from
``benchmarks/peers/amici_petab_runner.py --yaml <folder>/Crauste_CellSystems2017.yaml --rtol R
--atol A --repeats 1`` (run with the AMICI virtualenv's interpreter).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.integrate import solve_ivp

STATES = ("Naive", "EarlyEffector", "LateEffector", "Memory", "Pathogen")
Y0 = np.array([8090.0, 0.0, 0.0, 0.0, 1.0])
T_END = 28.0


class Crauste:
    """The model's right-hand side, Jacobian and forward sensitivities (numpy)."""

    def __init__(self, folder: Path):
        name = folder.name
        self.parameters = pd.read_csv(folder / f"parameters_{name}.tsv", sep="\t")
        self.ids = list(self.parameters.parameterId)
        self.p0 = self.parameters.nominalValue.to_numpy(dtype=float)
        self.measurements = pd.read_csv(folder / f"measurementData_{name}.tsv", sep="\t")
        self.times = np.unique(self.measurements.time.to_numpy(dtype=float))
        self.index = {pid: k for k, pid in enumerate(self.ids)}

    def rhs(self, t, y, p):
        N, E, L, M, P = y  # noqa: N806
        q = {pid: p[k] for pid, k in self.index.items()}
        return np.array(
            [
                -q["mu_N"] * N - q["delta_NE"] * P * N,
                q["delta_NE"] * P * N + q["rho_E"] * E * P - q["mu_EE"] * E * E - q["delta_EL"] * E,
                q["delta_EL"] * E - q["mu_LL"] * L * L - q["mu_LE"] * E * L - q["delta_LM"] * L,
                q["delta_LM"] * L,
                q["rho_P"] * P * P - q["mu_PE"] * E * P - q["mu_PL"] * L * P - q["mu_P"] * P,
            ]
        )

    def jacobian(self, t, y, p):
        N, E, L, M, P = y  # noqa: N806
        q = {pid: p[k] for pid, k in self.index.items()}
        J = np.zeros((5, 5))  # noqa: N806
        J[0, 0] = -q["mu_N"] - q["delta_NE"] * P
        J[0, 4] = -q["delta_NE"] * N
        J[1, 0] = q["delta_NE"] * P
        J[1, 1] = q["rho_E"] * P - 2 * q["mu_EE"] * E - q["delta_EL"]
        J[1, 4] = q["delta_NE"] * N + q["rho_E"] * E
        J[2, 1] = q["delta_EL"] - q["mu_LE"] * L
        J[2, 2] = -2 * q["mu_LL"] * L - q["mu_LE"] * E - q["delta_LM"]
        J[3, 2] = q["delta_LM"]
        J[4, 1] = -q["mu_PE"] * P
        J[4, 2] = -q["mu_PL"] * P
        J[4, 4] = 2 * q["rho_P"] * P - q["mu_PE"] * E - q["mu_PL"] * L - q["mu_P"]
        return J

    def jacobian_p(self, t, y, p):
        out = np.zeros((5, len(p)))
        for k in range(len(p)):
            pc = p.astype(complex)
            pc[k] += 1e-30j
            out[:, k] = self.rhs(t, y.astype(complex), pc).imag / 1e-30
        return out

    def augmented(self, t, z, p):
        n = len(p)
        y, S = z[:5], z[5:].reshape(5, n)  # noqa: N806
        dS = self.jacobian(t, y, p) @ S + self.jacobian_p(t, y, p)  # noqa: N806
        return np.concatenate([self.rhs(t, y, p), dS.ravel()])

    def solve(self, p, rtol, atol, method="DOP853", windows=None):
        """States and sensitivities at the measurement times; ``windows``: ``(a, b, rtol)``
        integrates [a, b] at that tolerance instead."""
        z = np.concatenate([Y0, np.zeros(5 * len(p))])
        knots = sorted({0.0, T_END, *self.times, *(windows[:2] if windows else ())})
        out = {}
        for t0, t1 in zip(knots[:-1], knots[1:]):
            r = rtol
            if windows and t0 >= windows[0] and t1 <= windows[1]:
                r = windows[2]
            sol = solve_ivp(
                self.augmented, (t0, t1), z, method=method, args=(p,), rtol=r, atol=atol * r / rtol
            )
            z = sol.y[:, -1]
            out[t1] = z.copy()
        Y = np.array([out[t][:5] for t in self.times])  # noqa: N806
        S = np.array([out[t][5:].reshape(5, len(p)) for t in self.times])  # noqa: N806
        return Y, S

    def terms(self, Y, S, p):  # noqa: N803
        """The log-likelihood and each measurement's term of the gradient (log10 scale)."""
        llh, rows = 0.0, []
        for _, r in self.measurements.iterrows():
            k = int(np.searchsorted(self.times, r.time))
            i = STATES.index(r.observableId.removeprefix("observable_"))
            s = float(r.noiseParameters)
            residual = r.measurement - Y[k, i]
            llh += -0.5 * np.log(2 * np.pi * s * s) - 0.5 * (residual / s) ** 2
            rows.append(residual / s**2 * S[k, i] * p * np.log(10))
        return llh, np.array(rows)

    def gradient(self, p, rtol, atol, method="DOP853", windows=None):
        Y, S = self.solve(p, rtol, atol, method, windows)  # noqa: N806
        llh, rows = self.terms(Y, S, p)
        return llh, rows.sum(axis=0)


def relative(g, exact):
    return np.linalg.norm(g - exact) / np.linalg.norm(exact)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--sections", default="reference,structure,windows,blowup,sweep")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    model = Crauste(args.folder.resolve())
    p0 = model.p0
    llh, exact = model.gradient(p0, 1e-13, 1e-16)
    print(f"exact (DOP853, rtol 1e-13): llh {llh!r}, |gradient| {np.linalg.norm(exact):.6g}")
    print("  gradient", np.array2string(exact, precision=8, max_line_width=200))
    if "reference" in sections:
        llh_r, radau = model.gradient(p0, 1e-13, 1e-16, method="Radau")
        print(f"Radau rtol 1e-13: llh {llh_r!r}, relative difference {relative(radau, exact):.2g}")

    if "structure" in sections:
        Y, S = model.solve(p0, 1e-13, 1e-16)  # noqa: N806
        _, rows = model.terms(Y, S, p0)
        print("cancellation, sum |terms| / |gradient| per parameter:")
        print("  ", np.array2string(np.abs(rows).sum(0) / np.abs(exact), precision=0))
        weighted = []
        for _, r in model.measurements.iterrows():
            k = int(np.searchsorted(model.times, r.time))
            i = STATES.index(r.observableId.removeprefix("observable_"))
            weighted.append(S[k, i] * p0 * np.log(10) / float(r.noiseParameters))
        R = np.array(weighted)  # noqa: N806
        _, singular, vt = np.linalg.svd(R)
        print(
            "singular values of the weighted sensitivities:", np.array2string(singular, precision=3)
        )
        cosine = abs(vt[0] @ exact) / np.linalg.norm(exact)
        print(f"cosine of the gradient with the first right singular vector: 1 - {1 - cosine:.2g}")
        unit = exact / np.linalg.norm(exact)
        print(f"Gauss-Newton curvature along the gradient: {unit @ R.T @ R @ unit:.3g}")
        ts = np.linspace(0, T_END, 2801)
        sol = solve_ivp(
            model.rhs,
            (0, T_END),
            Y0,
            method="DOP853",
            t_eval=ts,
            args=(p0,),
            rtol=1e-13,
            atol=1e-10,
        )
        lam = np.array(
            [np.linalg.eigvals(model.jacobian(t, y, p0)).real.max() for t, y in zip(ts, sol.y.T)]
        )
        print(
            f"largest real part of the Jacobian's eigenvalues: {lam.max():.3g} at t = "
            f"{ts[lam.argmax()]:.2f}; integral of its positive part over [0, 28]: "
            f"{np.trapezoid(np.maximum(lam, 0), ts):.3g}"
        )
        print(
            "states' ranges:",
            {
                s: (f"{lo:.3g}", f"{hi:.3g}")
                for s, lo, hi in zip(STATES, sol.y.min(1), sol.y.max(1))
            },
        )

        def variational(t, z):
            F = z[5:].reshape(5, 5)  # noqa: N806
            return np.concatenate(
                [model.rhs(t, z[:5], p0), (model.jacobian(t, z[:5], p0) @ F).ravel()]
            )

        probe = [4, 6, 8, 10, 11, 13, 28]
        s2 = solve_ivp(
            variational,
            (0, T_END),
            np.concatenate([Y0, np.eye(5).ravel()]),
            method="DOP853",
            t_eval=probe,
            rtol=1e-13,
            atol=1e-10,
        )
        for k, t in enumerate(s2.t):
            F, y = s2.y[5:, k].reshape(5, 5), s2.y[:5, k]  # noqa: N806
            scaled = F * np.maximum(np.abs(Y0), 1)[None, :] / np.maximum(np.abs(y), 1)[:, None]
            print(
                f"  t = {t:4g}: amplification of a relative perturbation of the initial "
                f"state {np.abs(scaled).max():.3g}"
            )

    if "windows" in sections:
        print("gradient error with rtol 1e-8 on one window only (1e-13 elsewhere):")
        for a, b in [
            (0, 28),
            (0, 4),
            (4, 6),
            (6, 7),
            (7, 8),
            (8, 9),
            (9, 10),
            (10, 11),
            (11, 13),
            (13, 28),
        ]:
            _, g = model.gradient(p0, 1e-13, 1e-16, windows=(a, b, 1e-8))
            cosine = (g - exact) @ exact / np.linalg.norm(g - exact) / np.linalg.norm(exact)
            print(
                f"  [{a:2}, {b:2}]: relative error {relative(g, exact):.3g}, cosine with the "
                f"gradient {cosine:+.6f}"
            )

    if "blowup" in sections:

        def reaches_the_end(k, h):
            p = p0.copy()
            p[k] *= 10**h
            sol = solve_ivp(
                model.rhs, (0, T_END), Y0, method="DOP853", args=(p,), rtol=1e-13, atol=1e-10
            )
            return sol.status == 0, sol.t[-1]

        for name, sign in [("rho_E", -1), ("rho_P", 1), ("delta_EL", 1)]:
            k = model.index[name]
            lo, hi = 0.0, 1e-4 * sign
            if reaches_the_end(k, hi)[0]:
                print(f"  {name}: no blow-up within {hi:g}")
                continue
            for _ in range(40):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if reaches_the_end(k, mid)[0] else (lo, mid)
            print(
                f"  {name}: blow-up {hi:+.3g} (log10) from the nominal value, at t = "
                f"{reaches_the_end(k, hi)[1]:.2f}"
            )

    if "sweep" in sections:
        from pymc_odesens.petab import PetabProblem

        yaml = args.folder / f"{args.folder.name}.yaml"
        for route in ("forward", "adjoint", "discrete_adjoint"):
            previous = None
            for e in range(8, 16):
                problem = PetabProblem.from_yaml(
                    yaml, relative_tolerance=10.0**-e, sensitivity=route, gradient_check=False
                )
                value, g = problem.log_likelihood_and_gradient()
                step = (
                    f", difference to rtol 1e-{e - 1}: {relative(previous, g):.3g}"
                    if previous is not None
                    else ""
                )
                print(
                    f"  {route:16} rtol 1e-{e}: llh {value:.11f}, relative error "
                    f"{relative(g, exact):.3g}{step}"
                )
                previous = g
            problem = PetabProblem.from_yaml(yaml, sensitivity=route)
            _, g = problem.log_likelihood_and_gradient()
            print(
                f"  {route:16} default options (gradient_check): rtol "
                f"{problem.tolerance_choice.relative_tolerance:g}, relative error "
                f"{relative(g, exact):.3g}"
            )
        for method in ("BDF", "LSODA", "RK45", "DOP853"):
            for rtol in (1e-8, 1e-10):
                value, g = model.gradient(p0, rtol, rtol, method=method)
                print(
                    f"  scipy {method:7} rtol = atol = {rtol:g}: llh {value:.11f}, relative "
                    f"error {relative(g, exact):.3g}"
                )


if __name__ == "__main__":
    main()
