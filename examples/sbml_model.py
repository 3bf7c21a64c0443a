"""Load an SBML model of the PEtab benchmark collection and solve it.

The default model is the STAT5 dimerization model of Boehm et al., "Identification of
isoform-specific dynamics in phosphorylation-dependent STAT5 dimerization by quantitative
mass spectrometry and mathematical modeling", J. Proteome Res. 13(12):5685-5694 (2014),
doi:10.1021/pr5006923, as the PEtab benchmark collection ships it
(``../shared/petab/Boehm_JProteomeRes2014/model_Boehm_JProteomeRes2014.xml``, read where it
is). Eight species in two compartments (cytoplasm 1.4, nucleus 0.45), nine reactions, an
Epo stimulus that decays as an assignment rule.

Run:  python examples/sbml_model.py                 (the Boehm model)
      python examples/sbml_model.py path/to/model.xml [--t-end 240] [--points 9]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

SHARED = Path(
    os.environ.get("PYMC_ODESENS_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared")
)
DEFAULT_MODEL = SHARED / "petab" / "Boehm_JProteomeRes2014" / "model_Boehm_JProteomeRes2014.xml"
CITATION = (
    "Boehm M. E. et al., J. Proteome Res. 13(12):5685-5694 (2014), doi:10.1021/pr5006923; "
    "SBML from the PEtab benchmark collection (Benchmark-Models-PEtab)"
)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", type=Path, default=DEFAULT_MODEL, help="SBML file")
    parser.add_argument("--t-end", type=float, default=240.0, help="end time (240)")
    parser.add_argument("--points", type=int, default=9, help="output times (9)")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    import numpy as np

    from pymc_odesens import OdeSystem, solve

    system = OdeSystem.from_sbml(args.model)
    if args.model == DEFAULT_MODEL:
        print(f"model: {CITATION}")
    print(f"{system.name}: {system.n_states} states, {system.n_params} parameters")
    print(f"  states (SBML ids): {', '.join(system.states)}")
    print(f"  parameters: {', '.join(system.params)}")
    if system.stoichiometry is not None:
        for law in system.conservation_laws.describe():
            print(f"  conserved: {law}")
    times = np.linspace(0.0, args.t_end, args.points)
    # y0=None: the initial state y0(p) of the file (initial assignments included)
    solution = solve(system, None, times, system.p_nominal, method="bdf")
    species = [s for s in system.states if system.sbml.kinds.get(s) == "species"][:4]
    rows = {f"[{s}]": solution[s] for s in species}  # what the SBML symbol denotes
    if species and species[-1] in system.sbml.concentrations:
        rows[f"amount {species[-1]}"] = solution.amount(species[-1])
    assigned = [s for s, role in system.sbml.roles.items() if role == "assigned"][:1]
    rows.update({s: solution[s] for s in assigned})  # an assignment rule's variable
    rows.update({f"rate {r}": solution[r] for r in system.reaction_ids[:1]})  # a reaction's rate
    header = "t".rjust(8) + "".join(name.rjust(16) for name in rows)
    print(header)
    for i, t in enumerate(times):
        print(f"{t:8.1f}" + "".join(f"{values[i]:16.6g}" for values in rows.values()))
    return {"system": system, "solution": solution, "rows": rows}


if __name__ == "__main__":
    main()
