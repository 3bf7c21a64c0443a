"""The synthetic mass-action networks of ``benchmarks/mass_action_network.py`` for tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def mass_action_network(n: int, **options):
    """The network with ``n`` species (``options``: those of the benchmark's function)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "mass_action_network.py"
    module = sys.modules.get("mass_action_network")
    if module is None:
        spec = importlib.util.spec_from_file_location("mass_action_network", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["mass_action_network"] = module  # its dataclasses look themselves up
        spec.loader.exec_module(module)
    return module.mass_action_network(n, **options)
