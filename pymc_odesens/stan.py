"""Stan's ODE functions for PyMC models.

``ode_rk45``, ``ode_ckrk``, ``ode_bdf``, ``ode_adams``, their ``_tol``
variants and ``ode_adjoint_tol_ctl`` take Stan's arguments in Stan's order and
return the solution at the output times as a PyTensor tensor of shape
(T, N) (Stan's ``array[T] vector[N]``), differentiable with respect to the
initial state and every real-valued argument.

The system function is an ordinary Python function ``f(t, y, *args)``
returning N expressions (Stan's ``vector``). It is called once, with sympy
symbols, and becomes an :class:`~pymc_odesens.OdeSystem` with exact,
compiled derivatives; the traced system is cached per function object.

Stan's damped harmonic oscillator (``theta = 0.15``, ``y0 = (1, 0)``,
``ts = 1, ..., 10``) translated:

>>> import numpy as np
>>> import pymc as pm
>>> from pymc_odesens import stan
>>> def sho(t, y, theta):
...     dydt = [0, 0]
...     dydt[0] = y[1]
...     dydt[1] = -y[0] - theta * y[1]
...     return dydt
>>> t0, ts = 0.0, np.arange(1.0, 11.0)
>>> y_sim = stan.ode_rk45(sho, np.array([1.0, 0.0]), t0, ts, 0.15).eval()
>>> y_sim.shape
(10, 2)
>>> y = y_sim + np.random.default_rng(1).normal(0.0, 0.1, size=y_sim.shape)
>>> with pm.Model() as model:
...     y0 = pm.Normal("y0", 0.0, 1.0, shape=2)
...     sigma = pm.HalfNormal("sigma", 2.5, shape=2)
...     theta = pm.Normal("theta", 0.0, 1.0)
...     mu = stan.ode_rk45(sho, y0, t0, ts, theta)
...     obs = pm.Normal("y", mu, sigma, observed=y)

How arguments become parameters
-------------------------------
Each extra argument of ``f`` is classified once per call:

- **Real-valued** arguments (PyTensor variables of any dtype, Python floats,
  float numpy arrays, lists of these) become parameters of the traced
  system: a scalar is one sympy symbol, an array of shape ``s`` is an object
  array of ``prod(s)`` symbols of the same shape (indexable, with
  element-wise arithmetic and ``@``). The parameter vector handed to
  :func:`~pymc_odesens.ode_solution` is the concatenation of all of them,
  flattened in C order. Values that are constants simply receive no
  gradient; one traced system serves every value, so changing data never
  re-traces or re-compiles.
- **Integer-valued data** (Python ints and bools, integer or boolean numpy
  arrays, integer PyTensor *constants*; Stan's ``int`` arguments, which are
  always data) are passed to ``f`` as the numbers themselves, so they can
  index (``y[idx[0]]``), size and branch. Their values are part of the cache
  key: a new value means a new trace.

Symbolic integer variables (e.g. an integer ``pm.Data``) are treated as real
parameters. To bake *real* constants into the expressions (no sensitivity
columns for them), close over them in ``f``: values read from a closure or a
global are fixed when ``f`` is traced, i.e. on the first call with a given
function object and argument layout.
"""

from __future__ import annotations

import inspect
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytensor.tensor as pt
import sympy as sp
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.variable import TensorVariable

from pymc_odesens.model import OdeSystem
from pymc_odesens.model.internal_symbols import time_symbol
from pymc_odesens.model.symbol_vector import make_symbols
from pymc_odesens.model.tracing import symbolic_misuse_hint
from pymc_odesens.ops.graph_traversal import ancestors
from pymc_odesens.ops.ode_solution import ode_solution
from pymc_odesens.sensitivity.adjoint_controls import resolve_adjoint_controls
from pymc_odesens.solvers.controls import resolve_controls

__all__ = [
    "ode_rk45",
    "ode_rk45_tol",
    "ode_ckrk",
    "ode_ckrk_tol",
    "ode_bdf",
    "ode_bdf_tol",
    "ode_adams",
    "ode_adams_tol",
    "ode_adjoint_tol_ctl",
    "ode_system",
    "clear_cache",
]

TensorLike = TensorVariable | np.ndarray | Sequence[Any] | float | int
"""A PyTensor tensor, a numpy array, a list of scalars or a number."""

SystemFunction = Callable[..., Sequence[Any]]
"""``f(t, y, *args)`` returning N expressions."""


# argument classification -------------------------------------------------------------------


@dataclass(frozen=True)
class _ArgLayout:
    """How one extra argument of ``f`` enters the traced system.

    ``constant`` is None for a parameter argument; for integer data it is the
    value handed to ``f`` (a Python int/bool or a read-only numpy array).
    """

    shape: tuple[int, ...]
    constant: Any = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=int)) if self.constant is None else 0

    def key(self) -> tuple:
        if self.constant is None:
            return ("param", self.shape)
        value = np.asarray(self.constant)
        return ("constant", value.dtype.str, value.shape, value.tobytes())


def _label(function_name: str, position: int, name: str) -> str:
    return f"{function_name}: argument {name!r} (extra argument {position} of f)"


def _is_integer_dtype(dtype) -> bool:
    return np.dtype(dtype).kind in "iub"


def _integer_constant(value: np.ndarray) -> Any:
    value = value.astype(np.bool_ if value.dtype.kind == "b" else np.int64)
    if value.ndim == 0:
        return value.item()
    value = value.copy()
    value.flags.writeable = False
    return value


def _static_shape(label: str, x: TensorVariable) -> tuple[TensorVariable, tuple[int, ...]]:
    """``x`` with a static shape: known, constant-folded, or read from the current values of
    the shared variables (``pm.Data``) it depends on, then pinned with ``specify_shape``."""
    shape = list(x.type.shape)
    if None not in shape:
        return x, tuple(shape)
    try:
        shape = [
            int(pt.get_underlying_scalar_constant_value(x.shape[i])) if s is None else s
            for i, s in enumerate(shape)
        ]
    except NotScalarConstantError:
        roots = [v for v in ancestors([x.shape]) if v.owner is None]
        if not all(isinstance(v, (Constant, SharedVariable)) for v in roots):
            raise ValueError(
                f"{label} has a shape unknown when the graph is built "
                f"(static shape {x.type.shape}); the number of parameters must be "
                "fixed: give it a static shape, e.g. pt.specify_shape(x, (k,)) or "
                "shape=k on the random variable"
            ) from None
        shape = [int(s) for s in x.shape.eval()]  # depends on data only: its current shape
    return pt.specify_shape(x, tuple(shape)), tuple(shape)


def _contains_variable(value: Any) -> bool:
    if isinstance(value, Variable):
        return True
    return isinstance(value, (list, tuple)) and any(_contains_variable(v) for v in value)


def _classify(label: str, value: Any) -> tuple[_ArgLayout, Any]:
    """``(layout, value)``: a tensor or float array for parameters, None for integer data."""
    if isinstance(value, (list, tuple)):
        if _contains_variable(value):
            try:
                value = pt.as_tensor_variable(value)
            except (TypeError, ValueError) as err:
                raise TypeError(f"{label}: cannot make a tensor of {value!r} ({err})") from None
        else:
            value = np.asarray(value)
    if isinstance(value, Variable):
        if not isinstance(value, TensorVariable):
            raise TypeError(f"{label} must be a tensor, got {type(value).__name__}")
        if np.dtype(value.type.dtype).kind not in "iubf":
            raise TypeError(f"{label} must be real or integer, got dtype {value.type.dtype}")
        if isinstance(value, Constant) and _is_integer_dtype(value.type.dtype):
            data = np.asarray(value.data)
            return _ArgLayout(data.shape, _integer_constant(data)), None
        x, shape = _static_shape(label, value)
        if x.type.dtype != "float64":
            x = pt.cast(x, "float64")
        return _ArgLayout(shape), x
    if isinstance(value, (bool, int, float, np.generic, np.ndarray)):
        arr = np.asarray(value)
        if _is_integer_dtype(arr.dtype):
            return _ArgLayout(arr.shape, _integer_constant(arr)), None
        if arr.dtype.kind != "f":
            raise TypeError(f"{label} must be real or integer, got dtype {arr.dtype}")
        return _ArgLayout(arr.shape), arr.astype(np.float64)
    raise TypeError(
        f"{label} must be a number, a numpy array, a list of numbers or a PyTensor tensor; "
        f"got {type(value).__name__}"
    )


def _flatten(layouts: Sequence[_ArgLayout], values: Sequence[Any]):
    """The parameter vector: every parameter argument flattened in C order, concatenated."""
    pieces = [v for layout, v in zip(layouts, values) if layout.constant is None]
    if not pieces:
        return np.zeros(0)
    if all(isinstance(v, np.ndarray) for v in pieces):
        return np.concatenate([v.ravel() for v in pieces])
    return pt.concatenate([pt.as_tensor_variable(v, dtype="float64").flatten() for v in pieces])


# tracing and its cache ---------------------------------------------------------------------


def _function_name(f: Callable) -> str:
    name = getattr(f, "__name__", None) or type(f).__name__
    return name if name.isidentifier() else "ode"


def _argument_names(f: Callable, n_args: int) -> list[str]:
    """Names of ``f``'s extra arguments (after ``t`` and ``y``), ``arg<j>`` where unknown."""
    names = [f"arg{j}" for j in range(n_args)]
    try:
        signature = inspect.signature(f)
    except (TypeError, ValueError):
        return names
    positional = [
        p.name
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    for j, name in enumerate(positional[2 : 2 + n_args]):
        names[j] = name
    return names


def _check_arity(function_name: str, f: Callable, n_args: int) -> None:
    if not callable(f):
        raise TypeError(f"{function_name}: f must be a function f(t, y, *args), got {f!r}")
    try:
        signature = inspect.signature(f)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*([None] * (2 + n_args)))
    except TypeError:
        raise TypeError(
            f"{function_name}: f{signature} cannot be called as f(t, y, *args) with the "
            f"{n_args} extra argument(s) given"
        ) from None


def _symbol_names(f: Callable, n_states: int, layouts: Sequence[_ArgLayout]):
    """State and parameter names: the argument names of ``f`` (``theta``, ``theta_0``, ...),
    or generic ones (``y<i>``, ``arg<j>_<i>``) when those are not usable."""
    arg_names = _argument_names(f, len(layouts))

    def names(labels: Sequence[str]) -> list[str]:
        out = []
        for label, layout in zip(labels, layouts):
            if layout.constant is not None:
                continue
            if layout.shape == ():
                out.append(label)
            else:
                out.extend(
                    f"{label}_" + "_".join(map(str, index)) for index in np.ndindex(*layout.shape)
                )
        return out

    states = [f"y{i}" for i in range(n_states)]
    params = names(arg_names)
    everything = [*states, *params, "t"]
    if len(set(everything)) != len(everything) or not all(n.isidentifier() for n in params):
        params = names([f"arg{j}" for j in range(len(layouts))])
    return states, params


def _presented(layouts: Sequence[_ArgLayout], symbols: Sequence[sp.Symbol]) -> list[Any]:
    """What ``f`` receives for each extra argument: a symbol, an object array of symbols,
    or the integer data itself."""
    out, k = [], 0
    for layout in layouts:
        if layout.constant is not None:
            out.append(layout.constant)
        elif layout.shape == ():
            out.append(symbols[k])
            k += 1
        else:
            block = np.empty(layout.size, dtype=object)
            block[:] = list(symbols[k : k + layout.size])
            out.append(block.reshape(layout.shape))
            k += layout.size
    return out


def _trace(f: Callable, n_states: int, layouts: Sequence[_ArgLayout]) -> OdeSystem:
    name = _function_name(f)
    state_names, param_names = _symbol_names(f, n_states, layouts)
    t = time_symbol()
    y_symbols = make_symbols(state_names)
    p_symbols = make_symbols(param_names)
    y = np.empty(n_states, dtype=object)
    y[:] = list(y_symbols)
    try:
        out = f(t, y, *_presented(layouts, p_symbols))
    except Exception as err:
        hint = symbolic_misuse_hint(err) if isinstance(err, TypeError) else None
        message = (
            f"while tracing {name}(t, y, *args): {type(err).__name__}: {err}. "
            "f is called once with sympy symbols for t, y and every real-valued argument: "
            + (
                hint
                if hint is not None
                else "use arithmetic and pymc_odesens.math (exp, log, where, ...) on them, "
                "not Python control flow, `math` or numpy functions"
            )
            + "; integer arguments arrive as numbers"
        )
        try:
            wrapped = type(err)(message)
        except Exception:
            wrapped = TypeError(message)
        raise wrapped from err
    if isinstance(out, (np.ndarray, sp.MatrixBase)):
        out = list(np.asarray(out, dtype=object).ravel())
    if not isinstance(out, Sequence) or isinstance(out, str):
        raise TypeError(
            f"{name} must return a sequence of {n_states} expressions (Stan's vector), "
            f"got {type(out).__name__}"
        )
    if len(out) != n_states:
        raise ValueError(
            f"{name} returned {len(out)} derivatives but y0 has {n_states} states; "
            "f must return one value per state"
        )
    return OdeSystem.from_expressions(list(out), t, y_symbols, p_symbols, name=name)


_lock = threading.Lock()
_weak_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_strong_cache: dict = {}


def _cache_for(f: Callable) -> dict:
    """The per-function cache dict. Functions are held weakly; bound methods (a new object
    at each attribute access, equal when object and method are) and objects without weak
    references are held strongly, keyed by equality, or by identity if unhashable."""
    if not inspect.ismethod(f):
        try:
            return _weak_cache.setdefault(f, {})
        except TypeError:
            pass
    try:
        return _strong_cache.setdefault(f, {})
    except TypeError:  # unhashable callable: keep it alive next to its entries
        return _strong_cache.setdefault(("id", id(f)), (f, {}))[1]


def _traced_system(f: Callable, n_states: int, layouts: Sequence[_ArgLayout]) -> OdeSystem:
    key = (n_states, tuple(layout.key() for layout in layouts))
    with _lock:
        cache = _cache_for(f)
        system = cache.get(key)
        if system is None:
            system = _trace(f, n_states, layouts)
            cache[key] = system
    return system


class RealDataArgumentNote(UserWarning):
    """A real-valued data argument holding whole numbers (``763.0``) became a parameter of
    the traced system; shown once per function and argument, since an ``int`` (``763``) may
    have been meant."""


_noted_arguments: set = set()


def _whole_real_data(f: Callable, args: Sequence[Any]) -> list[tuple[str, str, str]]:
    """``[(name, value as given, as an int)]`` of the extra arguments given as real *data*
    (numbers, not PyTensor variables) whose values are all whole numbers (``N = 763.0``)."""
    found = []
    for name, value in zip(_argument_names(f, len(args)), args):
        if isinstance(value, Variable) or _contains_variable(value):
            continue
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):
            continue
        if arr.dtype.kind != "f" or arr.size == 0 or not np.all(np.isfinite(arr)):
            continue
        if np.all(arr == np.round(arr)):
            if arr.ndim == 0:
                found.append((name, repr(float(arr)), str(int(arr))))
            else:
                found.append((name, f"a float array of shape {arr.shape}", "an integer array"))
    return found


def _whole_real_hint(whole: Sequence[tuple[str, str, str]]) -> str:
    given = ", ".join(f"{name} = {shown}" for name, shown, _ in whole)
    meant = ", ".join(f"{name} = {as_int}" for name, _, as_int in whole)
    return (
        f"the real-valued data {given} holds whole numbers only. A real argument is a "
        "parameter: f receives a sympy symbol for it, and forward sensitivities integrate "
        "one more column per entry. If it is integer data (a count, a size, an index), "
        f"pass integers ({meant}): they are baked into the equations"
    )


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside this module (the user's call)."""
    # level 1 is the function that calls warnings.warn, one frame above this one
    frame, level = inspect.currentframe().f_back, 1
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame, level = frame.f_back, level + 1
    return level


def _system_for(
    function_name: str,
    f: Callable,
    n_states: int,
    layouts: Sequence[_ArgLayout],
    args: Sequence[Any],
    *,
    note: bool,
) -> OdeSystem:
    """The traced system; real data holding whole numbers (``763.0`` where ``763`` may have
    been meant) is named in a tracing error and, with ``note``, in a one-time note."""
    whole = _whole_real_data(f, args)
    try:
        system = _traced_system(f, n_states, layouts)
    except Exception as err:
        if not whole:
            raise
        try:
            wrapped = type(err)(f"{err}. Note: {_whole_real_hint(whole)}")
        except Exception:  # pragma: no cover - exotic exception signatures
            raise err from None
        raise wrapped from err
    fresh = [item for item in whole if (f, item[0]) not in _noted_arguments]
    if note and fresh:
        _noted_arguments.update((f, item[0]) for item in fresh)
        warnings.warn(
            f"{function_name}: {_whole_real_hint(fresh)} (shown once per argument)",
            RealDataArgumentNote,
            stacklevel=_caller_stacklevel(),
        )
    return system


def clear_cache() -> None:
    """Forget every traced system (compiled kernels stay in the on-disk cache)."""
    with _lock:
        _weak_cache.clear()
        _strong_cache.clear()


# argument checks ---------------------------------------------------------------------------


def _data_value(function_name: str, argument: str, value: Any) -> Any:
    """Unwrap a PyTensor constant; reject symbolic values (Stan: the argument is data)."""
    if isinstance(value, Constant):
        return value.data
    if isinstance(value, Variable):
        raise TypeError(
            f"{function_name}: {argument} must be data (numbers fixed when the graph is built), "
            f"not the PyTensor variable {value}; in Stan it cannot depend on parameters"
        )
    return value


def _initial_state(function_name: str, y0: Any) -> tuple[Any, int]:
    """``(y0, N)`` with y0 a float array or a float64 tensor of static length N."""
    if y0 is None:
        raise TypeError(f"{function_name}: y0 is required (a vector of N initial states)")
    if isinstance(y0, (list, tuple)):
        if _contains_variable(y0):
            y0 = pt.as_tensor_variable(list(y0))
        else:
            try:
                y0 = np.asarray(y0, dtype=float)
            except (TypeError, ValueError):
                raise TypeError(
                    f"{function_name}: y0 must be a vector of reals, got {y0!r}"
                ) from None
    if isinstance(y0, Constant):
        y0 = y0.data
    if isinstance(y0, Variable):
        if not isinstance(y0, TensorVariable) or y0.type.ndim != 1:
            raise ValueError(
                f"{function_name}: y0 must be a vector of N initial states; got {y0.type}"
            )
        if y0.type.dtype.startswith("complex"):
            raise TypeError(f"{function_name}: y0 must be real, got dtype {y0.type.dtype}")
        y0, (n,) = _static_shape(f"{function_name}: y0", y0)
        if y0.type.dtype != "float64":
            y0 = pt.cast(y0, "float64")
    else:
        try:
            y0 = np.asarray(y0, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"{function_name}: y0 must be a vector of reals, got {y0!r}") from None
        if y0.ndim != 1:
            raise ValueError(
                f"{function_name}: y0 must be a vector of N initial states; got shape {y0.shape}"
            )
        if not np.all(np.isfinite(y0)):
            raise ValueError(f"{function_name}: y0 must be finite; got {y0}")
        n = y0.size
    if n == 0:
        raise ValueError(f"{function_name}: y0 must have at least one state")
    return y0, n


def _times(function_name: str, t0: Any, ts: Any) -> tuple[float, np.ndarray]:
    """Stan's checks: t0 finite; ts finite, sorted and all greater than t0."""
    t0 = _data_value(function_name, "t0", t0)
    try:
        t0 = float(np.asarray(t0, dtype=float))
    except (TypeError, ValueError):
        raise TypeError(f"{function_name}: t0 must be a real number, got {t0!r}") from None
    if not np.isfinite(t0):
        raise ValueError(f"{function_name}: t0 must be finite, got {t0}")
    ts = _data_value(function_name, "ts", ts)
    try:
        ts = np.asarray(ts, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{function_name}: ts must be an array of reals, got {ts!r}") from None
    if ts.ndim != 1:
        raise ValueError(
            f"{function_name}: ts must be a 1-d array of output times; got shape {ts.shape}"
        )
    if ts.size == 0:
        raise ValueError(f"{function_name}: ts must contain at least one output time")
    if not np.all(np.isfinite(ts)):
        raise ValueError(f"{function_name}: ts must be finite; got {ts}")
    decreasing = np.flatnonzero(np.diff(ts) < 0)
    if decreasing.size:
        i = int(decreasing[0])
        raise ValueError(
            f"{function_name}: ts must be sorted in increasing order; "
            f"ts[{i + 1}] = {float(ts[i + 1])!r} < ts[{i}] = {float(ts[i])!r}"
        )
    if not ts[0] > t0:
        raise ValueError(
            f"{function_name}: every output time must be greater than t0 = {t0!r} (as in Stan); "
            f"ts[0] = {float(ts[0])!r}"
        )
    return t0, np.ascontiguousarray(ts)


def _prepare(function_name: str, f: Callable, y0: Any, t0: Any, ts: Any, args: Sequence[Any]):
    """Validate the common arguments: ``(y0, N, t0, ts, layouts, params)``, no trace yet."""
    _check_arity(function_name, f, len(args))
    y0, n = _initial_state(function_name, y0)
    t0, ts = _times(function_name, t0, ts)
    names = _argument_names(f, len(args))
    classified = [_classify(_label(function_name, j, names[j]), a) for j, a in enumerate(args)]
    layouts = [layout for layout, _ in classified]
    params = _flatten(layouts, [value for _, value in classified])
    return y0, n, t0, ts, layouts, params


def _reraise(function_name: str, err: Exception) -> Exception:
    try:
        return type(err)(f"{function_name}: {err}")
    except Exception:  # pragma: no cover - exotic exception signatures
        return err


def _forward(
    function_name: str,
    method: str,
    f: SystemFunction,
    y0: Any,
    t0: Any,
    ts: Any,
    args: Sequence[Any],
    **controls: Any,
) -> TensorVariable:
    y0, n, t0, ts, layouts, params = _prepare(function_name, f, y0, t0, ts, args)
    controls = {k: _data_value(function_name, k, v) for k, v in controls.items()}
    try:
        resolve_controls(method, n, **controls)
    except (TypeError, ValueError) as err:
        raise _reraise(function_name, err) from None
    system = _system_for(function_name, f, n, layouts, args, note=True)
    return ode_solution(
        system, y0, ts, params, t0=t0, method=method, sensitivity="forward", **controls
    )


# Stan's functions ----------------------------------------------------------------------------


def ode_rk45(f: SystemFunction, y0: TensorLike, t0: float, ts: Any, *args: Any) -> TensorVariable:
    """Solve a non-stiff ODE with the Dormand-Prince 4(5) Runge-Kutta method (Stan's
    ``ode_rk45``), with forward sensitivities for the gradient.

    Stan: ``array[] vector ode_rk45(function f, vector y0, real t0, array[] real ts, ...)``.
    Defaults: ``relative_tolerance = absolute_tolerance = 1e-6``, ``max_num_steps = 1e6``.

    Parameters
    ----------
    f : callable
        ``f(t, y, *args)`` returning the N time derivatives (a list, tuple,
        numpy array or sympy matrix). Traced once with sympy symbols (see the
        module docstring for how ``args`` become parameters).
    y0 : tensor-like, shape (N,)
        Initial state: a PyTensor vector (random variables allowed), a numpy
        array or a list of scalars.
    t0 : float
        Initial time (data).
    ts : array_like, shape (T,)
        Output times (data): finite, sorted, every one greater than ``t0``.
    *args
        Extra arguments passed to ``f``: scalars or arrays, PyTensor
        variables or data.

    Returns
    -------
    TensorVariable
        Shape (T, N): row ``i`` is the state at ``ts[i]``.

    Raises
    ------
    ValueError, TypeError
        Bad arguments, when the graph is built, naming the argument.
    """
    return _forward("ode_rk45", "rk45", f, y0, t0, ts, args)


def ode_ckrk(f: SystemFunction, y0: TensorLike, t0: float, ts: Any, *args: Any) -> TensorVariable:
    """Solve a non-stiff or semi-stiff ODE with the Cash-Karp 4(5) Runge-Kutta method (Stan's
    ``ode_ckrk``), with forward sensitivities for the gradient.

    Stan: ``array[] vector ode_ckrk(function f, vector y0, real t0, array[] real ts, ...)``.
    Defaults: ``relative_tolerance = absolute_tolerance = 1e-6``, ``max_num_steps = 1e6``.
    Arguments and result as in :func:`ode_rk45`.
    """
    return _forward("ode_ckrk", "ckrk", f, y0, t0, ts, args)


def ode_bdf(f: SystemFunction, y0: TensorLike, t0: float, ts: Any, *args: Any) -> TensorVariable:
    """Solve a stiff ODE with variable-order (1-5) BDF (Stan's ``ode_bdf``), with forward
    sensitivities for the gradient (one LU factorisation shared by state and sensitivities).

    Stan: ``array[] vector ode_bdf(function f, vector y0, real t0, array[] real ts, ...)``.
    Defaults: ``relative_tolerance = absolute_tolerance = 1e-10``, ``max_num_steps = 1e8``.
    Arguments and result as in :func:`ode_rk45`.
    """
    return _forward("ode_bdf", "bdf", f, y0, t0, ts, args)


def ode_adams(f: SystemFunction, y0: TensorLike, t0: float, ts: Any, *args: Any) -> TensorVariable:
    """Solve a smooth non-stiff ODE with variable-order (1-12) Adams-Moulton (Stan's
    ``ode_adams``), with forward sensitivities for the gradient.

    Stan: ``array[] vector ode_adams(function f, vector y0, real t0, array[] real ts, ...)``.
    Defaults: ``relative_tolerance = absolute_tolerance = 1e-10``, ``max_num_steps = 1e8``.
    Arguments and result as in :func:`ode_rk45`.
    """
    return _forward("ode_adams", "adams", f, y0, t0, ts, args)


def _forward_tol(function_name, method, f, y0, t0, ts, rtol, atol, max_num_steps, args):
    controls = {
        "relative_tolerance": rtol,
        "absolute_tolerance": atol,
        "max_num_steps": max_num_steps,
    }
    missing = sorted(k for k, v in controls.items() if v is None)
    if missing:
        raise TypeError(
            f"{function_name}: relative_tolerance, absolute_tolerance and max_num_steps are "
            f"all required (as in Stan); got None for {', '.join(missing)}"
        )
    return _forward(function_name, method, f, y0, t0, ts, args, **controls)


def ode_rk45_tol(
    f: SystemFunction,
    y0: TensorLike,
    t0: float,
    ts: Any,
    relative_tolerance: float,
    absolute_tolerance: float | np.ndarray,
    max_num_steps: int,
    *args: Any,
) -> TensorVariable:
    """:func:`ode_rk45` with explicit controls (Stan's ``ode_rk45_tol``).

    Stan: ``array[] vector ode_rk45_tol(function f, vector y0, real t0, array[] real ts,
    data real relative_tolerance, data real absolute_tolerance, int max_num_steps, ...)``.

    Parameters
    ----------
    f, y0, t0, ts
        As in :func:`ode_rk45`.
    relative_tolerance : float
        Relative tolerance RTOL (data): positive, finite, below 1.
    absolute_tolerance : float or array_like of shape (N,)
        Absolute tolerance ATOL (data), positive. Stan takes a scalar; a
        vector gives one tolerance per state.
    max_num_steps : int
        Largest number of steps between two output times (data); more raise
        :class:`~pymc_odesens.MaxNumStepsError` (outside a model) or reject
        the proposal (inside one).
    *args
        Extra arguments passed to ``f``.

    Returns
    -------
    TensorVariable
        Shape (T, N).

    Raises
    ------
    ValueError, TypeError
        Bad arguments or controls, when the graph is built.
    """
    return _forward_tol(
        "ode_rk45_tol",
        "rk45",
        f,
        y0,
        t0,
        ts,
        relative_tolerance,
        absolute_tolerance,
        max_num_steps,
        args,
    )


def ode_ckrk_tol(
    f: SystemFunction,
    y0: TensorLike,
    t0: float,
    ts: Any,
    relative_tolerance: float,
    absolute_tolerance: float | np.ndarray,
    max_num_steps: int,
    *args: Any,
) -> TensorVariable:
    """:func:`ode_ckrk` with explicit controls (Stan's ``ode_ckrk_tol``).

    Stan: ``array[] vector ode_ckrk_tol(function f, vector y0, real t0, array[] real ts,
    data real relative_tolerance, data real absolute_tolerance, int max_num_steps, ...)``.
    Arguments and result as in :func:`ode_rk45_tol`.
    """
    return _forward_tol(
        "ode_ckrk_tol",
        "ckrk",
        f,
        y0,
        t0,
        ts,
        relative_tolerance,
        absolute_tolerance,
        max_num_steps,
        args,
    )


def ode_bdf_tol(
    f: SystemFunction,
    y0: TensorLike,
    t0: float,
    ts: Any,
    relative_tolerance: float,
    absolute_tolerance: float | np.ndarray,
    max_num_steps: int,
    *args: Any,
) -> TensorVariable:
    """:func:`ode_bdf` with explicit controls (Stan's ``ode_bdf_tol``).

    Stan: ``array[] vector ode_bdf_tol(function f, vector y0, real t0, array[] real ts,
    data real relative_tolerance, data real absolute_tolerance, int max_num_steps, ...)``.
    Arguments and result as in :func:`ode_rk45_tol`.
    """
    return _forward_tol(
        "ode_bdf_tol",
        "bdf",
        f,
        y0,
        t0,
        ts,
        relative_tolerance,
        absolute_tolerance,
        max_num_steps,
        args,
    )


def ode_adams_tol(
    f: SystemFunction,
    y0: TensorLike,
    t0: float,
    ts: Any,
    relative_tolerance: float,
    absolute_tolerance: float | np.ndarray,
    max_num_steps: int,
    *args: Any,
) -> TensorVariable:
    """:func:`ode_adams` with explicit controls (Stan's ``ode_adams_tol``).

    Stan: ``array[] vector ode_adams_tol(function f, vector y0, real t0, array[] real ts,
    data real relative_tolerance, data real absolute_tolerance, int max_num_steps, ...)``.
    Arguments and result as in :func:`ode_rk45_tol`.
    """
    return _forward_tol(
        "ode_adams_tol",
        "adams",
        f,
        y0,
        t0,
        ts,
        relative_tolerance,
        absolute_tolerance,
        max_num_steps,
        args,
    )


def ode_adjoint_tol_ctl(
    f: SystemFunction,
    y0: TensorLike,
    t0: float,
    ts: Any,
    relative_tolerance_forward: float,
    absolute_tolerance_forward: float | np.ndarray,
    relative_tolerance_backward: float,
    absolute_tolerance_backward: float | np.ndarray,
    relative_tolerance_quadrature: float,
    absolute_tolerance_quadrature: float,
    max_num_steps: int,
    num_steps_between_checkpoints: int,
    interpolation_polynomial: int,
    solver_forward: int,
    solver_backward: int,
    *args: Any,
) -> TensorVariable:
    """Solve an ODE and get its gradient by the adjoint method (Stan's
    ``ode_adjoint_tol_ctl``).

    The forward solve keeps checkpoints; each gradient evaluation integrates
    the N adjoint states backwards (re-integrating the forward solution
    between checkpoints) together with one quadrature per parameter, so its
    cost hardly grows with the number of parameters.

    Stan: ``array[] vector ode_adjoint_tol_ctl(function f, vector y0, real t0,
    array[] real ts, data real relative_tolerance_forward, data vector
    absolute_tolerance_forward, data real relative_tolerance_backward, data
    vector absolute_tolerance_backward, data real relative_tolerance_quadrature,
    data real absolute_tolerance_quadrature, int max_num_steps, int
    num_steps_between_checkpoints, int interpolation_polynomial, int
    solver_forward, int solver_backward, ...)``.

    Parameters
    ----------
    f, y0, t0, ts
        As in :func:`ode_rk45`.
    relative_tolerance_forward : float
        Relative tolerance of the forward solve (data).
    absolute_tolerance_forward : array_like, shape (N,)
        Absolute tolerance of the forward solve, one per state (data; a
        scalar is broadcast).
    relative_tolerance_backward : float
        Relative tolerance of the backward (adjoint) solve.
    absolute_tolerance_backward : array_like, shape (N,)
        Absolute tolerance of the backward solve, one per state (a scalar is
        broadcast).
    relative_tolerance_quadrature, absolute_tolerance_quadrature : float
        Tolerances of the parameter quadratures of the backward solve.
    max_num_steps : int
        Largest number of steps between two output times, in either phase.
    num_steps_between_checkpoints : int
        Forward steps between two stored checkpoints.
    interpolation_polynomial : {1, 2}
        Interpolation of the forward solution between checkpoints:
        1 Hermite, 2 polynomial.
    solver_forward, solver_backward : {1, 2}
        Method of the forward and backward solves: 1 Adams, 2 BDF.
    *args
        Extra arguments passed to ``f``.

    Returns
    -------
    TensorVariable
        Shape (T, N).

    Raises
    ------
    ValueError, TypeError
        Bad arguments, when the graph is built, naming the argument (e.g. an
        ``absolute_tolerance_forward`` whose length is not N).
    """
    function_name = "ode_adjoint_tol_ctl"
    y0, n, t0, ts, layouts, params = _prepare(function_name, f, y0, t0, ts, args)
    controls = {
        "relative_tolerance_forward": relative_tolerance_forward,
        "absolute_tolerance_forward": absolute_tolerance_forward,
        "relative_tolerance_backward": relative_tolerance_backward,
        "absolute_tolerance_backward": absolute_tolerance_backward,
        "relative_tolerance_quadrature": relative_tolerance_quadrature,
        "absolute_tolerance_quadrature": absolute_tolerance_quadrature,
        "max_num_steps": max_num_steps,
        "num_steps_between_checkpoints": num_steps_between_checkpoints,
        "interpolation_polynomial": interpolation_polynomial,
        "solver_forward": solver_forward,
        "solver_backward": solver_backward,
    }
    controls = {k: _data_value(function_name, k, v) for k, v in controls.items()}
    missing = sorted(k for k, v in controls.items() if v is None)
    if missing:
        raise TypeError(
            f"{function_name}: every control is required (as in Stan); got None for {missing}"
        )
    try:
        resolved = resolve_adjoint_controls(n, **controls)
    except (TypeError, ValueError) as err:
        raise _reraise(function_name, err) from None
    system = _system_for(function_name, f, n, layouts, args, note=False)
    return ode_solution(
        system,
        y0,
        ts,
        params,
        t0=t0,
        method=resolved.forward_method,
        sensitivity="adjoint",
        **controls,
    )


def ode_system(f: SystemFunction, y0: TensorLike, *args: Any) -> OdeSystem:
    """The :class:`~pymc_odesens.OdeSystem` traced from ``f`` for these arguments.

    The same (cached) object the solver functions use for ``f``, this number
    of states and this argument layout: use it with
    :func:`pymc_odesens.solve` or :func:`pymc_odesens.ode_solution`. Its
    parameters are the real-valued arguments flattened in C order, named
    after ``f``'s arguments (``theta``, ``rates_0``, ``rates_1``, ...).

    Parameters
    ----------
    f : callable
        ``f(t, y, *args)``.
    y0 : tensor-like, shape (N,)
        Initial state (only its length is used).
    *args
        Extra arguments as they would be passed to a solver function.

    Returns
    -------
    OdeSystem
    """
    function_name = "ode_system"
    _check_arity(function_name, f, len(args))
    _, n = _initial_state(function_name, y0)
    names = _argument_names(f, len(args))
    layouts = [_classify(_label(function_name, j, names[j]), a)[0] for j, a in enumerate(args)]
    return _system_for(function_name, f, n, layouts, args, note=False)
