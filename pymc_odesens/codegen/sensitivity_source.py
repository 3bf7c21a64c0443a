"""Generated right-hand side of the forward-sensitivity system.

The integrated vector is ``z = [y, S_0, S_1, ..., S_{B-1}]`` (DESIGN.md's
augmented layout, one block of N per sensitivity column) and

    z' = [f, J_y S_0 + J_p[0], ..., J_y S_{P-1} + J_p[P-1], J_y S_P, ...]

with parameter columns first (``wrt`` "params" or "both") and initial-state
columns after them (``wrt`` "y0" or "both", no inhomogeneous term). ``f``, the
structurally non-zero entries of ``J_y`` and ``J_p`` share one common
subexpression elimination; the products ``J_y S_k`` are computed in one loop
over the columns with the non-zeros of ``J_y`` unrolled, so the cost per column
is the number of non-zeros of ``J_y`` and the code size does not grow with the
number of columns.
"""

from __future__ import annotations

import sympy as sp

from pymc_odesens.codegen.kernel_source import header
from pymc_odesens.codegen.printer import KernelPrinter
from pymc_odesens.codegen.time_offsets import exact_time_offsets
from pymc_odesens.model import OdeSystem
from pymc_odesens.model.internal_symbols import internal_symbols

__all__ = ["WRT_CHOICES", "sensitivity_blocks", "sensitivity_module_source"]

WRT_CHOICES = ("params", "y0", "both")


def sensitivity_blocks(system: OdeSystem, wrt: str) -> tuple[int, int]:
    """``(parameter columns, initial-state columns)`` for ``wrt``."""
    if wrt not in WRT_CHOICES:
        raise ValueError(f"wrt must be one of {WRT_CHOICES}, got {wrt!r}")
    n_p = system.n_params if wrt in ("params", "both") else 0
    n_y0 = system.n_states if wrt in ("y0", "both") else 0
    return n_p, n_y0


def sensitivity_module_source(system: OdeSystem, wrt: str) -> str:
    """Source of a module with one kernel ``sens_rhs`` for the augmented system.

    The code size is O(N + nnz(J_y) + nnz(J_p)), not O(columns x nnz(J_y)): the
    inhomogeneous terms ``J_p[k]`` are written once (straight-line), then one loop over
    the columns adds ``J_y S_k`` with the non-zeros of ``J_y`` unrolled (unrolling the
    columns as well would make the code N x P statements).
    """
    n = system.n_states
    n_p, n_y0 = sensitivity_blocks(system, wrt)
    blocks = n_p + n_y0
    canon = system.to_canonical
    jy_nz = list(system.J_y_nonzeros)
    jp_nz = [(k, i) for (k, i) in system.J_p_nonzeros if k < n_p]
    expressions = (
        [canon(e) for e in system.rhs_expressions]
        + [canon(system.J_y_nonzeros[key]) for key in jy_nz]
        + [canon(system.J_p_nonzeros[key]) for key in jp_nz]
    )
    replacements, reduced = sp.cse(exact_time_offsets(expressions), symbols=internal_symbols("cse"))
    printer = KernelPrinter()
    lines = [
        header(system),
        f"# forward sensitivities wrt {wrt}: {n_p} parameter and {n_y0} initial-state columns",
        "",
        "",
        "def sens_rhs(t, y, p, v, out):",
    ]
    lines += [f"    {symbol} = {printer.doprint(value)}" for symbol, value in replacements]
    lines += [f"    out[{i}] = {printer.doprint(reduced[i])}" for i in range(n)]
    lines += [
        f"    jy_{i}_{j} = {printer.doprint(reduced[n + idx])}" for idx, (i, j) in enumerate(jy_nz)
    ]
    if blocks:
        # inhomogeneous part: J_p[k] in parameter column k, zero elsewhere
        lines.append(f"    for idx in range({n}, {n * (1 + blocks)}):")
        lines.append("        out[idx] = 0.0")
        lines += [
            f"    out[{n * (1 + k) + i}] = {printer.doprint(reduced[n + len(jy_nz) + idx])}"
            for idx, (k, i) in enumerate(jp_nz)
        ]
    rows: dict[int, list[int]] = {}
    for i, j in jy_nz:
        rows.setdefault(i, []).append(j)
    used = sorted({j for (_, j) in jy_nz})
    if blocks and jy_nz:
        # every column: out[b + i] += sum_j J_y[i, j] S[b + j]
        lines.append(f"    for b in range({n}, {n * (1 + blocks)}, {n}):")
        lines += [f"        s_{j} = y[b + {j}]" for j in used]
        for i in sorted(rows):
            terms = " + ".join(f"jy_{i}_{j} * s_{j}" for j in rows[i])
            lines.append(f"        out[b + {i}] = out[b + {i}] + ({terms})")
    return "\n".join(lines) + "\n"
