"""Reading an SBML document with libsbml: from a path or a string, checked, ``comp`` flattened.

The document is checked in this order: libsbml's errors while reading it; packages it
declares required that libsbml cannot interpret (libsbml recognises a package by its
``http://www.sbml.org/sbml/level3/...`` namespace; a ``required="true"`` attribute of any
other namespace on ``<sbml>`` declares one too); libsbml's consistency checks
(``checkConsistency``: identifiers, references, math, over-determined models, ...), errors
only, with the checks of units, SBO terms and modelling practice off (the importer reads
neither units nor SBO terms); then, after ``comp`` flattening, the features the importer
refuses (:func:`~pymc_odesens.model.sbml.refusals.check_supported`).

``checkInternalConsistency`` is not run: it checks what a document built through libsbml's
API would lack when written out (required attributes, ...), which reading a document
already reports as errors (the same error ids), and it costs 1.9 s on Chen_MSB2009's 500
species where ``checkConsistency`` costs 1.0 s.
"""

from __future__ import annotations

import os
from pathlib import Path

import libsbml

from pymc_odesens.model.sbml.refusals import (
    SbmlConsistencyError,
    SbmlError,
    SbmlUnsupportedError,
    check_supported,
)

__all__ = ["read_sbml"]

_SEVERE = (libsbml.LIBSBML_SEV_ERROR, libsbml.LIBSBML_SEV_FATAL)

_CHECKS_OFF = (
    libsbml.LIBSBML_CAT_UNITS_CONSISTENCY,
    libsbml.LIBSBML_CAT_SBO_CONSISTENCY,
    libsbml.LIBSBML_CAT_MODELING_PRACTICE,
)
"""Consistency-check categories not run: the importer reads no units and no SBO terms."""

_IGNORED_ERRORS = frozenset({libsbml.DanglingUnitReference})
"""libsbml errors about units that the unit category does not cover: a ``units`` attribute
naming no unit definition (SBML Test Suite case 00959's model's ``areaUnits``)."""


def _is_markup(text: str) -> bool:
    return text.lstrip().startswith("<")


def _errors(document: libsbml.SBMLDocument) -> list[str]:
    messages = []
    for j in range(document.getNumErrors()):
        error = document.getError(j)
        if error.getSeverity() in _SEVERE:
            messages.append(f"line {error.getLine()}: {error.getMessage().strip()}")
    return messages


def _required_unknown_packages(source: str, is_file: bool, document) -> list[tuple[str, str]]:
    """``(prefix, namespace)`` of each package the ``<sbml>`` element declares required
    (``prefix:required="true"``) that libsbml has no implementation of."""
    stream = libsbml.XMLInputStream(source, is_file)
    token = stream.next()
    while stream.isGood() and not token.isStart():
        token = stream.next()
    if not token.isStart():
        return []
    attributes = token.getAttributes()
    found = []
    for j in range(attributes.getLength()):
        uri = attributes.getURI(j)
        if (
            attributes.getName(j) == "required"
            and uri
            and attributes.getValue(j).strip() == "true"
            and not document.isPackageURIEnabled(uri)
        ):
            found.append((attributes.getPrefix(j), uri))
    return found


def _finding(error) -> tuple[int, int, str]:
    """``(line, error id, message)`` of a libsbml error: its short message and the part of
    its message that names the element (after libsbml's ``Reference:`` line)."""
    lines = [line.strip() for line in error.getMessage().splitlines() if line.strip()]
    references = [j for j, line in enumerate(lines) if line.startswith("Reference:")]
    detail = lines[references[-1] + 1 :] if references else lines
    message = " ".join(detail or lines)
    short = error.getShortMessage().strip()
    if short and not message.startswith(short):
        message = f"{short}: {message}"
    return error.getLine(), error.getErrorId(), message


def _check_consistency(document: libsbml.SBMLDocument, where: str) -> None:
    """Run libsbml's consistency checks; raise :class:`SbmlConsistencyError` on errors."""
    for category in _CHECKS_OFF:
        document.setConsistencyChecks(category, False)
    first = document.getNumErrors()
    document.checkConsistency()
    findings = []
    for j in range(first, document.getNumErrors()):
        error = document.getError(j)
        if error.getSeverity() in _SEVERE and error.getErrorId() not in _IGNORED_ERRORS:
            findings.append(_finding(error))
    if findings:
        raise SbmlConsistencyError(where, findings)


def _flatten_comp(document: libsbml.SBMLDocument, where: str) -> None:
    """Flatten hierarchical ``comp`` models into one model (libsbml's CompFlatteningConverter)."""
    plugin = document.getPlugin("comp")
    if plugin is None:
        return
    model_plugin = document.getModel().getPlugin("comp")
    has_submodels = model_plugin is not None and model_plugin.getNumSubmodels() > 0
    if not has_submodels and plugin.getNumModelDefinitions() == 0:
        if plugin.getNumExternalModelDefinitions() == 0:
            return
    properties = libsbml.ConversionProperties()
    properties.addOption("flatten comp", True)
    properties.addOption("leave_ports", False)
    status = document.convert(properties)
    if status != libsbml.LIBSBML_OPERATION_SUCCESS:
        details = "; ".join(_errors(document)) or f"libsbml status {status}"
        raise SbmlError(f"{where}: flattening the comp model failed: {details}")


def read_sbml(source: str | os.PathLike) -> tuple[libsbml.SBMLDocument, libsbml.Model, str]:
    """Read, check and flatten an SBML document.

    Parameters
    ----------
    source : str or path-like
        A path to an SBML file, or the SBML document itself as a string (text starting
        with ``<``).

    Returns
    -------
    document : libsbml.SBMLDocument
        Kept alive by the caller: the model belongs to it.
    model : libsbml.Model
    where : str
        The file name, or ``"<string>"``, for messages.

    Raises
    ------
    FileNotFoundError
        ``source`` names no file.
    SbmlError
        ``source`` is empty, libsbml reports errors, the document holds no model, or
        flattening failed.
    SbmlConsistencyError
        libsbml's consistency checks find errors (each named with its line and element).
    SbmlUnsupportedError
        The document requires a package libsbml cannot interpret, or the model uses a
        feature the importer refuses
        (:func:`pymc_odesens.model.sbml.refusals.check_supported`).
    """
    if isinstance(source, bytes):
        source = source.decode()
    if isinstance(source, str) and not source.strip():
        raise SbmlError(
            "from_sbml: the source is an empty string; expected a path to an SBML file or "
            "the SBML document itself"
        )
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not _is_markup(source)):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"from_sbml: no SBML file at {str(path)!r}")
        where = path.name
        document = libsbml.readSBMLFromFile(str(path))
        text, is_file = str(path), True
    elif isinstance(source, str):
        where = "<string>"
        document = libsbml.readSBMLFromString(source)
        text, is_file = source, False
    else:
        raise TypeError(f"source must be a path or an SBML string, got {type(source).__name__}")
    for prefix, uri in _required_unknown_packages(text, is_file, document):
        raise SbmlUnsupportedError(
            "required SBML package",
            f"package {prefix!r}",
            f"the document declares the namespace {uri} required to interpret the model, "
            "and libsbml has no implementation of it",
        )
    errors = _errors(document)
    if errors:
        raise SbmlError(f"{where}: libsbml reports errors: " + "; ".join(errors[:5]))
    if document.getModel() is None:
        raise SbmlError(f"{where}: the SBML document holds no model")
    _check_consistency(document, where)
    _flatten_comp(document, where)
    model = document.getModel()
    if model is None:
        raise SbmlError(f"{where}: the SBML document holds no model after flattening")
    check_supported(document)
    return document, model, where
