"""Generated right-hand side and Jacobian of the backward adjoint system.

The adjoint of ``y' = f(t, y, p)`` for a loss ``L(y(t_1), ..., y(t_T))`` is
integrated backwards in time. With ``s = -t`` (so that the integrators run
forwards) the backward vector ``z = [lambda, mu]`` (N + P components) obeys

    d lambda / ds = J_y(t, y(t))^T lambda        (``vjp_y``)
    d mu / ds     = J_p(t, y(t))^T lambda        (``vjp_p``; a quadrature)

and ``mu`` at ``s = -t0`` is ``int_{t0}^{t_T} lambda^T df/dp dt``. The state
``y(t)`` comes from the recorded forward trajectory: the kernels receive a
trajectory buffer (:mod:`pymc_odesens.codegen.recorded_trajectory`) in place
of the parameter vector, read the parameters from it and interpolate ``y``.

``adjoint_jac`` writes the structural non-zeros of ``J_y`` at the interpolated state,
in the order of the system's sparsity pattern (as ``jac_y_values``): the Jacobian of the
``lambda`` block is ``J_y^T``, which the implicit solvers' Newton iteration assembles from
them with the transposed pattern (:func:`pymc_odesens.solvers.newton_matrix.newton_structure`
with ``transposed=True``).
"""

from __future__ import annotations

from pymc_odesens.codegen.kernel_source import (
    header,
    kernel_function_source,
    sparse_product_source,
)
from pymc_odesens.codegen.printer import KernelPrinter
from pymc_odesens.model import OdeSystem

__all__ = ["adjoint_module_source"]

_ARGUMENTS = "s, z, data, unused, out"


def _preamble(n_params: int) -> list[str]:
    # the trajectory buffer's layout (codegen/recorded_trajectory.py: the solvers write it,
    # the generated kernels read it); imported here so that numba loads only when needed
    from pymc_odesens.codegen.recorded_trajectory import HEADER_SIZE

    return [
        "t = -s",
        f"y = trajectory_state(data, t, {HEADER_SIZE + n_params})",
        f"p = pointer_offset(data, {HEADER_SIZE})",
        "v = z",
    ]


def adjoint_module_source(system: OdeSystem) -> str:
    """Source of a module with the kernels ``adjoint_rhs`` and ``adjoint_jac``."""
    n, p = system.n_states, system.n_params
    canon = system.to_canonical
    jac_y = [((i, j), canon(e)) for (i, j), e in system.J_y_nonzeros.items()]
    # rows of [lambda^T J_y, lambda^T J_p]: column j of J_y, then N + k for parameter k
    products = sorted(((j, i), e) for (i, j), e in jac_y)
    products += [((n + k, i), canon(e)) for (k, i), e in system.J_p_nonzeros.items()]
    printer = KernelPrinter()
    preamble = _preamble(p)
    parts = [
        header(system),
        "# backward adjoint system in s = -t: z = [lambda (N), mu (P)]",
        sparse_product_source(
            "adjoint_rhs", products, n + p, printer, arguments=_ARGUMENTS, preamble=preamble
        ),
        kernel_function_source(
            "adjoint_jac", [e for _, e in jac_y], printer, arguments=_ARGUMENTS, preamble=preamble
        ),
    ]
    return "\n".join(parts) + "\n"
