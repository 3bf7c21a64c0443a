"""The kernel cache: a second process with warm caches neither generates nor compiles anything,
on every route (solves, forward sensitivities wrt params / y0 / both, both adjoints, events,
observables, PBS, dense and sparse Newton matrices); every damaged file is a miss, replaced
with a warning; a read-only or full cache keeps kernels in memory; a cache others can write
is refused."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

from pymc_odesens import OdeSystem
from pymc_odesens.caching.disk_cache import cache_directory, read_artefact
from pymc_odesens.caching.verified_file import frame, unframe
from pymc_odesens.codegen import compile_kernels
from pymc_odesens.codegen.kernels import kernel_cache_key
from pymc_odesens.model.conservation_cache import conservation_cache_path
from tests.conftest import MODELS_DIR

REPO = Path(__file__).resolve().parents[2]

EVERY_ROUTE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from numba.core import event

    compiles = []

    class CountCompiles(event.Listener):
        def on_start(self, ev):
            pass

        def on_end(self, ev):
            compiles.append(str(ev.data.get("dispatcher")))

    event.register("numba:compile", CountCompiles())
    if len(sys.argv) > 1:  # warm: generating source, IR or object code is an error
        import pymc_odesens.codegen.kernels as kernels_module
        import pymc_odesens.codegen.observable_kernels as observable_module
        import pymc_odesens.model.derivatives as derivatives

        def fail(*args, **kwargs):
            raise AssertionError("code generation or compilation ran with a warm cache")

        kernels_module.compile_object = fail
        kernels_module.kernel_ir = fail
        kernels_module.GeneratedKernels._source = fail
        derivatives.jacobian_nonzeros = fail
        observable_module.jacobian_nonzeros = fail

    import pymc_odesens as pos
    from pymc_odesens import OdeSystem
    from pymc_odesens.codegen.observable_kernels import (
        compile_observable_kernels,
        evaluate_observable_kernel,
    )

    models, network_path = __MODELS__, __NETWORK__
    sys.path.insert(0, network_path)
    from mass_action_network import mass_action_network

    results = {}

    def routes(name, system, y0, times, params, t0, linear_solver, adjoint=True):
        tol = dict(relative_tolerance=1e-7, absolute_tolerance=1e-9)
        for method in ("rk45", "bdf", "adams"):
            sol = pos.solve(system, y0, times, params, t0=t0, method=method,
                            linear_solver=linear_solver, **tol)
            results[f"{name}/{method}/{linear_solver}"] = sol.y.tolist()
        for wrt in ("params", "y0", "both"):
            sens = pos.solve_sensitivity(system, y0, times, params, t0=t0, wrt=wrt,
                                         linear_solver=linear_solver, **tol)
            results[f"{name}/forward_{wrt}/{linear_solver}"] = sens.S.tolist()
        if adjoint:
            cot = np.ones((len(times), system.n_states))
            for how in ("continuous", "discrete"):
                g = pos.adjoint_gradient(system, y0, times, params, cot, t0=t0,
                                         adjoint_method=how, linear_solver=linear_solver)
                results[f"{name}/{how}/{linear_solver}"] = g.params.tolist()
            g = pos.adjoint_gradient(system, y0, times, params, cot, t0=t0, solver_forward=1,
                                     solver_backward=1, linear_solver=linear_solver)
            results[f"{name}/continuous_adams/{linear_solver}"] = g.params.tolist()

    pka = OdeSystem.from_json(f"{models}/pka.json")
    times = np.linspace(pka.t0, pka.t_end, 5)[1:]
    routes("pka", pka, pka.x0, times, pka.p_nominal, pka.t0, "dense")
    routes("pka", pka, pka.x0, times, pka.p_nominal, pka.t0, "sparse", adjoint=False)
    pbs = pos.solve_sensitivity(pka, pka.x0, times, pka.p_nominal, t0=pka.t0,
                                sensitivity="pbs", method="rk45")
    results["pka/pbs"] = pbs.S.tolist()
    obs = compile_observable_kernels(pka, [pka.state_symbols[0] * pka.param_symbols[1]])
    y = np.linspace(0.1, 1.0, pka.n_states)
    results["pka/observable_jac_y"] = evaluate_observable_kernel(
        obs.jac_y, 0.3, y, pka.p_nominal, pka.n_states).tolist()

    ball = OdeSystem.from_json(f"{models}/bouncing_ball.json")
    times = np.linspace(0.0, ball.t_end, 5)[1:]
    routes("ball", ball, ball.x0, times, ball.p_nominal, 0.0, "dense")

    from pymc_odesens.model import TriggerEvent

    logic = OdeSystem(
        lambda t, y, p: [-p.k * y.x, 0.0, 0.0],
        states=["x", "a", "b"],
        params=["k"],
        events=[
            TriggerEvent(lambda t, y, p: (y.x < 0.5) ^ (t > 2.0),
                         lambda t, y, p: {"a": y.a + p.k}, priority=lambda t, y, p: y.x,
                         name="xor"),
            TriggerEvent(lambda t, y, p: (y.x < 0.2) | (t > 3.0),
                         lambda t, y, p: {"b": y.b + y.x}, name="or"),
        ],
        name="cache_trigger_logic",
    )
    routes("logic", logic, [1.0, 0.0, 0.0], [0.5, 1.0, 2.5, 4.0], [1.0], 0.0, "dense")

    decay = OdeSystem(lambda t, y, p: [-p[0] * y[0], p[0] * y[0] - p[1] * y[1]], 2, 2,
                      initial_state=lambda p: [p[1], 0.0], name="decay_y0p")
    routes("decay", decay, None, [0.5, 1.0], [1.0, 2.0], 0.0, "dense")

    network = mass_action_network(50)
    times = np.array([10.0, 50.0])
    routes("network", network, network.x0, times, network.p_nominal, 0.0, "sparse")
    print(json.dumps({"compiles": compiles, "results": results}))
    """
)


def _run(tmp_path: Path, warm: bool) -> dict:
    env = {**os.environ, "PYMC_ODESENS_CACHE_DIR": str(tmp_path)}
    script = EVERY_ROUTE.replace("__MODELS__", repr(str(MODELS_DIR))).replace(
        "__NETWORK__", repr(str(REPO / "benchmarks"))
    )
    args = [sys.executable, "-c", script] + (["warm"] if warm else [])
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_second_process_generates_and_compiles_nothing(tmp_path):
    cold = _run(tmp_path, warm=False)
    warm = _run(tmp_path, warm=True)
    assert warm["compiles"] == [], f"numba compiled in the warm process: {warm['compiles']}"
    assert warm["results"] == cold["results"]
    assert len(cold["results"]) > 40
    objects = list(tmp_path.rglob("kernels_*.o"))
    names = {path.name.split(".")[-2] for path in objects}
    for kernel in (
        "rhs",
        "jac_y",
        "jac_y_values",
        "jac_p",
        "vjp_y",
        "vjp_p",
        "sens_rhs",
        "adjoint_rhs",
        "adjoint_jac",
        "event_conditions",
        "event_jump",
        "event_adjoint_jump",
        "event_time_sensitivity",
        "event_condition_rates",
        "event_times",
        "event_triggers",
        "event_priorities",
        "event_time_gradient",
        "observable_jac_y",
        "initial_state",
        "initial_state_jac",
    ):
        assert kernel in names, f"no object code of {kernel} in the cache"
    assert list(tmp_path.rglob("kernels_*.newton.*.npy")), "sparse analysis not stored"


def test_cache_is_keyed_by_expressions():
    a = OdeSystem(lambda t, y, p: [-p[0] * y[0]], 1, 1)
    b = OdeSystem(lambda t, y, p: [-p[0] * y[0] * y[0]], 1, 1)
    assert kernel_cache_key(a) != kernel_cache_key(b)
    assert compile_kernels(a).path != compile_kernels(b).path
    assert compile_kernels(a).path.exists()
    description = json.loads(read_artefact(compile_kernels(a).path))
    assert description["n_states"] == 1 and description["n_params"] == 1


def test_generated_source_keeps_no_user_names(tmp_path, monkeypatch):
    """Names of states and parameters never reach the generated source (only ``y[i]``,
    ``p[k]`` and the library's own locals)."""
    monkeypatch.setenv("PYMC_ODESENS_CACHE_DIR", str(tmp_path))
    # an expression no other test uses: its kernels are generated here, into tmp_path
    system = OdeSystem(
        lambda t, y, p: [-p.secret_rate * y.hidden_state + 0.7182818],
        states=["hidden_state"],
        params=["secret_rate"],
        name="named",
    )
    kernels = compile_kernels(system)
    np.testing.assert_allclose(kernels.evaluate("rhs", 0.0, [2.0], [3.0]), [-6.0 + 0.7182818])
    sources = [p.read_text() for p in tmp_path.rglob("kernels_*.py")]
    assert sources
    assert not any("secret_rate" in s or "hidden_state" in s for s in sources)


# ----------------------------------------------------------------------------- damaged caches
# Every file of the cache is verified before use (SHA-256 digest and name in a header line):
# each way of damaging one is a cache miss, in a fresh process (a crash would show as its
# return code), with the numbers of an undamaged run bit for bit, one KernelCacheWarning
# naming the file, and the file replaced by one that verifies.

SYSTEMS = textwrap.dedent(
    """
    from pymc_odesens import OdeSystem

    def lotka_volterra(prey_rate=1.5, predator_death=3.0):
        return OdeSystem(
            lambda t, y, p: [
                prey_rate * y.x - p.a * y.x * y.y,
                p.b * y.x * y.y - predator_death * y.y,
            ],
            states=["x", "y"],
            params=["a", "b"],
            name="cache_damage_lv",
        )

    def isomerisation():
        return OdeSystem(
            lambda t, y, p: [-p.k1 * y.A + p.k2 * y.B, p.k1 * y.A - p.k2 * y.B],
            states=["A", "B"],
            params=["k1", "k2"],
            name="cache_damage_iso",
        )
    """
)
_namespace: dict = {}
exec(SYSTEMS, _namespace)
lotka_volterra, isomerisation = _namespace["lotka_volterra"], _namespace["isomerisation"]
OTHER_MODEL = {"prey_rate": 2.5, "predator_death": 1.0}

DAMAGED_RUN = SYSTEMS + textwrap.dedent(
    """
    import json, sys, warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import pymc_odesens as pos
        from pymc_odesens.codegen import compile_kernels
        from pymc_odesens.solvers.newton_matrix import newton_structure

        lv = lotka_volterra()
        kernels = compile_kernels(lv)
        y, p, v = [1.25, 0.75], [0.5, 0.25], [0.3, -0.7]
        results = {}
        for name in ("rhs", "jac_y", "jac_y_values", "jac_p", "vjp_y", "vjp_p", "jvp_y"):
            results[name] = kernels.evaluate(name, 0.0, y, p, v).ravel().tolist()
        rows, cols = kernels.jacobian_pattern
        results["pattern"] = rows.tolist() + cols.tolist()
        results["newton"] = newton_structure(kernels, "sparse").tolist()
        results["y(5)"] = pos.solve(lv, [1.0, 1.0], [5.0], p, method="rk45").y.ravel().tolist()
        laws = isomerisation().conservation_laws
        results["laws"] = laws.matrix.ravel().tolist() + laws.dependent.tolist()
        if len(sys.argv) > 1:  # another model's kernels beside (a foreign file to copy)
            other = compile_kernels(lotka_volterra(**json.loads(sys.argv[1])))
            other.evaluate("rhs", 0.0, y, p)
    hexed = {k: [float(x).hex() for x in values] for k, values in results.items()}
    found = [[w.category.__name__, str(w.message)] for w in caught]
    print(json.dumps({"results": hexed, "warnings": found}))
    """
)


def _damaged_run(cache: Path, *extra: str, command_prefix: tuple = (), **popen) -> dict:
    env = {**os.environ, "PYMC_ODESENS_CACHE_DIR": str(cache)}
    args = [*command_prefix, sys.executable, "-c", DAMAGED_RUN, *extra]
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=REPO, **popen)
    assert done.returncode == 0, f"return code {done.returncode}: {done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def _kernel_file(cache: Path, suffix: str, system=None) -> Path:
    key = kernel_cache_key(system or lotka_volterra())
    (path,) = cache.glob(f"kernels-v*/*/kernels_{key}{suffix}")
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, dict]:
    """A cache written by a cold process, and the results of an undamaged warm process."""
    cache = tmp_path_factory.mktemp("reference") / "cache"
    cold = _damaged_run(cache, json.dumps(OTHER_MODEL))
    warm = _damaged_run(cache)
    assert cold["warnings"] == warm["warnings"] == []
    assert warm["results"] == cold["results"]
    return cache, warm["results"]


def _copy(reference_cache: Path, tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    shutil.copytree(reference_cache, cache)
    return cache


def _payload(path: Path, cache: Path) -> bytes:
    return unframe(path.read_bytes(), path.relative_to(cache).as_posix())


def _reframed(path: Path, cache: Path, content: bytes) -> bytes:
    return frame(content, path.relative_to(cache).as_posix())


def _flip_machine_code(path: Path, cache: Path) -> bytes:
    """One bit of the kernel's machine code (its .text section) flipped; header kept."""
    content = _payload(path, cache)
    text = next(s.data() for s in llvm.ObjectFileRef.from_data(content).sections() if s.is_text())
    start = content.index(text)
    damaged = bytearray(path.read_bytes())
    offset = len(damaged) - len(content) + start + len(text) // 2
    damaged[offset] ^= 0x10
    return bytes(damaged)


def _double_constant(path: Path, cache: Path) -> bytes:
    """The constant 1.5 of the right-hand side (8 bytes in .rodata) doubled; header kept."""
    data = path.read_bytes()
    constant = struct.pack("<d", 1.5)
    assert data.count(constant) == 1, "the constant is not in the object code once"
    return data.replace(constant, struct.pack("<d", 3.0))


def _flip_header_digest(path: Path, cache: Path) -> bytes:
    data = bytearray(path.read_bytes())
    at = data.index(b"sha256=") + 7
    data[at] = ord("0") if data[at] != ord("0") else ord("1")
    return bytes(data)


def _foreign_object(path: Path, cache: Path) -> bytes:
    return _kernel_file(cache, "_rhs.rhs.o", lotka_volterra(**OTHER_MODEL)).read_bytes()


def _random(n: int | None = None):
    def damage(path: Path, cache: Path) -> bytes:
        return np.random.default_rng(7).bytes(n or path.stat().st_size)

    return damage


def _conservation_file(cache: Path) -> Path:
    return conservation_cache_path(isomerisation()).relative_to(cache_directory()).as_posix()


OBJECT_DAMAGES = {
    # object code: these crashed every later process or changed its numbers
    "object: random bytes": ("_rhs.rhs.o", _random()),
    "object: zero length": ("_jac_y.jac_y.o", lambda path, cache: b""),
    "object: truncated": ("_jac_p.jac_p.o", lambda path, cache: path.read_bytes()[:300]),
    "object: one bit of machine code flipped": ("_rhs.rhs.o", _flip_machine_code),
    "object: a constant in .rodata doubled": ("_rhs.rhs.o", _double_constant),
    "object: another model's object in place": ("_rhs.rhs.o", _foreign_object),
    "object: digest in the header changed": ("_vjp_y.vjp_y.o", _flip_header_digest),
}
OTHER_DAMAGES = {
    # manifests, sparsity pattern, sparse analysis, description, conservation laws: one
    # process with all of them (each a file of its own)
    "manifest: garbage JSON": ("_rhs.json", lambda path, cache: b"{not json"),
    "manifest: empty": ("_jac_y_values.json", lambda path, cache: b""),
    "manifest: garbage JSON under a matching digest": (
        "_jvp_y.json",
        lambda path, cache: _reframed(path, cache, b"{not json"),
    ),
    "pattern: random bytes": (".pattern.npz", _random()),
    "sparse analysis: a pickle under a matching digest": (
        ".newton.v2.npy",
        lambda path, cache: _reframed(path, cache, pickle_bytes()),
    ),
    "manifest: truncated": ("_jac_p.json", lambda path, cache: path.read_bytes()[:120]),
    "description: truncated": (".system.json", lambda path, cache: path.read_bytes()[:40]),
    "conservation laws: one byte flipped": (
        None,
        lambda path, cache: path.read_bytes().replace(b'"1"', b'"2"', 1),
    ),
}


def pickle_bytes() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"rows": 1}], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def _assert_healed(run: dict, reference_results: dict, damaged: list[Path], cache, originals):
    assert run["results"] == reference_results
    messages = [message for category, message in run["warnings"]]
    assert all(category == "KernelCacheWarning" for category, _ in run["warnings"]), messages
    for path in damaged:
        naming = [m for m in messages if str(path) in m]
        assert len(naming) == 1, f"{path.name}: {messages}"
        assert "does not verify" in naming[0]
        # replaced by a file that verifies, with the content of the undamaged cache
        assert _payload(path, cache) == originals[path]
    assert len(messages) == len(damaged), messages


def _damage(cache: Path, damages: dict) -> dict[Path, bytes]:
    """Apply ``damages`` (name: (file suffix, damage)); the original contents by path."""
    originals = {}
    for suffix, make_damaged in damages.values():
        if suffix is None:
            with _cache_dir(cache):
                path = cache / _conservation_file(cache)
        else:
            path = _kernel_file(cache, suffix)
        assert path not in originals, "two damages of one file"
        originals[path] = _payload(path, cache)
        damaged = make_damaged(path, cache)
        assert damaged != path.read_bytes()
        path.write_bytes(damaged)
    return originals


@pytest.mark.parametrize("damage", list(OBJECT_DAMAGES))
def test_damaged_object_code_is_compiled_again_and_replaced(reference, tmp_path, damage):
    reference_cache, reference_results = reference
    cache = _copy(reference_cache, tmp_path)
    originals = _damage(cache, {damage: OBJECT_DAMAGES[damage]})
    _assert_healed(_damaged_run(cache), reference_results, list(originals), cache, originals)


def test_damaged_manifests_patterns_analyses_and_laws_are_computed_again(reference, tmp_path):
    reference_cache, reference_results = reference
    cache = _copy(reference_cache, tmp_path)
    originals = _damage(cache, OTHER_DAMAGES)
    assert len(originals) == len(OTHER_DAMAGES)
    _assert_healed(_damaged_run(cache), reference_results, list(originals), cache, originals)


def test_emptied_sources_with_deleted_objects_are_generated_again(reference, tmp_path):
    reference_cache, reference_results = reference
    cache = _copy(reference_cache, tmp_path)
    key = kernel_cache_key(lotka_volterra())
    sources = sorted(cache.glob(f"kernels-v*/*/kernels_{key}_*.py"))
    assert len(sources) == 7
    originals = {path: _payload(path, cache) for path in sources}
    for path in sources:
        path.write_bytes(b"")
    for path in cache.glob("kernels-v*/*/kernels_*.o"):
        path.unlink()
    _assert_healed(_damaged_run(cache), reference_results, sources, cache, originals)
    assert len(list(cache.glob("kernels-v*/*/kernels_*.o"))) >= 7


class _cache_dir:
    """``PYMC_ODESENS_CACHE_DIR`` set to ``cache`` inside a ``with`` block."""

    def __init__(self, cache: Path) -> None:
        self.cache, self.saved = cache, None

    def __enter__(self):
        self.saved = os.environ.get("PYMC_ODESENS_CACHE_DIR")
        os.environ["PYMC_ODESENS_CACHE_DIR"] = str(self.cache)

    def __exit__(self, *exc):
        if self.saved is None:
            os.environ.pop("PYMC_ODESENS_CACHE_DIR")
        else:
            os.environ["PYMC_ODESENS_CACHE_DIR"] = self.saved


def test_a_new_cache_is_private(reference):
    cache, _ = reference
    for path in [cache, *cache.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {mode:o}"


def _read_only(directory: Path) -> tuple:
    """A command prefix (and preparation) under which ``directory`` cannot be written."""
    if os.geteuid() != 0:
        for path in [directory, *directory.rglob("*")]:
            if path.is_dir():
                path.chmod(0o500)
        return ()
    # root writes whatever the mode: a read-only bind mount in a mount namespace of its own
    if shutil.which("unshare") is None:
        pytest.skip("running as root without unshare(1): no read-only directory to test")
    prefix = ("unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"')
    probe = subprocess.run([*prefix, str(directory), "touch", str(directory / "probe")])
    if probe.returncode == 0 or (directory / "probe").exists():
        pytest.skip("no read-only bind mount available to root here")
    return (*prefix, str(directory))


def _writable_again(directory: Path) -> None:
    for path in [directory, *directory.rglob("*")]:
        if path.is_dir():
            path.chmod(0o700)


def _unwritable_warnings(run: dict) -> list[str]:
    return [m for c, m in run["warnings"] if "PYMC_ODESENS_CACHE_DIR" in m]


def test_a_read_only_cache_keeps_kernels_in_memory_with_one_warning(reference, tmp_path):
    _, reference_results = reference
    cache = tmp_path / "empty"
    cache.mkdir(mode=0o700)
    prefix = _read_only(cache)
    try:
        run = _damaged_run(cache, command_prefix=prefix)
    finally:
        _writable_again(cache)
    assert run["results"] == reference_results
    warnings_ = _unwritable_warnings(run)
    assert len(warnings_) == 1 and len(run["warnings"]) == 1, run["warnings"]
    assert str(cache) in warnings_[0] and "cannot be written" in warnings_[0]
    assert list(cache.iterdir()) == []


def test_a_read_only_warm_cache_is_read_without_a_warning(reference, tmp_path):
    reference_cache, reference_results = reference
    cache = _copy(reference_cache, tmp_path)
    prefix = _read_only(cache)
    try:
        run = _damaged_run(cache, command_prefix=prefix)
    finally:
        _writable_again(cache)
    assert run["results"] == reference_results
    assert run["warnings"] == []


def _no_room_for_files() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def test_a_full_disk_keeps_kernels_in_memory_with_one_warning(reference, tmp_path):
    """No file can grow (as on a full disk: every write fails), so nothing is stored."""
    _, reference_results = reference
    cache = tmp_path / "full"
    run = _damaged_run(cache, preexec_fn=_no_room_for_files)
    assert run["results"] == reference_results
    warnings_ = _unwritable_warnings(run)
    assert len(warnings_) == 1 and len(run["warnings"]) == 1, run["warnings"]
    assert str(cache) in warnings_[0]
    assert [p for p in cache.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("kind", ["directory", "file"])
def test_a_cache_others_can_write_is_refused(reference, tmp_path, kind):
    reference_cache, _ = reference
    cache = _copy(reference_cache, tmp_path)
    path = cache if kind == "directory" else _kernel_file(cache, "_rhs.rhs.o")
    path.chmod(0o770 if kind == "directory" else 0o666)
    env = {**os.environ, "PYMC_ODESENS_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", DAMAGED_RUN], env=env, capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("pymc_odesens.caching.disk_cache.KernelCacheError: ")
    assert f"kernel cache {kind} {path} is writable by" in last
    assert f"chmod {'700' if kind == 'directory' else '600'} {path}" in last
    assert "PYMC_ODESENS_CACHE_DIR" in last
