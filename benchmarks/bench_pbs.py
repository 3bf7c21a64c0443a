"""Reproduction of the Peano-Baker-series paper's evidence with our code (issue "PBS").

Eriksson, Kramer, Milinanni, Nyquist, "Sensitivity Approximation by the Peano-Baker Series"
(arXiv:2109.00067), Section 6. Our forward sensitivities (FS) are the reference and the peer.

Run:  python benchmarks/bench_pbs.py                 (about 9 minutes once the random linear
                                                       system's kernels are cached, about 30
                                                       more the first time for n = 50..100;
                                                       writes results/bench_pbs.json and PNGs)
      python benchmarks/bench_pbs.py --quick --sizes 5,10,15

1. Accuracy per time step (the paper's Figs 2, 3 and 5): pka and camkii on t in [0, 600],
   chua on [0, 10], the state by ``bdf`` at rtol 1e-5 / atol 1e-6 (the paper's). S of PBSR and
   Exp is evaluated at every solver step t_k and compared with forward sensitivities at
   rtol 1e-10 / atol 1e-12 (the paper compares with FS at its tolerances; a tight FS
   separates the methods' error from FS's own): ``||S_k - S_FS,k||_F / ||S_FS,k||_F``.
   Plots ``results/bench_pbs_<model>.png``, circles at the steps where PBSR took an Exp step.
   PBSR is run with our default Exp step inside PBSR (Jacobians averaged over the step,
   ``exp_step="trapezoid"``) and, as a second line, with the paper's (Jacobians at t_k).
2. Table 1: runtimes of FS, PBSR and Exp (median of repeated calls in this process, after a
   warm-up call that compiles or loads the kernels) on pka (N = 11, P = 35) and camkii
   (N = 21, P = 59; benchmarks/models/camkii.json, the paper's CaMKII model), 61 output
   times on [0, 600], bdf, rtol 1e-5 / atol 1e-6 for every method; the plain state solve
   (the floor of any method that solves the state once) beside them; ratios FS/PBSR, FS/Exp.
   AMICI's forward sensitivities at the same tolerances and output times are the peer's row
   (run in AMICI's environment, benchmarks/peers/amici.py; ``--no-amici`` leaves them out).
3. Runtime against dimension on the random linear system ``x' = A x + p**2 + u``,
   ``A = -B^T B`` (benchmarks/random_linear.py), n = N = P, t in [0, 10], 61 output times,
   bdf at rtol 1e-5 / atol 1e-6; PBSR without the switch (``eps=0``, ``n_max=None``: always
   refined PBS, as in the paper), Exp and FS. One subprocess per size (this script with
   ``--child``); its kernels are compiled once and cached (``PYMC_ODESENS_CACHE_DIR``); a size
   whose stage exceeds ``--compile-timeout`` is reported and larger sizes are skipped.
   Log-log fits ``runtime = a n^b`` and the plot ``results/bench_pbs_scaling.png`` (Fig. 4).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import common
import numpy as np
from common import fmt_err, fmt_ms, fmt_ratio, print_table, progress
from peers.amici import run_amici
from random_linear import DEFAULT_SEED, random_linear_problem

GOALS = {
    "pka": {"fs_over_pbsr": 1.2, "fs_over_exp": 7.0},
    "camkii": {"fs_over_pbsr": 13.8, "fs_over_exp": 50.0},
    "exponents": {"exp": 2.1, "pbsr": 3.7, "fs": 4.2},
}
PAPER_TOL = (1e-5, 1e-6)
TIGHT_TOL = (1e-10, 1e-12)
DEFAULT_SIZES = "5,10,15,20,25,30,40,50,60,70,80,90,100"  # the paper's range
CAMKII_PATH = common.BENCH_DIR / "models" / "camkii.json"


# ----------------------------------------------------------------------------- models


def load_model(name: str):
    """``(system, x0, p, t_end)`` of pka, chua (shared models) or camkii (benchmarks/models)."""
    from pymc_odesens import OdeSystem

    path = CAMKII_PATH if name == "camkii" else common.model_path(name)
    spec = json.loads(Path(path).read_text())
    system = OdeSystem.from_json(path)
    t_end = float(spec["t_end"])
    return system, np.array(spec["x0"], float), np.array(spec["p_nominal"], float), t_end


def call(system, x0, times, p, sensitivity, tol, options=None):
    from pymc_odesens import solve_sensitivity

    return solve_sensitivity(
        system,
        x0,
        times,
        p,
        method="bdf",
        sensitivity=sensitivity,
        relative_tolerance=tol[0],
        absolute_tolerance=tol[1],
        pbs_options=options,
    )


def frobenius_errors(S, S_ref) -> np.ndarray:
    """``||S_k - S_ref,k||_F / ||S_ref,k||_F`` per time (NaN where ``S_ref`` is 0)."""
    d = np.linalg.norm((S - S_ref).reshape(len(S), -1), axis=1)
    s = np.linalg.norm(S_ref.reshape(len(S), -1), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(s > 0, d / s, np.nan)


# ----------------------------------------------------------------------------- 1. accuracy


def accuracy_section(models, plot: bool) -> dict:
    progress(
        "\n== 1. relative error of S per solver step against FS at rtol 1e-10 / atol 1e-12 "
        "(state: bdf at rtol 1e-5 / atol 1e-6) =="
    )
    out = {}
    rows = []
    for name in models:
        system, x0, p, t_end = load_model(name)
        # the solver's own steps: the march does not depend on the output times
        probe = call(system, x0, [t_end], p, "pbsr", PAPER_TOL)
        steps = probe.pbs_steps.t
        pbsr = call(system, x0, steps, p, "pbsr", PAPER_TOL)
        published = call(system, x0, steps, p, "pbsr", PAPER_TOL, {"exp_step": "start"})
        exp = call(system, x0, steps, p, "exp", PAPER_TOL)
        reference = call(system, x0, steps, p, "forward", TIGHT_TOL)
        entry = {"t": steps, "n_steps": len(steps) - 1}
        for label, res in [("pbsr", pbsr), ("pbsr_published", published), ("exp", exp)]:
            err = frobenius_errors(res.S, reference.S)[1:]
            entry[label] = {
                "rel_err_per_step": err,
                "max": float(np.nanmax(err)),
                "median": float(np.nanmedian(err)),
                "branch_counts": res.pbs_steps.counts(),
                "exp_step_mask": res.pbs_steps.exp_mask,
            }
            rows.append(
                [
                    name,
                    label,
                    len(steps) - 1,
                    fmt_err(entry[label]["max"]),
                    fmt_err(entry[label]["median"]),
                    " ".join(f"{k}={v}" for k, v in res.pbs_steps.counts().items() if v),
                ]
            )
        entry["exp_over_pbsr_max_err"] = entry["exp"]["max"] / entry["pbsr"]["max"]
        entry["exp_over_pbsr_median_err"] = entry["exp"]["median"] / entry["pbsr"]["median"]
        if plot:
            entry["png"] = plot_errors(name, steps, entry)
        out[name] = entry
    print_table(
        ["model", "method", "steps", "max rel err", "median rel err", "branches (solver steps)"],
        rows,
    )
    for name, e in out.items():
        progress(
            f"  {name}: Exp/PBSR error ratio {e['exp_over_pbsr_max_err']:.1f}x (max over steps), "
            f"{e['exp_over_pbsr_median_err']:.1f}x (median)"
            + (f"; plot {e['png']}" if "png" in e else "")
        )
    return out


def plot_errors(name: str, steps, entry) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    t = steps[1:]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.semilogy(t, entry["pbsr"]["rel_err_per_step"], "-", color="C0", label="PBSR (ours)")
    mask = entry["pbsr"]["exp_step_mask"]
    ax.semilogy(
        t[mask],
        entry["pbsr"]["rel_err_per_step"][mask],
        "o",
        mfc="none",
        ms=4,
        color="C0",
        label="PBSR step took Exp",
    )
    ax.semilogy(
        t,
        entry["pbsr_published"]["rel_err_per_step"],
        "-",
        lw=0.8,
        color="C2",
        label="PBSR, paper's Exp step (J at t_k)",
    )
    ax.semilogy(t, entry["exp"]["rel_err_per_step"], "--", color="C1", label="Exp")
    ax.set_xlabel("t (solver steps)")
    ax.set_ylabel("||S - S_FS||_F / ||S_FS||_F")
    ax.set_title(f"{name}: relative error of S per time step (bdf, rtol 1e-5, atol 1e-6)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = common.RESULTS_DIR / f"bench_pbs_{name}.png"
    common.RESULTS_DIR.mkdir(exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path.relative_to(common.REPO_DIR))


# ----------------------------------------------------------------------------- 2. Table 1


def timed_calls(system, x0, times, p) -> list:
    """``(label, call)`` of the state solve, FS, PBSR and Exp at the paper's tolerances."""
    from pymc_odesens import solve

    def plain():
        return solve(
            system,
            x0,
            times,
            p,
            method="bdf",
            relative_tolerance=PAPER_TOL[0],
            absolute_tolerance=PAPER_TOL[1],
        )

    return [("state", plain)] + [
        (label, lambda s=label: call(system, x0, times, p, s, PAPER_TOL))
        for label in ("forward", "pbsr", "exp")
    ]


def amici_forward(name: str, repeats: int) -> dict | None:
    """AMICI's forward sensitivities of ``name`` at the paper's tolerances (the peer's FS).

    Same 61 output times, bdf, rtol 1e-5 / atol 1e-6; run in AMICI's own environment
    (benchmarks/peers/amici.py). None when AMICI is not installed or failed.
    """
    models_dir = CAMKII_PATH.parent if name == "camkii" else common.models_dir()
    progress(f"  AMICI forward sensitivities of {name} (subprocess; the first run builds it) ...")
    data = run_amici(
        name, modes=("forward",), tolerances=(PAPER_TOL,), repeats=repeats, models_dir=models_dir
    )
    if data is None:
        return None
    res = data["results"][0]["forward"]
    if res.get("error"):
        progress(f"  AMICI failed on {name}: {res['error']}")
        return None
    return {
        "median_ms": res["median_ms"],
        "min_ms": res["min_ms"],
        "amici_cpu_ms": res.get("amici_cpu_ms"),
        "n_steps": res.get("n_steps"),
        "amici_version": data.get("amici_version"),
    }


def table_section(models, repeats: int, with_amici: bool = True) -> dict:
    progress(
        "\n== 2. Table 1: runtimes (median of repeated calls), bdf at rtol 1e-5 / atol 1e-6, "
        "61 output times =="
    )
    out = {}
    rows = []
    for name in models:
        system, x0, p, t_end = load_model(name)
        times = np.linspace(0.0, t_end, 61)
        reference = call(system, x0, times, p, "forward", TIGHT_TOL)
        entry = {"n_states": system.n_states, "n_params": system.n_params}

        runs = timed_calls(system, x0, times, p)
        for label, fn in runs:
            t = common.time_call(fn, repeats=repeats, warmup=2, max_seconds=6.0)
            res = t.pop("result")
            e = {"median_ms": t["median_ms"], "min_ms": t["min_ms"], "n": t["n"]}
            e["n_steps"] = res.stats["n_steps"]
            if label != "state":
                e["S_rel_err_max"] = float(np.nanmax(frobenius_errors(res.S, reference.S)[1:]))
                e["stats"] = res.stats
            if res_has_report(res):
                e["branch_counts"] = res.pbs_steps.counts()
            entry[label] = e
        fs = entry["forward"]["median_ms"]
        entry["fs_over_pbsr"] = fs / entry["pbsr"]["median_ms"]
        entry["fs_over_exp"] = fs / entry["exp"]["median_ms"]
        entry["fs_over_state"] = fs / entry["state"]["median_ms"]
        entry["fs_over_pbsr_min"] = entry["forward"]["min_ms"] / entry["pbsr"]["min_ms"]
        entry["fs_over_exp_min"] = entry["forward"]["min_ms"] / entry["exp"]["min_ms"]
        if with_amici:
            amici = amici_forward(name, repeats)
            if amici is not None:
                entry["amici_forward"] = amici
                entry["amici_fs_over_pbsr"] = amici["median_ms"] / entry["pbsr"]["median_ms"]
                entry["amici_fs_over_exp"] = amici["median_ms"] / entry["exp"]["median_ms"]
        out[name] = entry
        state = entry["state"]["median_ms"]
        for label in ("state", "forward", "pbsr", "exp"):
            e = entry[label]
            products = e.get("stats", {}).get("n_matrix_products")
            beyond = e["median_ms"] - state if label != "state" else None
            e["ms_beyond_state_solve"] = beyond
            rows.append(
                [
                    f"{name} (N={system.n_states}, P={system.n_params})",
                    {"state": "state only", "forward": "FS"}.get(label, label.upper()),
                    fmt_ms(e["median_ms"]),
                    fmt_ms(e["min_ms"]),
                    e["n_steps"],
                    "-" if beyond is None else fmt_ms(beyond),
                    "-" if products is None else products,
                    fmt_err(e.get("S_rel_err_max")),
                    "-" if label in ("state", "forward") else fmt_ratio(fs / e["median_ms"]),
                ]
            )
        amici = entry.get("amici_forward")
        if amici is not None:
            rows.append(
                [
                    f"{name} (N={system.n_states}, P={system.n_params})",
                    f"AMICI FS ({amici['amici_version']})",
                    fmt_ms(amici["median_ms"]),
                    fmt_ms(amici["min_ms"]),
                    amici["n_steps"],
                    "-",
                    "-",
                    "-",
                    fmt_ratio(fs / amici["median_ms"]),
                ]
            )
    print_table(
        [
            "model",
            "method",
            "median ms",
            "min ms",
            "steps",
            "ms beyond state",
            "N x N products",
            "max rel err S",
            "FS / method",
        ],
        rows,
    )
    for name, entry in out.items():
        goal = GOALS.get(name)
        for key, label in (("fs_over_pbsr", "FS/PBSR"), ("fs_over_exp", "FS/Exp")):
            if goal is None:
                continue
            met = "met" if entry[key] >= goal[key] else "NOT met"
            progress(
                f"goal {name} {label} >= {goal[key]}x: {entry[key]:.2f}x (fastest runs "
                f"{entry[key + '_min']:.2f}x) - {met}; bound for any method that solves the "
                f"state once: FS/state = {entry['fs_over_state']:.1f}x"
            )
        if "amici_forward" in entry:
            progress(
                f"against the peer, AMICI's forward sensitivities at the same tolerances: "
                f"AMICI FS/PBSR {entry['amici_fs_over_pbsr']:.1f}x, "
                f"AMICI FS/Exp {entry['amici_fs_over_exp']:.1f}x"
            )
    return out


def res_has_report(res) -> bool:
    return getattr(res, "pbs_steps", None) is not None


# ----------------------------------------------------------------------------- 3. scaling

CHILD_STAGES = ("build", "forward", "pbsr", "exp")


def child(args) -> None:
    """One size of the random linear system: one JSON line per stage (see module doc)."""

    def emit(**fields):
        print(json.dumps(fields), flush=True)

    from pymc_odesens import solve_sensitivity
    from pymc_odesens.sensitivity import PbsOptions

    start = time.perf_counter()
    problem = random_linear_problem(args.child, args.seed)
    system = problem.system()
    emit(stage="build", seconds=time.perf_counter() - start)
    times = np.linspace(0.0, 10.0, 61)
    exact = problem.exact_sensitivities(times)
    no_switch = PbsOptions(eps=0.0, n_max=None)
    for stage in CHILD_STAGES[1:]:

        def fn(stage=stage):
            return solve_sensitivity(
                system,
                problem.y0,
                times,
                problem.p,
                method="bdf",
                sensitivity=stage,
                relative_tolerance=PAPER_TOL[0],
                absolute_tolerance=PAPER_TOL[1],
                pbs_options=no_switch if stage == "pbsr" else None,
            )

        start = time.perf_counter()
        fn()
        first = time.perf_counter() - start
        # the first call compiled or loaded everything: no further warm-up
        t = common.time_call(fn, repeats=args.repeats, warmup=0, max_seconds=4.0)
        res = t.pop("result")
        fields = {
            "first_call_s": first,
            "median_ms": t["median_ms"],
            "min_ms": t["min_ms"],
            "n": t["n"],
            "n_steps": res.stats["n_steps"],
            "S_rel_err": common.relative_error(res.S, exact),
        }
        if res_has_report(res):
            fields["n_pbs_substeps"] = res.stats["n_pbs_substeps"]
            fields["n_matrix_products"] = res.stats["n_matrix_products"]
        emit(stage=stage, **fields)


def scaling_section(sizes, args) -> dict:
    progress(
        f"\n== 3. random linear system, n = N = P in {sizes}, seed {args.seed}, bdf rtol 1e-5 / "
        f"atol 1e-6, t in [0, 10], 61 outputs; PBSR without the switch =="
    )
    out = {"sizes": sizes, "seed": args.seed, "per_size": {}}
    stopped = False
    for n in sizes:
        if stopped:
            out["per_size"][n] = {"skipped": "a smaller size exceeded the compile timeout"}
            continue
        progress(f"  n = {n} ...")
        res = common.run_staged_child(
            [str(Path(__file__).resolve()), "--child", str(n), "--seed", str(args.seed)]
            + ["--repeats", str(args.repeats)],
            list(CHILD_STAGES),
            stage_timeout=args.compile_timeout + 15.0,
            label=f"n={n}",
        )
        out["per_size"][n] = res
        if any(s not in res or "timeout_s" in res[s] or "error" in res[s] for s in CHILD_STAGES):
            stopped = True
    rows = []
    for n in sizes:
        r = out["per_size"][n]
        cells = [n]
        for stage in CHILD_STAGES[1:]:
            s = r.get(stage, {})
            cells.append(fmt_ms(s["median_ms"]) if "median_ms" in s else "-")
        for stage in CHILD_STAGES[1:]:
            s = r.get(stage, {})
            cells.append(f"{s['first_call_s']:.1f}" if "first_call_s" in s else "-")
        f, pb, ex = (r.get(s, {}).get("median_ms") for s in CHILD_STAGES[1:])
        cells.append(fmt_ratio(f / pb) if f and pb else "-")
        cells.append(fmt_ratio(f / ex) if f and ex else "-")
        cells.append(fmt_err(r.get("pbsr", {}).get("S_rel_err")))
        cells.append(fmt_err(r.get("exp", {}).get("S_rel_err")))
        rows.append(cells)
    print_table(
        [
            "n",
            "FS ms",
            "PBSR ms",
            "Exp ms",
            "FS 1st s",
            "PBSR 1st s",
            "Exp 1st s",
            "FS/PBSR",
            "FS/Exp",
            "PBSR err",
            "Exp err",
        ],
        rows,
    )
    for stage in CHILD_STAGES[1:]:
        xs = [n for n in sizes if "median_ms" in out["per_size"][n].get(stage, {})]
        ys = [out["per_size"][n][stage]["median_ms"] for n in xs]
        out[f"{stage}_fit_sizes"] = xs
        out[f"{stage}_exponent"] = common.fit_power_law(xs, ys)
        big = [n for n in xs if n >= 15]
        out[f"{stage}_exponent_n_ge_15"] = common.fit_power_law(
            big, [out["per_size"][n][stage]["median_ms"] for n in big]
        )
    paper = GOALS["exponents"]
    for stage, key in (("exp", "exp"), ("pbsr", "pbsr"), ("forward", "fs")):
        b = out[f"{stage}_exponent"]
        b15 = out[f"{stage}_exponent_n_ge_15"]
        if b is None:
            progress(f"fit {stage}: fewer than 2 sizes measured")
            continue
        met = "met" if b <= paper[key] else "NOT met"
        progress(
            f"goal exponent {stage} <= {paper[key]} (paper): n^{b:.2f} over n in "
            f"{out[f'{stage}_fit_sizes']}"
            + (f", n^{b15:.2f} for n >= 15" if b15 else "")
            + f" - {met}"
        )
    if args.plot:
        out["png"] = plot_scaling(out)
        if out["png"]:
            progress(f"  plot {out['png']}")
    return out


def plot_scaling(out) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for stage, style, label in (
        ("forward", "-", "FS"),
        ("pbsr", "--", "PBSR (no switch)"),
        ("exp", ":", "Exp"),
    ):
        xs = out[f"{stage}_fit_sizes"]
        if not xs:
            continue
        ys = [out["per_size"][n][stage]["median_ms"] for n in xs]
        b = out[f"{stage}_exponent"]
        ax.loglog(xs, ys, style + "o", label=f"{label}: n^{b:.2f}" if b else label)
    ax.set_xlabel("n = N = P")
    ax.set_ylabel("runtime (ms, median)")
    ax.set_title("random linear system x' = Ax + p^2 + u (bdf, rtol 1e-5, atol 1e-6)", fontsize=9)
    ax.legend()
    fig.tight_layout()
    path = common.RESULTS_DIR / "bench_pbs_scaling.png"
    common.RESULTS_DIR.mkdir(exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path.relative_to(common.REPO_DIR))


# ----------------------------------------------------------------------------- main


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repeats, camkii left out")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per measurement")
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="random linear system sizes")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--compile-timeout", type=float, default=900.0)
    parser.add_argument("--no-scaling", action="store_true", help="skip the random linear system")
    parser.add_argument("--no-plots", dest="plot", action="store_false")
    parser.add_argument(
        "--no-amici", dest="amici", action="store_false", help="leave the AMICI peer out of Table 1"
    )
    parser.add_argument("--sections", default="accuracy,table,scaling")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 5 if args.quick else 30
    if args.child is not None:
        child(args)
        return
    sections = set(args.sections.split(","))
    if args.no_scaling:
        sections.discard("scaling")
    start = time.perf_counter()
    load_start = common.report_load("at start")
    results: dict = {"goals": GOALS, "quick": args.quick}
    models = ["pka", "chua"] + ([] if args.quick else ["camkii"])
    if "accuracy" in sections:
        results["accuracy"] = accuracy_section(models, args.plot)
    if "table" in sections:
        results["table1"] = table_section(
            ["pka"] + ([] if args.quick else ["camkii"]), args.repeats, args.amici
        )
    if "scaling" in sections:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        results["random_linear"] = scaling_section(sizes, args)
    load_end = common.report_load("at end")
    results["load_average"] = {"start": load_start, "end": load_end}
    results["runtime_s"] = time.perf_counter() - start
    name = "bench_pbs_quick" if args.quick else "bench_pbs"
    path = common.write_results(name, results)
    progress(f"\nwrote {path.relative_to(common.REPO_DIR)} ({results['runtime_s']:.0f} s)")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
