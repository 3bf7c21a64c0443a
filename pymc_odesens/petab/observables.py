"""The observable table: observable and noise formulas in the simulated system's symbols.

petab's ``sympify_petab`` reads each ``observableFormula`` and ``noiseFormula``; every name
in them is then bound here, in this order:

- ``observableParameter<k>_<id>`` / ``noiseParameter<k>_<id>`` of the observable ``<id>``
  itself: a placeholder, given per measurement by its ``observableParameters`` /
  ``noiseParameters``. The observable formula has its observable parameters, the noise
  formula its noise parameters and the observable parameters of its observable formula (an
  additive-plus-relative error ``noiseParameter1_o + noiseParameter2_o * <observable
  formula>`` repeats them; they take the measurement's ``observableParameters`` values);
- in a noise formula, the observable's own id: its value;
- an SBML id: what its symbol denotes (a species' concentration or amount, an assigned
  parameter, a compartment's size, a reaction's rate), as an expression of the simulated
  system's ``t``, states and parameters (``system.outputs``);
- ``time``: the measurement's time;
- an id of the parameter table that is not a model id: a parameter of the observation
  model (estimated or fixed), whatever its shape: ``noiseParameter2_cycA_nuc`` in the
  parameter table is a parameter, not a placeholder of an observable ``cycA_nuc``.

Any other name is an error that names it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import pandas as pd
import sympy as sp
from petab.v1 import C
from petab.v1.math import sympify_petab
from petab.v1.observables import get_formula_placeholders

from pymc_odesens.model import OdeSystem
from pymc_odesens.petab.errors import PetabError, PetabUnsupportedError

__all__ = [
    "ObservableModel",
    "read_observables",
    "petab_formula",
    "NOISE_DISTRIBUTIONS",
    "TRANSFORMATIONS",
]

NOISE_DISTRIBUTIONS = (C.NORMAL, C.LAPLACE)
TRANSFORMATIONS = (C.LIN, C.LOG, C.LOG10)
_PLACEHOLDER = re.compile(r"^(observable|noise)Parameter\d+_")


@dataclass(frozen=True, eq=False)
class ObservableModel:
    """One row of the observable table, resolved.

    Attributes
    ----------
    id : str
    name : str
        ``observableName`` (or the id).
    formula, noise_formula : sympy.Expr
        In the simulated system's ``t``, states and parameters, the placeholders and the
        table parameters (the noise formula with the observable's value substituted).
    transformation : {"lin", "log", "log10"}
    distribution : {"normal", "laplace"}
    observable_placeholders, noise_placeholders : tuple of sympy.Symbol
        ``observableParameter<k>_<id>`` and ``noiseParameter<k>_<id>``, k = 1, 2, ...
    table_parameters : dict of sympy.Symbol to str
        Symbols that stand for parameter-table ids (not model ids).
    """

    id: str
    name: str
    formula: sp.Expr
    noise_formula: sp.Expr
    transformation: str
    distribution: str
    observable_placeholders: tuple
    noise_placeholders: tuple
    table_parameters: dict


@lru_cache(maxsize=4096)
def petab_formula(text: str) -> sp.Expr:
    """A formula of the observable table read by petab's ``sympify_petab``, once per text.

    petab's parser costs 1 to 80 ms a formula (Chen_MSB2009's observables are sums of
    dozens of species), and a problem's formulas are read by petab's table checks
    (:mod:`pymc_odesens.petab.validation`) and by :func:`read_observables`.
    """
    return sympify_petab(text)


def _cell(row: pd.Series, column: str, default: str) -> str:
    value = row.get(column, default)
    if not isinstance(value, str) or not value.strip():
        return default
    return value.strip()


def _bind(
    expr: sp.Expr,
    label: str,
    system: OdeSystem,
    parameter_ids: set,
    placeholders: dict,
    table_parameters: dict,
    own: tuple[str, sp.Expr] | None,
) -> sp.Expr:
    outputs = system.outputs
    replacement = {}
    # in name order: the order of table_parameters is part of the likelihood kernel's
    # cache key, and a set's order varies between processes
    for symbol in sorted(expr.free_symbols, key=lambda s: s.name):
        name = symbol.name
        if name in placeholders:
            replacement[symbol] = placeholders[name]
        elif own is not None and name == own[0]:
            replacement[symbol] = own[1]
        elif name in outputs:
            replacement[symbol] = sp.sympify(outputs[name])
        elif name == "time":
            replacement[symbol] = system.t
        elif name in parameter_ids:
            stand_in = table_parameters.setdefault(name, sp.Symbol(name))
            replacement[symbol] = stand_in
        elif _PLACEHOLDER.match(name):
            raise PetabError(
                f"{label}: {name!r} has the shape of a placeholder, but is neither a "
                f"placeholder of this observable ({', '.join(sorted(placeholders)) or 'none'}; "
                "placeholders are numbered from 1 without gaps, and a noise formula may use "
                "those of its observable formula), nor an id of the parameter table or of "
                "the SBML model"
            )
        else:
            raise PetabError(
                f"{label}: {name!r} is neither an id of the SBML model, of the parameter "
                "table, a placeholder of this observable nor 'time'"
            )
    return expr.xreplace(replacement)


def read_observables(
    observable_df: pd.DataFrame, system: OdeSystem, parameter_ids: set
) -> dict[str, ObservableModel]:
    """Resolve every row of the observable table (see the module docstring).

    Parameters
    ----------
    observable_df : pandas.DataFrame
    system : OdeSystem
        The simulated system (its ``outputs`` bind the SBML ids).
    parameter_ids : set of str
        The ids of the parameter table.

    Raises
    ------
    PetabUnsupportedError
        A noise distribution or transformation the importer does not cover.
    PetabError
        A name no table defines.
    """
    observables = {}
    for oid, row in observable_df.iterrows():
        transformation = _cell(row, C.OBSERVABLE_TRANSFORMATION, C.LIN)
        distribution = _cell(row, C.NOISE_DISTRIBUTION, C.NORMAL)
        if transformation not in TRANSFORMATIONS:
            raise PetabUnsupportedError(
                f"observable {oid!r}: observableTransformation {transformation!r} is not one "
                f"of {TRANSFORMATIONS}"
            )
        if distribution not in NOISE_DISTRIBUTIONS:
            raise PetabUnsupportedError(
                f"observable {oid!r}: noiseDistribution {distribution!r} is not one of "
                f"{NOISE_DISTRIBUTIONS}"
            )
        formula_text = row[C.OBSERVABLE_FORMULA]
        noise_text = row.get(C.NOISE_FORMULA, "")
        if not isinstance(noise_text, str) and not pd.isna(noise_text):
            noise_text = str(noise_text)
        if pd.isna(noise_text) or not str(noise_text).strip():
            raise PetabError(f"observable {oid!r}: noiseFormula is empty")
        observable_placeholders = tuple(
            sp.Symbol(n) for n in get_formula_placeholders(str(formula_text), oid, "observable")
        )
        noise_placeholders = tuple(
            sp.Symbol(n) for n in get_formula_placeholders(str(noise_text), oid, "noise")
        )
        table_parameters: dict = {}
        formula = _bind(
            petab_formula(str(formula_text)),
            f"observable {oid!r}: observableFormula",
            system,
            parameter_ids,
            {s.name: s for s in observable_placeholders},
            table_parameters,
            None,
        )
        noise_formula = _bind(
            petab_formula(str(noise_text)),
            f"observable {oid!r}: noiseFormula",
            system,
            parameter_ids,
            {s.name: s for s in (*noise_placeholders, *observable_placeholders)},
            table_parameters,
            (oid, formula),
        )
        observables[oid] = ObservableModel(
            id=oid,
            name=_cell(row, C.OBSERVABLE_NAME, oid),
            formula=formula,
            noise_formula=noise_formula,
            transformation=transformation,
            distribution=distribution,
            observable_placeholders=observable_placeholders,
            noise_placeholders=noise_placeholders,
            table_parameters={v: k for k, v in table_parameters.items()},
        )
    return observables
