"""Basic-block breaks in generated kernels: bounded blocks in numba's IR, unchanged values."""

from __future__ import annotations

import ctypes

import numba
import numpy as np
import pytest

from pymc_odesens import OdeSystem
from pymc_odesens.codegen import block_breaks
from pymc_odesens.codegen.block_breaks import with_block_breaks
from pymc_odesens.codegen.cache import import_module_from_path
from pymc_odesens.codegen.event_source import event_module_source
from pymc_odesens.codegen.kernel_source import CFUNC_OPTIONS, module_source
from pymc_odesens.codegen.sensitivity_source import sensitivity_module_source
from pymc_odesens.codegen.signature import KERNEL_SIGNATURE
from pymc_odesens.model import ImplicitEvent

BREAK = "basic-block break"
_DOUBLE_PTR = ctypes.POINTER(ctypes.c_double)


def test_breaks_bound_the_characters_between_them():
    statements = [f"    x{i} = y[{i}] * 2.0" for i in range(50)]
    lines = with_block_breaks(statements, "t", "    ", budget=100)
    assert [s for s in lines if BREAK not in s and s.strip() != "pass"] == statements
    longest = max(len(s) for s in statements)
    sizes = [0]
    for line in lines:
        if BREAK in line:
            assert line == f"    if t != t:  # {BREAK} (block_breaks)"
            sizes.append(0)
        elif line.strip() != "pass":
            sizes[-1] += len(line)
    assert len(sizes) > 5
    assert all(100 <= size < 100 + longest for size in sizes[:-1]), sizes
    assert 0 < sizes[-1] < 100 + longest
    assert with_block_breaks(statements, "t", "    ", budget=10**6) == statements
    with pytest.raises(ValueError, match="budget must be a positive number of characters, got 0"):
        with_block_breaks(statements, "t", "    ", budget=0)


def _dense_system(n: int) -> OdeSystem:
    rng = np.random.default_rng(7)
    a = rng.normal(size=(n, n))

    def rhs(t, y, p):
        return [
            sum(float(a[i, j]) * y[j] for j in range(n)) + p[i] * y[i] * y[(i + 1) % n]
            for i in range(n)
        ]

    return OdeSystem(rhs, n, n, name=f"dense_block_breaks_{n}")


def _largest_block(function) -> int:
    """Statements in the largest basic block of ``function`` as numba types and lowers it."""
    dispatcher = numba.njit(KERNEL_SIGNATURE, no_cpython_wrapper=True)(function)
    annotation = dispatcher.overloads[KERNEL_SIGNATURE.args].type_annotation
    return max(len(block.body) for block in annotation.blocks.values())


def _import(source: str, path) -> object:
    path.write_text(source)
    return import_module_from_path(path)


def _call(kernel, t, inputs, out_size):
    out = np.zeros(out_size)
    kernel.ctypes(float(t), *[a.ctypes.data_as(_DOUBLE_PTR) for a in (*inputs, out)])
    return out


def test_dense_kernels_have_small_blocks_and_the_values_of_unbroken_code(tmp_path, monkeypatch):
    """A dense 12-state system: with a break after every statement (budget 1) the long
    straight-line kernels' largest block in numba's typed IR is a small fraction of the
    unbroken one (budget huge), and all kernels give the values of the default budget,
    which are right."""
    n = 12
    system = _dense_system(n)
    rng = np.random.default_rng(3)
    t = 0.3
    y, p, v = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    z = np.concatenate([y, rng.normal(size=2 * n * n)])  # [y, S_0 .. S_2n-1]
    sizes = {"rhs": n, "jac_y": n * n, "jac_p": n * n, "vjp_y": n, "vjp_p": n, "jvp_y": n}
    long_kernels = ("rhs", "vjp_y", "jvp_y")
    results, blocks = {}, {}
    for label, budget in (("default", None), ("every", 1), ("never", 10**9)):
        if budget is not None:
            monkeypatch.setattr(block_breaks, "BLOCK_BREAK_CHARACTERS", budget)
        source = module_source(system)
        assert (BREAK in source) == (label != "never")
        module = _import(source, tmp_path / f"kernels_dense_{label}.py")
        if label != "default":
            blocks[label] = {name: _largest_block(getattr(module, name)) for name in long_kernels}
        if label == "never":
            continue
        results[label] = {
            name: _call(
                numba.cfunc(KERNEL_SIGNATURE, **CFUNC_OPTIONS)(getattr(module, name)),
                t,
                (y, p, v),
                size,
            )
            for name, size in sizes.items()
        }
        sens = _import(
            sensitivity_module_source(system, "both"), tmp_path / f"kernels_sens_{label}.py"
        )
        results[label]["sens_rhs"] = _call(sens.sens_rhs, t, (z, p, v), z.size)
    for name, value in results["default"].items():
        np.testing.assert_array_equal(results["every"][name], value, err_msg=name)
    jac = results["default"]["jac_y"].reshape(n, n)
    np.testing.assert_allclose(results["default"]["jvp_y"], jac @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(results["default"]["vjp_y"], v @ jac, rtol=1e-12, atol=1e-12)
    columns = z[n:].reshape(2 * n, n)
    jac_p = results["default"]["jac_p"].reshape(n, n)
    want = columns @ jac.T + np.vstack([jac_p, np.zeros((n, n))])
    np.testing.assert_allclose(results["default"]["sens_rhs"][n:], want.ravel(), atol=1e-12)
    for name in long_kernels:
        assert blocks["every"][name] * 8 < blocks["never"][name], (name, blocks)


def test_event_kernels_with_a_break_after_every_statement(tmp_path, monkeypatch):
    """The event module with a break after every statement (inside its branches too)
    compiles and its kernels give the values of the unbroken module."""
    system = OdeSystem(
        lambda t, y, p: [y[1], -p[0] - p[2] * y[1] * y[0]],
        states=["z", "v"],
        params=["g", "gamma", "c"],
        events=[
            ImplicitEvent(
                condition=lambda t, y, p: y[0],
                affect=lambda t, y, p: [y[0], -p[1] * y[1] + p[2] * y[0] * y[0]],
                direction="down",
            )
        ],
        name="ball_block_breaks",
    )
    rng = np.random.default_rng(5)
    inputs = (rng.normal(size=8), rng.normal(size=3), np.zeros(8))
    values = {}
    for label, budget in (("every", 1), ("never", 10**9)):
        monkeypatch.setattr(block_breaks, "BLOCK_BREAK_CHARACTERS", budget)
        source = event_module_source(system)
        assert (BREAK in source) == (label == "every")
        module = _import(source, tmp_path / f"kernels_events_{label}.py")
        values[label] = [
            _call(getattr(module, name), 0.4, inputs, 64)
            for name in ("event_conditions", "event_jump", "event_adjoint_jump")
        ]
    for every, never in zip(values["every"], values["never"]):
        np.testing.assert_array_equal(every, never)
    assert np.any(values["never"][1] != 0.0)
