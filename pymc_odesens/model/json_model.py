"""Reader for the neutral JSON model format of ``shared/models`` (see its README)."""

from __future__ import annotations

import json
from os import PathLike
from pathlib import Path

import numpy as np
import sympy as sp

from pymc_odesens.model.expression_parser import parse_expression
from pymc_odesens.model.internal_symbols import time_symbol
from pymc_odesens.model.json_schema import JsonModelError, validate_json_model
from pymc_odesens.model.symbol_vector import make_symbols

__all__ = ["load_json_model"]


def _parse(text, names: dict, where: str) -> sp.Expr:
    if not isinstance(text, str):  # a number, already checked by the schema
        text = repr(text)
    expr = parse_expression(text, names, where)
    if not isinstance(expr, sp.Expr):
        raise JsonModelError(
            f"{where}: expected an arithmetic expression, got the condition {text!r}"
        )
    return expr


def load_json_model(cls, path: str | PathLike):
    """Build ``cls`` (an OdeSystem class) from a JSON model file.

    The file is validated against the format first (:mod:`pymc_odesens.model.json_schema`);
    every state, parameter, intermediate and ``t`` is bound explicitly while parsing
    (:mod:`pymc_odesens.model.expression_parser`), so names such as ``gamma``, ``E`` or
    ``lambda`` stay plain symbols and an undeclared name is an error.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(f"from_json: no model file at {str(path)!r}") from None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise JsonModelError(f"{path.name}: not valid JSON: {err}") from None
    validate_json_model(spec, path.name)
    t = time_symbol()
    states = make_symbols(spec["states"])
    params = make_symbols(spec["parameters"])
    names: dict = {str(s): s for s in (*states, *params)}
    if "t" not in names:
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

        system.events = events_from_json(system, system.events_spec, path.name, names)
        system.__dict__.pop("fingerprint", None)
    return system
