"""PyTensor's scipy.special scalar Ops get NUMBA cache keys: digamma (in every negative
binomial gradient) computes scipy's values through the linker symbol, each function and
dtype has its own key, and a second process loads the compiled graph."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special

import pymc_odesens.ops  # noqa: F401  (registers the keys)
from tests.ops.test_numba_cache import run_child


def _scalar_key(output):
    from pytensor.link.numba.dispatch.basic import numba_funcify_and_cache_key

    node = output.owner  # an Elemwise of one scalar Op
    scalar_node = node.op.scalar_op.make_node(*(i.type.to_scalar_type()() for i in node.inputs))
    return numba_funcify_and_cache_key(scalar_node.op, node=scalar_node)[1]


def test_digamma_and_kin_compute_scipys_values_in_numba_mode():
    x = pt.dvector("x")
    a = pt.dvector("a")
    outputs = [pt.psi(x), pt.gammainc(a, x), pt.iv(a, x)]
    f = pytensor.function([x, a], outputs, mode="NUMBA")
    xs, as_ = np.array([0.3, 1.0, 4.5, 20.0]), np.array([0.5, 1.5, 2.0, 3.0])
    got = f(xs, as_)
    np.testing.assert_array_equal(got[0], scipy.special.psi(xs))
    np.testing.assert_array_equal(got[1], scipy.special.gammainc(as_, xs))
    np.testing.assert_array_equal(got[2], scipy.special.iv(as_, xs))


def test_each_function_and_dtype_has_its_own_key():
    x, y = pt.dscalar("x"), pt.dscalar("y")
    keys = [
        _scalar_key(pt.psi(pt.as_tensor([x]))),
        _scalar_key(pt.psi(pt.as_tensor([pt.cast(x, "float32")]))),
        _scalar_key(pt.gammainc(pt.as_tensor([x]), pt.as_tensor([y]))),
        _scalar_key(pt.gammaincc(pt.as_tensor([x]), pt.as_tensor([y]))),
    ]
    assert all(k is not None and k.startswith("pymc_odesens_") for k in keys), keys
    assert len(set(keys)) == len(keys)
    assert _scalar_key(pt.psi(pt.as_tensor([y]))) == keys[0]


CHILD = r"""
import numpy as np
import pytensor
import pytensor.tensor as pt

import pymc_odesens.ops

x = pt.dvector("x")
cost = (pt.gammaln(x) * 1.25 + x).sum()
f = pytensor.function([x], [cost, pytensor.grad(cost, x)], mode="NUMBA")  # grad: digamma
value, grad = f(np.array([0.7, 3.2]))
values = [float(value), *map(float, grad)]
print("RESULT " + json.dumps({"compiled": compiled, "values": values}))
"""


@pytest.mark.slow  # sampling run / worker processes: python -m pytest -m slow
def test_a_second_process_loads_a_graph_with_digamma():
    runs = [run_child(CHILD) for _ in range(2)]
    assert "numba_funcified_fgraph" not in runs[1]["compiled"], runs[1]["compiled"]
    expected = [
        1.25 * (scipy.special.gammaln(0.7) + scipy.special.gammaln(3.2)) + 3.9,
        *(1.25 * scipy.special.psi([0.7, 3.2]) + 1.0),
    ]
    for run in runs:
        np.testing.assert_allclose(run["values"], expected, rtol=1e-14)
