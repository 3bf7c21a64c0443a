"""The publication an SBML model describes, from its MIRIAM annotation."""

from __future__ import annotations

import libsbml

__all__ = ["publication"]

_PREFIXES = (
    ("http://identifiers.org/doi/", "doi:"),
    ("https://identifiers.org/doi/", "doi:"),
    ("http://identifiers.org/pubmed/", "PubMed "),
    ("https://identifiers.org/pubmed/", "PubMed "),
    ("urn:miriam:doi:", "doi:"),
    ("urn:miriam:pubmed:", "PubMed "),
)


def publication(model: libsbml.Model) -> str:
    """The references of the model's ``isDescribedBy`` annotation (``bqmodel`` or
    ``bqbiol``) as ``doi:...`` or ``PubMed ...``, joined by ``"; "``; ``""`` when none."""
    found = []
    for k in range(model.getNumCVTerms()):
        term = model.getCVTerm(k)
        described_by = (
            term.getModelQualifierType() == libsbml.BQM_IS_DESCRIBED_BY
            if term.getQualifierType() == libsbml.MODEL_QUALIFIER
            else term.getBiologicalQualifierType() == libsbml.BQB_IS_DESCRIBED_BY
        )
        if not described_by:
            continue
        for j in range(term.getNumResources()):
            resource = term.getResourceURI(j)
            for prefix, label in _PREFIXES:
                if resource.startswith(prefix):
                    resource = label + resource[len(prefix) :]
                    break
            if resource not in found:
                found.append(resource)
    return "; ".join(found)
