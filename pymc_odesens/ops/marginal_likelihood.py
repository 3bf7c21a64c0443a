"""The marginal normal log-likelihood as a PyTensor Op with an exact gradient (and NUMBA mode).

``marginal_log_likelihood(structure, z, c, a, sigma)`` is the log-density of the
measurements ``z`` (on their transformed scale) with the scalings, offsets and noise
variances of ``structure`` (:class:`~pymc_odesens.ops.marginal_structure.MarginalNormalStructure`)
integrated out in closed form (:mod:`pymc_odesens.ops.marginal_numerics`): one node for
all blocks, whatever their number, so that a model with dozens of blocks compiles as fast
as one with one. Its gradient with respect to ``z``, ``c``, ``A``'s entries ``a`` and the
given noise ``sigma`` comes from one more node (:class:`MarginalNormalLogLikelihoodGradient`,
value and gradient in one call). In PyTensor's NUMBA mode both are numba functions (cached
on disk with the rest of the graph; nutpie works).
"""

from __future__ import annotations

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch import numba_funcify

from pymc_odesens.ops.concurrent_calls import exclusive_perform
from pymc_odesens.ops.marginal_numerics import marginal_log_density
from pymc_odesens.ops.marginal_structure import MarginalNormalStructure

__all__ = [
    "MarginalNormalLogLikelihood",
    "MarginalNormalLogLikelihoodGradient",
    "marginal_log_likelihood",
]


class _MarginalOp(Op):
    __props__ = ("structure",)

    def __init__(self, structure: MarginalNormalStructure) -> None:
        if not isinstance(structure, MarginalNormalStructure):
            raise TypeError(
                f"structure must be a MarginalNormalStructure, got {type(structure).__name__}"
            )
        self.structure = structure

    def _inputs(self, z, c, a, sigma) -> list:
        s = self.structure
        inputs = []
        for name, value, size in (
            ("z", z, s.n_rows),
            ("c", c, s.n_rows),
            ("a", a, s.n_entries),
            ("sigma", sigma, s.n_rows),
        ):
            tensor = pt.as_tensor_variable(value)
            if tensor.ndim != 1:
                raise ValueError(f"{name} must be a vector of {size} values, got {tensor.type}")
            if tensor.type.shape[0] is not None and tensor.type.shape[0] != size:
                raise ValueError(f"{name} must have {size} values, got {tensor.type.shape[0]}")
            inputs.append(pt.cast(tensor, "float64"))
        return inputs

    def _values(self, inputs) -> list:
        s = self.structure
        values = []
        for name, value, size in zip(
            ("z", "c", "a", "sigma"), inputs, (s.n_rows, s.n_rows, s.n_entries, s.n_rows)
        ):
            value = np.ascontiguousarray(value, dtype=np.float64)
            if value.shape != (size,):
                raise ValueError(f"{name} must have shape ({size},), got {value.shape}")
            values.append(value)
        return values


class MarginalNormalLogLikelihood(_MarginalOp):
    """``L(z, c, a, sigma)``: the marginal log-likelihood of all blocks (a float64 scalar)."""

    def make_node(self, z, c, a, sigma):
        return Apply(self, self._inputs(z, c, a, sigma), [pt.dscalar()])

    @exclusive_perform
    def perform(self, node, inputs, output_storage):
        values = self._values(inputs)
        result = marginal_log_density(*values, False, *self.structure.numeric_arrays())
        output_storage[0][0] = np.asarray(result[0])

    def L_op(self, inputs, outputs, output_grads):
        _, *gradients = MarginalNormalLogLikelihoodGradient(self.structure)(*inputs)
        (g,) = output_grads
        return [g * d for d in gradients]


class MarginalNormalLogLikelihoodGradient(_MarginalOp):
    """``(L, dL/dz, dL/dc, dL/da, dL/dsigma)`` from one call."""

    def make_node(self, z, c, a, sigma):
        inputs = self._inputs(z, c, a, sigma)
        return Apply(self, inputs, [pt.dscalar(), *(i.type() for i in inputs)])

    @exclusive_perform
    def perform(self, node, inputs, output_storage):
        values = self._values(inputs)
        value, *gradients = marginal_log_density(*values, True, *self.structure.numeric_arrays())
        output_storage[0][0] = np.asarray(value)
        for k, gradient in enumerate(gradients):
            output_storage[k + 1][0] = gradient

    def L_op(self, inputs, outputs, output_grads):
        return [
            grad_not_implemented(self, k, x, "second derivatives of the marginal likelihood")
            for k, x in enumerate(inputs)
        ]


def marginal_log_likelihood(structure: MarginalNormalStructure, z, c, a, sigma):
    """The marginal log-likelihood of the measurements ``z`` as a tensor.

    Parameters
    ----------
    structure : MarginalNormalStructure
        The blocks, their marginalised columns and noise variances, and their priors.
    z : tensor-like, (n,)
        The measurements on their transformed scale.
    c : tensor-like, (n,)
        The fixed part of each measurement's mean.
    a : tensor-like, (nnz,)
        The values of ``A``'s entries (``structure.entry_row``, ``entry_column``).
    sigma : tensor-like, (n,)
        The noise standard deviation of the rows whose noise is given (ignored elsewhere).

    Returns
    -------
    TensorVariable
        A float64 scalar, differentiable with respect to all four inputs; ``-inf`` where an
        input is not finite or a given ``sigma`` not positive.
    """
    return MarginalNormalLogLikelihood(structure)(z, c, a, sigma)


def _numba_closure(op):
    arrays = op.structure.numeric_arrays()
    (
        block_kind,
        block_rows_start,
        block_rows,
        block_columns_start,
        block_columns,
        column_local,
        row_entries_start,
        row_entries,
        entry_column,
        prior_mean,
        prior_precision,
        alpha,
        beta,
        max_columns,
    ) = arrays
    core = marginal_log_density

    @numba.njit
    def evaluate(z, c, a, sigma, gradient):
        return core(
            np.ascontiguousarray(z),
            np.ascontiguousarray(c),
            np.ascontiguousarray(a),
            np.ascontiguousarray(sigma),
            gradient,
            block_kind,
            block_rows_start,
            block_rows,
            block_columns_start,
            block_columns,
            column_local,
            row_entries_start,
            row_entries,
            entry_column,
            prior_mean,
            prior_precision,
            alpha,
            beta,
            max_columns,
        )

    return evaluate


@numba_funcify.register(MarginalNormalLogLikelihood)
def _funcify_value(op, node=None, **kwargs):
    evaluate = _numba_closure(op)

    @numba.njit
    def marginal_value(z, c, a, sigma):
        return np.array(evaluate(z, c, a, sigma, False)[0], dtype=np.float64)

    return marginal_value


@numba_funcify.register(MarginalNormalLogLikelihoodGradient)
def _funcify_gradient(op, node=None, **kwargs):
    evaluate = _numba_closure(op)

    @numba.njit
    def marginal_value_and_gradient(z, c, a, sigma):
        value, dz, dc, da, dsigma = evaluate(z, c, a, sigma, True)
        return np.array(value, dtype=np.float64), dz, dc, da, dsigma

    return marginal_value_and_gradient
