"""The ten problems of the PEtab benchmark collection in ../shared/petab, and their
reference log-likelihoods (../shared/petab/README.md: AMICI's, at the nominal values)."""

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
    "Chen_MSB2009": -115700.1192629893,
    "Beer_MolBioSystems2014": 58622.9145631413,
    "Isensee_JCB2018": -3949.375966548649,
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


# not run: measured, with the llvmlite kernels its code compiles in 32 s (0.7 GB resident;
# with numba it ended in MemoryError at 8 GB), but the bdf integration at AMICI's
# tolerances (1e-8, 1e-16) stops with a step-size underflow at t = 1799.99 (h = 1.6e-12,
# largest weighted error in state c2): not yet investigated.
NOT_RUN = {
    "Chen_MSB2009": "bdf step-size underflow at t = 1799.99 at AMICI's tolerances "
    "(docs/petab.md, 'The benchmark collection')",
}


def problem_params(names=REFERENCE_LLH):
    """``pytest.param`` per problem: the ones not in QUICK marked slow, those of NOT_RUN
    skipped with their reason."""
    params = []
    for name in names:
        if name in NOT_RUN:
            marks = pytest.mark.skip(reason=f"{name}: {NOT_RUN[name]}")
        else:
            marks = () if name in QUICK else pytest.mark.slow
        params.append(pytest.param(name, marks=marks, id=name))
    return params
