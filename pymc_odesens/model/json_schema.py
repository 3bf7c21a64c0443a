"""Validation of a JSON model file against its documented format (shared/models/README.md).

Every field is checked for presence, type, length and the names it refers to before any
expression is parsed, and a failure names the file and the field (``pka.json: x0: expected
11 numbers (one per state), got 10``). Unknown keys are refused: a misspelt optional key
(``p_nominl``) would otherwise be ignored without a word.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = ["JsonModelError", "validate_json_model", "KNOWN_KEYS"]

REQUIRED_KEYS = ("states", "parameters", "rhs")
KNOWN_KEYS = (
    "name",
    "source",
    "states",
    "parameters",
    "expressions",
    "rhs",
    "p_nominal",
    "x0",
    "t0",
    "t_end",
    "outputs",
    "experiments",
    "prior",
    "units",
    "events",
    "exact",
    "checks",
)
"""Top-level keys of the format; ``prior``, ``units``, ``exact`` and ``checks`` are free-form."""

_EXPERIMENT_KEYS = ("id", "x0_overrides", "times", "data", "stdv", "t0", "comment")
_EVENT_KEYS = ("kind", "name", "condition", "direction", "times", "affect", "terminal")


class JsonModelError(ValueError):
    """A JSON model file that does not follow the format; the message names file and field."""


def _type_name(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


class _Checker:
    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, field: str, message: str):
        raise JsonModelError(f"{self.where}: {field}: {message}")

    def names(self, field: str, value, what: str) -> list[str]:
        if not isinstance(value, list):
            self.fail(field, f"expected a list of {what} names, got {_type_name(value)} {value!r}")
        for i, name in enumerate(value):
            if not isinstance(name, str) or not name.isidentifier():
                self.fail(f"{field}[{i}]", f"expected a name (an identifier), got {name!r}")
        seen = set()
        duplicates = sorted({n for n in value if n in seen or seen.add(n)})
        if duplicates:
            self.fail(field, f"duplicate names {duplicates}")
        return value

    def number(self, field: str, value, *, finite: bool = True) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(field, f"expected a number, got {_type_name(value)} {value!r}")
        if finite and not math.isfinite(value):
            self.fail(field, f"expected a finite number, got {value!r}")
        return float(value)

    def numbers(self, field: str, value, length: int | None, what: str) -> list[float]:
        if not isinstance(value, list):
            self.fail(field, f"expected a list of numbers ({what}), got {_type_name(value)}")
        if length is not None and len(value) != length:
            self.fail(field, f"expected {length} numbers ({what}), got {len(value)}")
        return [self.number(f"{field}[{i}]", v) for i, v in enumerate(value)]

    def expression(self, field: str, value) -> None:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.fail(
                field, f"expected an expression (a string), got {_type_name(value)} {value!r}"
            )

    def mapping(self, field: str, value) -> Mapping:
        if not isinstance(value, dict):
            self.fail(field, f"expected an object, got {_type_name(value)} {value!r}")
        return value

    def known_keys(self, field: str, value: Mapping, known: Sequence[str]) -> None:
        unknown = sorted(set(value) - set(known))
        if unknown:
            self.fail(field, f"unknown key(s) {unknown}; the format knows {list(known)}")


def validate_json_model(spec, where: str) -> None:
    """Check a decoded JSON model against the format; raise :class:`JsonModelError` if not.

    Parameters
    ----------
    spec : object
        The decoded file.
    where : str
        The file's name, for messages.
    """
    c = _Checker(where)
    if not isinstance(spec, dict):
        raise JsonModelError(
            f"{where}: expected a JSON object at the top level, got {_type_name(spec)}"
        )
    missing = [k for k in REQUIRED_KEYS if k not in spec]
    if missing:
        raise JsonModelError(f"{where}: lacks the key(s) {missing}")
    c.known_keys("top level", spec, KNOWN_KEYS)
    for key in ("name", "source"):
        if key in spec and not isinstance(spec[key], str):
            c.fail(key, f"expected a string, got {_type_name(spec[key])} {spec[key]!r}")
    states = c.names("states", spec["states"], "state")
    if not states:
        c.fail("states", "a model needs at least one state")
    params = c.names("parameters", spec["parameters"], "parameter")
    both = sorted(set(states) & set(params))
    if both:
        c.fail("parameters", f"names used for both a state and a parameter: {both}")
    declared = set(states) | set(params)
    expressions = c.mapping("expressions", spec.get("expressions", {}))
    for name, text in expressions.items():
        if not name.isidentifier():
            c.fail("expressions", f"{name!r} is not a name (an identifier)")
        if name in declared:
            c.fail(f"expressions[{name!r}]", "the name is already a state or a parameter")
        c.expression(f"expressions[{name!r}]", text)
    rhs = spec["rhs"]
    if not isinstance(rhs, list) or len(rhs) != len(states):
        got = f"{len(rhs)} entries" if isinstance(rhs, list) else f"{_type_name(rhs)}"
        c.fail("rhs", f"expected a list of {len(states)} expressions (one per state), got {got}")
    for i, text in enumerate(rhs):
        c.expression(f"rhs[{i}]", text)
    if "p_nominal" in spec:
        c.numbers("p_nominal", spec["p_nominal"], len(params), "one per parameter")
    if "x0" in spec:
        c.numbers("x0", spec["x0"], len(states), "one per state")
    t0 = c.number("t0", spec["t0"]) if "t0" in spec else 0.0
    if "t_end" in spec and c.number("t_end", spec["t_end"]) <= t0:
        c.fail("t_end", f"must be after t0 = {t0}, got {spec['t_end']!r}")
    outputs = c.mapping("outputs", spec.get("outputs", {}))
    for name, text in outputs.items():
        if not name.isidentifier():
            c.fail("outputs", f"{name!r} is not a name (an identifier)")
        c.expression(f"outputs[{name!r}]", text)
    _check_experiments(c, spec.get("experiments", []), states, outputs)
    _check_events(c, spec.get("events", []), states)


def _check_experiments(c: _Checker, experiments, states, outputs) -> None:
    if not isinstance(experiments, list):
        c.fail("experiments", f"expected a list, got {_type_name(experiments)}")
    for j, exp in enumerate(experiments):
        field = f"experiments[{j}]"
        c.mapping(field, exp)
        c.known_keys(field, exp, _EXPERIMENT_KEYS)
        overrides = c.mapping(f"{field}.x0_overrides", exp.get("x0_overrides", {}))
        for state, value in overrides.items():
            if state not in states:
                c.fail(f"{field}.x0_overrides", f"{state!r} is not a state ({', '.join(states)})")
            c.number(f"{field}.x0_overrides[{state!r}]", value)
        if "t0" in exp:
            c.number(f"{field}.t0", exp["t0"])
        times = (
            c.numbers(f"{field}.times", exp["times"], None, "output times")
            if "times" in exp
            else None
        )
        for key in ("data", "stdv"):
            table = c.mapping(f"{field}.{key}", exp.get(key, {}))
            for output, values in table.items():
                if output not in outputs and output not in states:
                    c.fail(f"{field}.{key}", f"{output!r} is neither an output nor a state")
                length = None if times is None else len(times)
                c.numbers(f"{field}.{key}[{output!r}]", values, length, "one per time")


def _check_events(c: _Checker, events, states) -> None:
    if not isinstance(events, list):
        c.fail("events", f"expected a list, got {_type_name(events)}")
    for j, event in enumerate(events):
        field = f"events[{j}]"
        c.mapping(field, event)
        c.known_keys(field, event, _EVENT_KEYS)
        kind = event.get("kind")
        if kind not in ("implicit", "explicit"):
            c.fail(f"{field}.kind", f"expected 'implicit' or 'explicit', got {kind!r}")
        if kind == "implicit":
            if "condition" not in event:
                c.fail(field, "an implicit event needs a 'condition'")
            c.expression(f"{field}.condition", event["condition"])
            direction = event.get("direction", "both")
            if direction not in ("up", "down", "both"):
                c.fail(f"{field}.direction", f"expected 'up', 'down' or 'both', got {direction!r}")
            if "times" in event:
                c.fail(f"{field}.times", "only explicit events have times")
        else:
            if "times" not in event:
                c.fail(field, "an explicit event needs 'times'")
            times = event["times"]
            if not isinstance(times, list) or not times:
                c.fail(f"{field}.times", f"expected a non-empty list, got {times!r}")
            for i, tau in enumerate(times):
                c.expression(f"{field}.times[{i}]", tau)
            for key in ("condition", "direction"):
                if key in event:
                    c.fail(f"{field}.{key}", "only implicit events have a condition and direction")
        affect = c.mapping(f"{field}.affect", event.get("affect", {}))
        for state, text in affect.items():
            if state not in states:
                c.fail(f"{field}.affect", f"{state!r} is not a state ({', '.join(states)})")
            c.expression(f"{field}.affect[{state!r}]", text)
        if "terminal" in event and not isinstance(event["terminal"], bool):
            c.fail(f"{field}.terminal", f"expected true or false, got {event['terminal']!r}")
        if "name" in event and not isinstance(event["name"], str):
            c.fail(f"{field}.name", f"expected a string, got {event['name']!r}")
