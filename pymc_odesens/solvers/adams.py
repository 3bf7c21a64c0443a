"""``adams``: variable-order (1–12), variable-step Adams–Moulton formulas.

Adams–Bashforth predictor and Adams–Moulton corrector in backward-difference
form (see :mod:`pymc_odesens.solvers.adams_formula`), run by the CVODE-style
multistep driver (:mod:`pymc_odesens.solvers.multistep`) with a Newton
corrector, as Stan's ``adams`` (CVODES with ``CV_ADAMS``) does. High orders
make it efficient on smooth non-stiff problems at tight tolerances.
"""

from __future__ import annotations

from pymc_odesens.solvers.multistep import ADAMS, run_multistep

__all__ = ["integrate_adams"]


def integrate_adams(*args):
    """Adams–Moulton orders 1–12: :func:`multistep.run_multistep` with the ``ADAMS`` family.

    Takes the arguments of :data:`multistep.MULTISTEP_SIGNATURE` after the family.
    """
    return run_multistep(ADAMS, *args)
