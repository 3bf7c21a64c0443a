"""What the SBML importer refuses, and the errors it raises.

Every SBML feature the importer cannot represent exactly is refused with a
:class:`SbmlUnsupportedError` naming the feature and the SBML element (its id, or its
position where the element has none): algebraic rules, fast reactions, ``delay()``, events
with delays, and anything else listed in :data:`UNSUPPORTED_FEATURES`. A model is never
simulated with a silent approximation of what it says.
"""

from __future__ import annotations

import libsbml

__all__ = [
    "SbmlConsistencyError",
    "SbmlError",
    "SbmlUndefinedError",
    "SbmlUnsupportedError",
    "UNSUPPORTED_FEATURES",
    "check_supported",
    "element_label",
    "rule_label",
]

UNSUPPORTED_FEATURES = (
    "algebraic rule",
    "fast reaction",
    "delay()",
    "event with a delay",
    "required SBML package",
)
"""The SBML features refused by :func:`check_supported` (others are refused where met)."""


_HARMLESS_PACKAGES = ("comp", "l3v2extendedmath", "layout", "render")
"""Packages that need nothing more: ``comp`` is flattened, ``l3v2extendedmath`` is the
math of SBML Level 3 Version 2 core (libsbml attaches it to every such document), ``layout``
and ``render`` only draw the model."""


class SbmlError(ValueError):
    """An SBML document that cannot be read: not SBML, errors reported by libsbml, no model."""


class SbmlConsistencyError(SbmlError):
    """A document that libsbml's consistency checks find errors in (duplicate ids, math
    that refers to nothing, rules that contradict each other, ...).

    Attributes
    ----------
    findings : list of tuple
        ``(line, libsbml error id, message)`` of each error, in libsbml's order; the
        message names the element.
    """

    def __init__(self, where: str, findings: list) -> None:
        self.findings = findings
        shown = "; ".join(f"line {line}: {message}" for line, _, message in findings[:5])
        more = f" (and {len(findings) - 5} more)" if len(findings) > 5 else ""
        super().__init__(
            f"{where}: libsbml's consistency check finds {len(findings)} error(s) in the "
            f"document: {shown}{more}"
        )


class SbmlUndefinedError(SbmlError):
    """An id whose value the model leaves undefined (no value, initial assignment or rule).

    Attributes
    ----------
    sid : str
    """

    def __init__(self, sid: str, message: str) -> None:
        self.sid = sid
        super().__init__(message)


class SbmlUnsupportedError(SbmlError):
    """An SBML feature the importer does not support, named with the element that uses it.

    Attributes
    ----------
    feature : str
        The SBML feature, e.g. ``"algebraic rule"``, ``"fast reaction"``, ``"delay()"``.
    element_id : str
        The id of the SBML element that uses it (or a description of the element when it
        has no id, e.g. ``"event #2"``).
    """

    def __init__(self, feature: str, element_id: str, detail: str = "") -> None:
        self.feature = feature
        self.element_id = element_id
        message = f"SBML {feature} is not supported ({element_id})"
        if detail:
            message += f": {detail}"
        super().__init__(message)


def element_label(element, kind: str, position: int) -> str:
    """``"<kind> '<id>'"`` for an element with an id, else ``"<kind> #<position>"``."""
    if element.isSetId() and element.getId():
        return f"{kind} {element.getId()!r}"
    return f"{kind} #{position}"


def rule_label(rule, position: int) -> str:
    """``"rate rule for 'x'"``, ``"assignment rule for 'x'"`` or ``"algebraic rule #j"``."""
    if rule.isAlgebraic():
        return f"algebraic rule #{position}"
    kind = "rate" if rule.isRate() else "assignment"
    return f"{kind} rule for {rule.getVariable()!r}"


def _math_nodes(ast):
    stack = [ast]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        yield node
        stack.extend(node.getChild(i) for i in range(node.getNumChildren()))


def _uses_delay(ast) -> bool:
    return ast is not None and any(
        node.getType() == libsbml.AST_FUNCTION_DELAY for node in _math_nodes(ast)
    )


def _math_elements(model):
    """Every (label, math) of the model whose math a simulation evaluates."""
    for j, rule in enumerate(model.getListOfRules()):
        yield rule_label(rule, j), rule.getMath()
    for assignment in model.getListOfInitialAssignments():
        yield f"initial assignment for {assignment.getSymbol()!r}", assignment.getMath()
    for j, reaction in enumerate(model.getListOfReactions()):
        label = element_label(reaction, "reaction", j)
        if reaction.isSetKineticLaw():
            yield f"kinetic law of {label}", reaction.getKineticLaw().getMath()
        for reference in (*reaction.getListOfReactants(), *reaction.getListOfProducts()):
            if reference.isSetStoichiometryMath():
                yield (
                    f"stoichiometryMath of {reference.getSpecies()!r} in {label}",
                    reference.getStoichiometryMath().getMath(),
                )
    for j, event in enumerate(model.getListOfEvents()):
        label = element_label(event, "event", j)
        if event.isSetTrigger():
            yield f"trigger of {label}", event.getTrigger().getMath()
        if event.isSetPriority():
            yield f"priority of {label}", event.getPriority().getMath()
        for assignment in event.getListOfEventAssignments():
            yield f"assignment to {assignment.getVariable()!r} in {label}", assignment.getMath()
    for j, constraint in enumerate(model.getListOfConstraints()):
        yield f"constraint #{j}", constraint.getMath()


def check_supported(document: libsbml.SBMLDocument) -> None:
    """Refuse the features the importer cannot simulate exactly.

    Raises
    ------
    SbmlUnsupportedError
        For an algebraic rule, a fast reaction, a ``delay()`` anywhere in the math, an
        event with a delay, or a package the document marks as required for its
        mathematical meaning (other than ``comp``, which is flattened before).
    """
    for j in range(document.getNumPlugins() if document.getLevel() >= 3 else 0):
        plugin = document.getPlugin(j)
        package = plugin.getPackageName()
        if package not in _HARMLESS_PACKAGES and document.getPackageRequired(package):
            raise SbmlUnsupportedError(
                "required SBML package",
                f"package {package!r}",
                "the document declares it required to interpret the model",
            )
    model = document.getModel()
    for j, rule in enumerate(model.getListOfRules()):
        if rule.isAlgebraic() and rule.isSetMath():
            raise SbmlUnsupportedError(
                "algebraic rule",
                rule_label(rule, j),
                f"0 = {libsbml.formulaToL3String(rule.getMath())} makes the model a DAE",
            )
    for j, reaction in enumerate(model.getListOfReactions()):
        if reaction.isSetFast() and reaction.getFast():
            raise SbmlUnsupportedError(
                "fast reaction",
                element_label(reaction, "reaction", j),
                "fast reactions are an equilibrium constraint (a DAE)",
            )
    for j, event in enumerate(model.getListOfEvents()):
        if event.isSetDelay() and event.getDelay().isSetMath():
            raise SbmlUnsupportedError("event with a delay", element_label(event, "event", j))
    for label, ast in _math_elements(model):
        if _uses_delay(ast):
            raise SbmlUnsupportedError(
                "delay()", label, "delay differential equations are not supported"
            )
