"""``bdf``: variable-order (1–5), variable-step backward differentiation formulas.

Fixed-leading-coefficient BDF (see :mod:`pymc_odesens.solvers.bdf_formula`) run
by the CVODE-style multistep driver (:mod:`pymc_odesens.solvers.multistep`):
Newton with the analytic ``J_y``, LU reuse and Jacobian-refresh heuristics,
order selection from error estimates at neighbouring orders. For stiff problems.
"""

from __future__ import annotations

from numba import njit

from pymc_odesens.solvers.multistep import BDF, MULTISTEP_SIGNATURE, run_multistep

__all__ = ["integrate_bdf"]


@njit(MULTISTEP_SIGNATURE, cache=True)
def integrate_bdf(
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
    """Integrate with BDF orders 1–5; see :func:`multistep.run_multistep`."""
    return run_multistep(
        BDF,
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
