"""Benchmark of adjoint gradients (issue "adjoint") against forward sensitivities and AMICI.

Run:  python benchmarks/bench_adjoint.py          (about 5-10 minutes once the kernels of the
                                                  random linear system are cached; writes
                                                  results/bench_adjoint.json)
      python benchmarks/bench_adjoint.py --quick --sizes 10,20

The gradient measured everywhere is that of the Gaussian log-likelihood
``L = sum_{t,i} log N(data[t, i] | y_i(t), 1)`` with ``data = 1.1 y_truth``, the setting of
AMICI's adjoint mode in ``peers/amici_runner.py``: cotangent ``dL/dy(t) = data - y(t)``,
reference gradient ``einsum(data - y_truth, S_truth)`` from the truth file.

1. pka (N = 11, P = 35), the truth file's 61 output times, at rtol 1e-6 / atol 1e-8 (every
   tolerance: state, sensitivities, and the adjoint's forward, backward and quadrature
   ones, as AMICI is run), at rtol 1e-8 / atol 1e-10, and at Stan's defaults (forward
   sensitivities: ``bdf``'s 1e-10 / 1e-10; adjoint: ``ode_adjoint_tol_ctl``'s documented
   defaults, 1e-6 everywhere):
   - forward: ``solve_sensitivity(method="bdf")``, then ``einsum`` with the cotangent;
   - adjoint: ``adjoint_forward`` (checkpoints) then ``.backward(data - y)`` (Hermite,
     ``bdf`` forward and backward, 150 steps between checkpoints), both phases also timed
     on their own; the same with the backward solve by ``adams``; and the discrete adjoint
     (``adjoint_method="discrete"``: forward ``bdf`` run, replayed and differentiated);
   - AMICI (CVODES): adjoint gradient of the same log-likelihood, and forward
     sensitivities for context.
   Step counts of every phase and the error of every gradient (relative: ``max_k |err_k| /
   max_k |g_k|``; per component: ``|err_k| / sum_{t,i} |c_ti S_tik|``).
2. Why the backward solve takes many steps on pka: its steps with the cotangent at all 61
   output times, at the last one only (the solve restarts at every output time, but
   ``lambda`` does not jump) and with a single output time; the backward steps in each
   output interval (each interval solved on its own, started from the ``lambda`` the full
   backward pass has there: the sum is checked against the full pass); the fastest
   eigenvalue of ``J_y`` along the trajectory.
3. How the comparison depends on the number of output times T (pka, robertson,
   lotka_volterra; T = 61, 7 = every 10th, 2 = first and last output time).
4. The random linear system of the PBS paper (``random_linear.py``; n = N = P, seed fixed)
   with T = 61 and T = 2 output times on [0, 10], bdf at 1e-6 / 1e-8: the plain solve, the
   forward-sensitivity gradient and the continuous and discrete adjoint gradients, each
   size in its own subprocess (``random_linear_child.py``), with log-log fits of time
   against n.
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np
from common import fmt_err, fmt_ms, fmt_ratio, print_table, progress
from peers.amici import run_amici
from random_linear import DEFAULT_SEED

LOOSE = (1e-6, 1e-8)
TIGHT = (1e-8, 1e-10)
DATA_SCALE = 1.1
DEFAULT_SIZES = "10,20,30,40"
GOALS = {"forward_over_adjoint_pka": 1.5, "amici_over_ours": 1.0, "adjoint_over_plain_exp": 0.5}
# tolerance cases of part 1: label -> (rtol, atol) or None for Stan's defaults
DISCRETE_LABEL = "adjoint (discrete, bdf)"
CASES = {"1e-6/1e-8": LOOSE, "1e-8/1e-10": TIGHT, "Stan defaults": None}


def adjoint_controls(tol) -> dict:
    """Every adjoint tolerance at (rtol, atol); ``{}`` (the documented defaults) for None."""
    if tol is None:
        return {}
    rtol, atol = tol
    return dict(
        relative_tolerance_forward=rtol,
        absolute_tolerance_forward=atol,
        relative_tolerance_backward=rtol,
        absolute_tolerance_backward=atol,
        relative_tolerance_quadrature=rtol,
        absolute_tolerance_quadrature=atol,
    )


def forward_controls(tol) -> dict:
    if tol is None:
        return {}
    return dict(relative_tolerance=tol[0], absolute_tolerance=tol[1])


class Case:
    """A reference model at a subset of its truth file's output times, with the data and
    the reference gradient of the Gaussian log-likelihood."""

    def __init__(self, name: str, index=None):
        from pymc_odesens import OdeSystem

        self.name = name
        self.system = OdeSystem.from_json(common.model_path(name))
        truth = common.load_truth(name)
        index = np.arange(truth["t"].size) if index is None else np.asarray(index)
        self.times = truth["t"][index]
        self.y_truth = truth["y"][index]
        self.S_truth = truth["S"][index]
        self.y0 = truth["y"][0]
        self.data = DATA_SCALE * self.y_truth
        cot = self.data - self.y_truth
        self.g_truth = np.einsum("ti,tik->k", cot, self.S_truth)
        self.g_scale = np.einsum("ti,tik->k", np.abs(cot), np.abs(self.S_truth))

    def errors(self, g) -> dict:
        err = np.abs(np.asarray(g) - self.g_truth)
        floor = 1e-12 * self.g_scale.max()  # components whose every term is zero
        return {
            "gradient_rel_err": float(err.max() / np.abs(self.g_truth).max()),
            "gradient_component_err": float((err / np.maximum(self.g_scale, floor)).max()),
        }

    def forward_gradient(self, method="bdf", **controls):
        from pymc_odesens import solve_sensitivity

        res = solve_sensitivity(
            self.system,
            self.y0,
            self.times,
            self.system.p_nominal,
            t0=self.system.t0,
            method=method,
            **controls,
        )
        return np.einsum("ti,tik->k", self.data - res.y, res.S), res

    def adjoint_forward(self, **controls):
        from pymc_odesens import adjoint_forward

        return adjoint_forward(
            self.system, self.y0, self.times, self.system.p_nominal, t0=self.system.t0, **controls
        )

    def adjoint_gradient(self, **controls):
        checkpoints = self.adjoint_forward(**controls)
        return checkpoints.backward(self.data - checkpoints.y)


def adjoint_steps(stats) -> str:
    if "replay" in stats:  # discrete: forward + replayed steps, no backward ODE
        return f"{stats['forward']['n_steps']}+{stats['replay']['n_steps']}"
    return (
        f"{stats['forward']['n_steps']}+{stats['reintegration']['n_steps']}"
        f"+{stats['backward']['n_steps']}"
    )


# ----------------------------------------------------------------------------- part 1


def bench_forward_row(case: Case, tol, repeats) -> dict:
    timing = common.time_call(
        lambda: case.forward_gradient(**forward_controls(tol)), repeats=repeats
    )
    g, res = timing["result"]
    return {
        "solver": "forward sens (bdf)",
        "median_ms": timing["median_ms"],
        "min_ms": timing["min_ms"],
        "n_timed": timing["n"],
        "steps": str(res.stats["n_steps"]),
        "stats": res.stats,
        **case.errors(g),
    }


def bench_adjoint_row(case: Case, tol, repeats, label="adjoint (bdf/bdf)", **extra) -> dict:
    controls = {**adjoint_controls(tol), **extra}
    timing = common.time_call(lambda: case.adjoint_gradient(**controls), repeats=repeats)
    g = timing["result"]
    fwd = common.time_call(lambda: case.adjoint_forward(**controls), repeats=repeats)
    checkpoints = fwd["result"]
    cot = case.data - checkpoints.y
    bwd = common.time_call(lambda: checkpoints.backward(cot), repeats=repeats)
    return {
        "solver": label,
        "controls": controls,
        "median_ms": timing["median_ms"],
        "min_ms": timing["min_ms"],
        "n_timed": timing["n"],
        "forward_phase_median_ms": fwd["median_ms"],
        "forward_phase_min_ms": fwd["min_ms"],
        "backward_phase_median_ms": bwd["median_ms"],
        "backward_phase_min_ms": bwd["min_ms"],
        "steps": adjoint_steps(g.stats),
        "stats": g.stats,
        **case.errors(g.params),
    }


def amici_rows(repeats) -> tuple[dict, dict | None]:
    progress("  AMICI adjoint gradient and forward sensitivities of pka (subprocess) ...")
    data = run_amici(
        "pka",
        modes=("adjoint", "forward"),
        tolerances=(LOOSE, TIGHT),
        repeats=repeats,
        models_dir=common.models_dir(),
    )
    rows: dict = {}
    if data is None:
        return rows, None
    if data.get("data_scale") != DATA_SCALE:
        raise RuntimeError(f"AMICI's data scale {data.get('data_scale')} is not {DATA_SCALE}")
    labels = {LOOSE: "1e-6/1e-8", TIGHT: "1e-8/1e-10"}
    for entry in data["results"]:
        key = labels[(entry["rtol"], entry["atol"])]
        for mode, label in (("adjoint", "AMICI adjoint"), ("forward", "AMICI forward (S only)")):
            res = entry[mode]
            steps = res.get("n_steps")
            if res.get("n_steps_backward"):
                steps = f"{steps}+{res['n_steps_backward']}"
            rows.setdefault(key, []).append(
                {
                    "solver": label,
                    "median_ms": res["median_ms"],
                    "min_ms": res["min_ms"],
                    "core_median_ms": res.get("core_median_ms"),
                    "amici_cpu_ms": res.get("amici_cpu_ms"),
                    "steps": str(steps),
                    "n_steps": res.get("n_steps"),
                    "n_steps_backward": res.get("n_steps_backward"),
                    "gradient_rel_err": res.get("gradient_rel_err"),
                    "error": res.get("error"),
                }
            )
    return rows, {k: v for k, v in data.items() if k != "results"}


def pka_benchmarks(args) -> dict:
    progress("\n== pka: gradient of a Gaussian log-likelihood, 61 output times ==")
    case = Case("pka")
    start = time.perf_counter()
    case.forward_gradient()
    case.adjoint_gradient()
    case.adjoint_gradient(solver_backward="adams")
    case.adjoint_gradient(adjoint_method="discrete")
    progress(f"  first calls (compile / cache load): {time.perf_counter() - start:.1f} s")
    rows = {}
    for key, tol in CASES.items():
        rows[key] = [
            bench_forward_row(case, tol, args.repeats),
            bench_adjoint_row(case, tol, args.repeats),
            bench_adjoint_row(
                case, tol, args.repeats, label="adjoint (bdf/adams)", solver_backward="adams"
            ),
            bench_adjoint_row(
                case, tol, args.repeats, label=DISCRETE_LABEL, adjoint_method="discrete"
            ),
        ]
        for r in rows[key]:
            progress(
                f"  {key:13s} {r['solver']:20s} {r['median_ms']:8.2f} ms  steps {r['steps']:>16s}"
                f"  grad err {r['gradient_rel_err']:.1e}"
            )
    amici_meta = None
    if not args.no_amici:
        found, amici_meta = amici_rows(args.repeats)
        for key, extra in found.items():
            rows[key].extend(extra)
    return {"rows": rows, "amici": amici_meta}


def print_pka_tables(pka: dict) -> None:
    for key, rows in pka["rows"].items():
        ours = {r["solver"]: r for r in rows}
        base = ours["adjoint (bdf/bdf)"]["median_ms"]
        table = []
        for r in rows:
            if r.get("error"):
                table.append([r["solver"], "failed"] + ["-"] * 8 + [r["error"]])
                continue
            extra = ""
            if r.get("core_median_ms") is not None:
                extra = f"C++ call {fmt_ms(r['core_median_ms'])}, cpu {fmt_ms(r['amici_cpu_ms'])}"
            table.append(
                [
                    r["solver"],
                    fmt_ms(r["median_ms"]),
                    fmt_ms(r["min_ms"]),
                    fmt_ms(r.get("forward_phase_median_ms")),
                    fmt_ms(r.get("backward_phase_median_ms")),
                    r["steps"],
                    fmt_err(r.get("gradient_rel_err")),
                    fmt_err(r.get("gradient_component_err")),
                    fmt_ratio(r["median_ms"] / base),
                    extra,
                ]
            )
        title = f"pka gradient of the log-likelihood, {key}, 61 output times"
        if key == "Stan defaults":
            title += " (forward sens: bdf 1e-10/1e-10; adjoint: every tolerance 1e-6)"
        print()
        print_table(
            [
                "gradient by",
                "ms",
                "min ms",
                "fwd phase",
                "bwd phase",
                "steps (fwd+reint+bwd | fwd+replay)",
                "rel err",
                "comp err",
                "t/adjoint",
                "AMICI",
            ],
            table,
            title=title,
        )
    print(
        "ms: median of the whole gradient (solve + cotangent + backward or einsum); fwd / bwd"
        " phase: adjoint_forward and .backward timed on their own. AMICI ms is its Python\n"
        "call; 'C++ call' without the Python result wrapping, 'cpu' its own integration time."
        " AMICI steps: forward+backward. Errors against einsum(data - y_truth, S_truth)."
    )


# ----------------------------------------------------------------------------- part 2


def backward_steps_per_interval(case: Case, controls: dict) -> dict:
    """Backward steps of each output interval on its own, started from the full pass's lambda.

    ``lambda(t_j-)`` (after the jump at ``t_j``) is ``dL/dy(t_j)`` of the problem that starts
    at ``t_j`` from ``y(t_j)``: the ``.y0`` of an adjoint gradient with ``t0 = t_j``, whose
    cotangent at ``t0`` is added after its backward solve. The interval ``[t_{j-1}, t_j]`` is
    then an adjoint gradient with ``t0 = t_{j-1}``, one output time ``t_j`` and cotangent
    ``lambda(t_j-)``.
    """
    from pymc_odesens import adjoint_gradient, solve

    system, times, p = case.system, case.times, case.system.p_nominal
    fwd = {k: v for k, v in controls.items() if k.endswith("_forward")}
    y = solve(
        system,
        case.y0,
        times,
        p,
        t0=system.t0,
        method="bdf",
        relative_tolerance=fwd.get("relative_tolerance_forward"),
        absolute_tolerance=fwd.get("absolute_tolerance_forward"),
    ).y
    cot = case.data - y
    steps = []
    for j in range(1, times.size):
        lam = adjoint_gradient(system, y[j], times[j:], p, cot[j:], t0=times[j], **controls).y0
        g = adjoint_gradient(
            system, y[j - 1], times[j : j + 1], p, lam[None], t0=times[j - 1], **controls
        )
        steps.append(g.stats["backward"]["n_steps"])
    return {"interval_start": times[:-1], "interval_end": times[1:], "steps": steps}


def fastest_eigenvalue(case: Case) -> dict:
    reference = common.load_reference(case.name)
    eig = [
        np.linalg.eigvals(reference.jac_y(t, y, reference.p_nominal)).real.min()
        for t, y in zip(case.times, case.y_truth)
    ]
    return {"min": float(min(eig)), "median": float(np.median(eig))}


def jump_analysis(args) -> dict:
    progress("\n== pka: backward steps per output interval (1e-6/1e-8) ==")
    case = Case("pka")
    controls = adjoint_controls(LOOSE)
    checkpoints = case.adjoint_forward(**controls)
    cot = case.data - checkpoints.y
    full = checkpoints.backward(cot).stats
    last_only = np.zeros_like(cot)
    last_only[-1] = cot[-1]
    restart_only = checkpoints.backward(last_only).stats
    single = Case("pka", index=[case.times.size - 1])
    one_time = single.adjoint_gradient(**controls).stats
    per = backward_steps_per_interval(case, controls)
    steps = np.asarray(per["steps"])
    eig = fastest_eigenvalue(case)
    out = {
        "controls": controls,
        "backward_steps_all_61": full["backward"]["n_steps"],
        "backward_steps_last_only": restart_only["backward"]["n_steps"],
        "backward_steps_one_output_time": one_time["backward"]["n_steps"],
        "forward_steps": full["forward"]["n_steps"],
        "reintegration_steps": full["reintegration"]["n_steps"],
        "per_interval": per,
        "per_interval_sum": int(steps.sum()),
        "per_interval_min": int(steps.min()),
        "per_interval_median": float(np.median(steps)),
        "per_interval_max": int(steps.max()),
        "fastest_eigenvalue_J_y": eig,
    }
    progress(
        f"  backward steps: {out['backward_steps_all_61']} (cotangent at all 61 times), "
        f"{out['backward_steps_last_only']} (last only), "
        f"{out['backward_steps_one_output_time']} (one output time)"
    )
    return out


def print_jump_analysis(jumps: dict, amici_backward) -> None:
    per = jumps["per_interval"]
    steps = per["steps"]
    print()
    groups = []
    for start in range(0, len(steps), 10):
        chunk = steps[start : start + 10]
        groups.append(
            [
                f"{per['interval_start'][start]:g}-{per['interval_end'][start + len(chunk) - 1]:g}",
                " ".join(str(s) for s in chunk),
                sum(chunk),
            ]
        )
    print_table(
        ["t (10 intervals)", "backward steps per interval", "sum"],
        groups,
        title="pka at 1e-6/1e-8: backward steps in each output interval (each solved alone)",
    )
    n_jumps = len(steps)
    per_jump = (jumps["backward_steps_all_61"] - jumps["backward_steps_last_only"]) / n_jumps
    print(
        f"sum over intervals {jumps['per_interval_sum']} vs {jumps['backward_steps_all_61']} in "
        f"the full backward pass; per interval min {jumps['per_interval_min']}, median "
        f"{jumps['per_interval_median']:.0f}, max {jumps['per_interval_max']}.\n"
        f"Backward steps: {jumps['backward_steps_all_61']} with the cotangent at all 61 output "
        f"times, {jumps['backward_steps_last_only']} with it at the last one only (restarts at "
        f"every output time, no jumps), {jumps['backward_steps_one_output_time']} with one "
        f"output time; forward pass {jumps['forward_steps']}, re-integration "
        f"{jumps['reintegration_steps']}.\n"
        f"Per jump: {per_jump:.0f}"
        f" steps more than a plain restart. Fastest eigenvalue of J_y along the trajectory: "
        f"{jumps['fastest_eigenvalue_J_y']['min']:.1f} (median over the output times "
        f"{jumps['fastest_eigenvalue_J_y']['median']:.1f})."
    )
    if amici_backward:
        print(f"AMICI (CVODES) backward steps at the same tolerances: {amici_backward}")


# ----------------------------------------------------------------------------- part 3

OUTPUT_TIME_MODELS = ("pka", "robertson", "lotka_volterra")


def output_time_sweep(args) -> list[dict]:
    progress("\n== output times: forward-sensitivity vs adjoint gradient (1e-6/1e-8) ==")
    rows = []
    for name in OUTPUT_TIME_MODELS:
        n_times = common.load_truth(name)["t"].size
        for label, index in (
            ("61", None),
            ("7", np.arange(0, n_times, 10)),
            ("2", np.array([0, n_times - 1])),
        ):
            case = Case(name, index)
            fwd = bench_forward_row(case, LOOSE, args.repeats)
            adj = bench_adjoint_row(case, LOOSE, args.repeats)
            row = {
                "model": name,
                "n_times": case.times.size,
                "forward": fwd,
                "adjoint": adj,
                "forward_over_adjoint": fwd["median_ms"] / adj["median_ms"],
            }
            rows.append(row)
            progress(
                f"  {name:15s} T={label:3s} forward {fwd['median_ms']:7.2f} ms ({fwd['steps']} "
                f"steps), adjoint {adj['median_ms']:7.2f} ms ({adj['steps']} steps)"
            )
    return rows


def print_output_time_table(rows) -> None:
    table = [
        [
            r["model"],
            r["n_times"],
            fmt_ms(r["forward"]["median_ms"]),
            r["forward"]["steps"],
            fmt_err(r["forward"]["gradient_rel_err"]),
            fmt_ms(r["adjoint"]["median_ms"]),
            r["adjoint"]["steps"],
            fmt_err(r["adjoint"]["gradient_rel_err"]),
            fmt_ratio(r["forward_over_adjoint"]),
        ]
        for r in rows
    ]
    print()
    print_table(
        [
            "model",
            "T",
            "forward ms",
            "steps",
            "rel err",
            "adjoint ms",
            "steps (fwd+reint+bwd)",
            "rel err",
            "forward/adjoint",
        ],
        table,
        title="Gradient of the log-likelihood at 1e-6/1e-8 (every tolerance), bdf, by the number"
        " of output times T (7: every 10th, 2: first and last)",
    )


# ----------------------------------------------------------------------------- part 4

CHILD = str(common.BENCH_DIR / "random_linear_child.py")
SCALING_STAGES = ("plain", "grad_forward", "grad_adjoint", "grad_discrete")


def scaling_benchmarks(args) -> dict:
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    progress(
        f"\n== random linear system (PBS paper), n = N = P in {sizes}, seed {args.seed}, "
        f"T = 61 and 2, compile timeout {args.compile_timeout:.0f} s per stage =="
    )
    out = {"sizes": sizes, "seed": args.seed, "n_times": [61, 2], "per_size": {}}
    active = list(SCALING_STAGES)
    for n in sizes:
        if not active:
            out["per_size"][n] = {"skipped": "a smaller size exceeded the compile timeout"}
            continue
        per_n = {}
        for n_times in (61, 2):
            argv = [CHILD, "--n", str(n), "--seed", str(args.seed), "--stages", ",".join(active)]
            argv += ["--n-times", str(n_times), "--repeats", str(args.repeats)]
            argv += ["--rtol", repr(LOOSE[0]), "--atol", repr(LOOSE[1])]
            res = common.run_staged_child(
                argv,
                ["import", "build", *active],
                stage_timeout=args.compile_timeout + 10.0,
                label=f"n={n:3d} T={n_times:2d}",
            )
            per_n[n_times] = res
            for stage in active:
                d = res.get(stage, {})
                if "median_ms" in d:
                    progress(
                        f"    n={n:3d} T={n_times:2d} {stage:12s}: first call "
                        f"{d['first_call_s']:5.1f} s, {d['median_ms']:9.2f} ms"
                    )
            for stage in list(active):
                if "median_ms" not in res.get(stage, {}):
                    active.remove(stage)
        out["per_size"][n] = per_n
    for n_times in (61, 2):
        fits = {}
        for stage in SCALING_STAGES:
            xs, ys = [], []
            for n in sizes:
                d = out["per_size"][n].get(n_times, {}).get(stage, {})
                if "median_ms" in d:
                    xs.append(n)
                    ys.append(d["median_ms"])
            fits[stage] = {"exponent": common.fit_power_law(xs, ys), "sizes": xs}
        for stage in ("grad_forward", "grad_adjoint", "grad_discrete"):
            xs, ys = [], []
            for n in sizes:
                d = out["per_size"][n].get(n_times, {})
                if "median_ms" in d.get(stage, {}) and "median_ms" in d.get("plain", {}):
                    xs.append(n)
                    ys.append(d[stage]["median_ms"] / d["plain"]["median_ms"])
            fits[f"{stage}_over_plain"] = {"exponent": common.fit_power_law(xs, ys), "sizes": xs}
        out[f"fits_T{n_times}"] = fits
    return out


def print_scaling_table(scaling: dict) -> None:
    for n_times in (61, 2):
        rows = []
        for n in scaling["sizes"]:
            d = scaling["per_size"].get(n, {})
            if "skipped" in d:
                rows.append([n, "skipped"] + ["-"] * 8)
                continue
            d = d.get(n_times, {})
            cells = [n]
            for stage in SCALING_STAGES:
                s = d.get(stage)
                if s is None:
                    cells.append("-")
                elif "timeout_s" in s:
                    cells.append(f"compile > {s['timeout_s']:.0f} s")
                elif "error" in s:
                    cells.append("failed")
                else:
                    cells.append(fmt_ms(s["median_ms"]))
            adj, fwd = d.get("grad_adjoint", {}), d.get("grad_forward", {})
            if "median_ms" in adj:
                cells += [
                    fmt_ms(adj["forward_phase_median_ms"]),
                    fmt_ms(adj["backward_phase_median_ms"]),
                    adjoint_steps(adj["stats"]),
                ]
            else:
                cells += ["-", "-", "-"]
            cells.append(fwd["stats"]["n_steps"] if "stats" in fwd else "-")
            disc = d.get("grad_discrete", {})
            ratios = [
                fmt_ratio(fwd["median_ms"] / x["median_ms"])
                if "median_ms" in x and "median_ms" in fwd
                else "-"
                for x in (adj, disc)
            ]
            cells.append(" / ".join(ratios))
            errs = [fmt_err(x.get("gradient_rel_err")) for x in (fwd, adj, disc)]
            cells.append(" / ".join(errs))
            rows.append(cells)
        print()
        print_table(
            [
                "n=N=P",
                "plain ms",
                "forward grad ms",
                "adjoint grad ms",
                "discrete grad ms",
                "adj fwd phase",
                "adj bwd phase",
                "adj steps",
                "fwd steps",
                "forward/adjoint / discrete",
                "grad err fwd / adj / disc",
            ],
            rows,
            title=f"Random linear system, T = {n_times} output times on [0, 10], bdf, "
            "1e-6 / 1e-8 (every tolerance)",
        )
        fits = scaling[f"fits_T{n_times}"]
        for key, label in (
            ("plain", "plain solve"),
            ("grad_forward", "forward-sensitivity gradient"),
            ("grad_adjoint", "adjoint gradient"),
            ("grad_discrete", "discrete adjoint gradient"),
            ("grad_forward_over_plain", "forward gradient / plain solve"),
            ("grad_adjoint_over_plain", "adjoint gradient / plain solve"),
            ("grad_discrete_over_plain", "discrete adjoint gradient / plain solve"),
        ):
            b = fits[key]["exponent"]
            text = "fewer than 2 sizes" if b is None else f"~ n^{b:.2f}"
            print(f"  log-log fit, {label}: {text} (sizes {fits[key]['sizes']})")


# ----------------------------------------------------------------------------- goals


def goals(pka: dict, scaling: dict | None) -> list[dict]:
    out = []
    rows = {r["solver"]: r for r in pka["rows"]["1e-6/1e-8"]}
    fwd = rows["forward sens (bdf)"]
    amici = rows.get("AMICI adjoint")
    for label, name in ((DISCRETE_LABEL, "discrete adjoint"), ("adjoint (bdf/bdf)", "adjoint")):
        adj = rows[label]
        ratio = fwd["median_ms"] / adj["median_ms"]
        out.append(
            {
                "goal": f"pka (P = 35) at 1e-6/1e-8: {name} gradient >= 1.5x faster than the "
                "forward-sensitivity gradient",
                "measured": f"forward/{name} = {fmt_ratio(ratio)} (fastest runs: "
                f"{fmt_ratio(fwd['min_ms'] / adj['min_ms'])}; {fmt_ms(fwd['median_ms'])} ms vs "
                f"{fmt_ms(adj['median_ms'])} ms)",
                "met": ratio >= GOALS["forward_over_adjoint_pka"],
            }
        )
        if not amici or amici.get("error"):
            out.append(
                {"goal": f"pka {name} no slower than AMICI's adjoint", "measured": "skipped"}
            )
            continue
        for key, text in (
            ("median_ms", f"pka {name} no slower than AMICI's adjoint (Python call)"),
            ("core_median_ms", "  (same, AMICI's C++ call without Python wrapping)"),
            ("amici_cpu_ms", "  (same, AMICI's own cpu_time of the integration only)"),
        ):
            if amici.get(key):
                r = amici[key] / adj["median_ms"]
                measured = f"AMICI/ours = {fmt_ratio(r)}"
                if key == "median_ms":
                    measured += f" (fastest runs: {fmt_ratio(amici['min_ms'] / adj['min_ms'])})"
                out.append({"goal": text, "measured": measured, "met": r >= 1.0})
    if scaling:
        for n_times in (61, 2):
            fits = scaling[f"fits_T{n_times}"]
            bf = fits["grad_forward_over_plain"]["exponent"]
            for stage, name in (("grad_discrete", "discrete adjoint"), ("grad_adjoint", "adjoint")):
                b = fits[f"{stage}_over_plain"]["exponent"]
                b_abs = fits[stage]["exponent"]
                if b is None:
                    out.append(
                        {
                            "goal": f"random linear, T = {n_times}: {name} cost far slower than "
                            "linear in P",
                            "measured": "fewer than 2 sizes",
                        }
                    )
                    continue
                out.append(
                    {
                        "goal": f"random linear, T = {n_times}: {name} cost grows far slower "
                        f"than linearly in P ({name} / plain solve ~ n^b, b <= "
                        f"{GOALS['adjoint_over_plain_exp']})",
                        "measured": f"b = {b:.2f} (forward/plain: {bf:.2f}; {name} alone "
                        f"~ n^{b_abs:.2f}; sizes {fits[f'{stage}_over_plain']['sizes']})",
                        "met": b <= GOALS["adjoint_over_plain_exp"],
                    }
                )
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Benchmark of adjoint gradients.")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="random linear system sizes")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--compile-timeout",
        type=float,
        default=120.0,
        help="seconds allowed per stage (model build, first call of each gradient) of one "
        "random-system size; compiled kernels are cached for later runs",
    )
    parser.add_argument("--no-amici", action="store_true")
    parser.add_argument("--no-scaling", action="store_true")
    parser.add_argument("--quick", action="store_true", help="few repeats")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = 3
    started = time.perf_counter()
    load_start = common.report_load("at start")
    progress("bench_adjoint: adjoint vs forward-sensitivity gradients, AMICI; scaling in P")
    pka = pka_benchmarks(args)
    jumps = jump_analysis(args)
    sweep = output_time_sweep(args)
    scaling = None if args.no_scaling else scaling_benchmarks(args)
    print_pka_tables(pka)
    amici_bwd = next(
        (r["n_steps_backward"] for r in pka["rows"]["1e-6/1e-8"] if r["solver"] == "AMICI adjoint"),
        None,
    )
    print_jump_analysis(jumps, amici_bwd)
    print_output_time_table(sweep)
    if scaling:
        print_scaling_table(scaling)
    goal_items = goals(pka, scaling)
    common.finish_run(
        "bench_adjoint",
        {
            "pka": pka,
            "pka_backward_steps": jumps,
            "output_times": sweep,
            "random_linear": scaling,
        },
        goal_items,
        load_start,
        started,
        title="Goals (issue 4)",
    )


if __name__ == "__main__":
    main()
