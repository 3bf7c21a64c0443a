"""The errors of the PEtab importer."""

from __future__ import annotations

__all__ = ["PetabError", "PetabUnsupportedError"]


class PetabError(ValueError):
    """A PEtab problem is inconsistent: a table names something that does not exist."""


class PetabUnsupportedError(PetabError):
    """A PEtab problem uses a feature the importer does not cover; the message names it."""
