"""The state between two recorded solver steps, for the PBS march (numba).

Records come from the state solve (``solvers.integrate(..., recording=...)``):
``rec_t[k]``, ``rec_y[k]``, ``rec_f[k]`` (the slope the solver took there) for
every accepted step, and for ``rk45`` ``rec_dense[k]`` (``sum_s D_s k_s`` of the
step that ends at record k). Codes are those of
:mod:`pymc_odesens.sensitivity.pbs_options`.
"""

from __future__ import annotations

from numba import njit

from pymc_odesens.sensitivity.pbs_options import (
    CASH_KARP_SUBSTEP,
    DORMAND_PRINCE_DENSE,
    HERMITE,
)
from pymc_odesens.solvers.runge_kutta import _cash_karp_substep, dormand_prince_dense_output

__all__ = ["interpolate_state"]


@njit(cache=True)
def interpolate_state(
    kind, k, t, rec_t, rec_y, rec_f, rec_dense, rhs, p, v, ck_stages, ck_sub, ck_state, out
):
    """Write the state at ``t`` in ``[rec_t[k], rec_t[k+1]]`` into ``out``.

    Returns the number of right-hand-side evaluations it took (5 for the
    Cash–Karp sub-step, else 0). ``ck_stages`` (1, N) holds the slope at the
    step's start for the Cash–Karp sub-step; ``ck_sub`` (6, N) and ``ck_state``
    (N,) are its scratch.
    """
    n = out.size
    t_a = rec_t[k]
    t_b = rec_t[k + 1]
    h = t_b - t_a
    if kind == DORMAND_PRINCE_DENSE:
        dormand_prince_dense_output(
            t_a, rec_y[k], rec_f[k], t_b, rec_y[k + 1], rec_f[k + 1], rec_dense[k + 1], t, out
        )
        return 0
    if kind == CASH_KARP_SUBSTEP:
        for i in range(n):
            ck_stages[0, i] = rec_f[k, i]
        _cash_karp_substep(rhs, t_a, rec_y[k], ck_stages, p, v, t - t_a, ck_sub, ck_state, out)
        return 5
    s = (t - t_a) / h
    if kind == HERMITE:
        s2 = s * s
        s3 = s2 * s
        h00 = 2.0 * s3 - 3.0 * s2 + 1.0
        h10 = (s3 - 2.0 * s2 + s) * h
        h01 = -2.0 * s3 + 3.0 * s2
        h11 = (s3 - s2) * h
        for i in range(n):
            out[i] = (
                h00 * rec_y[k, i]
                + h10 * rec_f[k, i]
                + h01 * rec_y[k + 1, i]
                + h11 * rec_f[k + 1, i]
            )
        return 0
    for i in range(n):
        out[i] = rec_y[k, i] + s * (rec_y[k + 1, i] - rec_y[k, i])
    return 0
