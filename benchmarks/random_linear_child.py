"""Timed stages on one size of the PBS paper's random linear system, run in a subprocess.

Started by ``bench_forward_sensitivity.py`` and ``bench_adjoint.py`` through
:func:`common.run_staged_child` (one process per size, so that a size whose kernels take too
long to compile can be stopped) and never imported by them. Prints one JSON line per stage,
``{"stage": name, ...}``; the parent gives each stage its own time limit.

    python random_linear_child.py --n 20 --stages plain,sens --n-times 61

Problem: :mod:`random_linear` (``x' = A x + p**2 + u``, ``x(0) = 0``, n = N = P), output
times ``linspace(0, 10, n_times)``, ``bdf`` at ``--rtol`` / ``--atol`` (every tolerance of the
adjoint as well). Stages:

- ``import``, ``build``: import of pymc_odesens; the ``OdeSystem`` (sympy).
- ``plain``: ``solve``.
- ``sens``: ``solve_sensitivity``; S against the closed form.
- ``grad_forward``: the gradient of the Gaussian log-likelihood
  ``sum_{t,i} log N(data[t, i] | x_i(t), 1)`` with ``data = 1.1 x_exact`` from forward
  sensitivities: ``solve_sensitivity``, cotangent ``data - y``, ``einsum``.
- ``grad_adjoint``: the same gradient by ``adjoint_forward`` and ``.backward(data - y)``,
  with the two phases also timed on their own.
- ``grad_discrete``: the same with ``adjoint_method="discrete"``.

The first call of a stage includes generating and compiling the kernels it needs (or
loading them from ``PYMC_ODESENS_CACHE_DIR``); then up to ``--repeats`` calls (at most about
3 s) are timed and their median and minimum reported. Gradients are compared with
``einsum(data - x_exact, S_exact)``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from random_linear import DEFAULT_SEED, random_linear_problem  # noqa: E402

STAGES = ("plain", "sens", "grad_forward", "grad_adjoint", "grad_discrete")
MAX_TIMED_SECONDS = 3.0


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def timed(fn, repeats: int) -> tuple[float, dict]:
    """First call's seconds, then the median / minimum of up to ``repeats`` timed calls."""
    start = time.perf_counter()
    result = fn()
    first = time.perf_counter() - start
    samples = []
    while len(samples) < max(repeats, 1) and sum(samples) < MAX_TIMED_SECONDS:
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return first, {
        "median_ms": float(np.median(samples)) * 1e3,
        "min_ms": float(min(samples)) * 1e3,
        "n_timed": len(samples),
        "result": result,
    }


def relative(value, truth) -> float:
    value, truth = np.asarray(value, float), np.asarray(truth, float)
    return float(np.abs(value - truth).max() / max(np.abs(truth).max(), 1e-300))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--stages", default="plain,sens")
    parser.add_argument("--n-times", type=int, default=61)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rtol", type=float, default=1e-6)
    parser.add_argument("--atol", type=float, default=1e-8)
    args = parser.parse_args(argv)
    stages = [s for s in args.stages.split(",") if s]
    unknown = set(stages) - set(STAGES)
    if unknown:
        raise SystemExit(f"unknown stages {sorted(unknown)}; choose from {STAGES}")

    start = time.perf_counter()
    from pymc_odesens import adjoint_forward, solve, solve_sensitivity

    emit(stage="import", seconds=time.perf_counter() - start)
    start = time.perf_counter()
    problem = random_linear_problem(args.n, args.seed)
    system = problem.system()
    emit(stage="build", seconds=time.perf_counter() - start)

    times = np.linspace(0.0, 10.0, args.n_times)
    y0, p = problem.y0, problem.p
    exact_y = problem.exact_states(times)
    exact_S = problem.exact_sensitivities(times)
    data = 1.1 * exact_y
    g_exact = np.einsum("ti,tik->k", data - exact_y, exact_S)
    kw = dict(method="bdf", relative_tolerance=args.rtol, absolute_tolerance=args.atol)
    adjoint_kw = dict(
        relative_tolerance_forward=args.rtol,
        absolute_tolerance_forward=args.atol,
        relative_tolerance_backward=args.rtol,
        absolute_tolerance_backward=args.atol,
        relative_tolerance_quadrature=args.rtol,
        absolute_tolerance_quadrature=args.atol,
    )

    def grad_forward():
        res = solve_sensitivity(system, y0, times, p, **kw)
        return res, np.einsum("ti,tik->k", data - res.y, res.S)

    method_kw = {"grad_adjoint": {}, "grad_discrete": {"adjoint_method": "discrete"}}

    for stage in stages:
        out = {"stage": stage, "n_times": args.n_times}
        if stage == "plain":
            first, t = timed(lambda: solve(system, y0, times, p, **kw), args.repeats)
            res = t.pop("result")
            out.update(stats=res.stats, y_rel_err=relative(res.y, exact_y))
        elif stage == "sens":
            first, t = timed(lambda: solve_sensitivity(system, y0, times, p, **kw), args.repeats)
            res = t.pop("result")
            out.update(
                stats=res.stats,
                y_rel_err=relative(res.y, exact_y),
                S_rel_err=relative(res.S, exact_S),
            )
        elif stage == "grad_forward":
            first, t = timed(grad_forward, args.repeats)
            res, grad = t.pop("result")
            out.update(stats=res.stats, gradient_rel_err=relative(grad, g_exact))
        else:
            kw_stage = {**adjoint_kw, **method_kw[stage]}

            def grad_adjoint(kw_stage=kw_stage):
                checkpoints = adjoint_forward(system, y0, times, p, **kw_stage)
                return checkpoints.backward(data - checkpoints.y)

            first, t = timed(grad_adjoint, args.repeats)
            g = t.pop("result")
            _, t_fwd = timed(lambda k=kw_stage: adjoint_forward(system, y0, times, p, **k), 5)
            checkpoints = t_fwd.pop("result")
            cot = data - checkpoints.y
            _, t_bwd = timed(lambda c=checkpoints, g=cot: c.backward(g), args.repeats)
            t_bwd.pop("result")
            out.update(
                stats=g.stats,
                gradient_rel_err=relative(g.params, g_exact),
                forward_phase_median_ms=t_fwd["median_ms"],
                forward_phase_min_ms=t_fwd["min_ms"],
                backward_phase_median_ms=t_bwd["median_ms"],
                backward_phase_min_ms=t_bwd["min_ms"],
            )
        out.update(first_call_s=first, **t)
        emit(**out)


if __name__ == "__main__":
    main()
