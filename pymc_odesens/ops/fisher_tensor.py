"""The expected Fisher information of an ODE model as a PyTensor expression.

:func:`fisher_information_tensor` wraps :func:`pymc_odesens.fisher_information`
in an Op, so that ``F`` can be computed inside a model (for example recorded
with ``pm.Deterministic`` along a chain, or used to build a design criterion),
with random or constant parameters, initial states and noise scales, and with
several experiments in one call (solved in parallel threads).

``F`` is not differentiable here: its derivative would need second-order
sensitivities. The Riemannian sampler :class:`pymc_odesens.SMMALA` does not
use this Op; it builds the Fisher information of a model's likelihood from
the model graph (:mod:`pymc_odesens.inference.smmala_metric`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_odesens.codegen.observable_kernels import compile_observable_kernels
from pymc_odesens.codegen.sensitivity_source import WRT_CHOICES
from pymc_odesens.model import OdeSystem
from pymc_odesens.ops.concurrent_calls import exclusive_perform
from pymc_odesens.ops.experiments import _map
from pymc_odesens.ops.graph_inputs import (
    experiment_count,
    experiment_inputs,
    experiment_times,
)
from pymc_odesens.sensitivity.fisher_information import (
    NOISE_MODELS,
    _solver_controls,
    fisher_information,
)
from pymc_odesens.sensitivity.observables import Observables, resolve_observables
from pymc_odesens.solvers.controls import METHODS, resolve_controls

__all__ = ["FisherInformationOp", "FisherSpec", "fisher_information_tensor"]

_SIMPLE_CONTROLS = ("relative_tolerance", "absolute_tolerance", "max_num_steps")


@dataclass(frozen=True, eq=False)
class FisherSpec:
    """What is fixed when the graph is built (see :func:`fisher_information_tensor`)."""

    system: OdeSystem
    times: np.ndarray
    t0: float
    method: str
    sensitivity: str
    observables: Observables
    noise: str
    wrt: str
    controls: dict
    n_experiments: int
    y0_from_system: bool

    def times_of(self, experiment: int) -> np.ndarray:
        return self.times if self.times.ndim == 1 else self.times[experiment]

    @property
    def n_columns(self) -> int:
        n, p = self.system.n_states, self.system.n_params
        return {"params": p, "y0": n, "both": p + n}[self.wrt]


class FisherInformationOp(Op):
    """``F`` (E, K, K) from ``[y0 (E, N),] params (E, P), sigma (E, T, M)``."""

    __props__ = ("spec",)

    def __init__(self, spec: FisherSpec) -> None:
        self.spec = spec

    def __str__(self) -> str:
        return f"FisherInformationOp{{{self.spec.system.name}, {self.spec.sensitivity}}}"

    def make_node(self, *inputs):
        inputs = [pt.as_tensor_variable(x, dtype="float64") for x in inputs]
        s = self.spec
        out = pt.tensor(dtype="float64", shape=(s.n_experiments, s.n_columns, s.n_columns))
        return Apply(self, inputs, [out])

    @exclusive_perform
    def perform(self, node, inputs, outputs):
        s = self.spec
        if s.y0_from_system:
            y0, (params, sigma) = None, inputs
        else:
            y0, params, sigma = inputs
        out = np.empty((s.n_experiments, s.n_columns, s.n_columns))
        observables = dict(zip(s.observables.names, s.observables.expressions))

        def run(e):
            out[e] = fisher_information(
                s.system,
                None if y0 is None else y0[e],
                s.times_of(e),
                params[e],
                sigma[e],
                t0=s.t0,
                sensitivity=s.sensitivity,
                method=s.method,
                observables=observables,
                noise=s.noise,
                wrt=s.wrt,
                **s.controls,
            ).matrix

        _map(run, s.n_experiments)
        outputs[0][0] = out

    def L_op(self, inputs, outputs, output_grads):
        return [
            grad_not_implemented(
                self,
                i,
                x,
                "the Fisher information has no gradient here "
                "(it would need second-order sensitivities)",
            )
            for i, x in enumerate(inputs)
        ]


def fisher_information_tensor(
    system: OdeSystem,
    y0,
    times,
    params,
    sigma,
    *,
    t0: float = 0.0,
    sensitivity: str = "forward",
    method: str = "bdf",
    observables=None,
    noise: str = "additive",
    wrt: str = "params",
    **controls,
):
    """The expected Fisher information as a PyTensor tensor.

    The arguments mean what they mean for :func:`pymc_odesens.fisher_information`;
    ``y0``, ``params`` and ``sigma`` may be random variables or any tensors.
    As in :func:`pymc_odesens.ode_solution`, a leading axis E on ``y0``,
    ``params`` or ``times`` describes E experiments.

    Parameters
    ----------
    system : OdeSystem
    y0 : tensor-like, shape (N,) or (E, N), or None
    times : array_like, shape (T,) or (E, T)
    params : tensor-like, shape (P,) or (E, P)
    sigma : tensor-like, shape (), (M,), (T, M) or (E, T, M)
        Noise standard deviations (positive; checked when evaluated).
    t0 : float
    sensitivity, method, observables, noise, wrt, **controls
        See :func:`pymc_odesens.fisher_information`.

    Returns
    -------
    TensorVariable
        ``F`` of shape (K, K), or (E, K, K) with one matrix per experiment
        when there is an experiment axis (sum them over E for parameters
        shared by all experiments). Not differentiable.

    Raises
    ------
    ValueError, TypeError
        Bad shapes, names, observables or controls, when the graph is built.
    """
    if not isinstance(system, OdeSystem):
        raise TypeError(f"system must be an OdeSystem, got {type(system).__name__}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if noise not in NOISE_MODELS:
        raise ValueError(f"noise must be one of {NOISE_MODELS}, got {noise!r}")
    if wrt not in WRT_CHOICES:
        raise ValueError(f"wrt must be one of {WRT_CHOICES}, got {wrt!r}")
    from pymc_odesens.sensitivity import SENSITIVITY_METHODS

    if sensitivity not in SENSITIVITY_METHODS:
        raise ValueError(f"sensitivity must be one of {SENSITIVITY_METHODS}, got {sensitivity!r}")
    controls = _solver_controls(controls)
    simple = {k: v for k, v in controls.items() if k in _SIMPLE_CONTROLS}
    resolve_controls(method, system.n_states, **simple)
    n, p = system.n_states, system.n_params
    t0 = float(t0)
    times_arr = experiment_times(times, t0)
    resolved = resolve_observables(system, observables)
    compile_observable_kernels(system, resolved.expressions)
    m, n_t = len(resolved), times_arr.shape[-1]
    params_m, y0_m, sizes = experiment_inputs(system, y0, params, times_arr)
    y0_from_system = y0 is None
    sigma_t = pt.as_tensor_variable(sigma, dtype="float64")
    if sigma_t.ndim > 3:
        raise ValueError(f"sigma must have at most 3 dims (E, T, M); got {sigma_t.ndim}")
    if sigma_t.ndim == 3:
        sizes["sigma"] = sigma_t.type.shape[0]
    batched, n_e = experiment_count(sizes)
    expected = {0: (), 1: (m,), 2: (n_t, m), 3: (n_e, n_t, m)}[sigma_t.ndim]
    for have, want in zip(sigma_t.type.shape, expected):
        if have is not None and have != want:
            raise ValueError(
                f"sigma must have shape (), ({m},), ({n_t}, {m}) or ({n_e}, {n_t}, {m}) "
                f"(M = {m} observables, T = {n_t} times); got shape {sigma_t.type.shape}"
            )
    sigma_b = pt.broadcast_to(sigma_t, (n_e, n_t, m))
    params_m = pt.broadcast_to(params_m, (n_e, p))
    if y0_m is not None:
        y0_m = pt.broadcast_to(y0_m, (n_e, n))
    spec = FisherSpec(
        system=system,
        times=times_arr,
        t0=t0,
        method=method,
        sensitivity=sensitivity,
        observables=resolved,
        noise=noise,
        wrt=wrt,
        controls=dict(controls),
        n_experiments=n_e,
        y0_from_system=y0_from_system,
    )
    op = FisherInformationOp(spec)
    inputs = [params_m, sigma_b] if y0_from_system else [y0_m, params_m, sigma_b]
    fisher = op(*inputs)
    return fisher if batched else fisher[0]
