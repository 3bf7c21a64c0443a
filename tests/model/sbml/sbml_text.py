"""Small SBML documents for tests, written with libsbml from a compact description."""

from __future__ import annotations

import libsbml


def _math(formula: str):
    ast = libsbml.parseL3Formula(formula)
    if ast is None:
        raise ValueError(f"libsbml cannot parse {formula!r}: {libsbml.getLastParseL3Error()}")
    return ast


def _check(status: int, what: str) -> None:
    if status != libsbml.LIBSBML_OPERATION_SUCCESS:
        raise ValueError(f"libsbml refused {what}: {libsbml.OperationReturnValue_toString(status)}")


def build_sbml(
    *,
    compartments: dict | None = None,
    species: list | tuple = (),
    parameters: dict | None = None,
    reactions: dict | None = None,
    assignment_rules: dict | None = None,
    rate_rules: dict | None = None,
    algebraic_rules: list | tuple = (),
    initial_assignments: dict | None = None,
    functions: dict | None = None,
    events: list | tuple = (),
    conversion_factor: str | None = None,
    model_id: str = "test_model",
) -> str:
    """An SBML Level 3 Version 2 document (Version 1 when a reaction is fast).

    Parameters
    ----------
    compartments : dict
        ``{id: size}`` or ``{id: (size, constant)}`` or ``{id: (size, constant, dims)}``;
        default ``{"c": 1.0}``.
    species : sequence of dict
        Keys ``id``, ``compartment`` (default the first compartment), one of
        ``concentration`` / ``amount``, and optional ``only_substance``, ``boundary``,
        ``constant``, ``conversion_factor``.
    parameters : dict
        ``{id: value}`` or ``{id: (value, constant)}`` (``value`` None: unset).
    reactions : dict
        ``{id: dict(reactants=[(species, stoichiometry), ...], products=[...], rate=formula,
        local={name: value}, fast=False, reference_ids={species: id})}``.
    assignment_rules, rate_rules, initial_assignments : dict
        ``{variable: formula}``.
    algebraic_rules : sequence of str
    functions : dict
        ``{id: "lambda(x, y, body)"}``.
    events : sequence of dict
        Keys ``id``, ``trigger``, ``assignments`` (``{variable: formula}``), and optional
        ``initial_value`` (True), ``persistent`` (True), ``priority``, ``delay``,
        ``use_trigger_values`` (True).
    """
    fast = any(spec.get("fast") for spec in (reactions or {}).values())
    document = libsbml.SBMLDocument(3, 1 if fast else 2)  # fast: up to SBML Level 3 Version 1
    model = document.createModel()
    model.setId(model_id)
    if conversion_factor:
        model.setConversionFactor(conversion_factor)
    for fid, text in (functions or {}).items():
        f = model.createFunctionDefinition()
        f.setId(fid)
        _check(f.setMath(_math(text)), f"function {fid}")
    compartments = {"c": 1.0} if compartments is None else compartments
    for cid, spec in compartments.items():
        size, constant, dims = (spec, True, 3) if not isinstance(spec, tuple) else (*spec, 3)[:3]
        c = model.createCompartment()
        c.setId(cid)
        c.setConstant(constant)
        c.setSpatialDimensions(float(dims))
        if size is not None:
            c.setSize(size)
    first = next(iter(compartments), None)
    for spec in species:
        s = model.createSpecies()
        s.setId(spec["id"])
        s.setCompartment(spec.get("compartment", first))
        if "concentration" in spec:
            s.setInitialConcentration(spec["concentration"])
        if "amount" in spec:
            s.setInitialAmount(spec["amount"])
        s.setHasOnlySubstanceUnits(spec.get("only_substance", False))
        s.setBoundaryCondition(spec.get("boundary", False))
        s.setConstant(spec.get("constant", False))
        if spec.get("conversion_factor"):
            s.setConversionFactor(spec["conversion_factor"])
    for pid, spec in (parameters or {}).items():
        value, constant = spec if isinstance(spec, tuple) else (spec, True)
        p = model.createParameter()
        p.setId(pid)
        p.setConstant(constant)
        if value is not None:
            p.setValue(value)
    for rid, spec in (reactions or {}).items():
        r = model.createReaction()
        r.setId(rid)
        r.setReversible(False)
        if fast:
            r.setFast(bool(spec.get("fast")))
        ids = spec.get("reference_ids", {})
        for create, items in ((r.createReactant, "reactants"), (r.createProduct, "products")):
            for name, stoichiometry in spec.get(items, []):
                ref = create()
                ref.setSpecies(name)
                ref.setConstant(name not in ids)
                if stoichiometry is not None:
                    ref.setStoichiometry(stoichiometry)
                if name in ids:
                    ref.setId(ids[name])
        if spec.get("rate") is not None:
            law = r.createKineticLaw()
            for name, value in spec.get("local", {}).items():
                lp = law.createLocalParameter()
                lp.setId(name)
                lp.setValue(value)
            _check(law.setMath(_math(spec["rate"])), f"kinetic law of {rid}")
    for variable, text in (assignment_rules or {}).items():
        rule = model.createAssignmentRule()
        rule.setVariable(variable)
        _check(rule.setMath(_math(text)), f"assignment rule for {variable}")
    for variable, text in (rate_rules or {}).items():
        rule = model.createRateRule()
        rule.setVariable(variable)
        _check(rule.setMath(_math(text)), f"rate rule for {variable}")
    for text in algebraic_rules:
        rule = model.createAlgebraicRule()
        _check(rule.setMath(_math(text)), "algebraic rule")
    for symbol, text in (initial_assignments or {}).items():
        ia = model.createInitialAssignment()
        ia.setSymbol(symbol)
        _check(ia.setMath(_math(text)), f"initial assignment for {symbol}")
    for spec in events:
        e = model.createEvent()
        if spec.get("id"):
            e.setId(spec["id"])
        e.setUseValuesFromTriggerTime(spec.get("use_trigger_values", True))
        trigger = e.createTrigger()
        trigger.setInitialValue(spec.get("initial_value", True))
        trigger.setPersistent(spec.get("persistent", True))
        _check(trigger.setMath(_math(spec["trigger"])), "trigger")
        if spec.get("priority") is not None:
            _check(e.createPriority().setMath(_math(spec["priority"])), "priority")
        if spec.get("delay") is not None:
            _check(e.createDelay().setMath(_math(spec["delay"])), "delay")
        for variable, text in spec.get("assignments", {}).items():
            ea = e.createEventAssignment()
            ea.setVariable(variable)
            _check(ea.setMath(_math(text)), f"event assignment to {variable}")
    return libsbml.writeSBMLToString(document)


GROWING_COMPARTMENT = build_sbml(
    compartments={"cell": (2.0, False)},
    species=[{"id": "A", "concentration": 3.0}],
    parameters={"r": 0.5},
    rate_rules={"cell": "r"},
)
"""A species (concentration 3) in a compartment of size 2 growing at rate r = 0.5: it is held
as its amount (6), and its concentration is 6 / (2 + r t)."""
