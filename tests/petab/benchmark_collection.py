"""The problems of the PEtab benchmark collection in ../shared/petab, and their reference
log-likelihoods at the nominal values (../shared/petab/README.md: AMICI's; for Chen_MSB2009
libRoadRunner's, for Smith_BMCSystBiol2013 AMICI's at a tighter tolerance, see below)."""

from __future__ import annotations

import pytest

from tests.conftest import PETAB_DIR

REFERENCE_LLH = {
    "Boehm_JProteomeRes2014": -138.22199693517703,
    "Fujita_SciSignal2010": 53.08377736998929,
    "Brannmark_JBC2010": -141.889113770537,
    "Bachmann_MSB2011": 418.40573341425295,
    "Elowitz_Nature2000": 63.20279991419332,
    "Fiedler_BMCSystBiol2016": 58.58390161681,
    "Schwen_PONE2014": -943.9992988598723,
    "Chen_MSB2009": -130591.75297306366,  # libRoadRunner's, not AMICI's: see below
    "Beer_MolBioSystems2014": 58622.9145631413,
    "Isensee_JCB2018": -3949.375966548649,
    "Smith_BMCSystBiol2013": -888198.4389554084,  # AMICI's at rtol 1e-12, not 1e-8: below
    # petab.calculate_llh of the collection's simulatedData table (no AMICI reference)
    "Raimundez_PCB2020": -550.0359830972582,
}

# in the default run: small, quick to compile; the others are marked slow (docs/petab.md
# lists how long each takes)
QUICK = (
    "Boehm_JProteomeRes2014",
    "Fujita_SciSignal2010",
    "Brannmark_JBC2010",
    "Elowitz_Nature2000",
    "Fiedler_BMCSystBiol2016",
)


def problem_yaml(name: str):
    path = PETAB_DIR / name / f"{name}.yaml"
    if not path.is_file():
        pytest.fail(f"PEtab problem {path} not found; set PYMC_ODESENS_SHARED_DIR")
    return path


# Chen_MSB2009's reference: AMICI's value (-115700.1192629893) is not reproducible. AMICI's
# own benchmark tests leave Chen out of their log-likelihood check ("unknown reasons"), and
# the collection's own simulatedData table gives -130669.488 by petab.calculate_llh, not
# that value. The reference here is libRoadRunner's (CVODE, restarted at the model's
# switching times, rtol 1e-10, atol 1e-8: benchmarks/peers/roadrunner_petab.py, whose
# docstring gives the command); docs/petab.md, "The benchmark collection", has the
# measurements.

# Smith_BMCSystBiol2013's reference: AMICI's published value (-888198.436541014) is its
# simulation at rtol 1e-8, atol 1e-16, which is 2.4e-3 from the solution: AMICI 1.0.1 itself
# gives -888198.4356740405 at rtol 1e-8, -888198.4389594076 at 1e-10 and -888198.4389554084
# at 1e-12 (atol 1e-16; benchmarks/peers/amici_petab_runner.py), and ours -888198.43881 at
# the default 1e-8, -888198.43898 at 1e-10 and -888198.43895 at 1e-12. The residuals of its
# 62 measurements are in the hundreds (noise 1), so a relative error of 1e-8 in the
# simulation moves the log-likelihood by about 1e-3. The reference here is AMICI's converged
# value.


def problem_params(names=REFERENCE_LLH):
    """``pytest.param`` per problem, the ones not in QUICK marked slow."""
    return [
        pytest.param(name, marks=() if name in QUICK else pytest.mark.slow, id=name)
        for name in names
    ]
