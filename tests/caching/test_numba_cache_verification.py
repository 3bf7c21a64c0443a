"""numba's cache files of the package's functions are verified before numba loads them: a
damaged index or data file is a miss (the function compiled again, the file replaced, one
warning naming it), never an unpickling error or damaged machine code that runs.

Cheap: a private ``NUMBA_CACHE_DIR`` with only what ``import pymc_odesens`` and two small
functions (``solvers.kernel_call``) compile, never the solvers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba.core import caching

from pymc_odesens.caching.numba_cache_verification import VerifiedCacheFile, verify_numba_cache
from pymc_odesens.caching.verified_file import unframe

REPO = Path(__file__).resolve().parents[2]

CALLS = textwrap.dedent(
    """
    import json, warnings
    import numpy as np
    from numba.core import event

    compiled = []

    class Compiles(event.Listener):
        def on_start(self, ev):
            pass

        def on_end(self, ev):  # the package's functions (not numba's own overloads)
            function = ev.data["dispatcher"].py_func
            if function.__module__.startswith("pymc_odesens."):
                compiled.append(function.__name__)

    event.register("numba:compile", Compiles())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from pymc_odesens import OdeSystem
        from pymc_odesens.codegen import compile_kernels
        from pymc_odesens.solvers.kernel_call import call_kernel, evaluate_along
        from pymc_odesens.codegen.recorded_trajectory import trajectory_state_cfunc

        lv = OdeSystem(lambda t, y, p: [1.5 * y[0] - p[0] * y[0] * y[1],
                                        p[1] * y[0] * y[1] - 3.0 * y[1]], 2, 2)
        kernels = compile_kernels(lv)
        p = np.array([0.5, 0.25])
        out = np.zeros(2)
        call_kernel(kernels.rhs, 0.0, np.array([1.25, 0.75]), p, np.zeros(2), out)
        along = np.zeros((3, 2))
        y = np.array([[1.0, 2.0], [0.5, 0.25], [3.0, 1.0]])
        evaluate_along(kernels.rhs, np.array([0.0, 1.0, 2.0]), y, p, along)
        assert trajectory_state_cfunc.address
    print(json.dumps({
        "results": [float(x).hex() for x in [*out, *along.ravel()]],
        "warnings": [[w.category.__name__, str(w.message)] for w in caught],
        "compiled": compiled,
    }))
    """
)


def _run(tmp_path: Path) -> dict:
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
        "PYMC_ODESENS_CACHE_DIR": str(tmp_path / "kernels"),
    }
    done = subprocess.run(
        [sys.executable, "-c", CALLS], env=env, capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, f"return code {done.returncode}: {done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def _file(tmp_path: Path, pattern: str) -> Path:
    (path,) = (tmp_path / "numba").rglob(pattern)
    return path


def _verifies(path: Path) -> bool:
    """The file's header verifies its content, under the file's own name."""
    data = path.read_bytes()
    name = data.split(b" name=", 1)[1].split(b"\n", 1)[0].decode()
    assert name == path.name or name.startswith(f"{path.name}:")
    return unframe(data, name) is not None


def test_damaged_numba_cache_files_are_compiled_again_and_replaced(tmp_path):
    cold = _run(tmp_path)
    assert cold["warnings"] == []
    assert {"call_kernel", "evaluate_along"} <= set(cold["compiled"])
    warm = _run(tmp_path)
    assert warm == {**cold, "compiled": []}

    rng = np.random.default_rng(3)
    data_file = _file(tmp_path, "kernel_call.call_kernel-*.sha256.1.nbc")
    data_file.write_bytes(rng.bytes(data_file.stat().st_size))  # was: unpickling error
    index = _file(tmp_path, "kernel_call.evaluate_along-*.sha256.nbi")
    index.write_bytes(index.read_bytes()[:-50])
    machine_code = _file(tmp_path, "recorded_trajectory.trajectory_state_cfunc-*.sha256.1.nbc")
    flipped = bytearray(machine_code.read_bytes())
    flipped[len(flipped) // 2] ^= 0x01  # past the header: in the pickled object code
    machine_code.write_bytes(bytes(flipped))
    damaged = [data_file, index, machine_code]

    healed = _run(tmp_path)
    assert healed["results"] == cold["results"]
    # (a cfunc's compile is no dispatcher event: its warning and new file show it)
    assert sorted(healed["compiled"]) == ["call_kernel", "evaluate_along"]
    messages = [message for category, message in healed["warnings"]]
    assert [c for c, _ in healed["warnings"]] == ["KernelCacheWarning"] * 3, messages
    for path in damaged:
        (naming,) = [m for m in messages if str(path) in m]
        assert "does not verify" in naming and "compiled again" in naming
        assert _verifies(path)
    assert _run(tmp_path) == {**cold, "compiled": []}


def test_only_the_package_functions_use_verified_files(tmp_path):
    verify_numba_cache()  # idempotent: installed at import
    verify_numba_cache()
    from pymc_odesens.solvers.kernel_call import call_kernel

    assert type(call_kernel._cache._cache_file) is VerifiedCacheFile

    def outside(x):
        return x + 1

    outside.__module__ = "someone_else"
    cache = caching.FunctionCache(outside)
    assert type(cache._cache_file) is caching.IndexDataCacheFile


@pytest.mark.parametrize("damage", ["random", "empty", "foreign"])
def test_a_damaged_index_reads_as_empty_with_a_warning(tmp_path, damage):
    files = VerifiedCacheFile(str(tmp_path), "module.function-3.py311", ("stamp", 1))
    other = VerifiedCacheFile(str(tmp_path), "module.other-9.py311", ("stamp", 1))
    files.save(("sig",), {"code": b"abc"})
    other.save(("sig",), {"code": b"xyz"})
    assert files.load(("sig",)) == {"code": b"abc"}
    index = Path(files._index_path)
    index.write_bytes(
        {
            "random": np.random.default_rng(1).bytes(200),
            "empty": b"",
            "foreign": Path(other._index_path).read_bytes(),
        }[damage]
    )
    with pytest.warns(Warning, match="does not verify") as caught:
        assert files.load(("sig",)) is None
    assert str(index) in str(caught[0].message)
    files.save(("sig",), {"code": b"abc"})
    assert files.load(("sig",)) == {"code": b"abc"}
