"""The log-posterior of a PyMC model as an optimiser sees it, in one process.

Mode finding maximises the log-posterior of the parameters *on their own scale* (the
priors' densities without the transforms' log-Jacobians: PyMC's ``jacobian=False``), so
that the optimum is the maximum a posteriori estimate of the values the user reads (for a
PEtab model: PEtab's parameters on their ``parameterScale``, the maximum-likelihood
estimate where the priors are uniform). The optimisation coordinates are

- the value itself, inside its bounds, for a variable whose transform is an interval
  with constant finite bounds (every PEtab parameter; ``pm.Uniform``, ``pm.Beta``...):
  L-BFGS-B and the trust region keep it inside the box, and an optimum on a bound is
  reached exactly, as in pyPESTO;
- the sampler's unconstrained value otherwise (log of a positive variable, the simplex's
  coordinates...), unbounded. A function's maximiser does not move under a change of
  variables (no Jacobian is added), so this is the same MAP.

:class:`ModeObjective` compiles, from one model, the log-posterior, its exact gradient and
the log-likelihood at a raveled vector of these coordinates, on demand the Fisher
information (:func:`pymc_odesens.inference.smmala_metric.smmala_graph`: the expected
Fisher information of the observed Normal and LogNormal variables through forward
sensitivities, minus the priors' Hessian), draws of starting points from the prior, and the
maps to the user's values and to the sampler's coordinates.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.model.transform.conditioning import remove_value_transforms
from pymc.pytensorf import compile as compile_pytensor
from pymc.pytensorf import find_rng_nodes, join_nonshared_inputs, reseed_rngs
from pymc.vartypes import continuous_types
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import graph_inputs
from pytensor.tensor.variable import TensorConstant

from pymc_odesens.inference.smmala_metric import smmala_graph, total_log_density
from pymc_odesens.ops.per_thread_function import PerThreadFunction
from pymc_odesens.ops.unused_sensitivities import states_only_mode

__all__ = ["Coordinate", "ModeObjective"]


@dataclass(frozen=True)
class Coordinate:
    """One free variable of the model in the optimisation vector.

    Attributes
    ----------
    name : str
        The variable's name (a PEtab parameter id for a PEtab model).
    shape : tuple of int
    start, stop : int
        Its slice of the optimisation vector.
    bounded : bool
        True: the value itself within ``lower``/``upper``; False: the sampler's
        unconstrained value (unbounded).
    value_variable : str
        The name of its value variable in the sampler's coordinates (``k_interval__``).
    """

    name: str
    shape: tuple
    start: int
    stop: int
    bounded: bool
    value_variable: str


def _constant(variable) -> np.ndarray | None:
    """The value of a graph without free inputs, else None."""
    if variable is None:
        return None
    variable = pt.as_tensor_variable(variable)
    if isinstance(variable, TensorConstant):
        return np.asarray(variable.data, dtype=float)
    if any(not isinstance(v, Constant) for v in graph_inputs([variable])):
        return None
    return np.asarray(variable.eval(), dtype=float)


def _box(model: pm.Model, rv, shape: tuple) -> tuple[np.ndarray, np.ndarray] | None:
    """``(lower, upper)`` broadcast to ``rv``'s shape when its transform is an interval with
    constant finite bounds, else None."""
    transform = model.rvs_to_transforms.get(rv)
    args_fn = getattr(transform, "args_fn", None)
    if args_fn is None:
        return None
    a, b = args_fn(*rv.owner.inputs)
    lower, upper = _constant(a), _constant(b)
    if lower is None or upper is None:
        return None
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        return None
    return np.broadcast_to(lower, shape).astype(float), np.broadcast_to(upper, shape).astype(float)


def _without_transforms(model: pm.Model, rvs: list) -> pm.Model:
    """A copy of ``model`` whose variables ``rvs`` have no value transform.

    PyMC's ``remove_value_transforms`` refuses models with initial values (a PEtab model
    starts at the nominal values); the copy does not need them (the starts are drawn from
    the prior), so they are left out of it.
    """
    initial_values = model.rvs_to_initial_values
    try:
        model.rvs_to_initial_values = dict.fromkeys(initial_values)
        return remove_value_transforms(model, vars=rvs)
    finally:
        model.rvs_to_initial_values = initial_values


class ModeObjective:
    """The log-posterior of ``model`` in the optimisation coordinates (module docstring).

    Parameters
    ----------
    model : pymc.Model
        A model with continuous free variables only.
    compile_kwargs : dict, optional
        PyTensor's compile arguments of the log-posterior and gradient (default: PyTensor's
        default mode).

    Attributes
    ----------
    coordinates : tuple of Coordinate
    lower, upper : numpy.ndarray
        Bounds of the optimisation vector (``-inf``/``inf`` for unbounded coordinates).
    size : int
    """

    def __init__(self, model: pm.Model, compile_kwargs: Mapping | None = None) -> None:
        discrete = [v.name for v in model.value_vars if v.dtype not in continuous_types]
        if discrete:
            raise ValueError(
                f"find_modes: the model has discrete free variables {discrete}; modes are found "
                "for continuous variables only"
            )
        if not model.free_RVs:
            raise ValueError("find_modes: the model has no free variables")
        self.model = model
        self.compile_kwargs = dict(compile_kwargs or {})
        initial = model.initial_point()
        boxes = {
            rv: _box(model, rv, np.shape(initial[model.rvs_to_values[rv].name]))
            for rv in model.free_RVs
        }
        boxed = [rv for rv, box in boxes.items() if box is not None]
        self.optimisation_model = _without_transforms(model, boxed) if boxed else model
        point = self.optimisation_model.initial_point()
        coordinates, lower, upper, offset = [], [], [], 0
        # the copy's variables come in another order: matched by name
        by_name = {rv.name: rv for rv in self.optimisation_model.free_RVs}
        self._opt_rvs = [by_name[rv.name] for rv in model.free_RVs]
        for rv, opt_rv in zip(model.free_RVs, self._opt_rvs):
            value = self.optimisation_model.rvs_to_values[opt_rv]
            shape = tuple(point[value.name].shape)
            size = int(np.prod(shape, dtype=int))
            box = boxes[rv]
            coordinates.append(
                Coordinate(
                    name=rv.name,
                    shape=shape,
                    start=offset,
                    stop=offset + size,
                    bounded=box is not None,
                    value_variable=model.rvs_to_values[rv].name,
                )
            )
            lower.append(np.full(size, -np.inf) if box is None else box[0].ravel())
            upper.append(np.full(size, np.inf) if box is None else box[1].ravel())
            offset += size
        self.coordinates = tuple(coordinates)
        self.lower = np.concatenate(lower)
        self.upper = np.concatenate(upper)
        self.size = offset
        self._point = point
        self._value_vars = [self.optimisation_model.rvs_to_values[rv] for rv in self._opt_rvs]
        self._lock = threading.RLock()
        # compiled on first use: the Fisher trust region needs only the Fisher information's
        # function, which gives the log-posterior, gradient and log-likelihood too
        self._function = None
        self._fisher_function = None
        self._value_function = None
        self._draw_function = None
        self._values_function = None
        self._sampler_function = None

    # compiled functions ----------------------------------------------------------------
    def _joined(self, outputs):
        joined, x = join_nonshared_inputs(self._point, outputs, self._value_vars, {})
        return joined, x

    def _log_posterior_graph(self):
        """``(log_posterior, log_likelihood, x)`` of the optimisation model."""
        m = self.optimisation_model
        observed = list(m.observed_RVs)
        others = list(m.free_RVs) + list(m.potentials)
        # one derivation of every term (a derivation per call costs about 0.2 s on a PEtab
        # model); their sum is model.logp
        factors = m.logp(vars=others + observed, jacobian=False, sum=False)
        prior = total_log_density(factors[: len(others)])
        log_likelihood = total_log_density(factors[len(others) :])
        (log_posterior, log_likelihood), x = self._joined([prior + log_likelihood, log_likelihood])
        return log_posterior, log_likelihood, x

    def _compile_log_posterior(self):
        log_posterior, log_likelihood, x = self._log_posterior_graph()
        gradient = pytensor.grad(log_posterior, x)
        function = compile_pytensor(
            [x], [log_posterior, gradient, log_likelihood], **self.compile_kwargs
        )
        function.trust_input = True
        return PerThreadFunction(function)

    def _evaluator(self):
        """``x -> (log_posterior, gradient, log_likelihood, ...)``: the log-posterior's own
        function, or the Fisher information's when only that one is compiled (it gives the
        same three first; compiling the other would cost as much again)."""
        with self._lock:
            if self._function is None and self._fisher_function is not None:
                return self._fisher_function
        return self._own_function()

    def _own_function(self):
        with self._lock:
            if self._function is None:
                self._function = self._compile_log_posterior()
            return self._function

    def log_posterior(self, x: np.ndarray) -> float:
        """The log-posterior (``jacobian=False``) at ``x`` without its gradient: ODE solves
        without sensitivities (:func:`~pymc_odesens.ops.unused_sensitivities.
        states_only_mode`), so the value differs from :meth:`evaluate`'s within the
        solver's tolerances; ``-inf`` where a solve fails. Compiled on first use."""
        with self._lock:
            if self._value_function is None:
                log_posterior, _, x_graph = self._log_posterior_graph()
                kwargs = dict(self.compile_kwargs)
                kwargs["mode"] = states_only_mode(kwargs.get("mode"))
                function = compile_pytensor([x_graph], log_posterior, **kwargs)
                function.trust_input = True
                self._value_function = PerThreadFunction(function)
            function = self._value_function
        return float(function(np.asarray(x, dtype=float)))

    def log_posterior_and_gradient(
        self, x: np.ndarray, own_route: bool = False
    ) -> tuple[float, np.ndarray]:
        """The log-posterior (``jacobian=False``) and its gradient at ``x``.

        ``own_route=True``: by the log-posterior's own function (the model's route to the
        gradient, an adjoint for instance), compiled on first use even where the Fisher
        information's function, already compiled, could give them: where its forward
        sensitivities fail, the model's route may not.
        """
        function = self._own_function() if own_route else self._evaluator()
        value, gradient, *_ = function(np.asarray(x, dtype=float))
        return float(value), np.array(gradient, dtype=float)

    def evaluate(self, x: np.ndarray) -> tuple[float, np.ndarray, float]:
        """``(log_posterior, gradient, log_likelihood)`` at ``x``."""
        value, gradient, log_likelihood, *_ = self._evaluator()(np.asarray(x, dtype=float))
        return float(value), np.array(gradient, dtype=float), float(log_likelihood)

    def fisher_information(self, x: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """``(log_posterior, gradient, metric)``: the metric is the expected Fisher
        information of the likelihood minus the priors' Hessian (a Gauss-Newton Hessian of
        minus the log-posterior), in the optimisation coordinates.

        Raises
        ------
        ValueError
            An observed variable is neither Normal nor LogNormal (its Fisher information is
            not known), or a prior depends on an ODE solution.
        """
        with self._lock:
            if self._fisher_function is None:
                self._fisher_function = self._compile_fisher()
        value, gradient, _, metric = self._fisher_function(np.asarray(x, dtype=float))
        return float(value), np.array(gradient, dtype=float), np.array(metric, dtype=float)

    def _compile_fisher(self) -> PerThreadFunction:
        graph = smmala_graph(
            self.optimisation_model, self._value_vars, self._point, {}, "forward", jacobian=False
        )
        function = compile_pytensor(
            [graph.x],
            [graph.logp, graph.dlogp, graph.log_likelihood, graph.metric],
            **self.compile_kwargs,
        )
        function.trust_input = True
        return PerThreadFunction(function)

    def draw_start(self, seed: np.random.SeedSequence) -> np.ndarray:
        """A draw of the optimisation vector from the prior (all free variables jointly)."""
        with self._lock:  # one random generator state: one draw at a time
            return self._draw_start(seed)

    def _draw_start(self, seed: np.random.SeedSequence) -> np.ndarray:
        if self._draw_function is None:
            model = self.model
            outputs = []
            for rv, c in zip(model.free_RVs, self.coordinates):
                transform = model.rvs_to_transforms.get(rv)
                if c.bounded or transform is None:
                    outputs.append(pt.as_tensor_variable(rv).ravel())
                else:
                    outputs.append(transform.forward(rv, *rv.owner.inputs).ravel())
            self._draw_function = compile_pytensor([], pt.concatenate(outputs), random_seed=0)
        rngs = find_rng_nodes(self._draw_function.maker.fgraph.outputs)
        reseed_rngs(rngs, seed.generate_state(4))
        x = np.array(self._draw_function(), dtype=float)
        return np.clip(x, self.lower, self.upper)

    def start_vector(self, values: Mapping[str, object]) -> np.ndarray:
        """The optimisation vector of a start given by the free variables' values.

        Parameters
        ----------
        values : dict
            Values on each variable's own scale (a PEtab parameter's ``parameterScale``),
            by name; a variable left out takes the model's initial value (a PEtab model's
            nominal value).

        Raises
        ------
        ValueError
            A name that is not a free variable, a value of the wrong shape, or a value that
            is not finite or lies outside its bounds.
        """
        from pymc.initial_point import make_initial_point_fn

        names = {c.name: c for c in self.coordinates}
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(
                f"initial_points: {unknown} are not free variables of the model (expected "
                f"names among {sorted(names)})"
            )
        overrides = {}
        for name, value in values.items():
            array = np.asarray(value, dtype=float)
            if array.shape != names[name].shape:
                raise ValueError(
                    f"initial_points: {name!r} has shape {array.shape}, expected "
                    f"{names[name].shape}"
                )
            if not np.all(np.isfinite(array)):
                raise ValueError(f"initial_points: {name!r} is not finite: {value!r}")
            overrides[name] = array
        with self._lock:
            points = [
                make_initial_point_fn(
                    model=self.model,
                    overrides=overrides,
                    jitter_rvs=set(),
                    return_transformed=transformed,
                )(0)
                for transformed in (False, True)
            ]
        pieces = []
        for c in self.coordinates:
            if c.bounded:  # the value itself (as given: the point's is mapped back and forth)
                value = overrides.get(c.name, points[0][c.name])
            else:
                value = points[1][c.value_variable]
            pieces.append(np.asarray(value, dtype=float).ravel())
        x = np.concatenate(pieces)
        outside = [
            c.name
            for c in self.coordinates
            if not np.all(
                (x[c.start : c.stop] >= self.lower[c.start : c.stop])
                & (x[c.start : c.stop] <= self.upper[c.start : c.stop])
            )
        ]
        if outside:
            raise ValueError(f"initial_points: {outside} lie outside their bounds")
        return x

    def _values(self):
        """Function ``x -> each free variable's value on its own scale``."""
        with self._lock:
            return self._build_values()

    def _build_values(self):
        if self._values_function is None:
            m = self.optimisation_model
            outputs = []
            for rv in self._opt_rvs:
                value = m.rvs_to_values[rv]
                transform = m.rvs_to_transforms.get(rv)
                outputs.append(
                    value if transform is None else transform.backward(value, *rv.owner.inputs)
                )
            outputs = m.replace_rvs_by_values(outputs)
            joined, x = self._joined(outputs)
            self._values_function = PerThreadFunction(compile_pytensor([x], joined))
        return self._values_function

    def parameters(self, x: np.ndarray) -> dict[str, np.ndarray | float]:
        """Each free variable's value on its own scale at ``x``, by name (floats for
        scalars)."""
        values = self._values()(np.asarray(x, dtype=float))
        return {
            c.name: (float(v) if np.ndim(v) == 0 else np.array(v))
            for c, v in zip(self.coordinates, values)
        }

    def sampler_point(self, x: np.ndarray, margin: float = 1e-6) -> dict[str, np.ndarray]:
        """The sampler's value variables (transformed scale) at ``x``.

        A bounded coordinate on (or within ``margin`` times its interval's width of) a bound
        is moved that far inside first: the interval transform is infinite on the bound.
        """
        x = np.asarray(x, dtype=float)
        width = self.upper - self.lower
        inside = np.where(np.isfinite(width), margin * width, 0.0)
        x = np.clip(x, self.lower + inside, self.upper - inside)
        with self._lock:
            function = self._build_sampler_function()
        pieces = [x[c.start : c.stop].reshape(c.shape) for c in self.coordinates]
        values = function(*pieces)
        return {c.value_variable: np.array(v) for c, v in zip(self.coordinates, values)}

    def _build_sampler_function(self):
        if self._sampler_function is None:
            model = self.model
            inputs, outputs = [], []
            for rv, c in zip(model.free_RVs, self.coordinates):
                variable = pt.tensor(
                    name=c.name, shape=c.shape, dtype=model.rvs_to_values[rv].dtype
                )
                inputs.append(variable)
                transform = model.rvs_to_transforms.get(rv)
                outputs.append(
                    transform.forward(variable, *rv.owner.inputs)
                    if c.bounded and transform is not None
                    else variable
                )
            self._sampler_function = PerThreadFunction(compile_pytensor(inputs, outputs))
        return self._sampler_function
