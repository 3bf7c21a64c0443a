"""Work on a Dask cluster (issue "beyond one machine"): speed-up of independent runs with 2
workers against 1, the round trip of one distributed log-likelihood + gradient, and a
projection to many workers.

Run (on a quiet machine: the figures are wall times)::

    python benchmarks/bench_distributed.py                      # every part
    python benchmarks/bench_distributed.py --parts latency,network --time-limit 600
    python benchmarks/bench_distributed.py --report             # the last results

writes ``results/bench_distributed.json``. Each measurement runs in a fresh process (its
own ``LocalCluster``, worker processes with one thread each) stopped with its whole process
group after ``--time-limit`` seconds. The parts:

- ``multistart``: ``find_modes`` on a shared PEtab problem (``--problem``, Boehm) with
  ``--starts`` starts on 1 and on 2 workers. Each cluster first runs one start per worker
  (the workers build the problem and compile: *startup*), then the timed search. Reported:
  both walls, the ratio, the starts' own seconds (their sum over the workers is the floor
  of the wall: the rest is dispatch and waiting, the largest worker's share over the mean
  is the *imbalance*), and that both found the same optimum bit for bit.
- ``smc``: ``sample_smc`` of the same problem, 4 runs (the chains), on 1 and on 2 workers,
  after a small warm-up run on the same cluster; the same bits on both.
- ``latency``: one ``DistributedLogLikelihood.value_and_gradient`` round trip on 2 workers
  (medians of warm calls, after the load balance settled) against the same evaluation
  here (``problem.log_likelihood_and_gradient``) and in the same chunks here
  (``executor=None``), on Isensee_JCB2018 and on a synthetic problem of 1000 conditions
  (Fujita_SciSignal2010's model, its EGF input varied, written as a PEtab problem in a
  temporary folder); also the round trip of empty tasks (1 ... 64 per call): the
  scheduler's cost per evaluation and per task.
- ``network``: the cost of one condition of a Froehlich-sized model (1396 species:
  ``mass_action_network(1396)``, its log-density gradient by the adjoint route, warm).

``--report`` prints the tables and the projection to 8, 64 and 512 workers (a model, not a
measurement: see :func:`projection`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
import numpy as np
from common import RESULTS_DIR, print_table, progress

PARTS = ("multistart", "smc", "latency", "network")
FROEHLICH_CONDITIONS = 9169
FROEHLICH_SPECIES = 1396
SYNTHETIC_CONDITIONS = 1000
PROJECTED_WORKERS = (8, 64, 512)


def shared_dir() -> Path:
    return Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", common.REPO_DIR.parent / "shared"))


def problem_yaml(name: str) -> Path:
    return shared_dir() / "petab" / name / f"{name}.yaml"


# ----------------------------------------------------------------------------- children


def _cluster(n_workers: int):
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    return cluster, Client(cluster)


def child_multistart(n_workers: int, problem: str, n_starts: int, seed: int) -> dict:
    from pymc_odesens.inference import find_modes
    from pymc_odesens.petab import PetabProblem

    began = time.perf_counter()
    cluster, client = _cluster(n_workers)
    out = {"workers": n_workers, "cluster_s": time.perf_counter() - began}
    try:
        pet = PetabProblem.from_yaml(problem_yaml(problem))
        began = time.perf_counter()
        warm = find_modes(pet, n_workers, random_seed=seed + 1, executor=client)
        out["startup_s"] = time.perf_counter() - began
        out["startup_start_s"] = [s.time for s in warm.starts]
        began = time.perf_counter()
        result = find_modes(pet, n_starts, random_seed=seed, executor=client)
        out["wall_s"] = time.perf_counter() - began
        start_s = [s.time for s in sorted(result.starts, key=lambda s: s.index)]
        out["start_s"] = start_s
        out["start_s_sum"] = float(sum(start_s))
        out["failed"] = sum(s.failed for s in result.starts)
        out["best_log_posterior"] = float(result.best.log_posterior)
        out["best_x"] = result.best.x.tolist()
        out["method"] = result.method
    finally:
        client.close()
        cluster.close()
    return out


def child_smc(n_workers: int, problem: str, draws: int, seed: int) -> dict:
    from pymc_odesens.inference import sample_smc
    from pymc_odesens.petab import PetabProblem

    options = {"n_leapfrog": 5, "moves": 2, "kernel": "hmc", "progressbar": False}
    began = time.perf_counter()
    cluster, client = _cluster(n_workers)
    out = {"workers": n_workers, "cluster_s": time.perf_counter() - began, **options}
    try:
        pet = PetabProblem.from_yaml(problem_yaml(problem))
        began = time.perf_counter()
        sample_smc(pet, draws=8, runs=n_workers, random_seed=seed + 1, executor=client, **options)
        out["startup_s"] = time.perf_counter() - began
        began = time.perf_counter()
        idata = sample_smc(pet, draws=draws, runs=4, random_seed=seed, executor=client, **options)
        out["wall_s"] = time.perf_counter() - began
        out["draws"], out["runs"] = draws, 4
        out["stages"] = int(idata.sample_stats.sizes.get("stage", 0))
        evidence = idata.sample_stats["log_marginal_likelihood"].values
        out["log_marginal_likelihood"] = [float(v) for v in np.ravel(evidence)]
        first = idata.posterior[next(iter(idata.posterior.data_vars))].values
        out["posterior_digest"] = float(np.sum(first))
    finally:
        client.close()
        cluster.close()
    return out


def _median_call(function, repeats: int, max_seconds: float) -> tuple[float, object]:
    times, result, began = [], None, time.perf_counter()
    while len(times) < repeats and (len(times) < 3 or time.perf_counter() - began < max_seconds):
        t0 = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def _noop(i):
    return i


def write_synthetic_problem(folder: Path, n_conditions: int) -> Path:
    """Fujita_SciSignal2010 with ``n_conditions`` conditions: the EGF step's dose spread
    geometrically over 0.1 ... 30 ng/mL and its length over 60 ... 3600 s, each condition
    with the measurements of the original 1 ng/mL step (times, observables, data)."""
    import pandas as pd
    import petab.v1 as petab

    source = problem_yaml("Fujita_SciSignal2010").parent
    folder.mkdir(parents=True, exist_ok=True)
    conditions = pd.read_csv(next(source.glob("experimentalCondition_*.tsv")), sep="\t")
    measurements = pd.read_csv(next(source.glob("measurementData_*.tsv")), sep="\t")
    template = measurements[measurements.simulationConditionId == "condition_step_01_0"]
    doses = np.geomspace(0.1, 30.0, n_conditions)
    lengths = np.array([60.0, 600.0, 3600.0])[np.arange(n_conditions) % 3]
    ids = [f"c{i:05d}" for i in range(n_conditions)]
    table = pd.DataFrame(
        {"conditionId": ids, "conditionName": ids, "EGF_0": doses, "EGF_rate": 0.0}
    )
    table["EGF_end"] = lengths
    table = table[list(conditions.columns)]
    rows = []
    for cid in ids:
        block = template.copy()
        block["simulationConditionId"] = cid
        block["datasetId"] = cid + "_" + block["observableId"]
        rows.append(block)
    table.to_csv(folder / "conditions.tsv", sep="\t", index=False)
    pd.concat(rows).to_csv(folder / "measurements.tsv", sep="\t", index=False)
    for kind in ("model_", "observables_", "parameters_"):
        path = next(source.glob(f"{kind}*"))
        (folder / path.name).write_bytes(path.read_bytes())
    yaml = folder / "synthetic.yaml"
    yaml.write_text(
        "format_version: 1\n"
        f"parameter_file: {next(source.glob('parameters_*')).name}\n"
        "problems:\n"
        "- condition_files: [conditions.tsv]\n"
        "  measurement_files: [measurements.tsv]\n"
        f"  observable_files: [{next(source.glob('observables_*')).name}]\n"
        f"  sbml_files: [{next(source.glob('model_*')).name}]\n"
    )
    problem = petab.Problem.from_yaml(str(yaml))
    if petab.lint_problem(problem):
        raise ValueError(f"{yaml}: the synthetic problem fails petab's linter")
    return yaml


def child_latency(problem: str, n_chunks: int, repeats: int, max_seconds: float) -> dict:
    from pymc_odesens.petab import PetabProblem

    out: dict = {"problem": problem, "n_chunks": n_chunks}
    with tempfile.TemporaryDirectory(prefix="bench_distributed_") as folder:
        if problem == "synthetic":
            yaml = write_synthetic_problem(Path(folder), SYNTHETIC_CONDITIONS)
        else:
            yaml = problem_yaml(problem)
        pet = PetabProblem.from_yaml(yaml)
        out["n_experiments"] = len(pet.experiments)
        out["n_parameters"] = len(pet.parameters)
        x = pet.x_nominal
        began = time.perf_counter()
        pet.log_likelihood_and_gradient(x)
        out["local_first_s"] = time.perf_counter() - began
        out["local_s"], (value, gradient) = _median_call(
            lambda: pet.log_likelihood_and_gradient(x), repeats, max_seconds
        )
        out["route"] = pet.gradient_route
        with pet.distributed_log_likelihood(None, n_chunks=n_chunks) as here:
            here.value_and_gradient(x)
            out["chunks_here_s"], _ = _median_call(
                lambda: here.value_and_gradient(x), repeats, max_seconds
            )
        cluster, client = _cluster(2)
        try:
            began = time.perf_counter()
            with pet.distributed_log_likelihood(client, n_chunks=n_chunks) as llh:
                first = llh.value_and_gradient(x)
                out["distributed_first_s"] = time.perf_counter() - began
                for _ in range(8):  # the load balance is revised after the 2nd, 4th, 8th
                    llh.value_and_gradient(x)
                out["distributed_s"], (d_value, d_gradient) = _median_call(
                    lambda: llh.value_and_gradient(x), repeats, max_seconds
                )
                balance = llh.balance
                out["chunk_costs_s"] = balance.costs.tolist()
                out["slot_loads_s"] = balance.loads.tolist()
                out["imbalance"] = balance.imbalance
                out["rebalances"] = balance.rebalances
            out["value"], out["distributed_value"] = float(value), float(d_value)
            out["first_value"] = float(first[0])
            out["gradient_max_rel_diff"] = float(
                np.max(np.abs(d_gradient - gradient)) / max(np.max(np.abs(gradient)), 1e-300)
            )
            # the scheduler's own round trip: k empty tasks submitted and gathered
            noop = {}
            for k in (1, 2, 8, 32, 64):

                def call(k=k):
                    return client.gather([client.submit(_noop, i, pure=False) for i in range(k)])

                call()
                noop[str(k)], _ = _median_call(call, 30, 10.0)
            out["noop_round_trip_s"] = noop
        finally:
            client.close()
            cluster.close()
    return out


def child_network(n_species: int, repeats: int, max_seconds: float) -> dict:
    """One condition of a model of ``n_species`` species (``mass_action_network``): the
    adjoint gradient of a Gaussian log-likelihood of all states at 61 times (the work of
    one condition's log-likelihood + gradient), warm, as bench_large.py times it (bdf,
    linear_solver "auto", rtol 1e-6, atol 1e-8), and the plain solve."""
    from bench_large import ATOL, N_TIMES, RTOL, adjoint_controls
    from mass_action_network import mass_action_network

    import pymc_odesens as pos

    system = mass_action_network(n_species)
    times = np.linspace(0.0, system.t_end, N_TIMES)
    x0, p = system.x0, system.p_nominal
    controls = {"method": "bdf", "relative_tolerance": RTOL, "absolute_tolerance": ATOL}
    out = {"n_species": system.n_states, "n_params": system.n_params, "n_times": N_TIMES}

    def plain():
        return pos.solve(system, x0, times, p, linear_solver="auto", **controls)

    def gradient():
        checkpoints = pos.adjoint_forward(
            system, x0, times, p, linear_solver="auto", **adjoint_controls()
        )
        return checkpoints.backward(1.0 - checkpoints.y)

    for name, function in (("solve", plain), ("gradient", gradient)):
        began = time.perf_counter()
        function()
        out[f"first_{name}_s"] = time.perf_counter() - began
        out[f"{name}_s"], _ = _median_call(function, repeats, max_seconds)
    return out


# ----------------------------------------------------------------------------- the parent


def run_child(argv: list[str], time_limit: float, label: str) -> dict:
    """``python this --child ...`` in a process group of its own (its LocalCluster's worker
    processes too), stopped as a whole after ``time_limit`` seconds."""
    progress(f"  {label} ...")
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--child", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=time_limit)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        progress(f"    stopped after the time limit of {time_limit:.0f} s")
        return {"error": f"time limit of {time_limit:.0f} s reached"}
    finally:
        try:  # the child's leftovers (worker processes), if any
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            result["process_s"] = time.perf_counter() - began
            progress(f"    done in {result['process_s']:.0f} s")
            return result
    lines = [s for s in stderr.strip().splitlines() if s.strip()]
    progress(f"    failed: {lines[-1] if lines else process.returncode}")
    return {"error": "\n".join(lines[-5:]) or f"exit status {process.returncode}"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--problem", default="Boehm_JProteomeRes2014")
    parser.add_argument("--starts", type=int, default=16)
    parser.add_argument("--draws", type=int, default=40, help="SMC particles per run")
    parser.add_argument("--latency-problems", default="Isensee_JCB2018,synthetic")
    parser.add_argument("--n-chunks", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--time-limit", type=float, default=900.0, help="seconds per process")
    parser.add_argument("--output", default="bench_distributed")
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        function = {
            "multistart": lambda: child_multistart(int(rest[0]), rest[1], int(rest[2]), 1),
            "smc": lambda: child_smc(int(rest[0]), rest[1], int(rest[2]), 1),
            "latency": lambda: child_latency(rest[0], int(rest[1]), int(rest[2]), 30.0),
            "network": lambda: child_network(int(rest[0]), int(rest[1]), 30.0),
        }[kind]
        load_before = os.getloadavg()
        result = function()
        result["load_average"] = {"before": load_before, "after": os.getloadavg()}
        print("RESULT " + json.dumps(result), flush=True)
        return
    path = RESULTS_DIR / f"{args.output}.json"
    if args.report:
        report(json.loads(path.read_text()))
        return
    record = json.loads(path.read_text()) if path.exists() else {}
    record.setdefault("parts", {})
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--parts: unknown {unknown}; expected some of {list(PARTS)}")
    load_start = common.report_load("at start")
    for part in parts:
        progress(f"== {part}")
        if part in ("multistart", "smc"):
            size = str(args.starts if part == "multistart" else args.draws)
            entry = {
                "problem": args.problem,
                **{
                    f"{w}_workers": run_child(
                        [part, str(w), args.problem, size], args.time_limit, f"{w} worker(s)"
                    )
                    for w in (1, 2)
                },
            }
        elif part == "latency":
            entry = {
                name: run_child(
                    ["latency", name, str(args.n_chunks), str(args.repeats)],
                    args.time_limit,
                    name,
                )
                for name in args.latency_problems.split(",")
            }
        else:
            entry = run_child(
                ["network", str(FROEHLICH_SPECIES), str(args.repeats)],
                args.time_limit,
                f"mass_action_network({FROEHLICH_SPECIES})",
            )
        entry["load_average_before"] = load_start
        record["parts"][part] = entry
        record["machine"] = common.machine_info()
        record["projection"] = summarise(record)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1) + "\n")
    report(record)
    progress(f"wrote {path}")


# ----------------------------------------------------------------------------- the report


def projection(
    per_condition_s: float, conditions: int, overhead_2_s: float, per_task_s: float
) -> dict:
    """Projected seconds of one log-likelihood + gradient on ``W`` workers (a model, not a
    measurement):

    ``T(W) = overhead_2_s + per_task_s * (W - 2) + ceil(conditions / W) * per_condition_s``

    ``overhead_2_s`` is the measured cost of one evaluation on 2 workers beyond the larger
    worker's compute (scheduler round trip, (de)serialisation of the parameter vector and
    the chunks' gradients, the sum), ``per_task_s`` the scheduler's measured cost of each
    further task (one task per worker per evaluation). Assumed: conditions of equal cost
    (the load balance evens out measured differences), one chunk per worker (``n_chunks=W``:
    the default is at most 64 chunks), workers on other machines as fast as this one,
    network transfer of the parameter vector and gradients small against the scheduler's
    cost. Against ``T_1 = conditions * per_condition_s`` (one worker, no overhead). It
    stops scaling where the scheduler's per-task cost outgrows the shrinking chunk:
    ``W* = sqrt(conditions * per_condition_s / per_task_s)``.
    """
    serial = conditions * per_condition_s
    rows = {}
    for workers in PROJECTED_WORKERS:
        t = (
            overhead_2_s
            + per_task_s * (workers - 2)
            + np.ceil(conditions / workers) * per_condition_s
        )
        rows[str(workers)] = {"seconds": float(t), "speedup": float(serial / t)}
    best = float(np.sqrt(serial / per_task_s)) if per_task_s > 0 else None
    return {
        "per_condition_s": per_condition_s,
        "conditions": conditions,
        "overhead_2_workers_s": overhead_2_s,
        "per_task_s": per_task_s,
        "serial_s": serial,
        "workers": rows,
        "stops_scaling_near_workers": best,
    }


def summarise(record: dict) -> dict | None:
    """The projection from the measured costs in ``record`` (None while some are missing):
    the per-condition cost of the ``network`` part, the overhead of the synthetic problem's
    evaluation on 2 workers, the slope of the empty round trips."""
    parts = record.get("parts", {})
    network = parts.get("network", {})
    latency = parts.get("latency", {})
    measured = latency.get("synthetic") or next(
        (r for r in latency.values() if isinstance(r, dict) and "distributed_s" in r), None
    )
    if "gradient_s" not in network or not measured or "distributed_s" not in measured:
        return None
    noop = measured["noop_round_trip_s"]
    per_task, _ = np.polyfit([int(k) for k in noop], list(noop.values()), 1)
    overhead = measured["distributed_s"] - max(measured["slot_loads_s"])
    return projection(
        network["gradient_s"], FROEHLICH_CONDITIONS, float(overhead), max(float(per_task), 0.0)
    )


def report(record: dict) -> None:
    parts = record.get("parts", {})
    rows = []
    for part in ("multistart", "smc"):
        entry = parts.get(part)
        if not entry:
            continue
        one, two = entry.get("1_workers", {}), entry.get("2_workers", {})
        if "wall_s" not in one or "wall_s" not in two:
            rows.append([part, entry.get("problem"), one.get("error", "-"), two.get("error", "-")])
            continue
        same = (
            one.get("best_x") == two.get("best_x")
            if part == "multistart"
            else one.get("log_marginal_likelihood") == two.get("log_marginal_likelihood")
        )
        rows.append(
            [
                part,
                entry["problem"],
                f"{one['wall_s']:.1f}",
                f"{two['wall_s']:.1f}",
                f"{one['wall_s'] / two['wall_s']:.2f}x",
                f"{one['startup_s']:.1f} / {two['startup_s']:.1f}",
                "yes" if same else "NO",
            ]
        )
    if rows:
        print_table(
            ["part", "problem", "1 worker s", "2 workers s", "speed-up", "startup s", "same bits"],
            rows,
            title="Independent runs on a LocalCluster (after each worker's startup run)",
        )
    entry = parts.get("multistart", {})
    one, two = entry.get("1_workers", {}), entry.get("2_workers", {})
    if "start_s" in one and "start_s" in two:
        floors = [max(r["start_s_sum"] / r["workers"], max(r["start_s"])) for r in (one, two)]
        print_table(
            ["workers", "wall s", "starts' own s (sum)", "floor s", "wall - floor s"],
            [
                [
                    r["workers"],
                    f"{r['wall_s']:.1f}",
                    f"{r['start_s_sum']:.1f}",
                    f"{f:.1f}",
                    f"{r['wall_s'] - f:.1f}",
                ]
                for r, f in zip((one, two), floors)
            ],
            title="Where the multistart's wall time goes: the starts' own seconds (in their "
            "workers), the floor max(sum / workers, longest start), the rest (dispatch, "
            "gather, the search's own work here, waiting on an uneven last start)",
        )
    latency = parts.get("latency", {})
    rows = []
    for name, r in latency.items():
        if not isinstance(r, dict):
            continue
        if "distributed_s" not in r:
            rows.append([name, r.get("error", "-")[:100]])
            continue
        rows.append(
            [
                name,
                r["n_experiments"],
                r["n_chunks"],
                f"{1e3 * r['local_s']:.1f}",
                f"{1e3 * r['chunks_here_s']:.1f}",
                f"{1e3 * r['distributed_s']:.1f}",
                f"{r['local_s'] / r['distributed_s']:.2f}x",
                f"{1e3 * r['noop_round_trip_s']['2']:.1f}",
                f"{r['imbalance']:.2f}",
                f"{r['distributed_first_s']:.0f}",
            ]
        )
    if rows:
        print_table(
            [
                "problem",
                "conditions",
                "chunks",
                "here ms",
                "chunks here ms",
                "2 workers ms",
                "speed-up",
                "empty round trip ms",
                "imbalance",
                "first call s",
            ],
            rows,
            title="One log-likelihood + gradient (medians of warm calls)",
        )
    network = parts.get("network", {})
    if "gradient_s" in network:
        print_table(
            ["model", "species", "parameters", "solve ms", "adjoint gradient ms"],
            [
                [
                    f"mass_action_network({network['n_species']})",
                    network["n_species"],
                    network["n_params"],
                    f"{1e3 * network['solve_s']:.0f}",
                    f"{1e3 * network['gradient_s']:.0f}",
                ]
            ],
            title="One condition of a Froehlich-sized model (warm, medians)",
        )
    summary = summarise(record)
    if summary:
        print_table(
            ["workers", "projected s per evaluation", "projected speed-up"],
            [
                [w, f"{r['seconds']:.2f}", f"{r['speedup']:.0f}x"]
                for w, r in summary["workers"].items()
            ],
            title=f"Projection (a model, not a measurement): {summary['conditions']} conditions "
            f"of {summary['per_condition_s']:.2f} s, {summary['serial_s']:.0f} s on one worker; "
            f"{1e3 * summary['overhead_2_workers_s']:.1f} ms overhead on 2 workers + "
            f"{1e3 * summary['per_task_s']:.2f} ms per further worker; stops scaling near "
            f"{summary['stops_scaling_near_workers']:.0f} workers",
        )


if __name__ == "__main__":
    main()
