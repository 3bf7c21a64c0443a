"""Benchmark of forward sensitivities (issue "forward sensitivities") against scipy and AMICI.

Run:  python benchmarks/bench_forward_sensitivity.py
          (about 3-5 minutes; writes results/bench_forward_sensitivity.json)
      python benchmarks/bench_forward_sensitivity.py --quick --sizes 5,10

1. pka (11 states, 35 parameters), output times = the truth file's 61 points, rtol 1e-6 /
   atol 1e-8 on states and sensitivities alike:
   - ours: ``solve_sensitivity(method="bdf")`` and ``(method="adams")``;
   - scipy: ``solve_ivp`` BDF on the augmented N(1+P) = 396 system ``z = [y, S_0, ...,
     S_{P-1}]``, ``z' = [f, J_y S_k + J_p[:, k]]``, with numpy ``f``, ``J_y``, ``J_p``
     lambdified from sympy (``shared/models/load_model.py``) and the analytic block Jacobian
     ``I_{1+P} (x) J_y`` as a sparse (CSC) matrix - the Newton matrix CVODES uses too (the
     exact Jacobian adds d(J_y S)/dy blocks that Newton does not need);
   - AMICI: CVODES forward sensitivities (staggered corrector, AMICI's defaults), and, for
     context, its adjoint gradient of a Gaussian log-likelihood (a vector-Jacobian product,
     not the full S).
   Accuracy of every S against the truth file is printed next to its time.
2. Accuracy at rtol 1e-8 / atol 1e-10: S of ours (and AMICI's) against the truth.
3. Cost growth with P on the random linear system of the PBS paper (Eriksson et al.,
   arXiv:2109.00067, Sec. 6): ``x' = A x + p**2 + u``, ``A = -B^T B``, ``B`` (n x n) and ``p``
   uniform on [0, 1] (numpy ``default_rng(seed)``, B drawn first), ``u = 1``, n = N = P,
   ``x(0) = 0``, t in [0, 10] with 61 output times, bdf at rtol 1e-6 / atol 1e-8. Each n runs
   in its own subprocess (kernels are generated and cached per n); time per step of the plain
   solve and of forward sensitivities, with log-log fits of time per step against n. A size
   whose kernel compile exceeds ``--compile-timeout`` seconds is reported as such and larger
   sizes of that kind are skipped (their kernels are larger still). S is checked against the
   closed form ``x(t) = A^{-1} (e^{At} - I) c``, ``c = p**2 + u``.
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np
import scipy.sparse as sparse
from common import fmt_err, fmt_ms, fmt_ratio, print_table, progress
from peers.amici import run_amici
from random_linear import DEFAULT_SEED
from scipy.integrate import solve_ivp

GOALS = {"scipy_over_ours": 30.0, "amici_over_ours": 1.0, "S_rel_err_tight": 1e-4}
LOOSE = (1e-6, 1e-8)
TIGHT = (1e-8, 1e-10)
DEFAULT_SIZES = "10,20,30,40"

# ----------------------------------------------------------------------------- pka


def s_errors(S, truth_S) -> dict:
    return {
        "S_rel_err": common.relative_error(S, truth_S),
        "S_scaled_err": common.scaled_error(S, truth_S, axis=(0, 1)),
        "S_max_abs_err": float(np.abs(np.asarray(S) - truth_S).max()),
    }


def bench_ours(system, truth, method, rtol, atol, repeats):
    from pymc_odesens import solve_sensitivity

    row, res = common.time_reference_solve(
        solve_sensitivity, system, truth, method, rtol, atol, repeats, max_seconds=4.0
    )
    return {
        **row,
        "y_scaled_err": common.scaled_error(res.y, truth["y"], axis=0),
        **s_errors(res.S, truth["S"]),
    }


def augmented_system(reference):
    """numpy right-hand side and sparse block Jacobian of z = [y, S_0, ..., S_{P-1}]."""
    n, n_p = len(reference.y), len(reference.p)
    p = reference.p_nominal
    eye = sparse.identity(1 + n_p, format="csr")

    def fun(t, z):
        y = z[:n]
        s_blocks = z[n:].reshape(n_p, n)  # row k = dy/dp_k
        jy = reference.jac_y(t, y, p)
        jp = reference.jac_p(t, y, p)  # (N, P)
        ds = s_blocks @ jy.T + jp.T  # row k: J_y S_k + J_p[:, k]
        return np.concatenate([reference.rhs(t, y, p), ds.ravel()])

    def jac(t, z):
        return sparse.kron(eye, sparse.csr_matrix(reference.jac_y(t, z[:n], p)), format="csc")

    return fun, jac, n, n_p


def bench_scipy_augmented(reference, truth, rtol, atol, repeats):
    fun, jac, n, n_p = augmented_system(reference)
    z0 = np.concatenate([reference.x0, np.zeros(n * n_p)])
    times = truth["t"]

    def call():
        return solve_ivp(
            fun,
            (reference.t0, float(times[-1])),
            z0,
            method="BDF",
            t_eval=times,
            rtol=rtol,
            atol=atol,
            jac=jac,
        )

    timing = common.time_call(call, repeats=repeats, max_seconds=8.0)
    sol = timing["result"]
    out = {
        "solver": "scipy BDF augmented",
        "median_ms": timing["median_ms"],
        "min_ms": timing["min_ms"],
        "n_timed": timing["n"],
        "n_steps": None,
        "n_rhs_evals": int(sol.nfev),
        "n_jac_evals": int(sol.njev),
        "n_lu_decompositions": int(sol.nlu),
        "success": bool(sol.success),
    }
    if sol.success:
        z = sol.y.T
        y = z[:, :n]
        S = np.transpose(z[:, n:].reshape(len(times), n_p, n), (0, 2, 1))
        out["y_scaled_err"] = common.scaled_error(y, truth["y"], axis=0)
        out.update(s_errors(S, truth["S"]))
    else:
        out["message"] = sol.message
    return out


def amici_rows(repeats) -> tuple[dict, dict | None]:
    progress("  AMICI forward sensitivities and adjoint gradient of pka (subprocess) ...")
    data = run_amici(
        "pka",
        modes=("forward", "adjoint"),
        tolerances=(LOOSE, TIGHT),
        repeats=repeats,
        models_dir=common.models_dir(),
    )
    rows = {}
    if data is None:
        return rows, None
    for entry in data["results"]:
        tol = (entry["rtol"], entry["atol"])
        for mode, label in (("forward", "AMICI forward"), ("adjoint", "AMICI adjoint (grad)")):
            res = entry[mode]
            row = {
                "solver": label,
                "median_ms": res["median_ms"],
                "min_ms": res["min_ms"],
                "core_median_ms": res.get("core_median_ms"),
                "amici_cpu_ms": res.get("amici_cpu_ms"),
                "n_steps": res.get("n_steps"),
                "n_rhs_evals": res.get("n_rhs_evals"),
                "y_scaled_err": res.get("y_scaled_err"),
                "error": res.get("error"),
            }
            if mode == "forward":
                row["S_rel_err"] = res.get("S_rel_err")
                row["S_scaled_err"] = res.get("S_scaled_err")
                row["S_max_abs_err"] = res.get("S_max_abs_err")
            else:
                row["n_steps_backward"] = res.get("n_steps_backward")
                row["gradient_rel_err"] = res.get("gradient_rel_err")
            rows[(tol, mode)] = row
    return rows, {k: v for k, v in data.items() if k != "results"}


def pka_benchmarks(args) -> dict:
    from pymc_odesens import OdeSystem, solve_sensitivity

    progress("\n== pka forward sensitivities ==")
    system = OdeSystem.from_json(common.model_path("pka"))
    truth = common.load_truth("pka")
    reference = common.load_reference("pka")
    for method in ("bdf", "adams"):
        start = time.perf_counter()
        solve_sensitivity(system, system.x0, truth["t"], system.p_nominal, method=method)
        progress(
            f"  first {method} call (compile / cache load): {time.perf_counter() - start:.2f} s"
        )
    rows = {"loose": [], "tight": []}
    for key, (rtol, atol) in (("loose", LOOSE), ("tight", TIGHT)):
        for method in ("bdf", "adams"):
            row = bench_ours(system, truth, method, rtol, atol, args.repeats)
            rows[key].append(row)
            progress(
                f"  rtol {rtol:g} {row['solver']:10s} {row['median_ms']:9.3f} ms "
                f"{row['n_steps']:5d} steps  S rel err {row['S_rel_err']:.1e}"
            )
    progress("  scipy solve_ivp BDF on the augmented system ...")
    row = bench_scipy_augmented(reference, truth, *LOOSE, args.scipy_repeats)
    rows["loose"].append(row)
    progress(f"  rtol 1e-06 scipy BDF augmented {row['median_ms']:9.1f} ms")
    amici_meta = None
    if not args.no_amici:
        found, amici_meta = amici_rows(args.repeats)
        for key, tol in (("loose", LOOSE), ("tight", TIGHT)):
            for mode in ("forward", "adjoint"):
                if (tol, mode) in found:
                    rows[key].append(found[(tol, mode)])
    return {"rows": rows, "amici": amici_meta}


def print_pka_tables(pka: dict) -> None:
    for key, (rtol, atol) in (("loose", LOOSE), ("tight", TIGHT)):
        rows = pka["rows"][key]
        base = {r["solver"]: r["median_ms"] for r in rows}
        table = []
        for r in rows:
            if r.get("error"):
                table.append([r["solver"], "failed"] + ["-"] * 8 + [r["error"]])
                continue
            extra = ""
            if r.get("core_median_ms") is not None:
                extra = f"core {fmt_ms(r['core_median_ms'])} / cpu {fmt_ms(r['amici_cpu_ms'])}"
            if r.get("n_steps_backward"):
                extra += (
                    f"; {r['n_steps_backward']} bwd steps, grad err {r['gradient_rel_err']:.1e}"
                )
            table.append(
                [
                    r["solver"],
                    fmt_ms(r["median_ms"]),
                    r.get("n_steps") if r.get("n_steps") is not None else "-",
                    r.get("n_rhs_evals"),
                    fmt_err(r.get("y_scaled_err")),
                    fmt_err(r.get("S_rel_err")),
                    fmt_err(r.get("S_scaled_err")),
                    fmt_err(r.get("S_max_abs_err")),
                    fmt_ratio(r["median_ms"] / base["ours bdf"]),
                    fmt_ratio(r["median_ms"] / base["ours adams"]),
                    extra,
                ]
            )
        print()
        print_table(
            [
                "solver",
                "ms",
                "steps",
                "rhs",
                "y err",
                "S rel err",
                "S col err",
                "S abs err",
                "t/ours-bdf",
                "t/ours-adams",
                "AMICI ms (C++ call / cpu_time)",
            ],
            table,
            title=f"pka forward sensitivities, rtol {rtol:g} / atol {atol:g}, 61 output times",
        )
    print(
        "S rel err = max|S - S_truth| / max|S_truth|; S col err = the same per parameter column"
        " (max over columns; all-zero columns: absolute); y err scaled per state.\n"
        "AMICI adjoint computes only the gradient of a log-likelihood (35 numbers), not S."
    )


# ----------------------------------------------------------------------------- scaling

CHILD = str(common.BENCH_DIR / "random_linear_child.py")


def run_scaling_child(n, stages, args) -> dict:
    """One size in its own process (``random_linear_child.py``); every stage (import,
    sympy build, each solve's first call plus its timed repeats) gets
    ``args.compile_timeout`` seconds plus 10 s for the repeats."""
    argv = [CHILD, "--n", str(n), "--seed", str(args.seed), "--stages", ",".join(stages)]
    argv += ["--repeats", str(args.repeats), "--rtol", repr(LOOSE[0]), "--atol", repr(LOOSE[1])]
    results = common.run_staged_child(
        argv,
        ["import", "build", *stages],
        stage_timeout=args.compile_timeout + 10.0,
        label=f"n={n:3d}",
    )
    if "seconds" in results.get("build", {}):
        progress(f"    n={n:3d} model built (sympy) in {results['build']['seconds']:.1f} s")
    for stage in stages:
        data = results.get(stage, {})
        if "median_ms" not in data:
            continue
        steps = data["stats"]["n_steps"]
        data["ms_per_step"] = data["median_ms"] / steps
        progress(
            f"    n={n:3d} {stage:5s}: first call {data['first_call_s']:.1f} s, "
            f"{data['median_ms']:.2f} ms, {steps} steps, "
            f"{data['ms_per_step'] * 1e3:.2f} us/step"
        )
    return results


def scaling_benchmarks(args) -> dict:
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    progress(
        f"\n== random linear system (PBS paper), n = N = P in {sizes}, seed {args.seed}, "
        f"compile timeout {args.compile_timeout:.0f} s per stage =="
    )
    out = {"sizes": sizes, "seed": args.seed, "per_size": {}}
    active = ["plain", "sens"]
    for n in sizes:
        if not active:
            out["per_size"][n] = {"skipped": "a smaller size exceeded the compile timeout"}
            continue
        res = run_scaling_child(n, active, args)
        out["per_size"][n] = res
        if "build" not in res or "timeout_s" in res.get("build", {}):
            active = []
            continue
        for stage in list(active):
            if stage not in res or "timeout_s" in res[stage] or "error" in res[stage]:
                active.remove(stage)
    for stage in ("plain", "sens"):
        xs, ys, ts = [], [], []
        for n in sizes:
            d = out["per_size"].get(n, {}).get(stage)
            if d and "ms_per_step" in d:
                xs.append(n)
                ys.append(d["ms_per_step"])
                ts.append(d["median_ms"])
        out[f"{stage}_exponent_per_step"] = common.fit_power_law(xs, ys)
        out[f"{stage}_exponent_total"] = common.fit_power_law(xs, ts)
        out[f"{stage}_fit_sizes"] = xs
    return out


def print_scaling_table(scaling: dict) -> None:
    rows = []
    for n in scaling["sizes"]:
        d = scaling["per_size"].get(n, {})
        if "skipped" in d:
            rows.append([n, "skipped"] + ["-"] * 9)
            continue
        cells = [n]
        for stage in ("plain", "sens"):
            s = d.get(stage)
            if s is None:
                cells += ["-", "-", "-", "-"]
            elif "timeout_s" in s:
                cells += [f"compile > {s['timeout_s']:.0f} s", "-", "-", "-"]
            elif "error" in s:
                cells += ["failed", "-", "-", "-"]
            else:
                cells += [
                    f"{s['first_call_s']:.1f}",
                    fmt_ms(s["median_ms"]),
                    s["stats"]["n_steps"],
                    f"{s['ms_per_step'] * 1e3:.2f}",
                ]
        sens, plain = d.get("sens", {}), d.get("plain", {})
        ratio = (
            sens["ms_per_step"] / plain["ms_per_step"]
            if "ms_per_step" in sens and "ms_per_step" in plain
            else None
        )
        cells.append(fmt_ratio(ratio))
        cells.append(fmt_err(sens.get("S_rel_err")))
        rows.append(cells)
    print()
    print_table(
        [
            "n=N=P",
            "plain 1st call s",
            "plain ms",
            "steps",
            "us/step",
            "sens 1st call s",
            "sens ms",
            "steps",
            "us/step",
            "sens/plain per step",
            "S rel err (exact)",
        ],
        rows,
        title="Random linear system x' = A x + p^2 + u (bdf, rtol 1e-6 / atol 1e-8, t in [0, 10])",
    )
    for stage, label in (("plain", "plain solve"), ("sens", "forward sensitivities")):
        b, b_total = scaling[f"{stage}_exponent_per_step"], scaling[f"{stage}_exponent_total"]
        sizes = scaling[f"{stage}_fit_sizes"]
        if b is None:
            print(f"log-log fit, {label}: fewer than 2 sizes measured ({sizes})")
        else:
            print(
                f"log-log fit, {label}: time per step ~ n^{b:.2f}, total time ~ n^{b_total:.2f}"
                f" (sizes {sizes})"
            )
    print("(PBS paper, Julia/CVODES forward sensitivities: total runtime ~ n^4.2)")


# ----------------------------------------------------------------------------- goals


def goals(pka: dict) -> list[dict]:
    out = []
    loose = {r["solver"]: r for r in pka["rows"]["loose"]}
    tight = {r["solver"]: r for r in pka["rows"]["tight"]}
    ours = loose["ours bdf"]["median_ms"]
    ours_min = loose["ours bdf"]["min_ms"]
    scipy_row = loose.get("scipy BDF augmented")
    if scipy_row and scipy_row.get("success"):
        ratio = scipy_row["median_ms"] / ours
        best = scipy_row["min_ms"] / ours_min
        out.append(
            {
                "goal": "pka bdf >= 30x faster than scipy augmented BDF (1e-6/1e-8)",
                "measured": f"{fmt_ratio(ratio)} (fastest runs: {fmt_ratio(best)})",
                "met": ratio >= GOALS["scipy_over_ours"],
            }
        )
    amici = loose.get("AMICI forward")
    if amici and not amici.get("error"):
        for key, text in (
            ("median_ms", "pka bdf no slower than AMICI forward (Python call)"),
            ("core_median_ms", "  (same, AMICI's C++ call without Python wrapping)"),
            ("amici_cpu_ms", "  (same, AMICI's own cpu_time of the integration only)"),
        ):
            if amici.get(key):
                ratio = amici[key] / ours
                measured = f"AMICI/ours = {fmt_ratio(ratio)}"
                if key == "median_ms":
                    measured += f" (fastest runs: {fmt_ratio(amici['min_ms'] / ours_min)})"
                out.append(
                    {"goal": text, "measured": measured, "met": ratio >= GOALS["amici_over_ours"]}
                )
    else:
        out.append({"goal": "pka bdf no slower than AMICI forward", "measured": "AMICI skipped"})
    for method in ("bdf", "adams"):
        r = tight[f"ours {method}"]
        out.append(
            {
                "goal": f"S ({method}, rtol 1e-8 / atol 1e-10) within 1e-4 relative of truth",
                "measured": f"{r['S_rel_err']:.1e} (per column {r['S_scaled_err']:.1e})",
                "met": r["S_rel_err"] <= GOALS["S_rel_err_tight"],
            }
        )
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Benchmark of forward sensitivities.")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--scipy-repeats", type=int, default=3)
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="random linear system sizes")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--compile-timeout",
        type=float,
        default=120.0,
        help="seconds allowed per stage (model build, first plain solve, first sensitivity "
        "solve) of one random-system size; kernels that compile are cached for later runs",
    )
    parser.add_argument("--no-amici", action="store_true")
    parser.add_argument("--no-scaling", action="store_true")
    parser.add_argument("--quick", action="store_true", help="few repeats")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.scipy_repeats = 3, 1
    started = time.perf_counter()
    load_start = common.report_load("at start")
    progress("bench_forward_sensitivity: pka against scipy (augmented) and AMICI; scaling in P")
    pka = pka_benchmarks(args)
    scaling = None if args.no_scaling else scaling_benchmarks(args)
    print_pka_tables(pka)
    if scaling:
        print_scaling_table(scaling)
    common.finish_run(
        "bench_forward_sensitivity",
        {"pka": pka, "random_linear": scaling},
        goals(pka),
        load_start,
        started,
    )


if __name__ == "__main__":
    main()
