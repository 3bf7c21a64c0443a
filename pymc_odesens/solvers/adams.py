"""``adams``: variable-order (1–12), variable-step Adams–Moulton formulas.

Adams–Bashforth predictor and Adams–Moulton corrector in backward-difference
form (see :mod:`pymc_odesens.solvers.adams_formula`), run by the CVODE-style
multistep driver (:mod:`pymc_odesens.solvers.multistep`) with a Newton
corrector, as Stan's ``adams`` (CVODES with ``CV_ADAMS``) does. High orders
make it efficient on smooth non-stiff problems at tight tolerances.
"""

from __future__ import annotations

from numba import njit

from pymc_odesens.solvers.multistep import ADAMS, MULTISTEP_SIGNATURE, run_multistep

__all__ = ["integrate_adams"]


@njit(MULTISTEP_SIGNATURE, cache=True)
def integrate_adams(
    rhs,
    jac,
    t0,
    y0,
    p,
    times,
    rtol,
    atol,
    max_num_steps,
    n_state,
    n_lu,
    n_err,
    record_every,
    rec_t,
    rec_y,
    rec_f,
    rec_count,
    y_out,
    stats,
    info,
):
    """Integrate with Adams–Moulton orders 1–12; see :func:`multistep.run_multistep`."""
    return run_multistep(
        ADAMS,
        rhs,
        jac,
        t0,
        y0,
        p,
        times,
        rtol,
        atol,
        max_num_steps,
        n_state,
        n_lu,
        n_err,
        record_every,
        rec_t,
        rec_y,
        rec_f,
        rec_count,
        y_out,
        stats,
        info,
    )
