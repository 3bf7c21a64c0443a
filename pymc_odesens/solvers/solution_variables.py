"""Variables of a solved trajectory: expressions of ``t``, ``y`` and ``p`` at the output times.

A system's outputs (``system.outputs``, for SBML models every id) are sympy expressions.
:func:`evaluate_along_solution` evaluates several of them at every output time: a state,
a multiple of one state or a constant directly with numpy, anything else through one
generated and compiled kernel for all of them, called along the times by a compiled loop
(no Python per time point).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import sympy as sp

__all__ = ["evaluate_along_solution"]


def _direct(expr: sp.Expr, states: dict, params: dict, t, y: np.ndarray):
    """The values of ``expr`` without a kernel when it is ``c`` or ``c * y_i``, else None."""
    if t in expr.free_symbols:
        return None
    coefficient, rest = expr.as_coeff_Mul()
    if rest in states and coefficient.is_Number:
        return float(coefficient) * y[:, states[rest]]
    if not (expr.free_symbols - set(params)):
        value = expr.xreplace(params)
        try:
            return np.full(y.shape[0], float(value))
        except TypeError:
            return None
    return None


def evaluate_along_solution(
    system, params: np.ndarray, t: np.ndarray, y: np.ndarray, expressions: Sequence[sp.Expr]
) -> np.ndarray:
    """``out[i, m] = expressions[m](t[i], y[i], params)``, shape (T, M).

    Parameters
    ----------
    system : OdeSystem
    params : numpy.ndarray, shape (P,)
    t : numpy.ndarray, shape (T,)
    y : numpy.ndarray, shape (T, N)
    expressions : sequence of sympy.Expr
        In the system's symbols ``t``, ``state_symbols``, ``param_symbols``.
    """
    from pymc_odesens.codegen.observable_kernels import compile_observable_values
    from pymc_odesens.solvers.kernel_call import evaluate_along

    states = {s: i for i, s in enumerate(system.state_symbols)}
    numbers = {s: sp.Float(float(v)) for s, v in zip(system.param_symbols, params)}
    out = np.empty((t.size, len(expressions)))
    compiled = []
    for m, expr in enumerate(expressions):
        expr = sp.sympify(expr)
        values = _direct(expr, states, numbers, system.t, y)
        if values is None:
            compiled.append(m)
        else:
            out[:, m] = values
    if compiled:
        kernel = compile_observable_values(system, [expressions[m] for m in compiled])
        values = np.empty((t.size, len(compiled)))
        p = np.ascontiguousarray(params if params.size else np.zeros(1), dtype=np.float64)
        evaluate_along(
            kernel,
            np.ascontiguousarray(t, dtype=np.float64),
            np.ascontiguousarray(y, dtype=np.float64),
            p,
            values,
        )
        out[:, compiled] = values
    return out
