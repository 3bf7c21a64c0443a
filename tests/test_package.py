"""The package namespace: what ``import pymc_odesens`` loads, and every exported name."""

from __future__ import annotations

import subprocess
import sys

import pymc_odesens


def test_import_does_not_load_pymc_or_pytensor():
    code = (
        "import sys, pymc_odesens\n"
        "from pymc_odesens import OdeSystem, solve, solve_sensitivity, adjoint_gradient\n"
        "heavy = sorted(m for m in ('pymc', 'pytensor') if m in sys.modules)\n"
        "print(','.join(heavy) or 'none')\n"
        "pymc_odesens.ode_solution\n"
        "print('pymc' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["none", "True"]


def test_every_exported_name_resolves():
    for name in pymc_odesens.__all__:
        assert getattr(pymc_odesens, name) is not None, name
    assert set(pymc_odesens.__all__) <= set(dir(pymc_odesens))


def test_unknown_attribute_names_itself():
    import pytest

    with pytest.raises(AttributeError, match="has no attribute 'odesolution'"):
        pymc_odesens.odesolution  # noqa: B018


def test_smmala_help_shows_its_own_constructor():
    import pydoc

    text = pydoc.render_doc(pymc_odesens.SMMALA, renderer=pydoc.plaintext)
    assert "Create the ArrayStepShared object" not in text
    assert "Create the sampler for the model in context" in text
