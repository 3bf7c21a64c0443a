"""The documentation site builds with warnings as errors, and its API reference covers every
public name.

CI runs README's test command, whose ``test`` extra includes the ``docs`` extra (sphinx,
pydata-sphinx-theme, myst-parser, numpydoc), so this is the site's CI build:
``sphinx-build -W -b html docs <dir>``, in a subprocess, into a temporary directory.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API = DOCS / "api"
DOCS_PACKAGES = ("sphinx", "pydata_sphinx_theme", "myst_parser", "numpydoc")
# the modules whose public names (``__all__``) the API reference documents
PUBLIC_MODULES = (
    "pymc_odesens",
    "pymc_odesens.ops",
    "pymc_odesens.inference",
    "pymc_odesens.petab",
    "pymc_odesens.stan",
    "pymc_odesens.math",
)


def documented_objects() -> dict[int, str]:
    """``id(object) -> dotted name`` of every object the API pages document: the entries of
    their ``autosummary`` lists and ``.. data::`` directives, under the page's
    ``currentmodule``, and the modules that have a page (``.. automodule::``)."""
    documented: dict[int, str] = {}
    for page in sorted(API.glob("*.rst")):
        module = None
        in_autosummary = False
        for line in page.read_text().splitlines():
            if match := re.match(r"\.\. (?:currentmodule|automodule):: (\S+)", line):
                if line.startswith(".. automodule::"):
                    target = importlib.import_module(match.group(1))
                    documented[id(target)] = match.group(1)
                module = importlib.import_module(match.group(1))
                in_autosummary = False
            elif line.startswith(".. autosummary::"):
                in_autosummary = True
            elif match := re.match(r"\.\. data:: (\S+)", line):
                documented[id(getattr(module, match.group(1)))] = (
                    f"{module.__name__}.{match.group(1)}"
                )
                in_autosummary = False
            elif in_autosummary and (match := re.match(r"   ([A-Za-z_]\w*)$", line)):
                name = match.group(1)
                documented[id(getattr(module, name))] = f"{module.__name__}.{name}"
            elif in_autosummary and line and not line.startswith(" "):
                in_autosummary = False
    return documented


def test_api_reference_documents_every_public_name():
    documented = documented_objects()
    missing = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if id(getattr(module, name)) not in documented:
                missing.append(f"{module_name}.{name}")
    assert not missing, f"public names missing from docs/api/*.rst: {missing}"
    assert documented[id(importlib.import_module("pymc_odesens").ode_solution)] == (
        "pymc_odesens.ode_solution"
    )


def test_site_builds_with_warnings_as_errors(tmp_path):
    absent = [name for name in DOCS_PACKAGES if importlib.util.find_spec(name) is None]
    if absent:
        pytest.fail(
            f"{absent} not installed: README's test command installs them "
            "(pip install -e '.[test]', whose test extra includes docs)"
        )
    html = tmp_path / "html"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            "-d",
            str(tmp_path / "doctrees"),
            str(DOCS),
            str(html),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert build.returncode == 0, f"sphinx-build -W failed:\n{build.stdout}\n{build.stderr}"

    # the API reference of ode_solution, from its numpydoc docstring
    api_page = (html / "api" / "generated" / "pymc_odesens.ode_solution.html").read_text()
    for text in ("pymc_odesens.ode_solution", "Parameters", "sensitivity", "Returns"):
        assert text in api_page, f"{text!r} missing from the ode_solution page"
    # a page with math (MyST dollarmath, rendered by MathJax)
    adjoint = (html / "adjoint.html").read_text()
    assert 'class="math' in adjoint and "mathjax" in adjoint.lower()
    # a page with the figures the examples write
    examples = (html / "examples.html").read_text()
    figures = re.findall(r'<img[^>]+src="(_images/[^"]+\.png)"', examples)
    assert "_images/akar4_fit.png" in figures, figures
    for figure in figures:
        assert (html / figure).stat().st_size > 0
