"""The SBML document a PEtab problem simulates: PEtab's values before the model's own.

A parameter that the condition table sets, or that the parameter table lists, takes PEtab's
value in every simulation, even where the SBML model gives it an initial assignment: PEtab
v2 says so explicitly (its specification's "Initialization and parameter application": the
values PEtab applies replace "any model-internal ... initialization constructs such as
SBML's initialAssignments"), and for v1 the petab library reads such a parameter as a free
parameter with the assignment's value (``SbmlModel.get_free_parameter_ids_with_values``),
which its parameter mapping then overrides per condition; AMICI's importer makes it a fixed
parameter of the condition. (Liu_IFACPapersOnLine2025 sets the initial virus load ``u_2`` per
condition, a parameter whose initial assignment is ``1 * 1000000000``.)

So before the model is imported, each such parameter's initial assignment is removed and its
value set to the assignment's number, which is what the model gives where PEtab sets
nothing. Only assignments that are numbers are replaced (as for the petab library, a
parameter whose assignment depends on other quantities is not a free parameter: the importer
then refuses to set it, naming it).
"""

from __future__ import annotations

import libsbml
import petab.v1 as petab
from petab.v1 import C

from pymc_odesens.petab.errors import PetabError

__all__ = ["simulated_sbml"]


def _set_by_petab(problem: petab.Problem) -> set[str]:
    """Ids the condition table sets or the parameter table lists."""
    ids = set()
    if problem.condition_df is not None:
        ids.update(c for c in problem.condition_df.columns if c != C.CONDITION_NAME)
    if problem.parameter_df is not None:
        ids.update(problem.parameter_df.index)
    return ids


def simulated_sbml(problem: petab.Problem) -> str:
    """The problem's SBML document, with the numeric initial assignments of the parameters
    PEtab sets replaced by their values (see the module's docstring).

    Parameters
    ----------
    problem : petab.v1.Problem
        A problem with an SBML model.

    Returns
    -------
    str
        The SBML document.
    """
    model = problem.model
    text = model.to_sbml_str()
    sbml = model.sbml_model
    free = dict(model.get_free_parameter_ids_with_values())
    replaced = sorted(
        pid
        for pid in _set_by_petab(problem)
        if pid in free
        and sbml.getParameter(pid) is not None
        and sbml.getInitialAssignmentBySymbol(pid) is not None
    )
    if not replaced:
        return text
    document = libsbml.readSBMLFromString(text)
    copy = document.getModel()
    for pid in replaced:
        assignment = copy.removeInitialAssignment(pid)
        if assignment is None or copy.getParameter(pid).setValue(float(free[pid])) != (
            libsbml.LIBSBML_OPERATION_SUCCESS
        ):
            raise PetabError(f"the SBML model: cannot replace the initial assignment of {pid!r}")
    return libsbml.writeSBMLToString(document)
