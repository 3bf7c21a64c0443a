"""nutpie's compiled PyMC model, with its two C callbacks cached across processes.

``nutpie.compile_pymc_model`` compiles the model's log-density and gradient and the map to
the trace's variables with PyTensor (NUMBA mode, which PyTensor caches on disk) and wraps
each in a numba C callback (``numba.cfunc``) that nutpie's sampler calls from its threads.
The callbacks are closures over the compiled graphs, and numba keys its cache of a closure
by a pickle of what it closes over, which differs in every process: every process
generates and optimises the machine code of the whole graph again, ODE solver included.
On Boehm_JProteomeRes2014 in whitened coordinates that took 17 s of the 20 s of
``compile_pymc_model`` with every other cache warm (benchmarks/README.md).

:func:`compile_nutpie_model` builds the same :class:`nutpie.compile_pymc.CompiledPyMCModel`
with callbacks written as source text whose model-specific parts are globals, cached by
numba in the package's cache directory (``<cache>/nutpie``) under a key that names
everything those globals hold: PyTensor's cache key of the compiled graph, the numbers of
values, the shared variables' names, shapes and dtypes, and the versions of nutpie, numba,
PyTensor and this module's source. The files are written and read through the package's
verified numba cache files (:mod:`pymc_odesens.caching.numba_cache_verification`), and
before use each callback is evaluated at a start of the chains and compared with the
PyTensor function it wraps: a loaded callback that does not reproduce it is compiled again
(with a :class:`~pymc_odesens.caching.disk_cache.KernelCacheWarning`); a fresh one that does
not raises.

The callbacks do what nutpie's do (same C signatures and return codes: 0 success, -1 a
size that is not the model's, 1 an exception in the log-density, 3 a gradient that is not
finite, 4 a log-density that is not finite, -2 an exception in the trace map). A graph that
PyTensor does not cache, a backend other than numba, numba options for the callbacks or a
nutpie whose internals this module does not know are compiled by
``nutpie.compile_pymc_model`` itself (the last with one line on stderr per process).

Thread safety: compiling is serialised by a lock; the compiled model is nutpie's and is
used as nutpie uses it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import importlib
import inspect
import sys
import threading
import warnings
import weakref

import numpy as np

from pymc_odesens.caching.disk_cache import KernelCacheWarning, private_directory

__all__ = ["CALLBACK_MODULE", "compile_nutpie_model"]

CALLBACK_MODULE = "pymc_odesens.inference.nutpie_callbacks"
"""The ``__module__`` of the generated callbacks (so numba's files of them are verified)."""

_CACHE_SUBDIRECTORY = "nutpie"

_LOGP_SOURCE = """
def nutpie_logp(dim, x_, out_, logp_, user_data_):
    if dim != N_DIM:
        return -1
    try:
        x = numba.carray(x_, (N_DIM,))
        out = numba.carray(out_, (N_DIM,))
        logp = numba.carray(logp_, ())
        value, gradient = extract(x, user_data_)
        logp[()] = value
        out[...] = gradient
        if not np.all(np.isfinite(out)):
            return 3
        if not np.isfinite(value):
            return 4
    except Exception:
        return 1
    return 0
"""

_EXPAND_SOURCE = """
def nutpie_expand(dim, expanded, x_, out_, user_data_):
    if dim != N_DIM:
        return -1
    if expanded != N_EXPANDED:
        return -1
    try:
        x = numba.carray(x_, (N_DIM,))
        out = numba.carray(out_, (N_EXPANDED,))
        (values,) = extract(x, user_data_)
        out[...] = values
    except Exception:
        return -2
    return 0
"""

_LOCK = threading.Lock()
_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # callback -> cache key
_SAID: set[str] = set()


def _say_once(text: str) -> None:
    with _LOCK:
        if text in _SAID:
            return
        _SAID.add(text)
    print(f"pymc_odesens: {text}", file=sys.stderr, flush=True)


def _install_locator() -> None:
    """Put the callbacks' cache locator first in numba's list (once per process)."""
    from numba.core import caching

    if any(
        getattr(c, "_pymc_odesens_callbacks", False) for c in caching.CacheImpl._locator_classes
    ):
        return

    class CallbackLocator(caching._CacheLocator):
        """numba's files of a generated callback: in ``<cache>/nutpie``, named by its key."""

        _pymc_odesens_callbacks = True

        def __init__(self, py_func, py_file, key: str, directory: str):
            self._py_file = py_file
            self._key = key
            self._directory = directory

        def ensure_cache_path(self) -> None:
            """Created (private) when the locator is chosen."""

        def get_cache_path(self) -> str:
            return self._directory

        def get_source_stamp(self) -> str:
            return self._key

        def get_disambiguator(self) -> str:
            return self._key

        @classmethod
        def from_function(cls, py_func, py_file):
            key = _KEYS.get(py_func)
            if key is None:
                return None
            directory = private_directory(_CACHE_SUBDIRECTORY)
            if directory is None:  # not writable (warned): numba's next locator decides
                return None
            return cls(py_func, py_file, key, str(directory))

    caching.CacheImpl._locator_classes.insert(0, CallbackLocator)


def _nutpie_internals():
    """nutpie's helpers this module builds on, or None when this nutpie has others."""
    try:
        module = importlib.import_module("nutpie.compile_pymc")
        internals = {
            name: getattr(module, name)
            for name in (
                "CompiledPyMCModel",
                "_make_functions",
                "_prepare_dims_and_coords",
                "_wrap_with_lock",
                "make_extraction_fn",
                "make_user_data",
            )
        }
    except (ImportError, AttributeError):
        return None
    # the arguments and fields used here must be the ones this nutpie has
    arguments = set(inspect.signature(internals["_make_functions"]).parameters)
    used = {"mode", "compute_grad", "join_expanded", "pymc_initial_point_fn", "var_names"}
    fields = {f.name for f in dataclasses.fields(internals["CompiledPyMCModel"])}
    needed = {
        "_n_dim",
        "dims",
        "_coords",
        "_shapes",
        "compiled_logp_func",
        "compiled_expand_func",
        "initial_point_func",
        "shared_data",
        "user_data",
        "n_expanded",
        "shape_info",
        "logp_func",
        "expand_func",
    }
    if not used <= arguments or not needed <= fields:
        return None
    return internals


def _signatures():
    from numba import types

    double = types.CPointer(types.double)
    logp = types.int64(types.uint64, double, double, double, types.voidptr)
    expand = types.int64(types.uint64, types.uint64, double, double, types.voidptr)
    return logp, expand


def _key(kind: str, source: str, inner_key: str, sizes: tuple, shared: list) -> str:
    import numba
    import nutpie
    import pytensor

    described = (
        "pymc_odesens nutpie callback 1",
        kind,
        source,
        inner_key,
        sizes,
        shared,
        nutpie.__version__,
        numba.__version__,
        pytensor.__version__,
    )
    return hashlib.sha256(repr(described).encode()).hexdigest()


def _callback(kind: str, source: str, name: str, signature, key: str | None, env: dict):
    """The cfunc of ``source`` with ``env`` as its globals, cached under ``key`` (None: not
    cached)."""
    import numba

    namespace = {"__name__": CALLBACK_MODULE, "np": np, "numba": numba, **env}
    exec(compile(source, f"pymc_odesens_nutpie_{kind}_callback", "exec"), namespace)
    function = namespace[name]
    if key is None:
        return numba.cfunc(signature)(function)
    _install_locator()
    _KEYS[function] = key
    with warnings.catch_warnings():
        # a graph that numba cannot cache (dynamic globals) is compiled as nutpie would
        warnings.filterwarnings("ignore", message="Cannot cache compiled function")
        return numba.cfunc(signature, cache=True)(function)


def _pointer(array: np.ndarray):
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


def _same(a, b) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return False
    finite = np.isfinite(a)
    if not np.array_equal(finite, np.isfinite(b)):
        return False
    return bool(np.allclose(a[finite], b[finite], rtol=1e-9, atol=1e-12))


def _logp_matches(callback, n_dim, user_data, logp_fn, x) -> bool:
    gradient = np.zeros(n_dim)
    value = np.zeros(())
    code = callback.ctypes(n_dim, _pointer(x), _pointer(gradient), _pointer(value), user_data)
    expected_value, expected_gradient = logp_fn(x)
    if code == 1:
        return False
    return _same(value, expected_value) and _same(gradient, expected_gradient)


def _expand_matches(callback, n_dim, n_expanded, user_data, expand_fn, x) -> bool:
    values = np.zeros(n_expanded)
    code = callback.ctypes(n_dim, n_expanded, _pointer(x), _pointer(values), user_data)
    (expected,) = expand_fn(x)
    return code == 0 and _same(values, expected)


def _inner_key(function) -> str | None:
    """PyTensor's cache key of a compiled NUMBA-mode function's graph (None: not cached)."""
    try:
        from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS
    except ImportError:
        return None
    jit = getattr(getattr(function, "vm", None), "jit_fn", None)
    if jit is None:
        return None
    return CACHED_SRC_FUNCTIONS.get(getattr(jit, "py_func", None))


def _checked_callback(kind, source, name, signature, key, env, matches):
    """The callback, loaded or compiled, that reproduces its PyTensor function."""
    callback = _callback(kind, source, name, signature, key, env)
    if matches(callback):
        return callback
    loaded = key is not None and getattr(callback, "_cache_hits", 0) > 0
    if loaded:
        warnings.warn(
            f"the cached nutpie {kind} callback (key {key[:16]}...) does not reproduce the "
            "model's compiled function: a cache miss, it is compiled again",
            KernelCacheWarning,
            stacklevel=4,
        )
        callback = _callback(kind, source, name, signature, None, env)
        if matches(callback):
            return callback
    raise RuntimeError(
        f"compile_nutpie_model: the {kind} callback does not reproduce the model's compiled "
        "function at the chains' first start (a defect: please report it)"
    )


def compile_nutpie_model(
    model,
    *,
    backend: str = "numba",
    gradient_backend: str = "pytensor",
    initial_points: dict | None = None,
    jitter_rvs: set | None = None,
    default_initialization_strategy: str = "support_point",
    var_names=None,
    freeze_model: bool | None = None,
    **kwargs,
):
    """``nutpie.compile_pymc_model`` with the C callbacks cached across processes.

    Parameters are ``nutpie.compile_pymc_model``'s (same defaults); see the module
    docstring for when nutpie's own function compiles instead.

    Returns
    -------
    nutpie.compile_pymc.CompiledPyMCModel
        For ``nutpie.sample``.

    Raises
    ------
    RuntimeError
        A freshly compiled callback does not reproduce the model's compiled function.
    """
    import nutpie

    arguments = dict(
        backend=backend,
        gradient_backend=gradient_backend,
        initial_points=initial_points,
        jitter_rvs=jitter_rvs,
        default_initialization_strategy=default_initialization_strategy,
        var_names=var_names,
        freeze_model=freeze_model,
        **kwargs,
    )
    internals = _nutpie_internals()
    if internals is None:
        _say_once(
            f"nutpie {nutpie.__version__} has other internals than those "
            "compile_nutpie_model builds on: its callbacks are compiled again in every process"
        )
    if internals is None or backend != "numba" or freeze_model or kwargs:
        return nutpie.compile_pymc_model(model, **arguments)
    if gradient_backend != "pytensor":
        raise ValueError(
            f"gradient_backend: expected 'pytensor' with backend='numba', got {gradient_backend!r}"
        )
    from pymc.initial_point import make_initial_point_fn

    if default_initialization_strategy == "support_point" and jitter_rvs is None:
        jitter_rvs = set(model.free_RVs)
    point_function = internals["_wrap_with_lock"](
        make_initial_point_fn(
            model=model,
            overrides=initial_points,
            default_strategy=default_initialization_strategy,
            jitter_rvs=jitter_rvs,
            return_transformed=True,
        )
    )
    with _LOCK:
        return _compile(model, internals, point_function, var_names)


def _compile(model, internals, point_function, var_names):
    n_dim, n_expanded, logp_fn, expand_fn, initial_point, shape_info = internals["_make_functions"](
        model,
        mode="NUMBA",
        compute_grad=True,
        join_expanded=True,
        pymc_initial_point_fn=point_function,
        var_names=var_names,
    )
    shared_data, shared_vars, seen = {}, {}, set()
    for variable in [*logp_fn.get_shared(), *expand_fn.get_shared()]:
        if variable.name in shared_data and variable not in seen:
            raise ValueError(f"Shared variables must have unique names: {variable.name}")
        shared_data[variable.name] = np.array(variable.get_value(), order="C", copy=True)
        shared_vars[variable.name] = variable
        seen.add(variable)
    for value in shared_data.values():
        value.flags.writeable = False
    user_data = internals["make_user_data"](shared_vars, shared_data)
    logp_signature, expand_signature = _signatures()
    x = np.ascontiguousarray(initial_point(0), dtype=float)
    pointer = user_data.ctypes.data

    def described(function) -> tuple[list, list]:
        names = [v.name for v in function.get_shared()]
        return [(n, shared_data[n].shape, shared_data[n].dtype.str) for n in names], names

    callbacks = {}
    for kind, function, source, name, signature in (
        ("logp", logp_fn, _LOGP_SOURCE, "nutpie_logp", logp_signature),
        ("expand", expand_fn, _EXPAND_SOURCE, "nutpie_expand", expand_signature),
    ):
        shared, names = described(function)
        extract = internals["make_extraction_fn"](
            function.vm.jit_fn, shared_data, names, user_data.dtype
        )
        inner = _inner_key(function)
        sizes = (n_dim, n_expanded, str(user_data.dtype.descr))
        key = None if inner is None else _key(kind, source, inner, sizes, shared)
        env = {"N_DIM": n_dim, "N_EXPANDED": n_expanded, "extract": extract}
        if kind == "logp":

            def matches(callback, f=function):
                return _logp_matches(callback, n_dim, pointer, f, x)

        else:

            def matches(callback, f=function):
                return _expand_matches(callback, n_dim, n_expanded, pointer, f, x)

        callbacks[kind] = _checked_callback(kind, source, name, signature, key, env, matches)
    dims, coords = internals["_prepare_dims_and_coords"](model, shape_info)
    return internals["CompiledPyMCModel"](
        _n_dim=n_dim,
        dims=dims,
        _coords=coords,
        _shapes={name: tuple(shape) for name, _, shape in zip(*shape_info)},
        compiled_logp_func=callbacks["logp"],
        compiled_expand_func=callbacks["expand"],
        initial_point_func=initial_point,
        shared_data=shared_data,
        user_data=user_data,
        n_expanded=n_expanded,
        shape_info=shape_info,
        logp_func=logp_fn,
        expand_func=expand_fn,
    )
