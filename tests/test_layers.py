"""The package's layering, checked from its source: every module in a layer, imports only
downwards, no import circles, no import of the package root from inside it.

The layers (docs/development.md, "Architecture"), bottom to top::

    0 base         version.py, caching/ (disk caches, numba cache guard and verification)
    1 model        model/, math.py
    2 codegen      codegen/
    3 solvers      solvers/
    4 sensitivity  sensitivity/
    5 ops          ops/
    6 stan         stan.py
    7 inference    inference/
    8 petab        petab/
    9 deprecated   pymc/ (re-exports of ops/ and inference/ for one release)
   10 commands     compile.py (``python -m pymc_odesens.compile``: every core compiled once)
   11 root         __init__.py (the public API)

Every import statement counts, at module level or inside a function (a lazy import is still
a dependency). A module may import modules of its own layer and of layers below it; PyTensor
and PyMC only from the ops layer up ("nothing below ops knows PyTensor").
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "pymc_odesens"
PACKAGE_DIR = Path(__file__).resolve().parents[1] / PACKAGE

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("version", "caching")),
    ("model", ("model", "math")),
    ("codegen", ("codegen",)),
    ("solvers", ("solvers",)),
    ("sensitivity", ("sensitivity",)),
    ("ops", ("ops",)),
    ("stan", ("stan",)),
    ("inference", ("inference",)),
    ("petab", ("petab",)),
    ("deprecated", ("pymc",)),
    ("commands", ("compile",)),
]
ROOT_LAYER = len(LAYERS)
PYTENSOR_FROM = [name for name, _ in LAYERS].index("ops")
"""The lowest layer allowed to import pytensor or pymc."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    """The layer index of a module of the package (None: in no layer)."""
    parts = module.split(".")
    if parts == [PACKAGE]:
        return ROOT_LAYER
    for index, (_, tops) in enumerate(LAYERS):
        if parts[1] in tops:
            return index
    return None


def imports_of(path: Path, modules: set[str]) -> list[tuple[int, str]]:
    """``(line, imported name)`` of every import in ``path``: modules of the package (a
    ``from a import b`` names ``a.b`` when that is a module, else ``a``) and third-party
    top-level names."""
    module = module_name(path)
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                target = f"{source}.{alias.name}"
                found.append((node.lineno, target if target in modules else source))
    return found


def package_graph() -> tuple[dict[str, Path], dict[str, list[tuple[int, str]]]]:
    files = {module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}
    modules = set(files)
    return files, {m: imports_of(p, modules) for m, p in files.items()}


FILES, IMPORTS = package_graph()


def test_every_module_is_in_a_layer():
    stray = [m for m in FILES if layer_of(m) is None]
    assert not stray, f"modules in no layer (add them to a layer folder or to LAYERS): {stray}"


def test_imports_go_down_the_layers():
    violations = []
    for module, imports in IMPORTS.items():
        own = layer_of(module)
        for line, target in imports:
            where = f"{FILES[module].relative_to(PACKAGE_DIR.parent)}:{line}"
            top = target.split(".")[0]
            if top in ("pytensor", "pymc") and own < PYTENSOR_FROM:
                violations.append(f"{where}: {LAYERS[own][0]} layer imports {top}")
            if top != PACKAGE:
                continue
            if target == PACKAGE and module != PACKAGE:
                violations.append(f"{where}: imports the package root")
                continue
            theirs = layer_of(target)
            if theirs is not None and theirs > own:
                violations.append(
                    f"{where}: {module} ({LAYERS[own][0]}) imports {target} "
                    f"({'root' if theirs == ROOT_LAYER else LAYERS[theirs][0]})"
                )
    assert not violations, "imports that go up a layer:\n" + "\n".join(violations)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    graph = {m: {t for _, t in imports if t in FILES and t != m} for m, imports in IMPORTS.items()}
    assert _cycles(graph) == []


def test_the_checks_see_a_violation():
    # the checker itself: an upward import, a root import and a circle are all found
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert layer_of(f"{PACKAGE}.solvers.bdf") < layer_of(f"{PACKAGE}.ops.ode_ops")
    assert layer_of(f"{PACKAGE}.somewhere_new") is None
    assert layer_of(PACKAGE) == ROOT_LAYER


@pytest.mark.parametrize("layer", [name for name, _ in LAYERS])
def test_layer_has_modules(layer):
    # a layer of the list that matches no module is a stale entry
    index = [name for name, _ in LAYERS].index(layer)
    assert any(layer_of(m) == index for m in FILES)
