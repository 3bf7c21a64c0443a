"""Files that carry the SHA-256 digest of their content and the name they were written for.

Every file the package caches on disk (kernel object code and sources, manifests, sparsity
patterns, conservation laws, numba's compiled functions) is written as one header line and
the content::

    # pymc_odesens verified 1 sha256=<64 hex digits> size=<bytes> name=<identity>\\n<content>

and read back only when the header parses, the content has that length and that digest, and
the identity (the file's name in its cache) is the one the reader asks for. Random bytes, an
empty or truncated file, one flipped byte anywhere (in the header, in machine code, in a
constant) and a file of another model copied in place all fail one of these checks; a
damage that still passes would have to rewrite the content and its digest together, which
is an attack, not an accident (the cache directory's permissions keep others from doing
that: :mod:`pymc_odesens.caching.disk_cache`). The header is a comment line, so a generated
source stays a readable Python file.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["FORMAT_VERSION", "frame", "unframe"]

FORMAT_VERSION = 1
"""Version of the header; part of every cache directory's name that holds such files."""

_PREFIX = f"# pymc_odesens verified {FORMAT_VERSION} ".encode()
_HEADER = re.compile(rb"sha256=([0-9a-f]{64}) size=([0-9]{1,15}) name=(\S+)")
_MAX_HEADER = 4096


def frame(content: bytes, identity: str) -> bytes:
    """The file holding ``content`` under the name ``identity`` (no whitespace in it)."""
    if not identity or any(c.isspace() for c in identity):
        raise ValueError(f"identity {identity!r} must be a non-empty name without whitespace")
    digest = hashlib.sha256(content).hexdigest()
    header = f"sha256={digest} size={len(content)} name={identity}\n".encode()
    return _PREFIX + header + content


def unframe(data: bytes, identity: str) -> bytes:
    """The content of the file ``data``, verified to be what was written as ``identity``.

    Raises
    ------
    ValueError
        Naming what does not check out (empty, no header, another file's identity, length,
        digest).
    """
    if not data:
        raise ValueError("the file is empty")
    end = data.find(b"\n", 0, _MAX_HEADER)
    if not data.startswith(_PREFIX) or end < 0:
        raise ValueError("the file has no verification header")
    match = _HEADER.fullmatch(data[len(_PREFIX) : end])
    if match is None:
        raise ValueError("the verification header is damaged")
    digest, size, name = match.group(1).decode(), int(match.group(2)), match.group(3)
    if name.decode(errors="replace") != identity:
        raise ValueError(f"the file was written as {name.decode(errors='replace')!r}")
    content = data[end + 1 :]
    if len(content) != size:
        raise ValueError(f"the content has {len(content)} bytes, {size} were written")
    if hashlib.sha256(content).hexdigest() != digest:
        raise ValueError("the content's SHA-256 digest does not match")
    return content
