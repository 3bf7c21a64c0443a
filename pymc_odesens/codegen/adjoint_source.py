"""Generated right-hand side and Jacobian of the backward adjoint system.

The adjoint of ``y' = f(t, y, p)`` for a loss ``L(y(t_1), ..., y(t_T))`` is
integrated backwards in time. With ``s = -t`` (so that the integrators run
forwards) the backward vector ``z = [lambda, mu]`` (N + P components) obeys

    d lambda / ds = J_y(t, y(t))^T lambda        (``vjp_y``)
    d mu / ds     = J_p(t, y(t))^T lambda        (``vjp_p``; a quadrature)

and ``mu`` at ``s = -t0`` is ``int_{t0}^{t_T} lambda^T df/dp dt``. The state
``y(t)`` comes from the recorded forward trajectory: the kernels receive a
trajectory buffer (:mod:`pymc_odesens.solvers.recorded_trajectory`) in place
of the parameter vector, read the parameters from it and interpolate ``y``.

``adjoint_jac`` writes ``J_y^T`` (N x N, row-major), the Jacobian of the
``lambda`` block used by the implicit solvers' Newton iteration.
"""

from __future__ import annotations

from pymc_odesens.codegen.kernel_source import CODEGEN_VERSION, HEADER, kernel_function_source
from pymc_odesens.codegen.printer import KernelPrinter
from pymc_odesens.model import OdeSystem

__all__ = ["adjoint_module_source"]

_IMPORTS = (
    "from pymc_odesens.solvers.recorded_trajectory import (\n"
    "    HEADER_SIZE,\n"
    "    interpolate_state,\n"
    "    trajectory_buffer_size,\n"
    ")\n"
)


def _preamble(n_states: int, n_params: int) -> list[str]:
    return [
        "buf = numba.carray(data, (trajectory_buffer_size(numba.carray(data, (HEADER_SIZE,))),))",
        "t = -s",
        "y = interpolate_state(buf, t)",
        f"p = buf[HEADER_SIZE : HEADER_SIZE + {n_params}]",
        f"v = numba.carray(z, ({max(n_states, 1)},))",
    ]


def adjoint_module_source(system: OdeSystem) -> str:
    """Source of a module with the cfuncs ``adjoint_rhs`` and ``adjoint_jac``."""
    n, p = system.n_states, system.n_params
    canon = system.to_canonical
    jac_y = system.J_y
    printer = KernelPrinter()
    rhs_expressions = [canon(e) for e in system.vjp_y] + [canon(e) for e in system.vjp_p]
    jac_expressions = [canon(jac_y[j, i]) for i in range(n) for j in range(n)]
    preamble = _preamble(n, p)
    parts = [
        HEADER.format(version=CODEGEN_VERSION, name=system.name, fingerprint=system.fingerprint),
        _IMPORTS,
        "# backward adjoint system in s = -t: z = [lambda (N), mu (P)]",
        kernel_function_source(
            "adjoint_rhs",
            rhs_expressions,
            printer,
            arguments="s, z, data, unused, out",
            preamble=preamble,
        ),
        kernel_function_source(
            "adjoint_jac",
            jac_expressions,
            printer,
            arguments="s, z, data, unused, out",
            preamble=preamble,
        ),
    ]
    return "\n".join(parts) + "\n"
