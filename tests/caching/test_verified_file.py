"""Files with the SHA-256 digest of their content and their name: any damage is detected."""

from __future__ import annotations

import pytest

from pymc_odesens.caching.verified_file import frame, unframe

CONTENT = b"\x7fELF machine code \x00\x01\x02 and a constant \x00\x00\x00\x00\x00\x00\xf8?"
NAME = "kernels-v1/tag/kernels_abc_rhs.rhs.o"


def test_the_content_comes_back_under_its_name():
    data = frame(CONTENT, NAME)
    assert data.startswith(b"# pymc_odesens verified 1 sha256=")
    assert unframe(data, NAME) == CONTENT
    assert unframe(frame(b"", NAME), NAME) == b""


def test_every_flipped_bit_is_detected():
    data = frame(CONTENT, NAME)
    for position in range(len(data)):
        for bit in range(8):
            damaged = bytearray(data)
            damaged[position] ^= 1 << bit
            with pytest.raises(ValueError):
                unframe(bytes(damaged), NAME)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda data: b"", "the file is empty"),
        (lambda data: CONTENT, "no verification header"),
        (lambda data: data[: len(data) - 5], "has 40 bytes, 45 were written"),
        (lambda data: data + b"\x00", "has 46 bytes, 45 were written"),
        (lambda data: data.replace(b"size=45", b"size=x5"), "header is damaged"),
        (lambda data: frame(CONTENT, "kernels-v1/tag/kernels_other_rhs.rhs.o"), "written as"),
        (lambda data: data[:-1] + b"!", "SHA-256 digest does not match"),
    ],
)
def test_damage_is_named(damage, reason):
    with pytest.raises(ValueError, match=reason):
        unframe(damage(frame(CONTENT, NAME)), NAME)


def test_an_identity_must_be_one_word():
    with pytest.raises(ValueError, match="identity 'a b'"):
        frame(CONTENT, "a b")
