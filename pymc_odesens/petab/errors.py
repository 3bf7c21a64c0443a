"""The errors of the PEtab importer, and how their messages name a table entry."""

from __future__ import annotations

__all__ = ["PetabError", "PetabUnsupportedError", "table_location"]


class PetabError(ValueError):
    """A PEtab problem is inconsistent: a table names something that does not exist, or an
    entry is not a value PEtab allows there. The message names the table, row and column."""


class PetabUnsupportedError(PetabError):
    """A PEtab problem uses a feature the importer does not cover; the message names it."""


def table_location(
    table: str, row: int | None = None, label: str | None = None, column: str | None = None
) -> str:
    """``"<table> table, row <row> (<label>), column <column>"``, the parts that are known.

    Rows are counted from 0, the first row below the header, as pandas counts them;
    ``label`` is the row's id (``parameterId``, ``observableId``, ``conditionId``; a
    measurement's ``observableId``).
    """
    parts = [f"{table} table"]
    if row is not None:
        parts.append(f"row {row}" + (f" ({label})" if label is not None else ""))
    if column is not None:
        parts.append(f"column {column}")
    return ", ".join(parts)
