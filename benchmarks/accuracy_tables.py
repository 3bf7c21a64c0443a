"""The measured accuracy tables of the docs, regenerated from the reference models.

Run:  python benchmarks/accuracy_tables.py                      (all sections, ~2-4 minutes)
      python benchmarks/accuracy_tables.py --sections adjoint   (solve, forward, adjoint)

Prints every table of ``docs/solvers.md`` ("Measured accuracy"), ``docs/sensitivities.md``
and ``docs/adjoint.md`` that holds errors or step counts, in markdown, with the numbers the
prose of those pages quotes, and writes them to ``results/accuracy_tables.json``. Nothing
here is timed: step counts and errors are deterministic for a given code and machine.

The settings are the tests' own, imported from them so that the two cannot drift apart:
``tests/solvers/test_solve_accuracy.py`` (solve), ``tests/sensitivity/test_forward_accuracy.py``
and ``accuracy.py`` (forward sensitivities: per-column errors, finite differences),
``tests/sensitivity/adjoint_reference.py`` (adjoint: seeded standard-normal cotangent at every
output time, per-model absolute tolerances, the two error measures). Run it from the
repository root or anywhere (the repository root is put on ``sys.path`` for ``tests``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import common
import numpy as np
from common import progress

sys.path.append(str(common.REPO_DIR))  # for `tests`; pymc_odesens as installed or on PYTHONPATH

SECTIONS = ("solve", "forward", "adjoint")


def fmt(value) -> str:
    """``1.7e-9`` (the docs' style: no sign or leading zero in the exponent)."""
    if value is None:
        return "-"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def markdown(headers, rows, title=None) -> str:
    lines = []
    if title:
        lines.append(f"**{title}**\n")
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("|" + "---|" * len(headers))
    lines.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
    text = "\n".join(lines)
    print("\n" + text, flush=True)
    return text


def truth_args(system, truth):
    return (system, truth["y"][0], truth["t"], system.p_nominal)


# ----------------------------------------------------------------------------- solve


def solve_section() -> dict:
    from pymc_odesens import OdeSystem, solve
    from tests.conftest import load_truth, model_path
    from tests.solvers.accuracy import scaled_error
    from tests.solvers.test_solve_accuracy import CASES

    progress("\n## solve: scaled error against the truth (docs/solvers.md)")
    methods = ("rk45", "ckrk", "bdf", "adams")
    rows, data = [], {}
    for name, model_methods, rtol, atol, bound in CASES:
        system = OdeSystem.from_json(model_path(name))
        truth = load_truth(name)
        tol = f"{fmt(rtol)} / {fmt(atol)}".replace(".0e", "e")
        cells = [f"{name} ({tol})"]
        for method in methods:
            if method not in model_methods:
                cells.append("")
                continue
            res = solve(
                *truth_args(system, truth),
                t0=system.t0,
                method=method,
                relative_tolerance=rtol,
                absolute_tolerance=atol,
            )
            err = scaled_error(res.y, truth["y"])
            data[f"{name}/{method}"] = {"scaled_error": err, "stats": res.stats, "bound": bound}
            cells.append(fmt(err))
        rows.append(cells)
    table = markdown(["model (rtol / atol)", *methods], rows)
    return {"values": data, "markdown": table}


# ----------------------------------------------------------------------------- forward


def forward_section() -> dict:
    import scipy.linalg

    from pymc_odesens import OdeSystem, solve, solve_sensitivity
    from tests.conftest import load_truth, model_path
    from tests.sensitivity.accuracy import (
        column_errors,
        entry_excess,
        fd_initial_state,
        fd_params,
        worst_column_error,
    )
    from tests.sensitivity.test_forward_accuracy import CASES, FD_CASES, STM_CASES

    progress("\n## forward sensitivities (docs/sensitivities.md)")
    out: dict = {}
    systems = {}

    def get(name):
        if name not in systems:
            systems[name] = (OdeSystem.from_json(model_path(name)), load_truth(name))
        return systems[name]

    # -- the main table: rtol 1e-8, error control on / off, steps, LU factorisations
    rows, values = [], {}
    for name, methods, atol, _bound, _ybound in CASES:
        system, truth = get(name)
        args = truth_args(system, truth)
        for method in methods:
            kw = dict(t0=system.t0, method=method, relative_tolerance=1e-8, absolute_tolerance=atol)
            plain = solve(*args, **kw)
            on = solve_sensitivity(*args, **kw)
            off = solve_sensitivity(*args, sensitivity_error_control=False, **kw)
            excess = entry_excess(on.S, truth["S"], relative=1e-4)
            err_on = worst_column_error(on.S, truth["S"])
            err_off = worst_column_error(off.S, truth["S"])
            implicit = method in ("bdf", "adams")
            lu = (
                f"{plain.stats['n_lu_decompositions']} / {on.stats['n_lu_decompositions']}"
                if implicit
                else ""
            )
            values[f"{name}/{method}"] = {
                "atol": atol,
                "column_error_on": err_on,
                "column_error_off": err_off,
                "entries_excess_atol": max(float(excess.max()) / atol, 0.0),
                "worst_column": int(column_errors(on.S, truth["S"]).argmax()),
                "stats_plain": plain.stats,
                "stats_on": on.stats,
                "stats_off": off.stats,
            }
            v = values[f"{name}/{method}"]
            entries = v["entries_excess_atol"]
            rows.append(
                [
                    name,
                    method,
                    f"{atol:g}",
                    fmt(err_on),
                    "0" if entries == 0 else f"{entries:.1f}",
                    fmt(err_off),
                    f"{plain.stats['n_steps']} / {on.stats['n_steps']} / {off.stats['n_steps']}",
                    lu,
                ]
            )
        progress(f"  {name} done")
    out["main"] = {
        "values": values,
        "markdown": markdown(
            [
                "model",
                "method",
                "atol",
                "column error",
                "entries",
                "column error, error control off",
                "steps: plain / on / off",
                "LU: plain / on",
            ],
            rows,
            title="rtol 1e-8, the settings of tests/sensitivity/test_forward_accuracy.py",
        ),
    }

    # -- adams on the stiff models without error control (the warning in the docs)
    rows, values = [], {}
    for name in ("pka", "robertson"):
        system, truth = get(name)
        for atol in (1e-10, 1e-12):
            kw = dict(
                t0=system.t0, method="adams", relative_tolerance=1e-8, absolute_tolerance=atol
            )
            on = solve_sensitivity(*truth_args(system, truth), **kw)
            off = solve_sensitivity(
                *truth_args(system, truth), sensitivity_error_control=False, **kw
            )
            e_on = worst_column_error(on.S, truth["S"])
            e_off = worst_column_error(off.S, truth["S"])
            values[f"{name}/{atol:g}"] = {
                "column_error_on": e_on,
                "column_error_off": e_off,
                "steps_on": on.stats["n_steps"],
                "steps_off": off.stats["n_steps"],
            }
            rows.append(
                [
                    name,
                    f"{atol:g}",
                    fmt(e_on),
                    fmt(e_off),
                    f"{on.stats['n_steps']} / {off.stats['n_steps']}",
                ]
            )
    out["adams_stiff_error_control"] = {
        "values": values,
        "markdown": markdown(
            ["model", "atol", "column error on", "column error off", "steps on / off"],
            rows,
            title="adams on the stiff models at rtol 1e-8, sensitivity error control on / off",
        ),
    }

    # -- pka's worst column with adams at 1e-8 / 1e-10 (absolute tolerance and small columns)
    system, truth = get("pka")
    res = solve_sensitivity(
        *truth_args(system, truth),
        t0=system.t0,
        method="adams",
        relative_tolerance=1e-8,
        absolute_tolerance=1e-10,
    )
    cols = column_errors(res.S, truth["S"])
    k = int(cols.argmax())
    out["pka_adams_1e-10"] = {
        "worst_column": k,
        "parameter": system.params[k],
        "column_error": float(cols[k]),
        "column_peak": float(np.abs(truth["S"][:, :, k]).max()),
    }
    progress(
        f"  pka adams 1e-8 / 1e-10: worst column {system.params[k]} (index {k}), error "
        f"{cols[k]:.1e}, peak |S| {out['pka_adams_1e-10']['column_peak']:.1e}"
    )

    # -- LU factorisations shared by all blocks (pka bdf at 1e-8 / 1e-12)
    kw = dict(t0=system.t0, method="bdf", relative_tolerance=1e-8, absolute_tolerance=1e-12)
    lu = {
        "plain": solve(*truth_args(system, truth), **kw).stats["n_lu_decompositions"],
        "params": solve_sensitivity(*truth_args(system, truth), **kw).stats["n_lu_decompositions"],
        "both": solve_sensitivity(*truth_args(system, truth), wrt="both", **kw).stats[
            "n_lu_decompositions"
        ],
    }
    out["pka_lu"] = lu
    progress(f"  pka bdf 1e-8 / 1e-12 LU factorisations: {lu}")

    # -- convergence as tolerances fall
    tolerances = (1e-4, 1e-6, 1e-8, 1e-10, 1e-12)
    rows, values = [], {}
    for name, method in (
        ("lotka_volterra", "rk45"),
        ("chua", "ckrk"),
        ("pka", "bdf"),
        ("pka", "adams"),
        ("robertson", "bdf"),
    ):
        system, truth = get(name)
        ratio = 1e-4 if name in ("pka", "robertson") else 1e-2
        errs = []
        for tol in tolerances:
            res = solve_sensitivity(
                *truth_args(system, truth),
                t0=system.t0,
                method=method,
                relative_tolerance=tol,
                absolute_tolerance=tol * ratio,
            )
            errs.append(worst_column_error(res.S, truth["S"]))
        values[f"{name}/{method}"] = errs
        rows.append([f"{name}, {method}", *(fmt(e) for e in errs)])
    out["convergence"] = {
        "values": values,
        "markdown": markdown(
            ["rtol", *(fmt(t).replace(".0e", "e") for t in tolerances)],
            rows,
            title="worst column error; atol = rtol x 1e-2 (non-stiff), rtol x 1e-4 (stiff)",
        ),
    }

    # -- state-transition matrix: linear2 against expm, the others against differences
    system, _ = get("linear2")
    p0, p1 = system.p_nominal
    a_mat = np.array([[-p0, p1], [0.0, -p1]])
    t = np.linspace(0.0, 5.0, 21)
    stm = {}
    for method in ("rk45", "ckrk", "bdf", "adams"):
        res = solve_sensitivity(
            system,
            [0.3, -2.0],
            t,
            [p0, p1],
            method=method,
            wrt="y0",
            relative_tolerance=1e-10,
            absolute_tolerance=1e-12,
        )
        exact = np.stack([scipy.linalg.expm(a_mat * tk) for tk in t])
        stm[f"linear2/{method}/expm"] = float(np.abs(res.S - exact).max())
    for name, fd_method, methods, _bound in STM_CASES:
        system, truth = get(name)
        y0 = truth["y"][0]
        atol = 1e-12 if name in ("lotka_volterra", "chua") else 1e-14
        fd = fd_initial_state(
            system, y0, truth["t"], system.p_nominal, t0=system.t0, method=fd_method
        )
        for method in methods:
            res = solve_sensitivity(
                *truth_args(system, truth),
                t0=system.t0,
                method=method,
                wrt="y0",
                relative_tolerance=1e-10,
                absolute_tolerance=atol,
            )
            stm[f"{name}/{method}/fd"] = worst_column_error(res.S, fd)
    out["state_transition_matrix"] = stm
    progress("  state-transition matrix: " + ", ".join(f"{k} {v:.1e}" for k, v in stm.items()))

    # -- finite differences of solve w.r.t. the parameters (and the differences vs the truth)
    fd_out = {}
    for name, fd_method, columns, methods, _bound in FD_CASES:
        system, truth = get(name)
        fd = fd_params(*truth_args(system, truth), columns, t0=system.t0, method=fd_method)
        fd_out[f"{name}/fd_vs_truth"] = worst_column_error(fd, truth["S"][:, :, list(columns)])
        atol = 1e-12 if name in ("lotka_volterra", "chua") else 1e-14
        for method in methods:
            res = solve_sensitivity(
                *truth_args(system, truth),
                t0=system.t0,
                method=method,
                relative_tolerance=1e-10,
                absolute_tolerance=atol,
            )
            fd_out[f"{name}/{method}"] = worst_column_error(res.S[:, :, list(columns)], fd)
    out["finite_differences"] = fd_out
    progress("  finite differences: " + ", ".join(f"{k} {v:.1e}" for k, v in fd_out.items()))
    return out


# ----------------------------------------------------------------------------- adjoint


def adjoint_section() -> dict:
    from pymc_odesens import OdeSolverError, adjoint_gradient
    from tests.sensitivity.adjoint_reference import (
        MODELS,
        adjoint_on_case,
        component_error,
        reference_case,
        relative_error,
    )
    from tests.sensitivity.test_adjoint_accuracy import _five_point, _loss

    progress("\n## adjoint gradients (docs/adjoint.md)")
    out: dict = {}

    def errors(ref, g) -> dict:
        return {
            "rel_truth": relative_error(g.params, ref["g_truth"]),
            "comp_truth": component_error(g.params, ref["g_truth"], ref["scale_truth"]),
            "rel_forward": relative_error(g.params, ref["g_forward"]),
            "y0_rel": relative_error(g.y0, ref["g_y0_forward"]),
            "y0_comp": component_error(g.y0, ref["g_y0_forward"], ref["scale_y0"]),
            "backward_steps": g.stats["backward"]["n_steps"],
        }

    # -- accuracy over tolerances, both interpolations, backward bdf
    tolerances = (1e-4, 1e-6, 1e-8, 1e-10)
    rows, values = [], {}
    for name in MODELS:
        ref = reference_case(name)
        for interp, label in ((1, "Hermite"), (2, "polynomial")):
            cells = [name, label]
            for tol in tolerances:
                key = f"{name}/{label}/{tol:g}"
                try:
                    g = adjoint_on_case(ref, tol, interpolation_polynomial=interp)
                except OdeSolverError as err:
                    values[key] = {"error": f"{type(err).__name__}: {err}"}
                    cells.append(f"fails ({type(err).__name__})")
                    continue
                values[key] = errors(ref, g)
                cells.append(f"{fmt(values[key]['rel_truth'])} / {fmt(values[key]['comp_truth'])}")
            rows.append(cells)
        progress(f"  {name} done")
    out["accuracy"] = {
        "values": values,
        "markdown": markdown(
            ["model", "interpolation", *(f"rtol {fmt(t).replace('.0e', 'e')}" for t in tolerances)],
            rows,
            title="dL/dp against the truth, relative / per component; backward bdf, "
            "controls of tests/sensitivity/adjoint_reference.py",
        ),
    }

    # -- rtol 1e-8: every interpolation and backward solver; dL/dy0; backward steps
    rows, values = [], {}
    for name in MODELS:
        ref = reference_case(name)
        for solver in ("bdf", "adams"):
            for interp, label in ((1, "Hermite"), (2, "polynomial")):
                g = adjoint_on_case(
                    ref, 1e-8, interpolation_polynomial=interp, solver_backward=solver
                )
                e = errors(ref, g)
                values[f"{name}/{solver}/{label}"] = e
                rows.append(
                    [
                        name,
                        solver,
                        label,
                        fmt(e["rel_truth"]),
                        fmt(e["comp_truth"]),
                        fmt(e["rel_forward"]),
                        fmt(e["y0_rel"]),
                        fmt(e["y0_comp"]),
                        e["backward_steps"],
                    ]
                )
    out["rtol_1e-8"] = {
        "values": values,
        "markdown": markdown(
            [
                "model",
                "backward",
                "interpolation",
                "dL/dp rel (truth)",
                "dL/dp comp (truth)",
                "dL/dp rel (forward sens)",
                "dL/dy0 rel",
                "dL/dy0 comp",
                "backward steps",
            ],
            rows,
            title="rtol 1e-8: both backward solvers and interpolations (dL/dy0 against the "
            "state-transition matrix from forward sensitivities at rtol 1e-10)",
        ),
    }

    # -- below rtol 1e-10 pka's error is the truth's own
    ref = reference_case("pka")
    out["pka_below_1e-10"] = {
        f"{tol:g}": relative_error(adjoint_on_case(ref, tol).params, ref["g_truth"])
        for tol in (1e-10, 1e-11)
    }
    progress(f"  pka, dL/dp relative error at rtol 1e-10, 1e-11: {out['pka_below_1e-10']}")

    # -- every control at its default
    defaults = {}
    for name in MODELS:
        ref = reference_case(name)
        system = ref["system"]
        g = adjoint_gradient(
            system, ref["y0"], ref["t"], system.p_nominal, ref["cot"], t0=system.t0
        )
        defaults[name] = errors(ref, g)
    out["defaults"] = defaults
    progress(
        "  every control at its default: "
        + ", ".join(
            f"{k} {v['rel_truth']:.1e} (comp {v['comp_truth']:.1e})" for k, v in defaults.items()
        )
    )

    # -- five-point differences on lotka_volterra at adjoint rtol 1e-10
    ref = reference_case("lotka_volterra")
    system, t, cot = ref["system"], ref["t"], ref["cot"]
    p, y0 = system.p_nominal.copy(), ref["y0"].copy()
    fd_p = np.array(
        [
            _five_point(lambda q: _loss(system, y0, t, q, cot), p, k, 1e-4 * abs(p[k]))
            for k in range(p.size)
        ]
    )
    fd_y0 = np.array(
        [_five_point(lambda z: _loss(system, z, t, p, cot), y0, j, 1e-4) for j in range(2)]
    )
    g = adjoint_on_case(ref, 1e-10)
    out["finite_differences_lotka_volterra"] = {
        "fd_vs_truth": relative_error(fd_p, ref["g_truth"]),
        "dL_dp": relative_error(g.params, fd_p),
        "dL_dy0": relative_error(g.y0, fd_y0),
    }
    progress(
        f"  five-point differences, lotka_volterra: {out['finite_differences_lotka_volterra']}"
    )

    # -- checkpoints: steps between checkpoints K on pka at rtol 1e-8
    ref = reference_case("pka")
    rows, values = [], {}
    for k in (5, 20, 150, 10**6):
        g = adjoint_on_case(ref, 1e-8, num_steps_between_checkpoints=k)
        s = g.stats
        values[str(k)] = {
            "n_checkpoints": s["n_checkpoints"],
            "forward_steps": s["forward"]["n_steps"],
            "reintegration_steps": s["reintegration"]["n_steps"],
            "backward_steps": s["backward"]["n_steps"],
            "rel_truth": relative_error(g.params, ref["g_truth"]),
        }
        v = values[str(k)]
        rows.append(
            [
                "1e6" if k == 10**6 else (f"{k} (default)" if k == 150 else k),
                v["n_checkpoints"],
                v["reintegration_steps"],
                v["backward_steps"],
                fmt(v["rel_truth"]),
            ]
        )
    fwd_steps = values["150"]["forward_steps"]
    out["checkpoints"] = {
        "values": values,
        "markdown": markdown(
            ["K", "checkpoints", "re-integration steps", "backward steps", "dL/dp rel error"],
            rows,
            title=f"pka, rtol 1e-8, {fwd_steps} forward steps, 61 output times",
        ),
    }

    # -- the quadratures' absolute tolerance (pka, rtol 1e-8)
    quad = {}
    for label, extra in (
        ("atol_q 1e-14", dict(absolute_tolerance_quadrature=1e-14)),
        ("atol_q 1e-8", dict(absolute_tolerance_quadrature=1e-8)),
        (
            "rtol_q 1e-6, atol_q 1e-6",
            dict(relative_tolerance_quadrature=1e-6, absolute_tolerance_quadrature=1e-6),
        ),
    ):
        controls = {**_pka_controls_1e8(), **extra}
        system = ref["system"]
        g = adjoint_gradient(
            system, ref["y0"], ref["t"], system.p_nominal, ref["cot"], t0=system.t0, **controls
        )
        quad[label] = {
            "comp_truth": component_error(g.params, ref["g_truth"], ref["scale_truth"]),
            "rel_truth": relative_error(g.params, ref["g_truth"]),
        }
    out["quadrature_tolerance_pka"] = quad
    progress(
        "  quadrature tolerance, pka rtol 1e-8: "
        + ", ".join(
            f"{k}: comp {v['comp_truth']:.1e}, rel {v['rel_truth']:.1e}" for k, v in quad.items()
        )
    )
    return out


def _pka_controls_1e8() -> dict:
    from tests.sensitivity.adjoint_reference import adjoint_controls

    return adjoint_controls("pka", 1e-8)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="The docs' accuracy tables.")
    parser.add_argument("--sections", default=",".join(SECTIONS))
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"--sections: unknown {sorted(unknown)}; choose from {SECTIONS}")
    started = time.perf_counter()
    # a run of some sections keeps the others' earlier numbers in the results file
    path = common.RESULTS_DIR / "accuracy_tables.json"
    results = {}
    if path.exists():
        previous = json.loads(path.read_text())
        results = {k: previous[k] for k in SECTIONS if k in previous}
    run = {"solve": solve_section, "forward": forward_section, "adjoint": adjoint_section}
    for section in sections:
        section_start = time.perf_counter()
        results[section] = run[section]()
        results[section]["measured"] = {
            **common.machine_info(),
            "runtime_s": time.perf_counter() - section_start,
        }
    path = common.write_results("accuracy_tables", results)
    progress(f"\nresults written to {path} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
