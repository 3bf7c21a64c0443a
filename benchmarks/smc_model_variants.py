"""Bayes factor between two variants of a PEtab problem, by tempered SMC (docs/smc.md).

The pathway question, on Boehm_JProteomeRes2014 (STAT5A/STAT5B dimerisation and nuclear
transport): do the STAT5A-STAT5B heterodimers leave the nucleus, or only the homodimers?
The published fit puts the heterodimers' export rate ``k_exp_hetero`` at its lower bound
(1e-5 per minute). The variant "no heterodimer export" is a PEtab problem of its own,
written by this script from the shared one into ``--output`` (the collection is never
copied into the repository): the same tables with ``k_exp_hetero`` fixed at 0. Both are
sampled by ``pymc_odesens.sample_smc`` with the problem's own priors (uniform on the
bounds, on the log10 scale), and ``compare_models`` gives the log Bayes factor with its
Monte Carlo error.

    python benchmarks/smc_model_variants.py [--draws 400] [--runs 4] [--cores N]
        [--output DIR] [--seed 1]

The table is printed and written to ``benchmarks/results/smc_model_variants.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", HERE.parents[1] / "shared"))
PROBLEM = "Boehm_JProteomeRes2014"
FIXED = "k_exp_hetero"


def write_variant(source: Path, output: Path) -> Path:
    """The problem in ``source`` with ``FIXED`` fixed at 0, written to ``output``; its YAML."""
    import pandas as pd

    output.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.is_file():
            shutil.copy2(path, output / path.name)
    table_path = output / f"parameters_{PROBLEM}.tsv"
    table = pd.read_csv(table_path, sep="\t", dtype=str)
    row = table["parameterId"] == FIXED
    if not row.any():
        raise ValueError(f"{table_path}: no parameter {FIXED!r}")
    table.loc[row, ["parameterScale", "nominalValue", "estimate"]] = ["lin", "0", "0"]
    table.loc[row, ["lowerBound", "upperBound"]] = ["0", "1"]
    table.to_csv(table_path, sep="\t", index=False)
    return output / f"{PROBLEM}.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=400, help="particles per run")
    parser.add_argument("--runs", type=int, default=4, help="independent runs per model")
    parser.add_argument("--cores", type=int, default=None, help="worker processes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", type=Path, default=None, help="folder of the variant")
    args = parser.parse_args()

    from pymc_odesens import compare_models
    from pymc_odesens.petab import PetabProblem

    source = SHARED / "petab" / PROBLEM
    output = args.output or Path(tempfile.mkdtemp(prefix="smc_variant_"))
    variant_yaml = write_variant(source, output / f"{PROBLEM}_no_hetero_export")
    problems = {
        "published": PetabProblem.from_yaml(source / f"{PROBLEM}.yaml"),
        "no heterodimer export": PetabProblem.from_yaml(variant_yaml),
    }
    started = time.perf_counter()
    table = compare_models(
        problems, draws=args.draws, runs=args.runs, cores=args.cores, random_seed=args.seed
    )
    seconds = time.perf_counter() - started
    print(table.to_string())
    print(f"{seconds:.0f} s for both models ({args.runs} runs of {args.draws} particles each)")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    record = {
        "problem": PROBLEM,
        "variant": f"{FIXED} fixed at 0",
        "draws": args.draws,
        "runs": args.runs,
        "cores": args.cores,
        "seed": args.seed,
        "seconds": seconds,
        "table": json.loads(table.to_json(orient="index")),
    }
    (results / "smc_model_variants.json").write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
