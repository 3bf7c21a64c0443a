"""Reader for the neutral JSON model format of ``shared/models`` (see its README)."""

from __future__ import annotations

import json
from os import PathLike
from pathlib import Path

import numpy as np
import sympy as sp

from pymc_odesens.model.symbol_vector import make_symbols

__all__ = ["load_json_model"]

_REQUIRED = ("states", "parameters", "rhs")


def _parse(text: str, names: dict, where: str) -> sp.Expr:
    try:
        return sp.sympify(text, locals=names)
    except (sp.SympifyError, SyntaxError, TypeError) as err:
        raise ValueError(f"{where}: cannot parse expression {text!r}: {err}") from err


def load_json_model(cls, path: str | PathLike):
    """Build ``cls`` (an OdeSystem class) from a JSON model file.

    Every state, parameter, intermediate and ``t`` is bound explicitly while
    parsing, so names such as ``gamma`` or ``beta`` stay plain symbols.
    """
    path = Path(path)
    try:
        spec = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"from_json: no model file at {str(path)!r}") from None
    missing = [k for k in _REQUIRED if k not in spec]
    if missing:
        raise ValueError(f"from_json: {path.name} lacks the key(s) {missing}")
    t = sp.Symbol("t", real=True)
    states = make_symbols(spec["states"])
    params = make_symbols(spec["parameters"])
    names: dict = {str(s): s for s in (*states, *params)}
    names["t"] = t
    for name, text in spec.get("expressions", {}).items():  # ordered; may use earlier ones
        names[name] = _parse(text, names, f"{path.name}: expressions[{name!r}]")
    rhs = [_parse(text, names, f"{path.name}: rhs[{i}]") for i, text in enumerate(spec["rhs"])]
    system = cls.from_expressions(rhs, t, states, params, name=spec.get("name", path.stem))
    system.source = spec.get("source")
    system.spec = spec
    if "x0" in spec:
        system.x0 = np.asarray(spec["x0"], dtype=float)
    if "p_nominal" in spec:
        system.p_nominal = np.asarray(spec["p_nominal"], dtype=float)
    system.t0 = float(spec.get("t0", 0.0))
    system.t_end = float(spec["t_end"]) if "t_end" in spec else None
    system.outputs = {
        k: _parse(v, names, f"{path.name}: outputs[{k!r}]")
        for k, v in spec.get("outputs", {}).items()
    }
    system.experiments = list(spec.get("experiments", []))
    system.events_spec = list(spec.get("events", []))
    if system.events_spec:
        from pymc_odesens.model.events import events_from_json

        system.events = events_from_json(system, system.events_spec, path.name)
        system.__dict__.pop("fingerprint", None)
    return system
