"""One entry point over the four compiled integrators (arrays in, arrays out)."""

from __future__ import annotations

import numpy as np

from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.controls import SolverControls

__all__ = ["integrate", "multistep_integrator", "NO_RECORDING"]

NO_RECORDING = (
    np.zeros(0),
    np.zeros((0, 0)),
    np.zeros((0, 0)),
    np.zeros(1, dtype=np.int64),
)
"""Empty recording arrays (``rec_t, rec_y, rec_f, rec_count``) for runs that record nothing."""


def multistep_integrator(method: str):
    """The compiled ``bdf`` or ``adams`` entry point (see :data:`multistep.MULTISTEP_SIGNATURE`)."""
    if method == "bdf":
        from pymc_odesens.solvers.bdf import integrate_bdf

        return integrate_bdf
    if method == "adams":
        from pymc_odesens.solvers.adams import integrate_adams

        return integrate_adams
    raise ValueError(f"method must be 'bdf' or 'adams' for a multistep integrator, got {method!r}")


def integrate(
    method: str,
    rhs,
    jac_y,
    t0: float,
    y0: np.ndarray,
    params: np.ndarray,
    times: np.ndarray,
    controls: SolverControls,
    *,
    n_state: int,
    n_err: int,
    atol: np.ndarray,
    state_names=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run one compiled integrator; raise the matching OdeSolverError on failure.

    Parameters
    ----------
    method : str
        ``rk45``, ``ckrk``, ``bdf`` or ``adams``.
    rhs, jac_y : numba CFunc
        Right-hand side of the integrated vector (the plain system, or an
        augmented system made of ``len(y0) // n_state`` blocks) and ``J_y``
        of the first block; implicit methods factorise ``I - c J_y`` once and
        apply it to every block.
    t0, y0, params, times : initial time, initial vector, parameters, output times.
    controls : SolverControls
    n_state : int
        Size N of one block.
    n_err : int
        Number of leading components in the error test.
    atol : numpy.ndarray
        Absolute tolerance per integrated component.

    Returns
    -------
    y_out : numpy.ndarray, shape (T, len(y0))
    stats : numpy.ndarray of int64 (see :data:`status.STAT_NAMES`)
    """
    # Each integrator module compiles (or loads from numba's cache) on first import.
    y0 = np.ascontiguousarray(y0, dtype=np.float64)
    params = np.ascontiguousarray(params, dtype=np.float64)
    if params.size == 0:
        params = np.zeros(1)  # a valid pointer for kernels that never read p
    y_out = np.empty((times.size, y0.size))
    stats = st.new_stats()
    info = np.zeros(st.INFO_SIZE)
    rtol = np.full(y0.size, controls.relative_tolerance)
    steps = controls.max_num_steps
    if method in ("rk45", "ckrk"):
        from pymc_odesens.solvers.runge_kutta import RK_METHOD_IDS, integrate_explicit_rk

        code = integrate_explicit_rk(
            rhs,
            t0,
            y0,
            params,
            times,
            rtol,
            atol,
            steps,
            n_err,
            RK_METHOD_IDS[method],
            y_out,
            stats,
            info,
        )
    else:
        integrator = multistep_integrator(method)
        no_record = NO_RECORDING
        code = integrator(
            rhs,
            jac_y,
            t0,
            y0,
            params,
            times,
            rtol,
            atol,
            steps,
            n_state,
            y0.size,  # every component goes through the LU blocks
            n_err,
            0,
            *no_record,
            y_out,
            stats,
            info,
        )
    st.raise_for_status(code, info, method, state_names)
    return y_out, stats
