"""``bdf``: variable-order (1–5), variable-step backward differentiation formulas.

Fixed-leading-coefficient BDF (see :mod:`pymc_odesens.solvers.bdf_formula`) run
by the CVODE-style multistep driver (:mod:`pymc_odesens.solvers.multistep`):
Newton with the analytic ``J_y``, LU reuse and Jacobian-refresh heuristics,
order selection from error estimates at neighbouring orders. For stiff problems.
"""

from __future__ import annotations

from pymc_odesens.solvers.multistep import BDF, run_multistep

__all__ = ["integrate_bdf"]


def integrate_bdf(*args):
    """Integrate with BDF orders 1–5: :func:`multistep.run_multistep` with the ``BDF`` family.

    Takes the arguments of :data:`multistep.MULTISTEP_SIGNATURE` after the family.
    """
    return run_multistep(BDF, *args)
