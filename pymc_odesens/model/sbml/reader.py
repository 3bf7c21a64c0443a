"""Reading an SBML document with libsbml: from a path or a string, checked, ``comp`` flattened."""

from __future__ import annotations

import os
from pathlib import Path

import libsbml

from pymc_odesens.model.sbml.refusals import SbmlError, check_supported

__all__ = ["read_sbml"]

_SEVERE = (libsbml.LIBSBML_SEV_ERROR, libsbml.LIBSBML_SEV_FATAL)


def _is_markup(text: str) -> bool:
    return text.lstrip().startswith("<")


def _errors(document: libsbml.SBMLDocument) -> list[str]:
    messages = []
    for j in range(document.getNumErrors()):
        error = document.getError(j)
        if error.getSeverity() in _SEVERE:
            messages.append(f"line {error.getLine()}: {error.getMessage().strip()}")
    return messages


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
        libsbml reports errors, the document holds no model, or flattening failed.
    SbmlUnsupportedError
        The model uses a feature the importer refuses
        (:func:`pymc_odesens.model.sbml.refusals.check_supported`).
    """
    if isinstance(source, bytes):
        source = source.decode()
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not _is_markup(source)):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"from_sbml: no SBML file at {str(path)!r}")
        where = path.name
        document = libsbml.readSBMLFromFile(str(path))
    elif isinstance(source, str):
        where = "<string>"
        document = libsbml.readSBMLFromString(source)
    else:
        raise TypeError(f"source must be a path or an SBML string, got {type(source).__name__}")
    errors = _errors(document)
    if errors:
        raise SbmlError(f"{where}: libsbml reports errors: " + "; ".join(errors[:5]))
    if document.getModel() is None:
        raise SbmlError(f"{where}: the SBML document holds no model")
    _flatten_comp(document, where)
    model = document.getModel()
    if model is None:
        raise SbmlError(f"{where}: the SBML document holds no model after flattening")
    check_supported(document)
    return document, model, where
