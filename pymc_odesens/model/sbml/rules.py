"""SBML rules: assignment rules (substituted wherever their variable appears) and rate rules
(their variable becomes a state whose derivative is the rule). Algebraic rules are refused
(:mod:`pymc_odesens.model.sbml.refusals`); a rule without math is no rule (SBML Level 3
Version 2 allows the math to be missing, and then the rule does nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libsbml

from pymc_odesens.model.sbml.refusals import SbmlError

__all__ = ["Rules", "read_rules"]


@dataclass
class Rules:
    """The assignment and rate rules of a model, by the id of their variable.

    Attributes
    ----------
    assignment, rate : dict of str to libsbml.ASTNode
    """

    assignment: dict = field(default_factory=dict)
    rate: dict = field(default_factory=dict)


def read_rules(model: libsbml.Model, where: str) -> Rules:
    """The model's rules with math, checked for one rule per variable."""
    rules = Rules()
    for rule in model.getListOfRules():
        if rule.isAlgebraic() or not rule.isSetMath():
            continue
        variable = rule.getVariable()
        if variable in rules.assignment or variable in rules.rate:
            raise SbmlError(f"{where}: {variable!r} is the variable of more than one rule")
        target = rules.assignment if rule.isAssignment() else rules.rate
        target[variable] = rule.getMath()
    return rules
